// SPDX-License-Identifier: Apache-2.0
#include "inject_log.h"
#include "common/io.h"
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int lt_ilog_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

#define STAGE_DEFAULT_TMP "/var/tmp"    /* survives a reboot, unlike /tmp on many nodes */
#define STAGE_PREFIX "llmtracker-stage."

/* A directory of ours in $TMPDIR: fd, its absolute path in path. */
static int stage_make(const char *dir, const char *kind, char *path, size_t pathsz, char *err, size_t errsz)
{
	const char *tmp = getenv("TMPDIR");
	char made[PATH_MAX];
	int e = 0, fd = -1;

	tmp = tmp && *tmp ? tmp : STAGE_DEFAULT_TMP;
	if ((size_t)snprintf(made, sizeof(made), "%s/" STAGE_PREFIX "XXXXXX", tmp) >= sizeof(made))
		e = ENAMETOOLONG;
	else if (!mkdtemp(made)) /* mode 0700 */
		e = errno;
	else if ((fd = open(made, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
		 !realpath(made, path) || strlen(path) >= pathsz) {
		e = fd < 0 ? errno : ENAMETOOLONG;
		rmdir(made);
	}
	if (e) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errsz, "%s is on %s, a network file system: the library logs are staged on a "
			 "local disk, but no directory could be made in %s (TMPDIR): %s", dir, kind, tmp,
			 strerror(e));
		return -e;
	}
	return fd;
}

int lt_ilog_stage(const char *dir, int outfd, char *path, size_t pathsz, const char **kind,
		  char *err, size_t errsz)
{
	*kind = NULL;
	if (lt_fs_network(outfd, kind) > 0)
		return stage_make(dir, *kind, path, pathsz, err, errsz);
	int fd = fcntl(outfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errsz, "%s: %s", dir, strerror(e));
		return -e;
	}
	snprintf(path, pathsz, "%s", dir);
	return fd;
}

int lt_ilog_stage_launch(const char *dir, const char *kind, uid_t uid, gid_t gid, char *path,
			 size_t pathsz, char *err, size_t errsz)
{
	int fd = stage_make(dir, kind, path, pathsz, err, errsz);
	/* Still ours and empty until given: nothing of the user's is in it. */
	if (fd >= 0 && uid != (uid_t)-1 && fchown(fd, uid, gid)) {
		int e = errno;
		close(fd);
		rmdir(path);
		snprintf(err, errsz, "%s is on %s, a network file system: the launched command's logs are "
			 "staged on a local disk, but its directory could not be given to uid %u: %s", dir, kind,
			 (unsigned)uid, strerror(e));
		return -e;
	}
	return fd;
}

void lt_ilog_unstage(int stagefd, const char *path, int ours)
{
	if (stagefd >= 0)
		close(stagefd);
	if (ours)
		rmdir(path); /* not empty: a staging file kept there, named where it was kept */
}

