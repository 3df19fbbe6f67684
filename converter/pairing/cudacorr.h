/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA correlation in the converter, in one place:
 *
 * - CUPTI's vocabulary as the outputs spell it: copy kinds and memory kinds
 *   (Kineto's names in the trace JSON, xprof's in the XPlane), synchronization
 *   types (Kineto's), CUPTI overhead kinds; and a probed call's decoded
 *   arguments, as every output shows them;
 * - the correlation table: which side of a launch (CUPTI's API record, a
 *   uprobe library call, GPU work) each (host, pid, correlation id) was seen
 *   on, filled in pass 1 (meta.c, launchpair.c), read in pass 2;
 * - sync binding: CUPTI's synchronization records carry no thread; pass 2
 *   puts each on the thread of the API call with its correlation id;
 * - flow ids: a launch and its GPU work get one flow id, written only when
 *   both ends exist.
 *
 * The uprobe and CUPTI records of one call are made one in dedup.c (the
 * uprobe's record takes CUPTI's correlation id); GPU work recorded without
 * its launch is paired with the uprobes' calls in launchpair.c, which marks
 * the ids it gives in the table here.
 */
#ifndef LLMT_CONV_CUDACORR_H
#define LLMT_CONV_CUDACORR_H

#include <stddef.h>
#include <stdint.h>
#include "eventlog/eventlog.h"
#include "converter/cv_util.h"
#include "converter/sink.h"

struct cv_core;

/* ----------------------------------------------------------------- names */

/* "Memcpy HtoD (Pageable -> Device)" as Kineto names a copy (trace JSON). */
const char *cv_memcpy_name(uint8_t kind, uint8_t src, uint8_t dst, char *buf, size_t bufsz);
/* A memory kind (CUpti_ActivityMemoryKind) as xprof's CUPTI collector
 * writes it in `memcpy_details` ("pageable", "device_static"). */
const char *cv_memory_kind_xprof(unsigned kind);
/* Kineto's names of a CUDA synchronization (CUpti_ActivitySynchronizationType)
 * and of a CUPTI overhead (CUpti_ActivityOverheadKind). */
const char *cv_sync_name(uint8_t kind);
const char *cv_overhead_name(uint32_t kind);

/* A library call's decoded arguments as the outputs show them (the trace
 * writers' "args", the XPlane's stat "args"), from its typed fields and its
 * detail: "kernel=NAME grid=X,Y,Z block=X,Y,Z smem=N stream=0xH" (func=0xH
 * where the kernel has no name), "bytes=N kind=HtoD stream=0xH", then the
 * detail's text. Written into buf (size n, cut to fit, NUL-terminated);
 * returns the length, 0 when there is nothing to show. */
#define CV_CALL_ARGS_MAX 1024
size_t cv_call_args(const struct evlog_event *e, char *buf, size_t n);

/* ------------------------------------------------------ correlation table */

enum cv_corr_flag {
	CV_CORR_API = 1,    /* EV_GPU_API with this correlation id */
	CV_CORR_LIB = 2,    /* EV_LIB_CALL with this correlation id */
	CV_CORR_GPU = 4,    /* GPU activity with this correlation id */
};

/* One byte of flags per (host, pid, correlation id), in 4 KiB pages of
 * consecutive ids (CUPTI numbers a process's calls densely), capped. */
struct cv_corr {
	struct cv_map pages;      /* (host<<32|pid, corr>>12) -> page + 1 */
	uint8_t **page_v;
	size_t n_pages, cap_pages;
	uint64_t memo_k1, memo_k2;  /* the page marked last */
	uint8_t *memo_page;
	uint32_t *proc_first;     /* flow ids: per host, the ordinal of its first process */
};

/* Add flags f (enum cv_corr_flag) to (host, pid, corr). 0 or -1 (no memory). */
int cv_corr_mark(struct cv_core *c, uint32_t host, uint32_t pid, uint64_t corr, uint8_t f);
/* The flags of (host, pid, corr); 0 for corr 0. */
uint8_t cv_corr_flags(const struct cv_core *c, uint32_t host, uint32_t pid, uint64_t corr);
void cv_corr_free(struct cv_corr *t);

/* ----------------------------------------------------------- sync binding */

/* CUPTI's synchronization records carry no thread, only the correlation id
 * of the API call that waited (cudaEventSynchronize, ...): they go on that
 * call's thread. The call's record follows the synchronization or precedes
 * it closely in the same log, so a small window of both suffices. */
#define CV_SYNC_RECENT 256

/* Receives every event fed, in order, a bound synchronization with its
 * thread set; log is the index of the event's log. */
typedef int (*cv_sync_emit_fn)(void *ctx, uint32_t log, const struct evlog_event *e);

struct cv_sync_call {
	uint64_t corr;
	uint32_t pid, tid;
};

struct cv_sync_bind {
	struct cv_sync_call recent[CV_SYNC_RECENT]; /* API calls by corr % CV_SYNC_RECENT */
	int held;                    /* a synchronization waits for its call */
	uint32_t log;
	struct evlog_event ev;       /* EV_GPU_SYNC: no strings */
	cv_sync_emit_fn emit;
	void *ctx;
};

void cv_sync_init(struct cv_sync_bind *b, cv_sync_emit_fn emit, void *ctx);
/* Does e need the binding? Else it can go to the timeline directly. */
static inline int cv_sync_concerns(const struct cv_sync_bind *b, const struct evlog_event *e)
{
	return b->held || e->type == EV_GPU_SYNC || e->type == EV_GPU_API;
}
/* Feed the next event of log `log` (in log order); -1 if emit failed. */
int cv_sync_feed(struct cv_sync_bind *b, uint32_t log, const struct evlog_event *e);
/* At a log's end: a synchronization still waiting goes on its process's
 * main thread. */
int cv_sync_flush(struct cv_sync_bind *b);

/* ------------------------------------------------------------------ flows */

/* A launch and its GPU work share one flow id, (process ordinal + 1) << 40 |
 * correlation id (processes numbered host by host, so ids stay unique in a
 * file of several hosts). It is set only when both ends exist; GPU work
 * without its launch counts as an unbound flow. */

/* Before pass 2 emits: number the processes. 0 or -1 (no memory). */
int cv_flow_prepare(struct cv_core *c);
/* Launch side, it on a thread of `host`: CUPTI's API record (is_api) carries
 * the flow, a uprobe library call only when CUPTI did not see the launch. */
void cv_flow_launch(struct cv_core *c, uint32_t host, struct conv_item *it, uint64_t corr,
		    int is_api);
/* GPU side: a kernel, copy or set of process pid. */
void cv_flow_gpu(struct cv_core *c, uint32_t host, struct conv_item *it, uint32_t pid,
		 uint64_t corr);

#endif
