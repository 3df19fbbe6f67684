/* SPDX-License-Identifier: Apache-2.0 */
#include "tb_seq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t direct_after(void)
{
	const char *v = getenv("LLMT_DIRECT_AFTER_MB");
	char *end;

	if (!v || !*v)
		return TB_SEQ_DIRECT_AFTER;
	if (!strcmp(v, "off"))
		return UINT64_MAX;
	unsigned long long mb = strtoull(v, &end, 10);

	return *end || mb > (1ull << 40) ? TB_SEQ_DIRECT_AFTER : mb << 20;
}

void tb_seq_init(struct tb_seq *s, int fd)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->mode = TB_SEQ_CACHED;
	s->direct_after = direct_after();
}

static int set_direct(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT);
}

/* At an aligned offset past the threshold: stage from here on, if the
 * filesystem takes O_DIRECT. */
static void go_direct(struct tb_seq *s)
{
	void *b = NULL;

	s->mode = TB_SEQ_CACHED_ONLY;
	if (posix_memalign(&b, TB_SEQ_ALIGN, TB_SEQ_BLOCK))
		return;
	if (set_direct(s->fd, 1)) {
		free(b);
		return;
	}
	s->stage = b;
	s->len = 0;
	s->mode = TB_SEQ_DIRECT;
}

/* Back to the cache for good (the last bytes, or a refusal). */
static int leave_direct(struct tb_seq *s)
{
	s->mode = TB_SEQ_CACHED_ONLY;
	return set_direct(s->fd, 0);
}

/* Every write names its offset: a retry after a partial write (O_DIRECT
 * refused midway) rewrites the same bytes in place. */
static int pwrite_all(int fd, const char *p, size_t n, uint64_t at)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)at);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!w)
				errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		at += (uint64_t)w;
	}
	return 0;
}

/* Write the first n (aligned) staged bytes; the rest moves to the front.
 * A filesystem may take O_DIRECT at fcntl and refuse it at write (EINVAL):
 * then these bytes, and all after them, go through the cache. */
static int flush_stage(struct tb_seq *s, size_t n)
{
	if (!n)
		return 0;
	if (pwrite_all(s->fd, s->stage, n, s->off) < 0) {
		if (errno != EINVAL || leave_direct(s) || pwrite_all(s->fd, s->stage, n, s->off) < 0)
			return -1;
	}
	s->off += n;
	s->len -= n;
	memmove(s->stage, s->stage + n, s->len);
	return 0;
}

static int write_cached(struct tb_seq *s, const char *p, size_t n)
{
	uint64_t at;

	if (s->mode == TB_SEQ_CACHED && s->off + n > s->direct_after) {
		/* The switch point: past the threshold, at an aligned offset. */
		at = s->off > s->direct_after ? s->off : s->direct_after;
		at = (at + TB_SEQ_ALIGN - 1) / TB_SEQ_ALIGN * TB_SEQ_ALIGN;
		if (s->off + n >= at) {
			size_t k = (size_t)(at - s->off);

			if (pwrite_all(s->fd, p, k, s->off) < 0)
				return -1;
			s->off += k;
			go_direct(s);
			return tb_seq_write(s, p + k, n - k);
		}
	}
	if (pwrite_all(s->fd, p, n, s->off) < 0)
		return -1;
	s->off += n;
	return 0;
}

int tb_seq_write(struct tb_seq *s, const void *buf, size_t n)
{
	const char *p = buf;

	if (s->mode != TB_SEQ_DIRECT)
		return write_cached(s, p, n);
	while (n) {
		size_t k = TB_SEQ_BLOCK - s->len < n ? TB_SEQ_BLOCK - s->len : n;

		memcpy(s->stage + s->len, p, k);
		s->len += k;
		p += k;
		n -= k;
		if (s->len == TB_SEQ_BLOCK && flush_stage(s, TB_SEQ_BLOCK) < 0)
			return -1;
		if (s->mode != TB_SEQ_DIRECT) /* refused: the rest through the cache */
			return write_cached(s, p, n);
	}
	return 0;
}

int tb_seq_pwrite(struct tb_seq *s, const void *buf, size_t n, uint64_t at)
{
	const char *p = buf;

	if (at + n > tb_seq_size(s)) {
		errno = EINVAL;
		return -1;
	}
	if (at + n > s->off) { /* the staged part */
		size_t skip = at < s->off ? (size_t)(s->off - at) : 0;

		memcpy(s->stage + (at + skip - s->off), p + skip, n - skip);
		n = skip;
	}
	if (!n)
		return 0;
	/* Written already: a small unaligned write goes through the cache. */
	if (s->mode == TB_SEQ_DIRECT) {
		int rc;

		if (set_direct(s->fd, 0))
			return -1;
		rc = pwrite_all(s->fd, p, n, at);
		if (set_direct(s->fd, 1) && rc == 0)
			rc = -1;
		return rc;
	}
	return pwrite_all(s->fd, p, n, at);
}

int tb_seq_finish(struct tb_seq *s)
{
	int rc = 0;

	if (s->mode == TB_SEQ_DIRECT) {
		rc = flush_stage(s, s->len / TB_SEQ_ALIGN * TB_SEQ_ALIGN);
		if (rc == 0 && s->mode == TB_SEQ_DIRECT)
			rc = leave_direct(s);
		if (rc == 0 && s->len && pwrite_all(s->fd, s->stage, s->len, s->off) < 0)
			rc = -1;
		if (rc == 0) {
			s->off += s->len;
			s->len = 0;
		}
	}
	tb_seq_free(s);
	return rc;
}

void tb_seq_free(struct tb_seq *s)
{
	free(s->stage);
	s->stage = NULL;
	s->len = 0;
	if (s->mode == TB_SEQ_DIRECT)
		s->mode = TB_SEQ_CACHED_ONLY;
}
