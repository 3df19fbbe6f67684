/* SPDX-License-Identifier: Apache-2.0 */
/* Growing arrays: one idiom for every table the tools build as they read. */
#ifndef LLMT_COMMON_GROW_H
#define LLMT_COMMON_GROW_H

#include <stdlib.h>

/* Make room for `need` elements of `elem` bytes in *buf (capacity *cap,
 * in elements): doubles from *cap, or from `first` when empty. 0, or -1
 * with *buf untouched when memory runs out. */
static inline int lt_grow(void **buf, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : first;
	while (n < need)
		n *= 2;
	void *b = realloc(*buf, n * elem);
	if (!b)
		return -1;
	*buf = b;
	*cap = n;
	return 0;
}

#endif
