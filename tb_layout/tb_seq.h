/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tb_seq: one large output file written front to back (trace JSON, XPlane)
 * with little kernel work. The first bytes (TB_SEQ_DIRECT_AFTER, or
 * LLMT_DIRECT_AFTER_MB: a number of MiB, or "off") go through the page
 * cache as usual; past them, from an aligned offset, the file is switched
 * to O_DIRECT and written in aligned blocks staged here. Gigabytes of
 * output then cost neither a page-cache copy and a fresh page per 4 KiB
 * (most of the converter's system time on a VM) nor the cache of the job
 * next to it. The last partial block is written through the cache. A
 * filesystem that refuses O_DIRECT is written through the cache.
 *
 * Bytes already written may be patched (length prefixes): in the staging
 * block while they are there, else through the cache.
 *
 * Errors are values: -1 with errno set.
 */
#ifndef LLMT_TB_SEQ_H
#define LLMT_TB_SEQ_H

#include <stddef.h>
#include <stdint.h>

#define TB_SEQ_DIRECT_AFTER (32ull << 20)
#define TB_SEQ_ALIGN 4096u
#define TB_SEQ_BLOCK (4u << 20)

enum tb_seq_mode { TB_SEQ_CACHED, TB_SEQ_DIRECT, TB_SEQ_CACHED_ONLY };

struct tb_seq {
	int fd;                  /* not owned */
	enum tb_seq_mode mode;
	uint64_t off;            /* bytes in the file, staged ones not counted */
	uint64_t direct_after;   /* UINT64_MAX: never */
	char *stage;             /* TB_SEQ_DIRECT: bytes for offset off on */
	size_t len;
};

/* Start writing fd (empty) from offset 0; every write names its offset, the
 * file position is not used. */
void tb_seq_init(struct tb_seq *s, int fd);
int tb_seq_write(struct tb_seq *s, const void *p, size_t n);
/* Overwrite n bytes at `at`, all of them already handed to tb_seq_write. */
int tb_seq_pwrite(struct tb_seq *s, const void *p, size_t n, uint64_t at);
/* Write what is staged; fd is left without O_DIRECT. Releases s. */
int tb_seq_finish(struct tb_seq *s);
/* Release s without writing (the file is being discarded). */
void tb_seq_free(struct tb_seq *s);
/* Bytes handed to tb_seq_write so far. */
static inline uint64_t tb_seq_size(const struct tb_seq *s)
{
	return s->off + s->len;
}

#endif
