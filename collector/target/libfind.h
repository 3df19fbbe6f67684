/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfind: the files a program will load that a probe file names, found
 * before the program maps them, inside its root (tfile.h, ldsearch.h):
 *  - the executable and its DT_NEEDED closure, resolved as ld.so will
 *    (loaded before main: `needed`);
 *  - every file of the directories ld.so searches (the executable's and its
 *    libraries' DT_RPATH/DT_RUNPATH, LD_LIBRARY_PATH, ld.so.conf, the
 *    defaults) whose name a probe-file library names, and the probe file's
 *    absolute paths: what a later dlopen by name (or by that path) loads.
 * Uprobes attach to a file, not to a mapping, so these can be probed before
 * the program runs; a name the program computes at run time (a dlopen of a
 * path outside the search path) cannot be known here.
 */
#ifndef LLMT_LIBFIND_H
#define LLMT_LIBFIND_H

#include <stdbool.h>
#include <stdint.h>

#include "collector/sources/probefile.h"

#define LT_LF_MAX_OBJS 512          /* objects in a DT_NEEDED closure */
#define LT_LF_MAX_FILES 4096        /* distinct files reported */
#define LT_LF_MAX_DIRENTS 65536     /* entries read per directory */

struct lt_lf_file {
	int fd;                     /* open for reading (tfile rules); the callee may keep a dup */
	const char *path;           /* as the target names it */
	const char *soname;         /* DT_SONAME when known, else NULL */
	uint64_t dev, ino;
	bool needed;                /* the executable or its DT_NEEDED closure */
};

/* Every such file once (by device and inode), to found(). exe_fd is the
 * executable (not closed), exe_path its path in the target. Returns how
 * many files were reported. */
int lt_libfind(int root_fd, int exe_fd, const char *exe_path, const char *ld_library_path,
	       const struct lt_probefile *pf, void (*found)(void *arg, const struct lt_lf_file *f),
	       void *arg);

#endif
