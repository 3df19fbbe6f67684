// SPDX-License-Identifier: Apache-2.0
#include "inject_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

int lt_ilog_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
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

int lt_ilog_create(struct lt_ilog *l, int dirfd, const char *prefix, const char *host, int pid,
		   char *err, size_t errsz)
{
	struct timespec rt;
	struct tm tm;
	struct stat sb;
	char stamp[32], h[65];

	memset(l, 0, sizeof(*l));
	clock_gettime(CLOCK_REALTIME, &rt);
	gmtime_r(&rt.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	ilog_host(host, h, sizeof(h));
	snprintf(l->name, sizeof(l->name), "%.24s.%s.%d.%s.%09ld.evlog", prefix, h, pid, stamp,
		 rt.tv_nsec);
	snprintf(l->partial, sizeof(l->partial), ".%s.partial", l->name);
	/* Write-only: the library appends and may cut a torn chunk off
	 * (ftruncate); it never needs to read, and gets nothing else. */
	int fd = openat(dirfd, l->partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errsz, "cannot create its log %s: %s", l->partial, strerror(e));
		return -e;
	}
	if (fstat(fd, &sb)) {
		int e = errno;
		close(fd);
		unlinkat(dirfd, l->partial, 0);
		snprintf(err, errsz, "cannot create its log %s: %s", l->partial, strerror(e));
		return -e;
	}
	l->dev = sb.st_dev;
	l->ino = sb.st_ino;
	l->live = 1;
	return fd;
}

/* Is the partial name still the file we made? Size in *size. */
static int ilog_ours(const struct lt_ilog *l, int dirfd, off_t *size)
{
	struct stat sb;
	if (!l->live || fstatat(dirfd, l->partial, &sb, AT_SYMLINK_NOFOLLOW))
		return 0;
	*size = sb.st_size;
	return S_ISREG(sb.st_mode) && sb.st_dev == l->dev && sb.st_ino == l->ino;
}

int lt_ilog_publish(struct lt_ilog *l, int dirfd, char *err, size_t errsz)
{
	off_t size = 0;
	if (!ilog_ours(l, dirfd, &size)) {
		l->live = 0;
		snprintf(err, errsz, "its log %s is gone or was replaced; not published", l->partial);
		return -ENOENT;
	}
	if (size == 0) {
		lt_ilog_drop(l, dirfd);
		return 0;
	}
	int rc = renameat2(dirfd, l->partial, dirfd, l->name, RENAME_NOREPLACE) ? -errno : 0;
	if (rc == -EINVAL || rc == -ENOSYS || rc == -EOPNOTSUPP) /* no RENAME_NOREPLACE here */
		rc = linkat(dirfd, l->partial, dirfd, l->name, 0) ? -errno
		     : (unlinkat(dirfd, l->partial, 0), 0);
	if (rc) {
		snprintf(err, errsz, "publishing %s: %s; kept as %s", l->name,
			 rc == -EEXIST ? "it already exists (never replaced)" : strerror(-rc), l->partial);
		return rc;
	}
	l->live = 0;
	return 1;
}

void lt_ilog_drop(struct lt_ilog *l, int dirfd)
{
	off_t size;
	if (ilog_ours(l, dirfd, &size) && size == 0)
		unlinkat(dirfd, l->partial, 0);
	l->live = 0;
}
