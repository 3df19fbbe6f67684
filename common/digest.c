// SPDX-License-Identifier: Apache-2.0
#include "digest.h"

#include <errno.h>
#include <nettle/base16.h>
#include <nettle/sha2.h>
#include <unistd.h>

int lt_sha256_fd(int fd, uint64_t max, char out[LT_SHA256_HEX], uint64_t *n)
{
	struct sha256_ctx s;
	uint8_t buf[1 << 16], d[LT_SHA256_LEN];
	uint64_t off = 0;

	sha256_init(&s);
	while (off < max) {
		size_t want = max - off < sizeof(buf) ? (size_t)(max - off) : sizeof(buf);
		ssize_t r = pread(fd, buf, want, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		sha256_update(&s, (size_t)r, buf);
		off += (uint64_t)r;
	}
	sha256_digest(&s, sizeof(d), d);
	base16_encode_update(out, sizeof(d), d);
	out[2 * LT_SHA256_LEN] = 0;
	*n = off;
	return 0;
}
