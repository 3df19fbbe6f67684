// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "converter/output/pbwire.h"
#include "common/utf8.h"
#include "common/varint.h"

/* ------------------------------------------------------------------ UTF-8 */

int pbw_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	size_t n;

	while (p < end) {
		if (*p < 0x80) {
			p++;
			continue;
		}
		if (!(n = lt_utf8_seq(p, (size_t)(end - p))))
			return 0;
		p += n;
	}
	return 1;
}

/*
 * proto3 strings must be UTF-8, or readers (xprof, protoc) reject the whole
 * file; names from targets are only bytes. A malloc'd copy with each invalid
 * byte replaced by U+FFFD, or NULL when out of memory.
 */
char *pbw_utf8_dup(const char *s)
{
	size_t len = strlen(s), n;
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	char *out = malloc(len * 3 + 1), *o = out;

	if (!out)
		return NULL;
	while (p < end) {
		n = lt_utf8_seq(p, (size_t)(end - p));
		if (n) {
			memcpy(o, p, n);
			o += n;
			p += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			p++;
		}
	}
	*o = 0;
	return out;
}

/* s itself when valid, else a cleaned copy stored in *owned (to free). */
const char *pbw_utf8_ok(const char *s, char **owned)
{
	*owned = NULL;
	if (!s || pbw_utf8_valid(s, strlen(s)))
		return s;
	*owned = pbw_utf8_dup(s);
	return *owned ? *owned : "";
}

/* ------------------------------------------------------- buffered output */


void pbw_flush(struct pbw *w)
{
	if (w->used && !w->failed && tb_seq_write(&w->seq, w->buf, w->used) < 0)
		w->failed = errno ? errno : EIO;
	w->used = 0;
}

void pbw_bytes(struct pbw *w, const void *p, size_t n)
{
	w->pos += n;
	if (n > sizeof(w->buf) - w->used) {
		pbw_flush(w);
		if (n >= sizeof(w->buf)) {
			if (!w->failed && tb_seq_write(&w->seq, p, n) < 0)
				w->failed = errno ? errno : EIO;
			return;
		}
	}
	memcpy(w->buf + w->used, p, n);
	w->used += n;
}

void pbw_varint(struct pbw *w, uint64_t v)
{
	uint8_t b[LT_VARINT_MAX];

	pbw_bytes(w, b, (size_t)(lt_varint_put(b, v) - b));
}

/* Varint field; proto3 leaves zero values out. */
void pbw_int_field(struct pbw *w, unsigned field, int64_t v)
{
	if (!v)
		return;
	pbw_varint(w, (uint64_t)field << 3);
	pbw_varint(w, (uint64_t)v);
}

/* Length-delimited field header (the payload follows). */
void pbw_len_header(struct pbw *w, unsigned field, uint64_t len)
{
	pbw_varint(w, ((uint64_t)field << 3) | 2);
	pbw_varint(w, len);
}

uint64_t pbw_len_field_size(unsigned field, uint64_t len)
{
	return lt_varint_len((uint64_t)field << 3 | 2) + lt_varint_len(len) + len;
}

/* A length-delimited field whose length is not known yet: its tag, then a
 * length slot of LEN_SLOT bytes (0x80 0x80 0x80 0x80 0x00 until patched).
 * Returns the slot's offset in the file. */
#define LEN_SLOT 5
#define LEN_SLOT_MAX ((1ull << 35) - 1)

uint64_t pbw_open_field(struct pbw *w, unsigned field)
{
	static const unsigned char slot[LEN_SLOT] = { 0x80, 0x80, 0x80, 0x80, 0x00 };
	uint64_t at;

	pbw_varint(w, ((uint64_t)field << 3) | 2);
	at = w->pos;
	pbw_bytes(w, slot, LEN_SLOT);
	return at;
}

/* Patch the slot at `at` with the length of all written since it: in the
 * buffer while the slot is still there, else in the file. */
