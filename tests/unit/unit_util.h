/* Shared by tests/unit/test_*.c: a test group's temporary directory and a
 * file read back whole. */
#ifndef LLMT_UNIT_UTIL_H
#define LLMT_UNIT_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

/* DIR (SIZE bytes) = a new directory /tmp/NAME.XXXXXX. 0, or -1. */
static inline int ut_mkdtemp(char *dir, size_t size, const char *name)
{
	if ((size_t)snprintf(dir, size, "/tmp/%s.XXXXXX", name) >= size)
		return -1;
	return mkdtemp(dir) ? 0 : -1;
}

static inline int ut_remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* DIR and all it holds removed (symbolic links as links). 0, or -1. */
static inline int ut_rmtree(const char *dir)
{
	return nftw(dir, ut_remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

/* PATH's bytes, NUL-terminated, in a buffer to free; their count in *LEN.
 * NULL when it cannot be read. */
static inline char *ut_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) == (size_t)n) {
		b[n] = 0;
		*len = (size_t)n;
	} else {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

#endif
