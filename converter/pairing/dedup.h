/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One CUDA call, two records: the collector's uprobe (EV_LIB_CALL: the
 * whole call as the application sees it, decoded arguments) and the
 * injected CUPTI library (EV_GPU_API: the correlation id that binds the
 * launch to its kernel). Both land on the same thread track with slightly
 * different bounds. This stage sits between the sorted merge and the
 * sinks: it holds each track's records for a short window, pairs the two
 * views of one call and releases one record, the uprobe's, carrying
 * CUPTI's correlation id. Order is kept; memory is the window's records.
 */
#ifndef LLMT_CONV_DEDUP_H
#define LLMT_CONV_DEDUP_H

#include <stddef.h>
#include <stdint.h>
#include "converter/input/spill.h"

/* CUPTI stamps the call from inside the function: its start follows the
 * uprobe's by a few µs at most, also on a loaded host, and its end precedes
 * the uprobe's return (docs/MEASUREMENTS.md, launch links, kernel counts
 * and clocks); the bounds below leave ample room. */
#define CV_DUP_START_NS 20000ULL  /* CUPTI start at most this much after */
#define CV_DUP_SLACK_NS 2000ULL   /* either bound may stick out this much */
#define CV_DUP_QUEUE_MAX 4096     /* records held at most (then released) */

/* Receives records in order; corr != 0: CUPTI's correlation id for an
 * EV_LIB_CALL that was paired (the EV_GPU_API record is not released). */
typedef int (*cv_dedup_emit_fn)(void *ctx, const struct cv_rec *r, uint64_t corr);

struct cv_pend;

struct cv_dedup {
	cv_dedup_emit_fn emit;
	void *ctx;
	struct cv_pend *q;      /* held records, q[head..n) */
	size_t head, n, cap;
	char *buf;              /* their bytes */
	size_t buf_len, buf_cap;
	uint64_t merged;        /* pairs made one */
	int oom;
};

void cv_dedup_init(struct cv_dedup *d, cv_dedup_emit_fn emit, void *ctx);
/* Feed the next record in (track, start) order; -1 if emit failed. */
int cv_dedup_feed(struct cv_dedup *d, const struct cv_rec *r);
/* Release everything held. */
int cv_dedup_flush(struct cv_dedup *d);
void cv_dedup_free(struct cv_dedup *d);

/* Function names equal modulo CUDA's versioned suffixes ("_v2", "_v7000",
 * "_ptsz", "_ptds"). Exposed for tests. */
int cv_dedup_same_func(const char *a, size_t alen, const char *b, size_t blen);

#endif
