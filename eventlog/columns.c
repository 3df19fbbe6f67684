// SPDX-License-Identifier: Apache-2.0
/*
 * Row <-> column transposition of chunk payloads (evlog_columns.h). One
 * walker, specialised for each direction, follows the row grammar of
 * schemas/eventlog.md 3.2-3.4 and moves each varint or string to or from its
 * column. Every read is bounds-checked: the reader feeds it file data.
 */
#include "eventlog/evlog_columns.h"
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"

#include <stdlib.h>
#include <string.h>

/*
 * Field kinds per event type, in row order (evlog_schema.h's letters): v
 * varint (u, z, c alike), s string reference, k native stack reference, y
 * Python stack reference, a argument list (count, then up to EVLOG_MAX_ARGS
 * values; 1 + 8 columns). Columns are numbered in this order.
 */
#define LETTERS(m, kind, f) EVS_LETTERS_##kind
#define SCHEMA(N, num, m, track, dur, corr) [EV_##N] = "" EVLOG_FIELDS_##m(LETTERS, m),
static const char *const evc_schema[EV_TYPE_MAX + 1] = { EVLOG_TYPES(SCHEMA) };
#undef SCHEMA
#undef LETTERS

#define BASE(N, num, m, track, dur, corr) [EV_##N] = EVC_BASE_##m,
const uint8_t evc_base[EV_TYPE_MAX + 1] = { EVLOG_TYPES(BASE) };
#undef BASE
#define NCOLS(N, num, m, track, dur, corr) [EV_##N] = EVC_NF_##m,
const uint8_t evc_ncols[EV_TYPE_MAX + 1] = { EVLOG_TYPES(NCOLS) };
#undef NCOLS

void evc_bases(uint8_t base[EV_TYPE_MAX + 2])
{
	unsigned k = EVC_FIELDS;
	base[0] = (uint8_t)k;
	for (unsigned t = 1; t <= EV_TYPE_MAX; t++) {
		if (evc_schema[t])
			k = evc_base[t];
		base[t] = (uint8_t)k;
		k += evc_ncols[t];
	}
	base[EV_TYPE_MAX + 1] = (uint8_t)k; /* == EVC_NCOLS */
}

/* ------------------------------------------------------------------ walker */

struct evc_io {
	const uint8_t *in[EVC_NCOLS], *in_end[EVC_NCOLS]; /* rows: [0] only */
	struct evc_col *out;                              /* rows: out[0] only, fixed */
	uint64_t nstr, nstk, npy;                         /* defined so far */
	uint32_t done;                                    /* events moved whole */
};

static int evc_grow(struct evc_col *o, size_t n)
{
	return lt_grow((void **)&o->b, &o->cap, o->len + n, 1, 4096);
}

/* Move n raw bytes of column k. Row-to-column direction (r2c) reads the
 * single row stream and appends to column k, which may grow; the other way
 * reads column k into the row buffer, whose size is exact. */
static inline __attribute__((always_inline))
int evc_mv_bytes(struct evc_io *io, const int r2c, unsigned k, size_t n)
{
	unsigned s = r2c ? 0 : k, d = r2c ? k : 0;
	const uint8_t *p = io->in[s];
	struct evc_col *o = &io->out[d];
	if (n == 0)
		return 0;
	if ((size_t)(io->in_end[s] - p) < n)
		return -1;
	if (o->cap - o->len < n && (!r2c || evc_grow(o, n)))
		return -1;
	memcpy(o->b + o->len, p, n);
	o->len += n;
	io->in[s] = p + n;
	return 0;
}

/* Move one varint of column k; its value in *v. */
static inline __attribute__((always_inline))
int evc_mv(struct evc_io *io, const int r2c, unsigned k, uint64_t *v)
{
	unsigned s = r2c ? 0 : k, d = r2c ? k : 0;
	const uint8_t *p = io->in[s];
	const uint8_t *q = lt_varint_get(p, io->in_end[s], v);
	if (!q)
		return -1;
	size_t n = (size_t)(q - p);
	struct evc_col *o = &io->out[d];
	if (o->cap - o->len < n && (!r2c || evc_grow(o, n)))
		return -1;
	if (n == 1)
		o->b[o->len] = *p;
	else
		memcpy(o->b + o->len, p, n);
	o->len += n;
	io->in[s] = q;
	return 0;
}

#define MV(k, v) do { if (evc_mv(io, r2c, (k), (v))) return -1; } while (0)

static inline __attribute__((always_inline))
int evc_str(struct evc_io *io, const int r2c, unsigned k)
{
	uint64_t id, len;
	MV(k, &id);
	if (id < io->nstr)
		return 0;
	if (id > io->nstr)
		return -1;
	MV(EVC_STRDEF, &len);
	if (len > EVLOG_STR_MAX || evc_mv_bytes(io, r2c, EVC_STRDEF, len))
		return -1;
	io->nstr++;
	return 0;
}

static inline __attribute__((always_inline))
int evc_stack(struct evc_io *io, const int r2c, unsigned k)
{
	uint64_t id, nk, nu, v;
	MV(k, &id);
	if (id < io->nstk)
		return 0;
	if (id > io->nstk)
		return -1;
	MV(EVC_STKDEF, &nk);
	MV(EVC_STKDEF, &nu);
	if (nk > EVLOG_MAX_FRAMES || nu > EVLOG_MAX_FRAMES - nk)
		return -1;
	for (uint64_t i = 0; i < nk + nu; i++)
		MV(EVC_STKDEF, &v);
	io->nstk++;
	return 0;
}

