/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evlog_columns.h: the column layout of a chunk payload (format 1.1,
 * schemas/eventlog.md 3.5). Each field of each event type has its own
 * column, so values of one field sit side by side and zstd's entropy coder
 * sees each field's own statistics (about a fifth fewer bytes on disk than
 * the 1.0 row layout). The writer encodes into columns and the reader decodes
 * from them directly; the transposition below converts between the column
 * layout and 1.0 rows (reading 1.0 logs, writing them for 1.0 readers).
 *
 * A column payload holds exactly the bytes of the row payload, reordered,
 * plus a small directory.
 */
#ifndef LLMT_EVLOG_COLUMNS_H
#define LLMT_EVLOG_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "eventlog/eventlog.h"

/* First payload byte of a column chunk: an event type (20) that 1.0 readers
 * do not know, so they skip the chunk and count it (chunks_unknown). */
#define EVC_MARK 20u

/* Fixed columns, then one per field of each event type (evc_bases). */
enum {
	EVC_TYPE,   /* the type byte (with its SAME_* flags) */
	EVC_TS,     /* timestamp delta */
	EVC_TID,    /* pid and tid, when coded */
	EVC_STRDEF, /* new strings: length, bytes */
	EVC_STKDEF, /* new native stacks: n_kernel, n_user, frames */
	EVC_PYDEF,  /* new Python stacks: n, frame string references */
	EVC_FIELDS,
};

/* EVC_NF_<member>: the columns of a type's fields (EVLOG_FIELDS_<member>). */
#define EVC_NF_FIELD(m, kind, f) + EVS_NCOL_##kind
#define EVC_NF(N, num, m, track, dur, corr) EVC_NF_##m = 0 EVLOG_FIELDS_##m(EVC_NF_FIELD, m),
enum { EVLOG_TYPES(EVC_NF) };
#undef EVC_NF
#undef EVC_NF_FIELD

/* EVC_BASE_<member>: the first column of a type's fields, in type order
 * (each enumerator after a type's last column is the next type's first);
 * EVC_NCOLS: all columns. */
#define EVC_BASE(N, num, m, track, dur, corr) \
	EVC_BASE_##m, EVC_LAST_##m = EVC_BASE_##m + EVC_NF_##m - 1,
enum { EVC_BEFORE_FIELDS = EVC_FIELDS - 1, EVLOG_TYPES(EVC_BASE) EVC_NCOLS };
#undef EVC_BASE

/* Format 1.1/1.2 columns (types 1-19) never move. */
_Static_assert(EVC_BASE_clock == 104 && EVC_LAST_clock == 104, "1.2 columns moved");

/* base[t]: the first column of event type t's fields, ncols[t] of them (an
 * argument list takes 1 + EVLOG_MAX_ARGS); base[EV_TYPE_MAX + 1] is
 * EVC_NCOLS. A number that is no type has no columns. */
void evc_bases(uint8_t base[EV_TYPE_MAX + 2]);
extern const uint8_t evc_base[EV_TYPE_MAX + 1], evc_ncols[EV_TYPE_MAX + 1];

struct evc_col {
	uint8_t *b;
	size_t len, cap;
};

/* Writer side: scratch columns, kept across chunks. */
struct evc_cols {
	struct evc_col col[EVC_NCOLS];
};

void evc_free(struct evc_cols *c);

/* Transpose a 1.0 row payload of `count` events into a column payload (mark,
 * directory, columns) in *out (grown as needed); *whole = the events moved
 * whole. 0; -1 damaged rows (bytes after the last event, or an event that
 * does not parse), -2 an event type this reader does not know, both after
 * moving *whole events; -3 out of memory. */
int evc_from_rows(struct evc_cols *c, const uint8_t *row, size_t n, uint32_t count,
		  uint8_t **out, size_t *out_len, size_t *out_cap, uint32_t *whole);

/* Reader side: transpose a column payload (starting with EVC_MARK) back to
 * rows in `row`, which has room for n bytes. Returns the row length, -1 if
 * the payload is damaged, -2 if it uses columns this reader does not know (a
 * newer minor version). */
long evc_to_rows(const uint8_t *cols, size_t n, uint32_t count, uint8_t *row);

#endif /* LLMT_EVLOG_COLUMNS_H */