void pbw_close_field(struct pbw *w, uint64_t at)
{
	uint64_t len = w->pos - at - LEN_SLOT, buf_start = w->pos - w->used;
	unsigned char b[LEN_SLOT];
	size_t in_file = 0;

	if (len > LEN_SLOT_MAX) {
		if (!w->failed)
			w->failed = EFBIG;
		return;
	}
	for (int i = 0; i < LEN_SLOT; i++)
		b[i] = (unsigned char)(((len >> (7 * i)) & 0x7f) | (i < LEN_SLOT - 1 ? 0x80 : 0));
	if (at < buf_start) {
		in_file = at + LEN_SLOT <= buf_start ? LEN_SLOT : (size_t)(buf_start - at);
		if (!w->failed && tb_seq_pwrite(&w->seq, b, in_file, at) < 0)
			w->failed = errno ? errno : EIO;
	}
	if (in_file < LEN_SLOT)
		memcpy(w->buf + (at + in_file - buf_start), b + in_file, LEN_SLOT - in_file);
}

void pbw_str_field(struct pbw *w, unsigned field, const char *s)
{
	char *owned;
	size_t n;

	s = pbw_utf8_ok(s, &owned);
	n = s ? strlen(s) : 0;
	if (n) {
		pbw_len_header(w, field, n);
		pbw_bytes(w, s, n);
	}
	free(owned);
}

/* A protobuf-c message as a length-delimited field. */
int pbw_msg_field(struct pbw *w, unsigned field, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	unsigned char stackbuf[1024], *p = n <= sizeof(stackbuf) ? stackbuf : malloc(n);

	if (!p)
		return -1;
	protobuf_c_message_pack(m, p);
	pbw_len_header(w, field, n);
	pbw_bytes(w, p, n);
	if (p != stackbuf)
		free(p);
	return 0;
}

struct pbw *pbw_new(int fd)
{
	struct pbw *w = malloc(sizeof(*w));

	if (w) {
		tb_seq_init(&w->seq, fd);
		w->pos = 0;
		w->used = 0;
		w->failed = 0;
	}
	return w;
}

/* ------------------------------------------------------------- in memory */

int pbm_grow(struct pbm *m, size_t n)
{
	size_t nc = m->cap ? m->cap : 256;
	uint8_t *np;

	if (m->oom)
		return -1;
	while (nc < m->len + n)
		nc *= 2;
	if (!(np = realloc(m->p, nc))) {
		m->oom = 1;
		return -1;
	}
	m->p = np;
	m->cap = nc;
	return 0;
}

void pbm_free(struct pbm *m)
{
	free(m->p);
	memset(m, 0, sizeof(*m));
}

void pbm_fixed64(struct pbm *m, unsigned field, uint64_t v)
{
	pbm_tag(m, field, PB_I64);
	if (pbm_room(m, 8))
		return;
	for (int i = 0; i < 8; i++)
		m->p[m->len++] = (uint8_t)(v >> (8 * i));
}

void pbm_double(struct pbm *m, unsigned field, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	pbm_fixed64(m, field, u);
}

void pbm_bytes(struct pbm *m, unsigned field, const void *p, size_t n)
{
	pbm_tag(m, field, PB_LEN);
	pbm_varint(m, n);
	if (n && !pbm_room(m, n)) {
		memcpy(m->p + m->len, p, n);
		m->len += n;
	}
}

/* The repair as pbw_utf8_dup's, for a string with a length (it may hold NULs). */
void pbm_str(struct pbm *m, unsigned field, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	size_t bad = 0, k;

	if (pbw_utf8_valid(s, n)) {
		pbm_bytes(m, field, s, n);
		return;
	}
	for (const unsigned char *q = p; q < end; q += k ? k : 1)
		if (!(k = *q < 0x80 ? 1 : lt_utf8_seq(q, (size_t)(end - q))))
			bad++;
	pbm_tag(m, field, PB_LEN);
	pbm_varint(m, n + 2 * bad);
	if (pbm_room(m, n + 2 * bad))
		return;
	while (p < end) {
		k = *p < 0x80 ? 1 : lt_utf8_seq(p, (size_t)(end - p));
		if (k) {
			memcpy(m->p + m->len, p, k);
			m->len += k;
			p += k;
		} else {
			memcpy(m->p + m->len, "\xef\xbf\xbd", 3);
			m->len += 3;
			p++;
		}
	}
}
