/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small containers for the converter: a bump arena for strings that live as
 * long as the conversion, a map from a pair of u64 keys to a u64 value and a
 * string interning table (both on common/hmap.h). All allocation failures are reported as
 * values (NULL / -1), never aborts.
 */
#ifndef LLMT_CV_UTIL_H
#define LLMT_CV_UTIL_H

#include "../common/hmap.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ arena */
struct cv_arena {
	struct cv_arena_blk *head;
	size_t used_total;
};
void *cv_arena_alloc(struct cv_arena *a, size_t n);
/* Copy s[0..len) and NUL-terminate. */
char *cv_arena_strndup(struct cv_arena *a, const char *s, size_t len);
void cv_arena_free(struct cv_arena *a);

/* ---------------------------------------------------------------- hash map */
/* Entries in the order they were added (iterate ents[0..n)), found by an
 * lt_hmap of (a, b)'s hash. */
struct cv_map_ent {
	uint64_t a, b;
	uint64_t val;
};
struct cv_map {
	struct lt_hmap ix;       /* lt_hash_pair(a, b) -> ents index */
	struct cv_map_ent *ents;
	size_t n, cap;
};
/* Find (a, b); NULL if absent. */
uint64_t *cv_map_get(const struct cv_map *m, uint64_t a, uint64_t b);
/* Find or insert (value 0 when new, *is_new set). NULL on ENOMEM. The
 * pointer holds until the next insert. */
uint64_t *cv_map_put(struct cv_map *m, uint64_t a, uint64_t b, int *is_new);
void cv_map_free(struct cv_map *m);

/* -------------------------------------------------------- string interning */
struct cv_strtab {
	struct lt_hmap ix;      /* lt_hash_bytes of a string -> its index */
	struct cv_arena arena;
	const char **strs;      /* index -> NUL-terminated copy */
	uint32_t *lens;
	size_t n, cap;
};
/* Intern s[0..len): returns its index, or -1 on ENOMEM. */
int64_t cv_strtab_intern(struct cv_strtab *t, const char *s, size_t len);
static inline const char *cv_strtab_get(const struct cv_strtab *t, uint32_t idx)
{
	return idx < t->n ? t->strs[idx] : "";
}
void cv_strtab_free(struct cv_strtab *t);

/* --------------------------------------------------------- growable buffer */
struct cv_buf {
	char *p;
	size_t len, cap;
};
int cv_buf_reserve(struct cv_buf *b, size_t extra);
int cv_buf_append(struct cv_buf *b, const void *p, size_t n);
static inline int cv_buf_putc(struct cv_buf *b, char c)
{
	if (b->len + 1 > b->cap && cv_buf_reserve(b, 1))
		return -1;
	b->p[b->len++] = c;
	return 0;
}
int cv_buf_printf(struct cv_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* NUL-terminate without counting the NUL in len. */
int cv_buf_cstr(struct cv_buf *b);
void cv_buf_free(struct cv_buf *b);

#endif
