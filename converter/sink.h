/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the converter's core hands to each output writer (trace JSON,
 * XPlane, folded stacks, summary): a merged timeline, one host at a time.
 *
 * The core reads every input log twice. Pass 1 collects metadata (hosts,
 * processes, threads, GPUs and their streams, symbols, the time range);
 * pass 2 streams the timeline items. For each host a sink sees:
 *
 *   begin_host(meta)
 *   item(...) for every track of that host, track after track (its threads
 *             first, then its GPU streams by device); within one
 *             track, items sorted by start time (longer first on ties) and
 *             properly nested (the core cuts or moves overlapping children
 *             and counts them)
 *   end_host()
 *
 * Timestamps are CLOCK_MONOTONIC ns of the host, already aligned across
 * logs; meta->base_mono_ns/base_realtime_ns map them to wall time.
 *
 * A sink with a plan() is told, before the first host, what the items to
 * come are like (struct conv_sizes: a pass over them that writes nothing),
 * for a size budget (fold.h).
 */
#ifndef LLMT_CONV_SINK_H
#define LLMT_CONV_SINK_H

#include <stdint.h>
#include <stddef.h>
#include "eventlog/eventlog.h"

enum conv_track_kind {
	CONV_TRACK_THREAD = 1,   /* a host thread: pid, tid */
	CONV_TRACK_STREAM = 2,   /* a GPU stream: device, stream */
};

struct conv_thread {
	uint32_t pid, tid;
	const char *name;        /* thread name, never NULL */
	int own;                 /* the profiler's own thread in the target
				  * (EVLOG_MARK_OWN_THREAD): not the job's work */
};

struct conv_process {
	uint32_t pid;
	const char *name;        /* comm or exe basename, never NULL */
	const char *cmdline;     /* may be "" */
	int32_t rank;            /* its rank in a distributed job (its environment, else
				  * the order the ranks started), -1: none */
	uint64_t start_ns;       /* when it started or exec'd (mono), 0: before the profile */
	const char *label;       /* "rank R (pid P)" where rank >= 0, else "": the name
				  * outputs give it */
};

struct conv_gpu {
	uint32_t device;
	const struct evlog_event *props; /* EV_GPU_DEVICE, or NULL if none was logged */
	uint32_t n_streams;
	const uint32_t *streams; /* stream ids seen, ascending */
};

struct conv_steps; /* steps.h */
struct conv_job;

struct conv_host_meta {
	const char *host;        /* as logged (':' not yet replaced) */
	uint64_t base_mono_ns;   /* earliest timestamp of the host's profile */
	uint64_t base_realtime_ns; /* wall time of base_mono_ns */
	uint64_t start_ns, stop_ns; /* profile time range (mono) */
	uint32_t n_processes, n_threads, n_gpus;
	const struct conv_process *processes;
	const struct conv_thread *threads;
	const struct conv_gpu *gpus;
	/* Several hosts in one run: this host's index (0-based) among n_hosts,
	 * and the earliest wall time of all of them (one timeline for all). */
	uint32_t host_index, n_hosts;
	uint64_t run_base_realtime_ns;
	/* Steps (set before the first item): the job's markers, detected ones
	 * (then sent as items with category "step" on the driving thread), or
	 * none, with the evidence in words. NULL when not looked for. */
	const struct conv_steps *steps;
	/* The job's ranks, their steps by iteration and the stragglers, the
	 * same for every host (NULL: fewer than two ranks with steps). */
	const struct conv_job *job;
};

/* A process's track of one GPU as a whole (GPU memory) is a thread whose
 * tid no Linux thread can have: this bit and the device's number. */
#define CONV_DEVICE_TID_BIT 0x40000000u
static inline int conv_is_device_tid(uint32_t tid)
{
	return (tid & CONV_DEVICE_TID_BIT) != 0;
}

