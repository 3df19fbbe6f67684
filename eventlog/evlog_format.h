/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evlog_format.h: on-disk constants and the varint primitives shared by the
 * event log writer and reader. schemas/eventlog.md is the normative text;
 * keep the two in step.
 */
#ifndef LLMT_EVLOG_FORMAT_H
#define LLMT_EVLOG_FORMAT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/varint.h" /* the columns' integers */

/* ------------------------------------------------------------ file header */
#define EVF_MAGIC "LLMTRACE"
#define EVF_MAGIC_LEN 8
/* magic(8) major(2) minor(2) body_len(4) body_crc(4) */
#define EVF_FILE_FIXED 20
/* A header body larger than this is rejected as corrupt: it holds a few
 * strings, each capped by the writer. */
#define EVF_HEADER_BODY_MAX (7u * (16u << 20) + 4096u)

enum evf_tag {
	EVF_TAG_HOST = 1,
	EVF_TAG_BOOT_ID = 2,
	EVF_TAG_MACHINE = 3,
	EVF_TAG_PRODUCER = 4,
	EVF_TAG_CMDLINE = 5,
	EVF_TAG_OPTIONS = 6,
	EVF_TAG_MONO_NS = 7,      /* u64 */
	EVF_TAG_REALTIME_NS = 8,  /* u64 */
	EVF_TAG_PRODUCER_PID = 9, /* u32 */
	EVF_TAG_SESSION = 10,     /* 16 bytes (1.2): the profile's id, shared by all its logs */
	EVF_TAG_SEGMENT = 11,     /* u32 (1.5): the file's segment number, from 2 on */
};

/* ----------------------------------------------------------- chunk header */
#define EVF_CHUNK_MAGIC 0x4b434c45u /* "ELCK" little-endian */
#define EVF_CHUNK_HDR 48
/*
 * off size field
 *   0   4  magic
 *   4   4  header crc32 (bytes 8..47)
 *   8   4  compressed payload size
 *  12   4  raw (decompressed) payload size
 *  16   4  event count
 *  20   4  flags (0; reader ignores unknown bits)
 *  24   8  sequence number (0, 1, 2 ... per file)
 *  32   8  base timestamp (ts of the first event)
 *  40   4  payload crc32 (of the compressed bytes)
 *  44   4  reserved (0)
 */
/* Raw payload cap: bounds the reader's allocations from file-supplied
 * sizes, and the largest single event the writer accepts. */
#define EVF_CHUNK_RAW_MAX (64u << 20)
#define EVF_CHUNK_DEFAULT (1u << 20)
/* Per-chunk caps on interned items, so a reader's tables stay small
 * whatever a (checksum-valid but hostile) chunk says. */
#define EVF_CHUNK_STRS_MAX (1u << 20)     /* strings defined */
#define EVF_CHUNK_FRAMES_MAX (1u << 22)   /* native frames defined (new stacks) */
#define EVF_CHUNK_PYFRAMES_MAX (1u << 20) /* Python frames defined (new pystacks) */

/* ------------------------------------------------------------- event byte */
#define EVF_TYPE_MASK 0x3f
#define EVF_SAME_THREAD 0x80 /* pid/tid omitted: same as the previous event */
#define EVF_SAME_PID 0x40    /* pid omitted (same as the previous event), tid follows */

/* ------------------------------------------------------- little endian io */
static inline void evf_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void evf_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void evf_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t evf_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t evf_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t evf_get64(const uint8_t *p)
{
	return (uint64_t)evf_get32(p) | (uint64_t)evf_get32(p + 4) << 32;
}

/* Format a message into msg (if any) for an open function's caller; returns
 * -code. Shared by the reader and the writer (names.c). */
int evf_msg(char *msg, size_t msgsz, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* LLMT_EVLOG_FORMAT_H */
