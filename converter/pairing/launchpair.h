/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Launch links without CUPTI's API records: CUPTI recording kernels only
 * (start key runtime=0) costs about half of what its RUNTIME records cost
 * on a launch-bound loop, and then no kernel, copy or set carries a link to
 * the call that queued it. The `-t cuda` uprobes see those calls with their
 * arguments (kernel name from the launch's host stub, grid, block, stream,
 * bytes), so the converter pairs them here:
 *
 * - pass 1 notes every probed launch, copy, set and graph launch, every GPU
 *   record, and CUPTI's launch API records where there are any;
 * - after pass 1 each process's GPU records are paired with its calls, per
 *   kind of work and its signature (kernel name, grid, block; bytes), in
 *   launch order (first in, first out), the launch before the work starts,
 *   only calls made while CUPTI recorded their kind of work (the library's
 *   EVLOG_MARK_CUPTI_ON markers, one per kind's switch); then again with each call's stream mapped to CUPTI's stream
 *   id (learnt from the first round), so work of one signature on several
 *   streams pairs by stream. Then, with the work left, kernel launches
 *   without a name (driver launches) by dims and shared memory, launches
 *   without dims (cudaLaunchKernelExC) by name; a graph launch takes the
 *   kernels carrying one correlation id with a graph id, in order. Where
 *   the records carry CUPTI's correlation ids, the ids of each thread's
 *   linked calls must rise: falls (shifted pairs) are counted;
 * - pass 2 gives a paired call the work's correlation id (a made-up one
 *   past 2^39 when CUPTI's is 0), and the work a launch flow bound to it,
 *   exactly as CUPTI's runtime records would (trace JSON flows, XPlane
 *   correlation ids). Work CUPTI already linked keeps CUPTI's link; for it
 *   the uprobe pairing is checked against CUPTI's instead (agreement).
 *
 * Signatures come from the call's typed fields, as the collector decodes
 * them (collector/sources/cudadecode.c; eventlog/evlog_schema.h, lib_call):
 * kernel, grid, block, dynamic_smem, stream, bytes.
 */
#ifndef LLMT_CONV_LAUNCHPAIR_H
#define LLMT_CONV_LAUNCHPAIR_H

#include <stdint.h>
#include <stdio.h>
#include "eventlog/eventlog.h"

struct cv_core;
struct cv_log;
struct cv_lp;

/* Room for the kernel name cv_lp_apply gives a launch without one. */
#define CV_LP_NAME_ROOM (EVLOG_CALL_KERNEL_MAX + 1)

/* Made-up correlation ids for work CUPTI gave none: above CUPTI's 32-bit
 * ids, below the 40 bits a flow id keeps. */
#define CV_LP_CORR_BASE (1ULL << 39)

struct cv_lp_stats {
	uint64_t work;          /* kernels, copies, sets in the window of a probed process */
	uint64_t linked;        /* given their launch from the uprobes */
	uint64_t cupti_linked;  /* had CUPTI's link already */
	uint64_t no_call;       /* no probed call of that signature before it */
	uint64_t graph_nocorr;  /* a graph's kernel without a correlation id */
	uint64_t calls;         /* probed launch/copy/set/graph calls noted */
	uint64_t calls_unpaired;/* of those, after recording began, with no recorded work */
	uint64_t calls_late;    /* of those, made after recording stopped */
	uint64_t unnamed;       /* kernel launches without a name (driver launches), paired by dims */
	uint64_t checked, agree;/* uprobe pairs compared with CUPTI's links, equal */
	uint64_t order_checked, order_bad; /* links with CUPTI's ids: falling along a thread */
	uint64_t capped;        /* records not noted: the pairing's memory bound */
};

/* Pass 1: note e (host clock = e->ts + l->clock_off). 1: e was the
 * library's recording switch (EVLOG_MARK_CUPTI_ON or _OFF: not a timeline
 * event), 0: go on, -1: no memory. */
int cv_lp_note(struct cv_core *c, uint32_t host, const struct cv_log *l,
	       const struct evlog_event *e);
/* After pass 1: pair, mark the correlation ids used. 0 or -1 (c->err). */
int cv_lp_solve(struct cv_core *c);
/* Pass 2, before naming: give e (a record of host `host` starting at
 * `start` on the host clock) the correlation id of its pairing, if any; a
 * launch without a kernel name (a driver launch) takes its kernel's then,
 * written into buf (size n, which must live as long as e). */
void cv_lp_apply(struct cv_core *c, uint32_t host, uint64_t start, struct evlog_event *e,
		 char *buf, size_t n);
const struct cv_lp_stats *cv_lp_stats(const struct cv_core *c);
/* One line for the conversion's end (nothing when there was nothing to
 * pair), then one per reason work missed the link CUPTI gives it. */
void cv_lp_print(struct cv_core *c, FILE *f);
void cv_lp_free(struct cv_core *c);

#endif
