/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evlog_columns.h: the column layout of a chunk payload (schemas/eventlog.md
 * 3.5). Each field of each event type has its own column, so values of one
 * field sit side by side and zstd's entropy coder sees each field's own
 * statistics (about a fifth fewer bytes on disk than the events' bytes back
 * to back). The writer encodes into columns and the reader decodes from
 * them directly.
 */
#ifndef LLMT_EVLOG_COLUMNS_H
#define LLMT_EVLOG_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "eventlog/eventlog.h"

/* First payload byte of a chunk: the column layout's mark, never an event
 * type. */
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

/* Column numbers are part of the format: they never move (schemas/eventlog.md
 * 3.5: type 18 starts at 112, type 19 is at 117, type 26 ends at 146). */
_Static_assert(EVC_BASE_marker == 112, "columns moved");
_Static_assert(EVC_BASE_clock == 117 && EVC_LAST_clock == 117, "columns moved");
_Static_assert(EVC_LAST_gpu_memory == 146, "columns moved");

/* base[t]: the first column of event type t's fields, ncols[t] of them (an
 * argument list takes 1 + EVLOG_MAX_ARGS); base[EV_TYPE_MAX + 1] is
 * EVC_NCOLS. A number that is no type has no columns. */
void evc_bases(uint8_t base[EV_TYPE_MAX + 2]);
extern const uint8_t evc_base[EV_TYPE_MAX + 1], evc_ncols[EV_TYPE_MAX + 1];

#endif /* LLMT_EVLOG_COLUMNS_H */
