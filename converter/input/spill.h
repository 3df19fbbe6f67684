/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Spill runs: pass 2 packs every timeline item into a compact record
 * (derived key + the original event, strings inline) in a bounded memory
 * buffer; a full buffer is sorted by (track, start, longer first, arrival:
 * the sort is stable and runs merge in order) and appended, as zstd blocks,
 * to one anonymous temporary file (a run is a byte range of it, read back
 * with pread, so hundreds of runs need one fd). The runs are then k-way
 * merged, so memory stays flat however long the logs are.
 */
#ifndef LLMT_CONV_SPILL_H
#define LLMT_CONV_SPILL_H

#include <stdint.h>
#include <stddef.h>
#include "eventlog/eventlog.h"

struct cv_rec {
	uint32_t track;
	uint32_t len;       /* whole record in bytes, a multiple of 8 */
	uint64_t start;     /* on the host clock */
	uint64_t dur;
	uint32_t log;       /* index of the input log */
	uint32_t stack;     /* interned folded stack + 1, or 0 */
	/* the packed event follows */
};

/* Pack ev after a record header into buf (grown as needed by the caller:
 * cv_rec_size() first, an upper bound; cv_rec_pack sets r->len exactly, and
 * r->start must be set before: ts is coded relative to it). */
size_t cv_rec_size(const struct evlog_event *ev);
void cv_rec_pack(struct cv_rec *r, const struct evlog_event *ev);
/* Unpack: ev's strings point into r. Returns -1 if r is malformed. */
int cv_rec_unpack(const struct cv_rec *r, struct evlog_event *ev);
/* The body's first byte: the event type, and the record's padding bytes in
 * the top three bits. */
#define CV_REC_TYPE_MASK 0x1f
#define CV_REC_PAD_SHIFT 5
/* The event type of a packed record, without unpacking it. */
static inline uint32_t cv_rec_type(const struct cv_rec *r)
{
	return r->len > sizeof(*r) ? *(const uint8_t *)(r + 1) & CV_REC_TYPE_MASK : 0;
}

struct cv_spill;

/* run_bytes: memory for one run. tmpdir: where runs go (NULL: $TMPDIR or /tmp). */
struct cv_spill *cv_spill_new(size_t run_bytes, uint32_t n_tracks, const char *tmpdir,
			      char *err, size_t errsz);
/* Reserve room for a record of len bytes; NULL on error (see err). The
 * record must be filled before the next call. */
struct cv_rec *cv_spill_reserve(struct cv_spill *s, size_t len, char *err, size_t errsz);
/* Finish writing; then iterate in sorted order. */
int cv_spill_finish(struct cv_spill *s, char *err, size_t errsz);
/* Iterate again from the first record (after cv_spill_finish). */
int cv_spill_rewind(struct cv_spill *s, char *err, size_t errsz);
/* Next record in order: 1 and *r set, 0 at the end, -1 on error. */
int cv_spill_next(struct cv_spill *s, const struct cv_rec **r, char *err, size_t errsz);
uint32_t cv_spill_runs(const struct cv_spill *s);
uint64_t cv_spill_count(const struct cv_spill *s);
void cv_spill_free(struct cv_spill *s);

#endif
