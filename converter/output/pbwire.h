/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protobuf wire format. Written straight to a file through a buffer (pbw):
 * the XPlane writer streams planes and lines of any size without building
 * them in memory, patching each length-delimited field's length when it
 * closes. Or built in memory (pbm): the Perfetto writer's small packets,
 * each nested message built apart and added whole, its length then known
 * (no length slot to patch, so a 1-byte length where it fits).
 */
#ifndef LLMT_PBWIRE_H
#define LLMT_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "tb_layout/tb_seq.h"
#include "common/varint.h"

/* Writes protobuf wire data to an fd through a buffer; pos counts every
 * byte, so the buffer holds the file's bytes [pos - used, pos). */
struct pbw {
	struct tb_seq seq;
	uint64_t pos;
	size_t used;
	int failed;        /* errno of the first failure */
	unsigned char buf[1 << 16];
};

/* A writer on fd (tb_seq: O_DIRECT past its first MiBs), or NULL. */
struct pbw *pbw_new(int fd);
void pbw_flush(struct pbw *w);
void pbw_bytes(struct pbw *w, const void *p, size_t n);
void pbw_varint(struct pbw *w, uint64_t v);
/* Varint field; proto3 leaves zero values out. */
void pbw_int_field(struct pbw *w, unsigned field, int64_t v);
/* Length-delimited field header (the payload follows). */
void pbw_len_header(struct pbw *w, unsigned field, uint64_t len);
/* Bytes a length-delimited field of payload len takes. */
uint64_t pbw_len_field_size(unsigned field, uint64_t len);
/* A length-delimited field of unknown length: returns its length slot's
 * offset, for pbw_close_field() to patch with all written since. */
uint64_t pbw_open_field(struct pbw *w, unsigned field);
void pbw_close_field(struct pbw *w, uint64_t at);
/* A string field, as UTF-8 (pbw_utf8_ok); nothing for "". */
void pbw_str_field(struct pbw *w, unsigned field, const char *s);
/* A protobuf-c message as a length-delimited field; -1 out of memory. */
int pbw_msg_field(struct pbw *w, unsigned field, const ProtobufCMessage *m);

/* proto3 strings must be UTF-8: s itself when it is, else a copy with each
 * invalid byte replaced by U+FFFD, stored in *owned (to free). */
const char *pbw_utf8_ok(const char *s, char **owned);
/* That copy, always made (malloc'd), or NULL when out of memory. */
char *pbw_utf8_dup(const char *s);

/* --------------------------------------------------------------- in memory */

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2 };

/* A message being built; an allocation failure is remembered (oom) and
 * later appends do nothing until pbm_reset. */
struct pbm {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

int pbm_grow(struct pbm *m, size_t n);
static inline void pbm_reset(struct pbm *m)
{
	m->len = 0;
	m->oom = 0;
}
void pbm_free(struct pbm *m);

static inline int pbm_room(struct pbm *m, size_t n)
{
	return m->len + n <= m->cap ? 0 : pbm_grow(m, n);
}

static inline void pbm_varint(struct pbm *m, uint64_t v)
{
	if (!pbm_room(m, LT_VARINT_MAX))
		m->len = (size_t)(lt_varint_put(m->p + m->len, v) - m->p);
}

static inline void pbm_tag(struct pbm *m, unsigned field, unsigned wire)
{
	pbm_varint(m, (uint64_t)field << 3 | wire);
}

/* Varint field, written even when 0 (proto2: presence counts). */
static inline void pbm_uint(struct pbm *m, unsigned field, uint64_t v)
{
	pbm_tag(m, field, PB_VARINT);
	pbm_varint(m, v);
}

/* int64 field: negative values take ten bytes, as protobuf codes them. */
static inline void pbm_int(struct pbm *m, unsigned field, int64_t v)
{
	pbm_uint(m, field, (uint64_t)v);
}

void pbm_fixed64(struct pbm *m, unsigned field, uint64_t v);
void pbm_double(struct pbm *m, unsigned field, double v);
/* Length-delimited field of n bytes (bytes, or a string known to be UTF-8). */
void pbm_bytes(struct pbm *m, unsigned field, const void *p, size_t n);
/* String field: s[0..n), invalid UTF-8 repaired (U+FFFD), NUL bytes kept. */
void pbm_str(struct pbm *m, unsigned field, const char *s, size_t n);
/* A nested message built in sub. */
static inline void pbm_msg(struct pbm *m, unsigned field, const struct pbm *sub)
{
	if (sub->oom)
		m->oom = 1;
	pbm_bytes(m, field, sub->p, sub->len);
}

/* Is s[0..n) valid UTF-8? */
int pbw_utf8_valid(const char *s, size_t n);

#endif