/* Host names become one safe path component. */
static void ilog_host(const char *host, char *out, size_t sz)
{
	size_t i = 0;
	for (; host && host[i] && i + 1 < sz; i++) {
		char c = host[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '-' || c == '_' || (c == '.' && i > 0);
		out[i] = ok ? c : '_';
	}
	out[i] = 0;
	if (!i)
		snprintf(out, sz, "unknown");
}

static void ilog_names(struct lt_ilog *l, const char *prefix, const char *host, int pid)
{
	struct timespec rt;
	struct tm tm;
	char stamp[32], h[65];

	clock_gettime(CLOCK_REALTIME, &rt);
	gmtime_r(&rt.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	ilog_host(host, h, sizeof(h));
	snprintf(l->name, sizeof(l->name), "%.24s.%s.%d.%s.%09ld.evlog", prefix, h, pid, stamp,
		 rt.tv_nsec);
	snprintf(l->partial, sizeof(l->partial), ".%s.partial", l->name);
	snprintf(l->copy, sizeof(l->copy), ".%s.copy", l->name);
}

/* Our own read fd of the staging file, opened before the target holds it
 * (nothing of the target's can stand between) and checked to be the very
 * file made. fd or -errno. */
static int ilog_own_fd(const struct lt_ilog *l, int dirfd)
{
	struct stat sb;
	int fd = openat(dirfd, l->partial, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || sb.st_dev != l->dev || sb.st_ino != l->ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* At most this many chunk headers read per call: the status line is
 * redrawn every second, and a library flushes a chunk every few. */
#define TAIL_HEADERS_PER_CALL 64

uint64_t lt_ilog_events_so_far(struct lt_ilog *l)
{
	uint8_t h[EVF_CHUNK_HDR];

	if (l->tail_fd < 3)
		return l->tail_events;
	if (!l->tail_off) { /* the file header first: fixed part + body */
		if (pread(l->tail_fd, h, EVF_FILE_FIXED, 0) != EVF_FILE_FIXED ||
		    memcmp(h, EVF_MAGIC, EVF_MAGIC_LEN))
			return 0;
		l->tail_off = EVF_FILE_FIXED + (uint64_t)evf_get32(h + 12);
	}
	for (int k = 0; k < TAIL_HEADERS_PER_CALL; k++) {
		if (pread(l->tail_fd, h, sizeof(h), (off_t)l->tail_off) != (ssize_t)sizeof(h) ||
		    evf_get32(h) != EVF_CHUNK_MAGIC)
			break; /* not written yet (or not a chunk: stop counting) */
		l->tail_off += EVF_CHUNK_HDR + (uint64_t)evf_get32(h + 8);
		l->tail_events += evf_get32(h + 16);
	}
	return l->tail_events;
}

void lt_ilog_tail_close(struct lt_ilog *l)
{
	if (l->tail_fd >= 3)
		close(l->tail_fd);
	l->tail_fd = 0;
}

int lt_ilog_create(struct lt_ilog *l, int dirfd, const char *prefix, const char *host, int pid,
		   char *err, size_t errsz)
{
	struct stat sb;

	memset(l, 0, sizeof(*l));
	l->rfd = -1;
	ilog_names(l, prefix, host, pid);
	/* Write-only: the library appends and may cut a torn chunk off
	 * (ftruncate); it never needs to read, and gets nothing else. */
	int fd = openat(dirfd, l->partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errsz, "cannot create its log %s: %s", l->partial, strerror(e));
		return -e;
	}
	int e = fstat(fd, &sb) ? errno : 0;
	if (!e) {
		l->dev = sb.st_dev;
		l->ino = sb.st_ino;
		l->rfd = ilog_own_fd(l, dirfd);
		e = l->rfd < 0 ? -l->rfd : 0;
		/* its own fd: publishing closes rfd while the status line reads */
		if (!e && (l->tail_fd = fcntl(l->rfd, F_DUPFD_CLOEXEC, 3)) < 0)
			l->tail_fd = 0;
	}
	if (e) {
		close(fd);
		unlinkat(dirfd, l->partial, 0);
		snprintf(err, errsz, "cannot create its log %s: %s", l->partial, strerror(e));
		return -e;
	}
	l->live = 1;
	return fd;
}

/* Is `name` in dirfd still the regular file dev:ino? */
static int ilog_same(int dirfd, const char *name, dev_t dev, ino_t ino)
{
	struct stat sb;
	return !fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) && S_ISREG(sb.st_mode) && sb.st_dev == dev &&
	       sb.st_ino == ino;
}

/* Is the staging name still the file we made? */
static int ilog_ours(const struct lt_ilog *l, int dirfd)
{
	return ilog_same(dirfd, l->partial, l->dev, l->ino);
}

static void ilog_close(struct lt_ilog *l)
{
	if (l->live && l->rfd >= 0)
		close(l->rfd);
	l->rfd = -1;
	l->live = 0;
}

/* The staging file re-encoded into `out`, pid_from's events as pid_to's:
 * every event the reader takes (a torn last chunk is not). */
static int ilog_recode(int out, int from, const struct lt_ilog *l, uint64_t *copied)
{
	struct evlog_reader *r = NULL;
	struct evlog_writer *w = NULL;
	const struct evlog_event *e;
	struct stat sb;
	char msg[256];
	int in = fcntl(from, F_DUPFD_CLOEXEC, 0); /* the reader takes it: the caller keeps its own */
	if (in < 0)
		return -errno;
	if (evlog_reader_open_fd(&r, in, l->name, msg, sizeof(msg)))
		return -EIO;
	struct evlog_header h = *evlog_reader_header(r);
	int o = fcntl(out, F_DUPFD_CLOEXEC, 0), rc = 0;
	if (o < 0 || evlog_writer_open_fd(&w, o, l->copy, &h, NULL, msg, sizeof(msg)))
		rc = -EIO;
	while (!rc && evlog_next(r, &e) == 0) {
		struct evlog_event ev = *e;
		if (ev.pid == l->pid_from)
			ev.pid = l->pid_to;
		rc = evlog_write(w, &ev) ? -EIO : 0;
	}
	if (w && evlog_writer_close(w) && !rc)
		rc = -EIO;
	evlog_reader_close(r);
	if (!rc && fstat(out, &sb))
		rc = -errno;
	*copied = rc ? 0 : (uint64_t)sb.st_size;
	return rc;
}

/* The copy: ours, 0644 whatever the umask, l->len bytes of the staging
 * file (`in`) at most, on disk before it gets a name. 0, or -errno with err
 * set and nothing left. */
static int ilog_copy(struct lt_ilog *l, int in, int outfd, char *err, size_t errsz)
{
	uint64_t copied = 0;
	int fd = openat(outfd, l->copy, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : 0;
	if (!rc && fchmod(fd, 0644))
		rc = -errno;
	if (!rc)
		rc = l->pid_from ? ilog_recode(fd, in, l, &copied) : lt_copy_bounded(fd, in, l->len, &copied);
	if (!rc && fsync(fd))
		rc = -errno;
	if (!rc) {
		uint64_t hashed = 0;
		memcpy(l->digest, "sha256:", 8);
		rc = lt_sha256_fd(fd, copied, l->digest + 7, &hashed);
		if (!rc && hashed != copied)
			rc = -EIO;
	}
	if (fd >= 0 && close(fd) && !rc) /* a store's last upload may come at close */
		rc = -errno;
	if (rc) {
		snprintf(err, errsz, "publishing %s: copying it into %s: %s", l->name, l->copy, strerror(-rc));
		if (fd >= 0)
			unlinkat(outfd, l->copy, 0);
		return rc;
	}
	l->size = copied;
	return 0;
}

int lt_ilog_seal(struct lt_ilog *l, char *err, size_t errsz)
{
	struct stat sb;
	if (!l->live) {
		snprintf(err, errsz, "its log %s was never made; not published", l->partial);
		return -ENOENT;
	}
	if (fstat(l->rfd, &sb)) {
		int e = errno;
		snprintf(err, errsz, "publishing %s: %s", l->name, strerror(e));
		return -e;
	}
	if (sb.st_size <= 0)
		return 0;
	/* What it holds now, no more: it may grow while we copy. */
	l->capped = (uint64_t)sb.st_size > LT_ILOG_MAX_BYTES;
	l->len = l->capped ? LT_ILOG_MAX_BYTES : (uint64_t)sb.st_size;
	return 1;
}

int lt_ilog_copy(struct lt_ilog *l, int stagefd, int outfd, char *err, size_t errsz)
{
	/* By name: the collector holds the file open until we answer, so its
	 * inode number names no other file meanwhile. */
	int in = ilog_own_fd(l, stagefd);
	if (in < 0) {
		snprintf(err, errsz, "publishing %s: its staging file %s: %s", l->name, l->partial, strerror(-in));
		return in;
	}
	int rc = ilog_copy(l, in, outfd, err, errsz);
	close(in);
	return rc;
}

int lt_ilog_name(struct lt_ilog *l, int outfd, char *err, size_t errsz)
{
	int rc = lt_publish_noreplace(outfd, l->copy, l->name);
	if (rc) {
		snprintf(err, errsz, "publishing %s: %s", l->name,
			 rc == -EEXIST ? "it already exists (never replaced)" : strerror(-rc));
		unlinkat(outfd, l->copy, 0);
	}
	return rc;
}

void lt_ilog_uncopy(const struct lt_ilog *l, int outfd)
{
	unlinkat(outfd, l->copy, 0);
}

void lt_ilog_unname(const struct lt_ilog *l, int outfd)
{
	unlinkat(outfd, l->name, 0);
}

void lt_ilog_published(struct lt_ilog *l, int stagefd)
{
	if (l->live && ilog_ours(l, stagefd))
		unlinkat(stagefd, l->partial, 0);
	ilog_close(l);
}

/* Why a launched process's staged file is not taken, or NULL. */
static const char *staged_refused(const struct stat *sb, uid_t owner)
{
	if (S_ISLNK(sb->st_mode))
		return "is a symbolic link (never followed)";
	if (!S_ISREG(sb->st_mode))
		return "is not a regular file";
	if (sb->st_uid != owner)
		return "is not its user's file";
	if (sb->st_size <= 0)
		return "is empty";
	return NULL;
}

/* l->name in dirfd, opened as lt_ilog_copy_staged says: fd (*sb its
 * stat), or -errno with *why set where the file is refused. */
static int staged_open(const struct lt_ilog *l, int dirfd, uid_t owner, struct stat *sb, const char **why)
{
	struct stat at;

	*why = NULL;
	/* Looked at first: a FIFO or a device is never opened. */
	if (fstatat(dirfd, l->name, &at, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if ((*why = staged_refused(&at, owner)))
		return -EPERM;
	int fd = openat(dirfd, l->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int e = fstat(fd, sb) ? errno : 0;
	if (!e && (*why = staged_refused(sb, owner)))
		e = EPERM;
	else if (!e && (sb->st_dev != at.st_dev || sb->st_ino != at.st_ino))
		*why = "was replaced while it was opened", e = ESTALE;
	if (e) {
		close(fd);
		return -e;
	}
	return fd;
}

int lt_ilog_copy_staged(struct lt_ilog *l, int dirfd, uid_t owner, int outfd, char *err, size_t errsz)
{
	struct stat sb;
	const char *why;

	snprintf(l->partial, sizeof(l->partial), "%s", l->name);
	snprintf(l->copy, sizeof(l->copy), ".%s.copy", l->name);
	int in = staged_open(l, dirfd, owner, &sb, &why);
	if (in < 0) {
		snprintf(err, errsz, "publishing %s: its staged file %s", l->name, why ? why : strerror(-in));
		return in;
	}
	l->dev = sb.st_dev;
	l->ino = sb.st_ino;
	/* What it holds now, no more: its user may write on. */
	l->capped = (uint64_t)sb.st_size > LT_ILOG_MAX_BYTES;
	l->len = l->capped ? LT_ILOG_MAX_BYTES : (uint64_t)sb.st_size;
	int rc = ilog_copy(l, in, outfd, err, errsz);
	close(in);
	return rc;
}

void lt_ilog_staged_done(int dirfd, const char *name, dev_t dev, ino_t ino)
{
	if (ilog_same(dirfd, name, dev, ino))
		unlinkat(dirfd, name, 0);
}

int lt_ilog_feed(int dst, int src, uint64_t *off)
{
	struct stat sb;
	if (fstat(src, &sb))
		return -errno;
	uint64_t end = (uint64_t)sb.st_size < LT_ILOG_MAX_BYTES ? (uint64_t)sb.st_size : LT_ILOG_MAX_BYTES;
	int rc = lt_copy_range(dst, src, off, end);
	if (rc)
		return rc;
	uint64_t done = *off & ~(uint64_t)4095;
	if (done) /* what is copied need not stay in the child's memory */
		fallocate(src, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)done);
	return 0;
}

void lt_ilog_keep(struct lt_ilog *l)
{
	ilog_close(l);
}

void lt_ilog_drop(struct lt_ilog *l, int dirfd)
{
	struct stat sb;
	if (l->live && !fstat(l->rfd, &sb) && sb.st_size == 0 && ilog_ours(l, dirfd))
		unlinkat(dirfd, l->partial, 0);
	ilog_close(l);
}

int lt_ilog_name_ok(const char *name)
{
	size_t n = strlen(name);
	return n > 23 && n < 192 && !strncmp(name, "llmtracker-cupti.", 17) &&
	       !strcmp(name + n - 6, ".evlog") && !strchr(name, '/');
}

int lt_ilog_describe(int dirfd, const char *name, uint64_t *size, char *digest, size_t digestsz,
		     char *err, size_t errsz)
{
	struct stat sb;
	char hex[LT_SHA256_HEX];
	if (!lt_ilog_name_ok(name)) {
		snprintf(err, errsz, "its log '%.200s' is no name of a library log; not recorded", name);
		return -EINVAL;
	}
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int rc = fd < 0 ? -errno : fstat(fd, &sb) ? -errno : !S_ISREG(sb.st_mode) ? -EINVAL : 0;
	uint64_t max = rc ? 0 : (uint64_t)sb.st_size;
	if (!rc)
		rc = lt_sha256_fd(fd, max < LT_ILOG_MAX_BYTES ? max : LT_ILOG_MAX_BYTES, hex, size);
	if (fd >= 0)
		close(fd);
	if (rc) {
		snprintf(err, errsz, "its log %s: %s; not recorded", name, strerror(-rc));
		return rc;
	}
	snprintf(digest, digestsz, "sha256:%s", hex);
	return 0;
}
