/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Steps found unaided: while pass 2 reads the logs, every completed Python
 * call (with the function that made it), every CUDA library call and every
 * GPU kernel is offered as a candidate (bounded memory); after reading,
 * each process's candidates are judged and the best become its steps,
 * placed on the thread that drives its loop. A process's own step markers
 * win over detection. The steps of the job's ranks are then numbered by
 * iteration across ranks (steps_ranks.c), and each rank's time in
 * collectives is split into communication and waiting for the others.
 */
#ifndef LLMT_CONV_STEPS_H
#define LLMT_CONV_STEPS_H

#include <stdint.h>
#include "eventlog/eventlog.h"

/* One process's steps (also handed to sinks). */
struct conv_step_set {
	int from_markers;        /* the process's own step markers: nothing detected */
	uint32_t pid, tid;       /* the driving thread (detected steps only) */
	uint32_t track;          /* its track (a GPU stream's when on_stream) */
	int on_stream;           /* found from kernels alone: the steps lie on that stream */
	uint32_t device, stream; /* the stream, when on_stream */
	uint32_t n;              /* detected steps */
	const uint64_t *start, *end; /* detected step bounds, n each, ascending */
	uint32_t first;          /* step i is ProfilerStep#(first + i): iterations across ranks */
	char evidence[320];      /* one line: what was used */
};

/* What the detector decided for one host. */
struct conv_steps {
	uint32_t n_sets;                   /* processes with steps, by track */
	const struct conv_step_set *sets;
	char evidence[320];                /* with no set: why no steps */
};

/* A process's collective calls in one of its steps, against the same
 * iteration's on the other ranks (steps_ranks.c). */
struct conv_rank_step {
	uint64_t coll_ns;        /* in collectives (Python c10d calls, nccl*) */
	uint64_t wait_ns;        /* of which waiting for a later rank to arrive */
	uint64_t arrive;         /* start of the collective that decides lateness; 0: none */
};

/* One rank: the process whose loop it runs. */
struct conv_rank {
	uint32_t host, pid, tid;
	int32_t rank;            /* from its environment, else by start order */
	const struct conv_step_set *set;
	const struct conv_rank_step *x; /* set->n of them */
};

/* A step where one rank reached the collectives late. */
struct conv_straggler {
	uint32_t step;           /* ProfilerStep#step */
	uint32_t who;            /* index into conv_job.ranks */
	uint64_t late_ns;        /* its arrival less the median of the others' */
};

/* The job across ranks (NULL in a host's metadata when fewer than two
 * ranks have steps). */
struct conv_job {
	uint32_t n_ranks;
	const struct conv_rank *ranks;      /* by rank */
	uint32_t n_compared;                /* iterations seen by every rank with collectives */
	uint32_t first, last;               /* their step numbers */
	uint32_t n_stragglers;
	const struct conv_straggler *stragglers; /* by step */
	uint64_t threshold_ns;              /* lateness below this is not named */
	char verdict[320];
};

struct cv_steps;
struct conv_host_meta;

struct cv_steps *cv_steps_new(uint32_t n_hosts);
void cv_steps_free(struct cv_steps *s);
/* One timeline record of pass 2 (start/dur on the host clock), but Python
 * calls. Returns -1 only when out of memory. */
int cv_steps_feed(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		  uint64_t dur, uint32_t depth, const struct evlog_event *e);
/* The id of a Python call's function (e: EV_PY_ENTER), taken once when
 * the call starts; -1 when out of memory. */
int64_t cv_steps_py_name(struct cv_steps *s, const struct evlog_event *e);
/* A completed Python call of function `name` made by a call of function
 * `parent` that started at pstart (parent CV_STEPS_TOP: at the top of what
 * its thread recorded). */
#define CV_STEPS_TOP UINT32_MAX
int cv_steps_feed_py(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		     uint64_t dur, const struct evlog_event *e, uint32_t name, uint32_t parent,
		     uint64_t pstart);
/* Judge every host's candidates, then relate the ranks' steps. metas: each
 * host's metadata (profile range, processes and their ranks, clocks). */
int cv_steps_detect(struct cv_steps *s, struct conv_host_meta *const *metas);
/* The decision for a host (valid until cv_steps_free). */
const struct conv_steps *cv_steps_of(const struct cv_steps *s, uint32_t host);
/* The job across ranks, or NULL. */
const struct conv_job *cv_steps_job(const struct cv_steps *s);
/* Is e (a Python call, a library call) a collective: torch.distributed's
 * (all_reduce, broadcast, barrier, ... of distributed_c10d.py), NCCL's? */
int cv_is_collective(const struct evlog_event *e);
/* Is this marker one of the job's own steps (`step`, `ProfilerStep#N`)? */
int cv_is_step_marker(const struct evlog_event *e);

#endif
