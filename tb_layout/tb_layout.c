/* SPDX-License-Identifier: Apache-2.0 */
/* TensorBoard run-directory layout and atomic, symlink-safe publishing. */
#include "tb_layout.h"
#include "common/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fail(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	if (err && errsz) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int tb_run_name(uint64_t realtime_ns, char *out, size_t outsz)
{
	time_t secs = (time_t)(realtime_ns / 1000000000ull);
	struct tm tm;

	/* TensorFlow names runs after the local time the profile started. */
	if (!localtime_r(&secs, &tm))
		return -1;
	if (strftime(out, outsz, "%Y_%m_%d_%H_%M_%S", &tm) == 0)
		return -1;
	return 0;
}

int tb_run_name_check(const char *run, char *err, size_t errsz)
{
	size_t n;

	if (!run || !*run)
		return fail(err, errsz, "run name is empty; give --run NAME or omit it");
	n = strlen(run);
	if (n > TB_NAME_MAX)
		return fail(err, errsz, "run name is %zu bytes long; at most %d", n, TB_NAME_MAX);
	if (!strcmp(run, ".") || !strcmp(run, ".."))
		return fail(err, errsz, "run name '%s' is not a directory name; choose another", run);
	for (const char *p = run; *p; p++) {
		if (*p == '/')
			return fail(err, errsz, "run name '%s' contains '/'; it must be one directory name", run);
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return fail(err, errsz, "run name contains a control character; use a plain name");
	}
	return 0;
}

static int host_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int tb_host_filename(const char *host, char *out, size_t outsz)
{
	size_t n = 0, max;

	if (outsz < 16)
		return -1;
	max = outsz - 1 < TB_NAME_MAX ? outsz - 1 : TB_NAME_MAX;
	for (const char *p = host ? host : ""; *p && n < max; p++)
		out[n++] = host_char_ok(*p) ? *p : '_';
	out[n] = 0;
	if (n == 0) {
		snprintf(out, outsz, "unknown-host");
		return 0;
	}
	/* A leading dot would hide the file (and "." / ".." would escape). */
	if (out[0] == '.')
		out[0] = '_';
	return 0;
}

