// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <unistd.h>

#include "io.h"

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
