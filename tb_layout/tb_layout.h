/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_layout: the TensorBoard profile-plugin run directory
 *
 *   <logdir>/plugins/profile/<run>/<host>.xplane.pb
 *   <logdir>/plugins/profile/<run>/<host>.trace.json.gz
 *
 * and safe publishing into it. <logdir> itself is the user's choice and may
 * be reached through symlinks; every directory below it is created and
 * opened component by component with O_NOFOLLOW, so a symlink planted in a
 * shared logdir never redirects our writes. Files are written under a
 * temporary dot-name in their final directory and renamed into place
 * (RENAME_NOREPLACE unless overwriting was asked for), so readers never see
 * a partial file and another writer's file is never clobbered.
 *
 * Errors are values: functions return 0 or -1 with a message in err.
 */
#ifndef LLMT_TB_LAYOUT_H
#define LLMT_TB_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define TB_PLUGIN_DIR "plugins/profile"
#define TB_NAME_MAX 200  /* longest host/run component we produce */

/* Run name from a wall-clock time (ns since the epoch), as TensorFlow's
 * profiler names runs: the LOCAL time of the profile start, formatted
 * "YYYY_MM_DD_HH_MM_SS" (set TZ=UTC for UTC names). out needs >= 20 bytes. */
int tb_run_name(uint64_t realtime_ns, char *out, size_t outsz);

/* Check a user-supplied run name (--run): one non-empty path component,
 * no '/', not "." or "..", no control characters, at most TB_NAME_MAX. */
int tb_run_name_check(const char *run, char *err, size_t errsz);

/* Host name made safe as a file name: ':' -> '_', every byte outside
 * [A-Za-z0-9._-] -> '_', a leading '.' -> '_' (never hidden, never ".."),
 * empty -> "unknown-host", cut to TB_NAME_MAX. Always succeeds when
 * outsz >= 16 (returns -1 only if out is too small). */
int tb_host_filename(const char *host, char *out, size_t outsz);

/* "<logdir>/plugins/profile/<run>" and ".../<run>/<host><suffix>"
 * (host sanitized here; suffix like ".xplane.pb"). -1 if it does not fit. */
int tb_run_dir_path(const char *logdir, const char *run, char *out, size_t outsz);
int tb_run_file_path(const char *logdir, const char *run, const char *host,
		     const char *suffix, char *out, size_t outsz);

/* Open <logdir>/plugins/profile/<run> as a directory fd, creating missing
 * components (mode 0755) when create is set, never following a symlink
 * below logdir. Returns the fd (O_DIRECTORY|O_CLOEXEC) or -1. */
int tb_open_run_dir(const char *logdir, const char *run, int create,
		    char *err, size_t errsz);

/* mkdir -p of a path the user gave (their symlinks are followed); 0 or -1
 * with errno set. */
int tb_mkdir_user_path(const char *path);

/* mkdir -p of a relative path under dirfd, one component at a time with
 * mkdirat + openat(O_NOFOLLOW|O_DIRECTORY). Returns an fd of the last
 * component or -1. "." and ".." components are refused. */
int tb_mkdirs_at(int dirfd, const char *relpath, int create, char *err, size_t errsz);

/* ------------------------------------------------------ atomic publish */

struct tb_tmpfile {
	int dirfd;          /* owned: a dup of the directory */
	int fd;             /* the temporary file, O_RDWR */
	char tmpname[TB_NAME_MAX + 64];
	char final[TB_NAME_MAX + 64];
};

/* Create ".<final>.<pid>.<random>.tmp" in dirfd (O_CREAT|O_EXCL|O_NOFOLLOW,
 * mode 0644). Fails early with a clear message if final exists and
 * overwrite is 0. */
int tb_tmp_open(struct tb_tmpfile *t, int dirfd, const char *final_name,
		int overwrite, char *err, size_t errsz);

/* Same, for a full path: the directory is opened as given (it must exist). */
int tb_tmp_open_path(struct tb_tmpfile *t, const char *final_path,
		     int overwrite, char *err, size_t errsz);

/* Sync the file's data (fdatasync), close it and rename it to its final
 * name: renameat2(RENAME_NOREPLACE) unless overwrite. On failure the
 * temporary file is removed. Always releases t. */
int tb_tmp_publish(struct tb_tmpfile *t, int overwrite, char *err, size_t errsz);

/* Remove the temporary file and release t. Safe on a zeroed/released t. */
void tb_tmp_discard(struct tb_tmpfile *t);

/* Remove temporaries a dead writer left (a SIGKILLed conversion): only
 * names tb_tmp_open makes, regular files of our user, whose pid is not
 * alive and whose lock nobody holds. Returns how many went.
 * _logdir: in every run directory under LOGDIR/plugins/profile, removing a
 * run directory that is empty after that. */
int tb_clean_stale(int dirfd);
int tb_clean_stale_logdir(const char *logdir);


#endif
