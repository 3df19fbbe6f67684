/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 (FIPS 180-4), for the digests the collector records of the files
 * it publishes and the converter checks before it trusts them: a digest
 * that a forger who can write the output directory cannot match with other
 * content (a CRC or an XXH64 can be matched on purpose). No library the
 * tools link exports one (libzstd keeps its XXH64 internal; libcrypto is
 * not a dependency), so it lives here.
 */
#ifndef LLMT_COMMON_SHA256_H
#define LLMT_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define LT_SHA256_LEN 32
#define LT_SHA256_HEX (2 * LT_SHA256_LEN + 1)

struct lt_sha256 {
	uint32_t h[8];
	uint64_t bytes;
	uint8_t buf[64];
	size_t fill;
};

void lt_sha256_init(struct lt_sha256 *s);
void lt_sha256_update(struct lt_sha256 *s, const void *p, size_t n);
void lt_sha256_final(struct lt_sha256 *s, uint8_t out[LT_SHA256_LEN]);
/* Lower-case hex of a digest. */
char *lt_sha256_hex(const uint8_t d[LT_SHA256_LEN], char out[LT_SHA256_HEX]);
/* The digest of the first `max` bytes of fd from offset 0 (pread: fd's
 * offset is left alone), in hex; the bytes read in *n. 0 or -errno. */
int lt_sha256_fd(int fd, uint64_t max, char out[LT_SHA256_HEX], uint64_t *n);

#endif
