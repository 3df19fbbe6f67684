/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protobuf wire format, written straight to a file through a buffer: the
 * XPlane writer streams planes and lines of any size without building them
 * in memory, patching each length-delimited field's length when it closes.
 */
#ifndef LLMT_PBWIRE_H
#define LLMT_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "../tb_layout/tb_seq.h"

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

#endif