static inline __attribute__((always_inline))
int evc_pystack(struct evc_io *io, const int r2c, unsigned k)
{
	uint64_t id, n;
	MV(k, &id);
	if (id < io->npy)
		return 0;
	if (id > io->npy)
		return -1;
	MV(EVC_PYDEF, &n);
	if (n > EVLOG_MAX_FRAMES)
		return -1;
	for (uint64_t i = 0; i < n; i++)
		if (evc_str(io, r2c, EVC_PYDEF))
			return -1;
	io->npy++;
	return 0;
}

static inline __attribute__((always_inline))
int evc_fields(struct evc_io *io, const int r2c, unsigned type, unsigned k)
{
	uint64_t v;
	for (const char *s = evc_schema[type]; *s; s++, k++) {
		switch (*s) {
		case 'v': MV(k, &v); break;
		case 's': if (evc_str(io, r2c, k)) return -1; break;
		case 'k': if (evc_stack(io, r2c, k)) return -1; break;
		case 'y': if (evc_pystack(io, r2c, k)) return -1; break;
		case 'a': {
			uint64_t na, a;
			MV(k, &na);
			if (na > EVLOG_MAX_ARGS)
				return -1;
			for (unsigned i = 0; i < na; i++)
				MV(k + 1 + i, &a);
			k += EVLOG_MAX_ARGS;
			break;
		}
		}
	}
	return 0;
}

static inline __attribute__((always_inline))
int evc_walk(struct evc_io *io, const int r2c, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		uint64_t v;
		unsigned s = r2c ? 0 : EVC_TYPE;
		if (io->in[s] >= io->in_end[s])
			return -1;
		uint8_t t = *io->in[s];
		unsigned type = t & EVF_TYPE_MASK;
		if (type == 0 || type > EV_TYPE_MAX)
			return -2; /* a newer minor version's event */
		if (!evc_schema[type])
			return -1; /* 20 (EVC_MARK) is never an event */
		if (evc_mv_bytes(io, r2c, EVC_TYPE, 1))
			return -1;
		MV(EVC_TS, &v);
		if (!(t & EVF_SAME_THREAD)) {
			if (!(t & EVF_SAME_PID))
				MV(EVC_TID, &v);
			MV(EVC_TID, &v);
		}
		if (evc_fields(io, r2c, type, evc_base[type]))
			return -1;
		io->done = i + 1;
	}
	return 0;
}

/* ------------------------------------------------------------------ writer */

static __attribute__((noinline)) int evc_walk_r2c(struct evc_io *io, uint32_t count)
{
	return evc_walk(io, 1, count);
}

void evc_free(struct evc_cols *c)
{
	for (unsigned k = 0; k < EVC_NCOLS; k++) {
		free(c->col[k].b);
		c->col[k] = (struct evc_col){ 0 };
	}
}

int evc_from_rows(struct evc_cols *c, const uint8_t *row, size_t n, uint32_t count,
		  uint8_t **out, size_t *out_len, size_t *out_cap, uint32_t *whole)
{
	struct evc_io io;
	io.in[0] = row;
	io.in_end[0] = row + n;
	io.out = c->col;
	io.nstr = io.nstk = io.npy = 0;
	io.done = 0;
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		c->col[k].len = 0;
	int rc = evc_walk_r2c(&io, count);
	if (rc == 0 && io.in[0] != row + n)
		rc = -1; /* bytes after the last event */
	*whole = io.done;
	size_t need = 1 + 10 * (EVC_NCOLS + 1) + n;
	if (need > *out_cap) {
		uint8_t *b = realloc(*out, need);
		if (!b)
			return -3;
		*out = b;
		*out_cap = need;
	}
	uint8_t *p = *out;
	*p++ = EVC_MARK;
	p = lt_varint_put(p, EVC_NCOLS);
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		p = lt_varint_put(p, c->col[k].len);
	for (unsigned k = 0; k < EVC_NCOLS; k++) {
		if (c->col[k].len)
			memcpy(p, c->col[k].b, c->col[k].len);
		p += c->col[k].len;
	}
	*out_len = (size_t)(p - *out);
	return rc;
}

/* ------------------------------------------------------------------ reader */

static __attribute__((noinline)) int evc_walk_c2r(struct evc_io *io, uint32_t count)
{
	return evc_walk(io, 0, count);
}

long evc_to_rows(const uint8_t *cols, size_t n, uint32_t count, uint8_t *row)
{
	const uint8_t *p = cols, *end = cols + n;
	uint64_t ncols, len;
	if (n < 1 || *p++ != EVC_MARK || !(p = lt_varint_get(p, end, &ncols)))
		return -1;
	if (ncols > EVC_NCOLS)
		return -2; /* columns of event types newer than this reader */
	struct evc_io io;
	uint64_t lens[EVC_NCOLS] = { 0 };
	for (unsigned k = 0; k < ncols; k++) {
		if (!(p = lt_varint_get(p, end, &len)) || len > (size_t)(end - p))
			return -1;
		lens[k] = len;
	}
	size_t total = (size_t)(end - p);
	for (unsigned k = 0; k < EVC_NCOLS; k++) {
		if (lens[k] > (size_t)(end - p))
			return -1;
		io.in[k] = p;
		io.in_end[k] = p + lens[k];
		p += lens[k];
	}
	if (p != end)
		return -1;
	struct evc_col o = { row, 0, total };
	io.out = &o;
	io.nstr = io.nstk = io.npy = 0;
	io.done = 0;
	if (evc_walk_c2r(&io, count))
		return -1;
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		if (io.in[k] != io.in_end[k])
			return -1;
	return (long)o.len;
}