int tb_run_dir_path(const char *logdir, const char *run, char *out, size_t outsz)
{
	int n = snprintf(out, outsz, "%s/%s/%s", logdir, TB_PLUGIN_DIR, run);

	return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

int tb_run_file_path(const char *logdir, const char *run, const char *host,
		     const char *suffix, char *out, size_t outsz)
{
	char h[TB_NAME_MAX + 1];
	int n;

	if (tb_host_filename(host, h, sizeof(h)) < 0)
		return -1;
	n = snprintf(out, outsz, "%s/%s/%s/%s%s", logdir, TB_PLUGIN_DIR, run, h, suffix);
	return n < 0 || (size_t)n >= outsz ? -1 : 0;
}

/* Open (and maybe create) one component below dirfd; never a symlink. */
static int open_component(int dirfd, const char *name, int create, char *err, size_t errsz)
{
	int fd;

	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return fail(err, errsz, "path component '%s' refused", name);
	if (create && mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
		return fail(err, errsz, "cannot create directory '%s': %s", name, strerror(errno));
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return fail(err, errsz, "'%s' is a symlink or not a directory; refusing to "
				    "follow it (remove it or choose another --logdir)", name);
		return fail(err, errsz, "cannot open directory '%s': %s", name, strerror(errno));
	}
	return fd;
}

int tb_mkdirs_at(int dirfd, const char *relpath, int create, char *err, size_t errsz)
{
	char buf[4096], *save = NULL, *comp;
	int cur, next;

	if (strlen(relpath) >= sizeof(buf))
		return fail(err, errsz, "path too long: %s", relpath);
	strcpy(buf, relpath);
	cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return fail(err, errsz, "dup: %s", strerror(errno));
	for (comp = strtok_r(buf, "/", &save); comp; comp = strtok_r(NULL, "/", &save)) {
		next = open_component(cur, comp, create, err, errsz);
		close(cur);
		if (next < 0)
			return -1;
		cur = next;
	}
	return cur;
}

/* mkdir -p of the user's logdir (a path of their choosing: symlinks in it
 * are theirs and are followed). */
int tb_mkdir_user_path(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

int tb_open_run_dir(const char *logdir, const char *run, int create, char *err, size_t errsz)
{
	char rel[TB_NAME_MAX + 64], sub[512];
	int root, fd;

	if (tb_run_name_check(run, sub, sizeof(sub)) < 0)
		return fail(err, errsz, "%s", sub);
	if (create && tb_mkdir_user_path(logdir) < 0)
		return fail(err, errsz, "cannot create logdir %s: %s", logdir, strerror(errno));
	/* The logdir itself is the user's path: symlinks to it are fine. */
	root = open(logdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return fail(err, errsz, "cannot open logdir %s: %s", logdir, strerror(errno));
	snprintf(rel, sizeof(rel), "%s/%s", TB_PLUGIN_DIR, run);
	fd = tb_mkdirs_at(root, rel, create, sub, sizeof(sub));
	close(root);
	if (fd < 0)
		return fail(err, errsz, "%s/%s: %s", logdir, rel, sub);
	return fd;
}

static void tb_tmp_reset(struct tb_tmpfile *t)
{
	t->dirfd = -1;
	t->fd = -1;
	t->tmpname[0] = 0;
	t->final[0] = 0;
}

int tb_tmp_open(struct tb_tmpfile *t, int dirfd, const char *final_name,
		int overwrite, char *err, size_t errsz)
{
	struct stat st;
	unsigned rnd;

	tb_tmp_reset(t);
	if (!*final_name || strchr(final_name, '/') || strlen(final_name) > TB_NAME_MAX + 32)
		return fail(err, errsz, "bad output file name '%s'", final_name);
	if (!overwrite && fstatat(dirfd, final_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return fail(err, errsz, "%s already exists; not replacing it (use --force, "
			    "another --run, or remove it)", final_name);
	snprintf(t->final, sizeof(t->final), "%s", final_name);
	t->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (t->dirfd < 0)
		return fail(err, errsz, "dup: %s", strerror(errno));
	for (int tries = 0; tries < 16; tries++) {
		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = (unsigned)time(NULL) ^ ((unsigned)getpid() << 8) ^ (unsigned)tries;
		snprintf(t->tmpname, sizeof(t->tmpname), ".%s.%d.%08x.tmp", final_name,
			 (int)getpid(), rnd);
		t->fd = openat(t->dirfd, t->tmpname,
			       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		/* Held until the file is published or removed: the proof for
		 * tb_clean_stale that its writer is alive (in any pid namespace). */
		if (t->fd >= 0 && flock(t->fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (t->fd >= 0) {
			fail(err, errsz, "cannot lock temporary file %s: %s", t->tmpname, strerror(errno));
			close(t->fd);
			unlinkat(t->dirfd, t->tmpname, 0);
			close(t->dirfd);
			tb_tmp_reset(t);
			return -1;
		}
		if (errno != EEXIST)
			break;
	}
	fail(err, errsz, "cannot create temporary file %s: %s", t->tmpname, strerror(errno));
	close(t->dirfd);
	tb_tmp_reset(t);
	return -1;
}

int tb_tmp_open_path(struct tb_tmpfile *t, const char *final_path,
		     int overwrite, char *err, size_t errsz)
{
	char dir[4096];
	const char *slash = strrchr(final_path, '/');
	const char *base = slash ? slash + 1 : final_path;
	int dfd, rc;

	tb_tmp_reset(t);
	if (slash) {
		size_t n = (size_t)(slash - final_path);

		if (n >= sizeof(dir))
			return fail(err, errsz, "path too long: %s", final_path);
		memcpy(dir, final_path, n);
		dir[n] = 0;
		if (n == 0)
			strcpy(dir, "/");
	} else {
		strcpy(dir, ".");
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(err, errsz, "cannot open directory %s: %s", dir, strerror(errno));
	rc = tb_tmp_open(t, dfd, base, overwrite, err, errsz);
	close(dfd);
	return rc;
}

static int rename_into_place(struct tb_tmpfile *t, int overwrite)
{
	if (overwrite)
		return renameat(t->dirfd, t->tmpname, t->dirfd, t->final);
	int rc = lt_publish_noreplace(t->dirfd, t->tmpname, t->final);

	return rc ? (errno = -rc, -1) : 0;
}

int tb_tmp_publish(struct tb_tmpfile *t, int overwrite, char *err, size_t errsz)
{
	int rc = 0;

	if (t->fd < 0)
		return fail(err, errsz, "nothing to publish");
	/* The data reaches the disk before the name does, so that after a
	 * crash a published name never holds a short or empty file (most of a
	 * big output is already there: tb_seq writes it with O_DIRECT). File
	 * systems that cannot sync (some FUSE mounts) publish as before. */
	if (fdatasync(t->fd) < 0 && errno != EINVAL && errno != EROFS && errno != ENOTSUP)
		rc = fail(err, errsz, "writing %s: %s", t->final, strerror(errno));
	if (close(t->fd) < 0 && rc == 0) {
		t->fd = -1;
		rc = fail(err, errsz, "writing %s: %s", t->final, strerror(errno));
	}
	t->fd = -1;
	if (rc == 0 && rename_into_place(t, overwrite) < 0) {
		if (errno == EEXIST)
			rc = fail(err, errsz, "%s appeared meanwhile (another writer?); "
				  "not replacing it", t->final);
		else
			rc = fail(err, errsz, "cannot rename %s to %s: %s", t->tmpname,
				  t->final, strerror(errno));
	}
	if (rc == 0)
		t->tmpname[0] = 0;
	tb_tmp_discard(t);
	return rc;
}

void tb_tmp_discard(struct tb_tmpfile *t)
{
	if (t->fd >= 0)
		close(t->fd);
	if (t->dirfd >= 0) {
		if (t->tmpname[0])
			unlinkat(t->dirfd, t->tmpname, 0);
		close(t->dirfd);
	}
	tb_tmp_reset(t);
}

/* ".<final>.<pid>.<8 hex>.tmp", as tb_tmp_open names them: the pid, or 0. */
static int tmp_name_pid(const char *name)
{
	size_t n = strlen(name);
	const char *p;
	char *end;
	long pid;

	if (name[0] != '.' || n < 16 || strcmp(name + n - 4, ".tmp"))
		return 0;
	p = name + n - 13; /* "." 8 hex digits ".tmp" */
	if (*p != '.')
		return 0;
	for (int i = 1; i <= 8; i++)
		if (!strchr("0123456789abcdef", p[i]))
			return 0;
	while (p > name + 1 && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p == name + 1 || p[-1] != '.' || p == name + n - 13)
		return 0;
	pid = strtol(p, &end, 10);
	return end == name + n - 13 && pid > 0 && pid < (1L << 22) ? (int)pid : 0;
}

/* Remove one stale temporary: ours by its name, its writer gone (the pid is
 * not alive here, and nobody holds the lock a live writer keeps). */
static int clean_one(int dirfd, const char *name)
{
	int pid = tmp_name_pid(name), fd, gone = 0;
	struct stat st;

	if (!pid || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
		return 0;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    flock(fd, LOCK_EX | LOCK_NB) == 0)
		gone = unlinkat(dirfd, name, 0) == 0;
	close(fd);
	return gone;
}

int tb_clean_stale(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return 0;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] == '.' && (e->d_type == DT_REG || e->d_type == DT_UNKNOWN))
			n += clean_one(dirfd, e->d_name);
	closedir(d);
	return n;
}

int tb_clean_stale_logdir(const char *logdir)
{
	int root = open(logdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), prof, fd, n = 0;
	char sub[256];
	struct dirent *e;
	DIR *d;

	if (root < 0)
		return 0;
	prof = tb_mkdirs_at(root, TB_PLUGIN_DIR, 0, sub, sizeof(sub));
	close(root);
	if (prof < 0)
		return 0;
	if ((fd = fcntl(prof, F_DUPFD_CLOEXEC, 0)) < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		close(prof);
		return 0;
	}
	while ((e = readdir(d))) {
		int run, k;

		if (e->d_name[0] == '.' || (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN))
			continue;
		run = openat(prof, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (run < 0)
			continue;
		k = tb_clean_stale(run);
		close(run);
		/* A run directory that held only a dead conversion's temporaries
		 * never got a file: it goes too (rmdir leaves a non-empty one). */
		if (k)
			unlinkat(prof, e->d_name, AT_REMOVEDIR);
		n += k;
	}
	closedir(d);
	close(prof);
	return n;
}
