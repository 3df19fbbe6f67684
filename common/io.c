// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "io.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

int lt_write_all(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -(errno = EIO);
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The read/write way, from offset `off` of in on. */
static int copy_rw(int out, int in, uint64_t off, uint64_t max, uint64_t *copied)
{
	char buf[1 << 16];

	while (off < max) {
		size_t want = max - off < sizeof(buf) ? (size_t)(max - off) : sizeof(buf);
		ssize_t r = pread(in, buf, want, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		int rc = lt_write_all(out, buf, (size_t)r);
		if (rc)
			return rc;
		off += (uint64_t)r;
	}
	*copied = off;
	return 0;
}

int lt_copy_bounded(int out, int in, uint64_t max, uint64_t *copied)
{
	off_t off = 0;

	*copied = 0;
	while ((uint64_t)off < max) {
		uint64_t left = max - (uint64_t)off;
		ssize_t r = copy_file_range(in, &off, out, NULL, left < (1u << 30) ? left : (1u << 30), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
			      errno == EBADF || errno == EPERM || errno == ETXTBSY))
			return copy_rw(out, in, (uint64_t)off, max, copied); /* not here: the plain way */
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
	}
	*copied = (uint64_t)off;
	return 0;
}

int lt_publish_noreplace(int dirfd, const char *from, const char *to)
{
	if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
		return -errno;
	if (linkat(dirfd, from, dirfd, to, 0) != 0)
		return -errno;
	unlinkat(dirfd, from, 0);
	return 0;
}
