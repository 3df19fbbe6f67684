/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ldsearch: where the dynamic linker of a target will find a library, worked
 * out inside the target's root (tfile.h) without running anything there:
 * DT_RPATH of the loader (when it has no DT_RUNPATH), LD_LIBRARY_PATH,
 * DT_RUNPATH (both with $ORIGIN), the directories of /etc/ld.so.conf and its
 * includes (what ldconfig builds /etc/ld.so.cache from), then the default
 * directories. Used by generateProbe (the dependencies of a running process)
 * and by `-t cuda` to arm a program's libraries before it runs.
 */
#ifndef LLMT_LDSEARCH_H
#define LLMT_LDSEARCH_H

#include <stdbool.h>
#include <stddef.h>

#define LT_LD_MAX_DIRS 256            /* per list: LD_LIBRARY_PATH, ld.so.conf */
#define LT_LD_ENV_MAX (1u << 16)      /* bytes of /proc/PID/environ read */

struct lt_elf;

struct lt_ldsearch {
	int root_fd;                       /* the target's root (not owned) */
	char *env_dirs[LT_LD_MAX_DIRS];    /* LD_LIBRARY_PATH, absolute entries */
	size_t n_env;
	char *sys_dirs[LT_LD_MAX_DIRS];    /* ld.so.conf directories, then the defaults */
	size_t n_sys;
	void (*warn)(const char *msg);     /* a config file read partly or refused */
};

/* ld_library_path: the value the target's loader sees (NULL: none). */
void lt_lds_init(struct lt_ldsearch *l, int root_fd, const char *ld_library_path,
		 void (*warn)(const char *msg));
void lt_lds_free(struct lt_ldsearch *l);

/* LD_LIBRARY_PATH from /proc/PID/environ into buf (first LT_LD_ENV_MAX bytes);
 * true if the variable is set. */
bool lt_lds_env_of(int pid, char *buf, size_t n);

/* Every directory searched for a name that `loader` (at loader_path in the
 * target) loads, in the loader's order; cb returns true to stop. */
void lt_lds_dirs(const struct lt_ldsearch *l, const struct lt_elf *loader, const char *loader_path,
		 bool (*cb)(const char *dir, void *arg), void *arg);

/* The file a DT_NEEDED (or dlopen) name of `loader` resolves to: a regular
 * file inside the root. A name with '/' is taken as it is. */
bool lt_lds_resolve(const struct lt_ldsearch *l, const struct lt_elf *loader, const char *loader_path,
		    const char *name, char *out, size_t n);

#endif
