/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A streaming output file for the converter: bytes are buffered, optionally
 * gzip-compressed, written under a temporary name in the
 * final directory and renamed into place by cv_out_publish(). Plus the JSON
 * pieces the trace writer needs: strings escaped for any input (control
 * characters, invalid UTF-8 repaired to U+FFFD) and fast numbers.
 */
#ifndef LLMT_CONV_JSONW_H
#define LLMT_CONV_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct libdeflate_compressor;
#include "tb_layout/tb_layout.h"
#include "tb_layout/tb_seq.h"

struct cv_out {
	struct tb_tmpfile tmp;
	struct tb_seq seq;   /* writes tmp.fd (O_DIRECT past its first MiBs) */
	int open;
	int gz;
	/* By default one ISA-L level-1 stream (zs). With LLMT_GZIP_LEVEL,
	 * libdeflate (zc) and each full buffer one gzip member (RFC 1952 allows
	 * many; gzip, zcat, Python's gzip module, Perfetto and Chrome read them
	 * all): it compresses a whole buffer much faster than a stream. */
	struct libdeflate_compressor *zc;
	void *zs;            /* struct isal_zstream */
	char *buf;           /* pending bytes */
	size_t len, cap;
	unsigned char *zbuf;
	size_t zcap;
	uint64_t bytes_in, bytes_out;
	char err[600];
};

/* Open final_path (gzip when gz) under a temporary name in its directory,
 * or name in dirfd when dirfd >= 0. */
int cv_out_open(struct cv_out *o, int dirfd, const char *final, int gz, int overwrite,
		char *err, size_t errsz);
/* Flush, end the gzip stream, rename into place. Releases o. */
int cv_out_publish(struct cv_out *o, int overwrite, char *err, size_t errsz);
/* Finish the bytes (flush + end gzip) without publishing yet. */
int cv_out_close(struct cv_out *o);
void cv_out_discard(struct cv_out *o);
int cv_out_flush(struct cv_out *o, int final);

#define CV_OUT_CHUNK (1u << 20)

static inline int cv_out_reserve(struct cv_out *o, size_t n)
{
	if (o->len + n > o->cap)
		return cv_out_flush(o, 0) || o->len + n > o->cap ? -1 : 0;
	return 0;
}

static inline int cv_out_write(struct cv_out *o, const void *p, size_t n)
{
	while (o->len + n > o->cap) {
		size_t k = o->cap - o->len;

		memcpy(o->buf + o->len, p, k);
		o->len += k;
		p = (const char *)p + k;
		n -= k;
		if (cv_out_flush(o, 0))
			return -1;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	return 0;
}

#define CV_OUT_LIT(o, s) cv_out_write((o), (s), sizeof(s) - 1)

int cv_out_str(struct cv_out *o, const char *s);
/* Bytes at the start of s that need no escaping in a JSON string. */
size_t cv_json_plain_len(const char *s, size_t len);
/* A JSON string literal, quotes included, of s[0..len). */
int cv_json_str(struct cv_out *o, const char *s, size_t len);
/* v in decimal at d (20 bytes at most, no NUL); returns the length. */
size_t cv_dec_u64(char *d, uint64_t v);
int cv_json_u64(struct cv_out *o, uint64_t v);
int cv_json_i64(struct cv_out *o, int64_t v);
/* ns as µs with three decimals ("12.345"). */
int cv_json_us(struct cv_out *o, int64_t ns);
int cv_json_double(struct cv_out *o, double v);

/* Escape into a plain buffer; returns bytes written (dst needs 6*len+3). */
size_t cv_json_escape(char *dst, const char *s, size_t len);

#endif
