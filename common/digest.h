/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 (nettle), for the digests the collector records of the files it
 * publishes (library logs, log segments) and the converter checks before it
 * trusts them: a digest that a forger who can write the output directory
 * cannot match with other content (a CRC or an XXH64 can be matched on
 * purpose).
 *
 * The injected library is built with LT_NO_DIGEST: it needs only glibc (no
 * libnettle in a target's container) and never digests anything, since the
 * collector computes its logs' digests when it publishes them
 * (collector/injection/inject_log.c) and it never writes segments.
 */
#ifndef LLMT_COMMON_DIGEST_H
#define LLMT_COMMON_DIGEST_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define LT_SHA256_LEN 32
#define LT_SHA256_HEX (2 * LT_SHA256_LEN + 1)

#ifndef LT_NO_DIGEST
#include <nettle/sha2.h>

struct lt_sha256 {
	struct sha256_ctx ctx;
};
static inline void lt_sha256_init(struct lt_sha256 *s) { sha256_init(&s->ctx); }
static inline void lt_sha256_update(struct lt_sha256 *s, const void *p, size_t n)
{
	sha256_update(&s->ctx, n, p);
}
static inline void lt_sha256_final(struct lt_sha256 *s, uint8_t out[LT_SHA256_LEN])
{
	sha256_digest(&s->ctx, LT_SHA256_LEN, out);
}

/* The digest of the first `max` bytes of fd from offset 0 (pread: fd's
 * offset is left alone), in lower-case hex; the bytes read in *n. 0 or
 * -errno. */
int lt_sha256_fd(int fd, uint64_t max, char out[LT_SHA256_HEX], uint64_t *n);
#else
struct lt_sha256 {
	int unused;
};
static inline void lt_sha256_init(struct lt_sha256 *s) { (void)s; }
static inline void lt_sha256_update(struct lt_sha256 *s, const void *p, size_t n)
{
	(void)s, (void)p, (void)n;
}
static inline void lt_sha256_final(struct lt_sha256 *s, uint8_t out[LT_SHA256_LEN])
{
	(void)s;
	for (int i = 0; i < LT_SHA256_LEN; i++)
		out[i] = 0;
}
static inline int lt_sha256_fd(int fd, uint64_t max, char out[LT_SHA256_HEX], uint64_t *n)
{
	(void)fd, (void)max, (void)out, (void)n;
	return -ENOSYS;
}
#endif

/* d in lower-case hex, NUL-terminated; returns out. */
static inline char *lt_sha256_hex(const uint8_t d[LT_SHA256_LEN], char out[LT_SHA256_HEX])
{
	static const char x[] = "0123456789abcdef";

	for (int i = 0; i < LT_SHA256_LEN; i++) {
		out[2 * i] = x[d[i] >> 4];
		out[2 * i + 1] = x[d[i] & 15];
	}
	out[2 * LT_SHA256_LEN] = 0;
	return out;
}

#endif
