/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD shim for tests: makes the race between looking at a file and
 * opening it happen every time. The first stat-family call (stat, lstat,
 * fstatat and their 64 forms) that succeeds on a path whose last component
 * is $SWAP_NAME renames $SWAP_FROM (a symlink, a FIFO) over that path, right
 * after the call returned what it saw: a program that trusts what it saw
 * and then opens the path by name opens the swapped-in thing.
 *
 *   cc -shared -fPIC -o stat_swap.so stat_swap.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int swapped;

static void swap(int dirfd, const char *path)
{
	const char *want = getenv("SWAP_NAME"), *from = getenv("SWAP_FROM");
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : path;
	if (swapped || !want || !from || !base || strcmp(base, want))
		return;
	swapped = 1;
	if (renameat(AT_FDCWD, from, dirfd, path) != 0)
		perror("stat_swap: rename");
}

#define PATH_STAT(fn, st_t)                                                   \
	int fn(const char *p, struct st_t *st)                                \
	{                                                                     \
		static int (*real)(const char *, struct st_t *);              \
		if (!real)                                                    \
			real = (int (*)(const char *, struct st_t *))dlsym(RTLD_NEXT, #fn); \
		int r = real(p, st);                                          \
		if (r == 0)                                                   \
			swap(AT_FDCWD, p);                                    \
		return r;                                                     \
	}
#define AT_STAT(fn, st_t)                                                     \
	int fn(int d, const char *p, struct st_t *st, int fl)                 \
	{                                                                     \
		static int (*real)(int, const char *, struct st_t *, int);    \
		if (!real)                                                    \
			real = (int (*)(int, const char *, struct st_t *, int))dlsym(RTLD_NEXT, #fn); \
		int r = real(d, p, st, fl);                                   \
		if (r == 0)                                                   \
			swap(d, p);                                           \
		return r;                                                     \
	}

PATH_STAT(stat, stat)
PATH_STAT(lstat, stat)
PATH_STAT(stat64, stat64)
PATH_STAT(lstat64, stat64)
AT_STAT(fstatat, stat)
AT_STAT(fstatat64, stat64)