/* A thread of meta by (pid, tid), or NULL: threads are sorted by both. */
static inline const struct conv_thread *conv_meta_thread(const struct conv_host_meta *m,
							 uint32_t pid, uint32_t tid)
{
	size_t lo = 0, hi = m->n_threads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct conv_thread *t = &m->threads[mid];

		if (t->pid == pid && t->tid == tid)
			return t;
		if (t->pid < pid || (t->pid == pid && t->tid < tid))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* A process of meta by pid, or NULL: processes are sorted by pid. */
static inline const struct conv_process *conv_meta_process(const struct conv_host_meta *m,
							   uint32_t pid)
{
	size_t lo = 0, hi = m->n_processes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->processes[mid].pid == pid)
			return &m->processes[mid];
		if (m->processes[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* A run of short calls folded into one item (fold.h): the item's name says
 * how many and how long; these are its details. */
#define CONV_FOLD_TOP 5
struct conv_fold {
	uint64_t calls;           /* every call folded, nested ones included */
	uint64_t top_calls;       /* those directly under the parent */
	uint64_t busy_ns;         /* the top-level calls' summed durations */
	uint32_t n_top;
	struct {
		const char *name;
		uint64_t calls, ns;   /* calls of this name (any depth), their summed durations */
	} top[CONV_FOLD_TOP];     /* most calls first */
};

/* One timeline item. `ev` is the original event (pointers valid during the
 * call); the fields before it are what the core derived from it. */
struct conv_item {
	enum conv_track_kind track;
	uint32_t pid, tid;        /* CONV_TRACK_THREAD */
	uint32_t device, stream;  /* CONV_TRACK_STREAM */
	uint64_t start_ns, dur_ns;/* dur 0 for instant items (CPU samples) */
	const char *name;         /* display name: syscall name, symbol, demangled kernel... */
	const char *category;     /* CONTRACT §4 cat: "syscall", "cuda_runtime", "kernel", ... */
	uint64_t flow_id;         /* != 0: launch->kernel flow (correlation id, made unique per process) */
	int flow_start;           /* 1 on the launch (flow "s"), 0 on the GPU side ("f") */
	const char *stack_folded; /* CPU/Python samples: "root;...;leaf", else NULL */
	uint32_t step;            /* steps (markers or detected): step number + 1, else 0 */
	const struct conv_fold *fold; /* != NULL: short calls folded (category "folded") */
	const struct evlog_event *ev;
};

/* Items by duration, in buckets of an eighth of a power of two
 * (conv_size_bucket): those a size budget may fold (calls on a thread
 * without a flow: Python functions, system calls, library calls) apart from
 * the rest, with the string bytes each brings (names, files, stacks,
 * arguments), and how many runs of sibling calls folding all those of
 * buckets below k would leave (each run becomes one item). */
#define CONV_SIZE_BUCKETS 513
struct conv_sizes {
	uint64_t n[CONV_SIZE_BUCKETS], str[CONV_SIZE_BUCKETS]; /* foldable */
	int64_t runs_d[CONV_SIZE_BUCKETS + 1]; /* runs(k) = runs_d[0] + ... + runs_d[k] */
	uint64_t n_other, str_other, flows;    /* never folded; items with a flow */
	uint64_t tracks;
};

static inline unsigned conv_size_bucket(uint64_t d)
{
	if (!d)
		return 0;
	unsigned e = 63u - (unsigned)__builtin_clzll(d);
	unsigned s = (unsigned)(e >= 3 ? d >> (e - 3) : d << (3 - e)) & 7u;

	return 1 + 8 * e + s;
}

/* The shortest duration in bucket b (0 for b == 0; an empty bucket of the
 * first few shares its neighbour's). */
static inline uint64_t conv_size_lower(unsigned b)
{
	if (!b)
		return 0;
	unsigned e = (b - 1) / 8, s = (b - 1) % 8;

	return e >= 3 ? (uint64_t)(8 + s) << (e - 3) : (uint64_t)(8 + s) >> (3 - e);
}

struct conv_sink {
	const char *name;
	void *ctx;
	int (*plan)(void *ctx, const struct conv_sizes *sz); /* optional, see above */
	int (*begin_host)(void *ctx, const struct conv_host_meta *meta);
	int (*item)(void *ctx, const struct conv_item *it);
	int (*end_host)(void *ctx);
	/* Publish (rename into place) or discard; called once at the end. */
	int (*finish)(void *ctx, int ok);
	char err[256];
};

#endif
