/* SPDX-License-Identifier: Apache-2.0 */
/* What steps.c gathers and decides, shared with steps_loop.c (Python loops)
 * and steps_ranks.c (the job across ranks). */
#ifndef LLMT_CONV_STEPS_INT_H
#define LLMT_CONV_STEPS_INT_H

#include "converter/pairing/steps.h"
#include "converter/cv_util.h"

#define MIN_STEPS 4
#define MIN_SPAN_PCT 20            /* a loop spans >= 20% of the profile */

/* Series of (start, end) per (track, kind, name): library calls, kernels,
 * a track's collective calls, a track's step markers (with their number). */
enum { SER_LIB = 0, SER_GPU = 1, SER_COLL = 2, SER_MARK = 3, SER_KINDS };

struct series {
	uint32_t host, track, pid, tid, name, depth;
	uint32_t device, stream;     /* GPU kernels' stream */
	uint8_t kind, dead;
	uint32_t n, cap;
	uint64_t *t;                 /* start, end, [number] (stride 3 for markers, else 2) */
};

/* A Python call made directly by one function (or at the top of what a
 * thread recorded) on one thread. */
struct pycall {
	uint64_t start, end;
	uint64_t pstart;             /* start of the call that made it: one instance of the loop frame */
	uint32_t name;               /* "func\x1ffile:line", interned */
	uint32_t inst;               /* instance number, set when judged */
};

struct group {
	uint32_t host, track, pid, tid;
	uint32_t parent;             /* the calling function's name id, or GROUP_ROOT */
	uint32_t instances;
	uint8_t dead, full;
	uint32_t n;
	size_t cap;
	struct pycall *v;
};
#define GROUP_ROOT CV_STEPS_TOP

/* One process's candidate or decided steps. */
struct cand {
	struct conv_step_set set;
	uint64_t *bounds;            /* start[n], end[n], owned */
	uint32_t *num;               /* marker steps: their numbers (else NULL), owned */
	uint64_t coverage;           /* time in steps */
	uint64_t typical;            /* of which in iterations of the typical sequence */
	uint32_t with_coll;          /* steps holding a collective call */
	uint32_t n_typical;          /* steps that are typical iterations */
	uint64_t host_off;           /* host clock -> wall clock: add this */
};

struct host_res {
	struct conv_steps pub;
	struct cand *sets;           /* by track */
	struct conv_step_set *pubsets;
	uint32_t n_sets, cap_sets;
};

struct cv_steps {
	uint32_t n_hosts;
	struct cv_map idx;           /* (track << 2 | kind, name) -> series index + 1 */
	struct cv_map stream_idx;    /* (host, track) -> streams[] index + 1 */
	struct stream_use *streams;  /* per GPU stream: its kernels' idle times */
	size_t n_streams, cap_streams;
	struct stream_use *last;     /* the stream of the previous kernel (most follow one) */
	struct cv_strtab names;
	struct series *v;
	size_t n, cap;
	uint64_t live;               /* pairs held in series */
	struct cv_map gidx;          /* (track, parent) -> groups index + 1 */
	struct group *g;
	size_t ng, capg;
	uint64_t glive;              /* calls held in groups */
	struct cv_map marked;        /* (host, pid): the process has step markers */
	struct cv_map ddp;           /* (host, pid): the process runs DistributedDataParallel */
	uint32_t coll_name, mark_name, bwd_name; /* series names: collectives, markers,
						  * autograd's backward calls */
	struct cv_buf key;           /* scratch for interned names */
	struct host_res *res;        /* per host */
	/* the job across ranks (steps_ranks.c) */
	struct conv_job job;
	struct conv_rank *ranks;
	struct conv_rank_step **rank_x;
	struct conv_straggler *stragglers;
};

/* steps_loop.c: the best Python loop of each process of host h, added to
 * the host's result. prof_ns: the host's profiled duration. */
int cv_loops_judge(struct cv_steps *s, uint32_t h, uint64_t prof_ns);
/* Add a candidate's set to host h's result (it takes c's arrays). */
int cv_steps_add_set(struct cv_steps *s, uint32_t h, struct cand *c);
/* Is pid of host h one with its own step markers? */
int cv_steps_marked(const struct cv_steps *s, uint32_t h, uint32_t pid);
/* The series of (track, kind, name), or NULL. */
const struct series *cv_series_get(const struct cv_steps *s, uint32_t track, int kind, uint32_t name);
/* The collective calls of a process's loop thread: its c10d or NCCL calls;
 * without any, in a DDP process, its backward calls (they hold the
 * gradients' all-reduce). NULL: none. */
const struct series *cv_coll_series(const struct cv_steps *s, uint32_t host,
				    const struct conv_step_set *set);
/* steps_ranks.c: relate the ranks' steps; frees with cv_ranks_free. */
int cv_ranks_relate(struct cv_steps *s, struct conv_host_meta *const *metas);
void cv_ranks_free(struct cv_steps *s);

int cv_u64_cmp(const void *a, const void *b);
uint64_t cv_u64_median(uint64_t *v, uint32_t n); /* v reordered */

#endif
