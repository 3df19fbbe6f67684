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
#define EVC_NCOLS 105u

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

/* base[t]: the first column of event type t's fields; base[t + 1] - base[t]
 * columns in all (an argument list takes 1 + EVLOG_MAX_ARGS). */
void evc_bases(uint8_t base[EV_TYPE_MAX + 2]);

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
