/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 of a file's first bytes (nettle), for the digests the collector
 * records of the files it publishes and the converter checks before it
 * trusts them: a digest that a forger who can write the output directory
 * cannot match with other content (a CRC or an XXH64 can be matched on
 * purpose). Not in the injected library (it needs only glibc).
 */
#ifndef LLMT_COMMON_DIGEST_H
#define LLMT_COMMON_DIGEST_H

#include <stdint.h>

#define LT_SHA256_LEN 32
#define LT_SHA256_HEX (2 * LT_SHA256_LEN + 1)

/* The digest of the first `max` bytes of fd from offset 0 (pread: fd's
 * offset is left alone), in lower-case hex; the bytes read in *n. 0 or
 * -errno. */
int lt_sha256_fd(int fd, uint64_t max, char out[LT_SHA256_HEX], uint64_t *n);

#endif
