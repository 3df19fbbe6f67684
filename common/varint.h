/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LEB128 varints and zigzag, as the event log's columns and protobuf's wire
 * format (the XPlane writer) both encode integers. Inline: both call them
 * per field of every event.
 */
#ifndef LLMT_COMMON_VARINT_H
#define LLMT_COMMON_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define LT_VARINT_MAX 10 /* bytes of a u64 */

static inline size_t lt_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* The caller guarantees LT_VARINT_MAX bytes of room; returns the end. */
static inline uint8_t *lt_varint_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint64_t lt_zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t lt_unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Bounds-checked decode: returns the new position, or NULL if the varint
 * runs past `end` or is longer than 10 bytes / overflows 64 bits. Always
 * inlined: the event log reader's and the sort records' decoders are a
 * chain of these, and GCC's size limits left it out of line there once
 * those functions grew (1.6% more instructions converting, callgrind,
 * docs/MEASUREMENTS.md, converter throughput and memory). */
static inline __attribute__((always_inline)) const uint8_t *lt_varint_get(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
	if (end - p >= 2) { /* fast paths: one or two bytes */
		if (p[0] < 0x80) {
			*out = p[0];
			return p + 1;
		}
		if (p[1] < 0x80) {
			*out = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
			return p + 2;
		}
	}
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (p >= end)
			return NULL;
		uint8_t b = *p++;
		if (shift == 63 && b > 1)
			return NULL;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return p;
		}
	}
	return NULL;
}

#endif
