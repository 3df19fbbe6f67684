/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tfile: the one way the collector opens a target's files.
 *
 * A target is a job we must not trust: its file system can hold absolute
 * symlinks to the node's files, FIFOs, device files, names with newlines.
 * Every file of a target is therefore
 *  - resolved inside the target's root (openat2 RESOLVE_IN_ROOT on an
 *    O_PATH fd of /proc/PID/root: absolute links and ".." stay inside;
 *    RESOLVE_NO_MAGICLINKS: no /proc/self/... escape), or reached through
 *    /proc/PID/map_files/START-END when it is mapped (the kernel's own
 *    binding of the mapping to its file);
 *  - opened O_PATH first and checked with fstat: anything but a regular
 *    file is refused before it is opened for reading (opening a FIFO can
 *    block, opening a device can have effects, reading /dev/zero never ends);
 *  - when opened by a path taken from /proc/PID/maps, checked to be the file
 *    mapped there (device and inode), since that path can be ambiguous
 *    (" (deleted)", an escaped newline) or replaced since;
 *  - read with a bound on bytes (and lines for text).
 * There is no fallback to the node's own paths. Files the user names on the
 * node (--probe-file, EBPF_USDT_PYTHON_PATH) go through lt_tf_open_node: the
 * same regular-file check before any read, without the root.
 */
#ifndef LLMT_TFILE_H
#define LLMT_TFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LT_TF_PROC "/proc"
#define LT_TF_LINE_MAX (4 * PATH_MAX)       /* a maps line: escaped path + fields */
#define LT_TF_MAPS_MAX_BYTES (256u << 20)   /* /proc/PID/maps: 65530 maps x ~4 KiB */
#define LT_TF_MAPS_MAX_LINES (1u << 20)
#define LT_TF_CONF_MAX_BYTES (1u << 20)     /* ld.so.conf and its includes */
#define LT_TF_CONF_MAX_LINES 16384u

/* The file a mapping names: (device, inode) as /proc/PID/maps prints them. */
struct lt_tf_id {
	dev_t dev;
	ino_t ino;
};

/* One parsed line of /proc/PID/maps. */
struct lt_tf_map {
	uint64_t start, end, pgoff;
	char perms[5];
	struct lt_tf_id id;          /* dev 0 and ino 0: anonymous */
	bool deleted;                /* ends with " (deleted)" (or a file named so) */
	char path[PATH_MAX];         /* "\012" unescaped; "" for anonymous */
};

/* An O_PATH|O_DIRECTORY fd of PROC/PID/root (proc: LT_TF_PROC, or another
 * proc tree in tests), or -errno. Open once per target; it stays valid
 * after the target exits. */
int lt_tf_root_open(const char *proc, int pid);

/* Does `pid` see the file system as we do? 1 the same mount namespace (and,
 * with `root_too`, the same root directory: a path of ours then names the
 * same file there), 0 another, -errno when it cannot be told. */
int lt_tf_same_view(int pid, bool root_too);

/* Open `path` (absolute, as the target names it) inside root_fd for
 * reading: O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY, a regular file only. With
 * `want`, the file must be that (device, inode). Returns the fd, or -errno
 * with one line in err naming the path and why (-EFTYPE style: -EINVAL for
 * "a FIFO", "a device"...; -ESTALE for another file than the one mapped). */
int lt_tf_open(int root_fd, const char *path, const struct lt_tf_id *want, char *err,
	       size_t errsz);

/* `path` with every symbolic link resolved inside root_fd (as the kernel
 * names a mapped file in /proc/PID/maps), into out. 0 or -errno. */
int lt_tf_realpath(int root_fd, const char *path, char *out, size_t n);

/* An O_DIRECTORY fd of `path` inside root_fd (for include globs), or -errno. */
int lt_tf_open_dir(int root_fd, const char *path, char *err, size_t errsz);

/* Is `path` a regular file inside root_fd? (existence probe, nothing read) */
bool lt_tf_exists(int root_fd, const char *path);

/* The file mapped at m in pid: /proc/PID/map_files/START-END, else (no
 * CAP_SYS_ADMIN, say) m->path inside root_fd checked against m->id. */
int lt_tf_open_mapped(const char *proc, int pid, int root_fd, const struct lt_tf_map *m,
		      char *err, size_t errsz);

/* The file behind a magic link of PROC/PID (e.g. "exe"): the kernel's own
 * binding, regular file only. */
int lt_tf_open_link(const char *proc, int pid, const char *name, char *err, size_t errsz);

/* A file the user named on the node: regular file only, non-blocking. */
int lt_tf_open_node(const char *path, char *err, size_t errsz);

/* A path the kernel resolves to the very file open as fd (for libbpf's
 * uprobe and USDT attachment, which take paths): /proc/self/fd/N. */
void lt_tf_fd_path(int fd, char *buf, size_t n);

/* Read all of fd, at most max bytes (more is an error, nothing is cut
 * silently). *buf is NUL-terminated, freed by the caller. 0 or -errno. */
int lt_tf_read_all(int fd, size_t max, char **buf, size_t *len, char *err, size_t errsz);

/* A bounded line reader over an fd it does not own. */
struct lt_tf_lines {
	int fd;
	size_t max_bytes, max_lines, bytes, lines, skipped;
	size_t len, pos;              /* buffered bytes, start of the next line */
	int err;                      /* 0, -E2BIG (a cap hit) or -errno of read */
	bool eof;
	char buf[LT_TF_LINE_MAX + 1];
};

void lt_tf_lines_init(struct lt_tf_lines *r, int fd, size_t max_bytes, size_t max_lines);
/* The next line, without its '\n', NUL-terminated; NULL at the end or when
 * a cap is hit (r->err says which). Longer lines than LT_TF_LINE_MAX are
 * skipped whole and counted in r->skipped. */
char *lt_tf_lines_next(struct lt_tf_lines *r);

/* Parse one maps line. 0, or -EINVAL for a line of another shape. */
int lt_tf_map_parse(const char *line, struct lt_tf_map *m);

/* Open PROC/PID/maps (procfs on the node, not a target's file). */
int lt_tf_maps_open(const char *proc, int pid);

/* Each mapping of PROC/PID/maps in order, parsed, to fn until it returns
 * non-zero (that value is returned); lines of another shape are skipped.
 * Read through the bounded reader (LT_TF_MAPS_MAX_*). 0 at the end, or
 * -errno when the maps cannot be opened or read. */
typedef int (*lt_tf_map_fn)(const struct lt_tf_map *m, void *ctx);
int lt_tf_maps_each(const char *proc, int pid, lt_tf_map_fn fn, void *ctx);
/* The same over maps already open (lt_tf_maps_open; fd stays open): a
 * caller telling "cannot open" from "read partly" opens it itself. */
int lt_tf_maps_each_fd(int fd, lt_tf_map_fn fn, void *ctx);
/* /proc/PID/stat of the node after the command name (which may hold spaces
 * and parentheses): " S ppid pgrp ...", read into buf; NULL when it cannot
 * be read (the process is gone). */
const char *lt_tf_proc_stat(int pid, char *buf, size_t n);
/* Alive, and neither a zombie nor dead (a killed process may linger
 * unreaped). */
bool lt_tf_proc_running(int pid);

/* Open PROC/PID/environ (procfs on the node: the environment the process
 * image started with, as the kernel keeps it). fd or -errno. */
int lt_tf_environ_open(const char *proc, int pid);

#endif
