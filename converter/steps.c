/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Step detection (steps.h). Evidence, in order of trust:
 *   1. the job's own step markers (`step`, `ProfilerStep#N`): detection is off;
 *   2. the outermost repeated Python frame: a function called at least
 *      MIN_STEPS times on one thread, calls not nested in each other, that
 *      covers most of the stretch from its first call to its last (a loop
 *      body: variable lengths are fine, warm-up calls are just long steps);
 *   3. a CUDA library call repeating at a steady period on one thread
 *      (cudaDeviceSynchronize, cudaGraphLaunch, nccl*, ...): each step ends
 *      where the call returns;
 *   4. a GPU kernel that starts each step: the step's first kernel waits for
 *      the host's work between steps, so the stream is idle before it far
 *      longer than before its other kernels (median idle before it at least
 *      GPU_IDLE_FACTOR times the stream's mean); of those, the one after the
 *      longest idle (then the fewest runs). Step lengths may vary. The steps
 *      lie on that stream (the host side is not known without launches).
 * Candidates are kept as series of (start, end) per (thread, name); a series
 * that grows past CALLS_MAX is too frequent to be a step and is dropped, and
 * all live series share BUDGET entries (the largest is dropped first), so
 * memory is bounded whatever the log size. Judging sorts each series once:
 * O(n log n) in the events kept.
 */
#include "common/grow.h"
#include "steps.h"
#include "cv_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_STEPS 4
#define CALLS_MAX (1u << 16)       /* more calls than this: not a step */
#define BUDGET (1u << 19)          /* (start, end) pairs held in all series */
#define SERIES_MAX 65536
#define MIN_SPAN_PCT 20            /* a loop spans >= 20% of the profile */
#define PY_COVER_PCT 50            /* its calls cover >= 50% of that span */
#define PY_OUTER_FACTOR 2          /* an outer frame wins unless a deeper one covers 2x */
#define LIB_REGULAR_PCT 75         /* >= 75% of intervals within ±30% of the median */
#define GPU_IDLE_FACTOR 4          /* a step's first kernel: idle before it >= 4x the mean */

enum { SER_PY = 0, SER_LIB = 1, SER_GPU = 2, SER_KINDS };

struct series {
	uint32_t host, track, pid, tid, name, depth;
	uint32_t device, stream;     /* GPU kernels' stream */
	uint8_t kind, dead;
	uint32_t n, cap;
	uint64_t *t;                 /* start, end pairs (GPU: start, start + idle time before it) */
};

struct stream_use {
	uint32_t host, track;
	uint64_t end;                /* end of its latest kernel + 1; 0 before the first */
	uint64_t idle, runs;         /* idle ns before its kernels, in all; its kernels */
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
	uint64_t live;               /* pairs held */
	uint8_t *markers;            /* per host: the log has step markers */
	struct conv_steps *res;      /* per host */
	uint64_t **bounds;           /* per host: start[n], end[n] */
};

int cv_is_step_marker(const struct evlog_event *e)
{
	struct evlog_str n = e->u.marker.name;

	return (n.len == 4 && !memcmp(n.ptr, "step", 4)) ||
	       (n.len >= 12 && !memcmp(n.ptr, "ProfilerStep", 12));
}

struct cv_steps *cv_steps_new(uint32_t n_hosts)
{
	struct cv_steps *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->n_hosts = n_hosts;
	s->markers = calloc(n_hosts + 1, 1);
	s->res = calloc(n_hosts + 1, sizeof(*s->res));
	s->bounds = calloc(n_hosts + 1, sizeof(*s->bounds));
	if (!s->markers || !s->res || !s->bounds) {
		cv_steps_free(s);
		return NULL;
	}
	return s;
}

void cv_steps_free(struct cv_steps *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].t);
	for (uint32_t h = 0; s->bounds && h < s->n_hosts; h++)
		free(s->bounds[h]);
	free(s->v);
	free(s->markers);
	free(s->res);
	free(s->bounds);
	cv_map_free(&s->idx);
	cv_map_free(&s->stream_idx);
	free(s->streams);
	cv_strtab_free(&s->names);
	free(s);
}

static void kill(struct cv_steps *s, struct series *x)
{
	s->live -= x->n;
	free(x->t);
	x->t = NULL;
	x->n = x->cap = 0;
	x->dead = 1;
}

/* Over budget: the series with the most calls is the least likely step. */
static void kill_largest(struct cv_steps *s)
{
	struct series *big = NULL;

	for (size_t i = 0; i < s->n; i++)
		if (!s->v[i].dead && (!big || s->v[i].n > big->n))
			big = &s->v[i];
	if (big)
		kill(s, big);
}

/* Where calls of a series that found no room go: dead, never written. */
static struct series no_room = { .dead = 1 };

static struct series *series_of(struct cv_steps *s, uint32_t host, uint32_t track, uint8_t kind,
				const char *name, size_t len, const struct evlog_event *e)
{
	int64_t ni = cv_strtab_intern(&s->names, name, len);
	int is_new;

	if (ni < 0)
		return NULL;
	uint64_t *v = cv_map_put(&s->idx, (uint64_t)track << 2 | kind, (uint64_t)ni, &is_new);

	if (!v)
		return NULL;
	if (is_new) {
		if (s->n == SERIES_MAX)
			return &no_room; /* *v stays 0: looked up again, still no room */
		if (lt_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v), 256))
			return NULL;
		s->v[s->n] = (struct series){ .host = host, .track = track, .pid = e->pid,
					     .tid = e->tid ? e->tid : e->pid, .name = (uint32_t)ni,
					     .kind = kind, .depth = UINT32_MAX };
		*v = ++s->n;
	}
	return *v ? &s->v[*v - 1] : &no_room;
}

static struct stream_use *stream_of(struct cv_steps *s, uint32_t host, uint32_t track)
{
	int is_new;

	if (s->last && s->last->host == host && s->last->track == track)
		return s->last;
	uint64_t *v = cv_map_put(&s->stream_idx, host, track, &is_new);

	if (!v)
		return NULL;
	if (is_new) {
		if (lt_grow((void **)&s->streams, &s->cap_streams, s->n_streams + 1, sizeof(*s->streams), 16))
			return NULL;
		s->streams[s->n_streams] = (struct stream_use){ .host = host, .track = track };
		*v = ++s->n_streams;
	}
	return s->last = &s->streams[*v - 1];
}

/* A kernel's second value: how long its stream was idle before it (kernels
 * of a stream come in order; an overlap counts as no idle time). */
static int stream_idle(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		       uint64_t dur, uint64_t *idle)
{
	struct stream_use *u = stream_of(s, host, track);

	if (!u)
		return -1;
	*idle = u->end && start + 1 > u->end ? start + 1 - u->end : 0;
	if (start + dur + 1 > u->end)
		u->end = start + dur + 1;
	u->idle += *idle;
	u->runs++;
	return 0;
}

static int add_call(struct cv_steps *s, struct series *x, uint64_t start, uint64_t dur,
		    uint32_t depth)
{
	if (x->dead)
		return 0;
	if (x->n == CALLS_MAX) {
		kill(s, x);
		return 0;
	}
	if (x->n == x->cap) {
		uint32_t nc = x->cap ? x->cap * 2 : 16;
		uint64_t *nt = realloc(x->t, (size_t)nc * 2 * sizeof(*nt));

		if (!nt)
			return -1;
		x->t = nt;
		x->cap = nc;
	}
	x->t[2 * x->n] = start;
	x->t[2 * x->n + 1] = start + dur;
	x->n++;
	if (depth < x->depth)
		x->depth = depth;
	if (++s->live > BUDGET)
		kill_largest(s);
	return 0;
}

int cv_steps_feed(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		  uint64_t dur, uint32_t depth, const struct evlog_event *e)
{
	struct evlog_str n;
	uint8_t kind;

	if (host >= s->n_hosts)
		return 0;
	switch (e->type) {
	case EV_MARKER:
		if (cv_is_step_marker(e))
			s->markers[host] = 1;
		return 0;
	case EV_PY_ENTER:
		n = e->u.py_enter.func;
		kind = SER_PY;
		break;
	case EV_LIB_CALL:
		n = e->u.lib_call.symbol;
		kind = SER_LIB;
		break;
	case EV_GPU_API:
		n = e->u.gpu_api.name;
		kind = SER_LIB;
		break;
	case EV_GPU_KERNEL:
		n = e->u.gpu_kernel.name;
		kind = SER_GPU;
		/* the series keeps (start, start + idle time before it) */
		if (stream_idle(s, host, track, start, dur, &dur))
			return -1;
		break;
	default:
		return 0;
	}
	if (s->markers[host] || !n.len)
		return 0;
	struct series *x = series_of(s, host, track, kind, n.ptr, n.len, e);

	if (x && kind == SER_GPU && x->n == 0) {
		x->device = e->u.gpu_kernel.device;
		x->stream = e->u.gpu_kernel.stream;
	}
	return x ? add_call(s, x, start, dur, depth) : -1;
}

/* ------------------------------------------------------------- judging */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_pair(const void *a, const void *b)
{
	return cmp_u64(a, b);
}

/* Median of n values, scratch[] reordered. */
static uint64_t median(uint64_t *scratch, uint32_t n)
{
	qsort(scratch, n, sizeof(*scratch), cmp_u64);
	return scratch[n / 2];
}

/* What one series looks like as a loop; ok = 0 when it is not one. */
struct verdict {
	int ok;
	uint64_t score;   /* Python: time covered by calls; library: span of the period */
	uint64_t span, covered, period;
	uint32_t regular_pct;
	uint64_t idle;    /* GPU: median idle time of the stream before the kernel */
};

static struct verdict judge_py(const struct series *x, uint64_t *scratch)
{
	struct verdict v = { 0 };
	const uint64_t *t = x->t;

	for (uint32_t i = 0; i < x->n; i++) {
		if (i && t[2 * i] < t[2 * i - 1])
			return v; /* a call inside another: recursion, not a loop body */
		v.covered += t[2 * i + 1] - t[2 * i];
		scratch[i] = t[2 * i + 1] - t[2 * i];
	}
	v.span = t[2 * x->n - 1] - t[0];
	v.period = median(scratch, x->n);
	v.score = v.covered;
	v.ok = v.span && v.covered * 100 >= v.span * PY_COVER_PCT;
	return v;
}

static struct verdict judge_lib(const struct series *x, uint64_t *scratch)
{
	struct verdict v = { 0 };
	const uint64_t *t = x->t;
	uint32_t m = x->n - 1, regular = 0;

	for (uint32_t i = 0; i < m; i++)
		scratch[i] = t[2 * i + 3] - t[2 * i + 1];
	v.period = median(scratch, m);
	for (uint32_t i = 0; i < m; i++)
		regular += scratch[i] * 10 >= v.period * 7 && scratch[i] * 10 <= v.period * 13;
	v.regular_pct = regular * 100 / m;
	v.span = t[2 * x->n - 1] - t[1];
	v.score = v.span;
	v.ok = v.period && v.regular_pct >= LIB_REGULAR_PCT;
	return v;
}

/* A kernel that starts each step: the stream idles before it far longer
 * than on average (score: that median idle). */
static struct verdict judge_gpu(const struct cv_steps *s, const struct series *x, uint64_t *scratch)
{
	struct verdict v = { 0 };
	const uint64_t *t = x->t;
	uint32_t m = x->n - 1, regular = 0;
	const uint64_t *i = cv_map_get(&s->stream_idx, x->host, x->track);
	const struct stream_use *u = i ? &s->streams[*i - 1] : NULL;

	for (uint32_t i = 0; i < m; i++)
		scratch[i] = t[2 * i + 2] - t[2 * i];
	v.period = median(scratch, m);
	for (uint32_t i = 0; i < m; i++)
		regular += scratch[i] * 10 >= v.period * 7 && scratch[i] * 10 <= v.period * 13;
	v.regular_pct = regular * 100 / m;
	v.span = t[2 * m] - t[0];
	for (uint32_t i = 0; i < x->n; i++)
		scratch[i] = t[2 * i + 1] - t[2 * i];
	v.idle = median(scratch, x->n);
	v.score = v.idle;
	v.ok = u && u->runs && v.idle &&
	       (double)v.idle >= GPU_IDLE_FACTOR * ((double)u->idle / (double)u->runs);
	return v;
}

/* Library calls that mark an iteration's end by what they do. */
static int lib_rank(const char *name)
{
	return strstr(name, "Synchronize") || strstr(name, "GraphLaunch") ||
	       !strncmp(name, "nccl", 4) || strstr(name, "StreamSync");
}

/* Is candidate b better than a (both ok, same kind)? Python frames at
 * different depths: the outer one, unless the deeper covers over twice its
 * time. Otherwise close scores (within 10%) go to the library call that
 * syncs or launches a graph, then the fewer calls (a step, not a part). */
static int better(const struct cv_steps *s, const struct series *a, const struct verdict *va,
		  const struct series *b, const struct verdict *vb)
{
	if (!a)
		return 1;
	/* The step is the outermost repeated frame: a deeper function (the
	 * step's parts, or a helper a second phase calls too) covers as much
	 * or a little more, and wins only covering over twice the time. */
	if (a->kind == SER_PY && b->kind == SER_PY && a->depth != b->depth) {
		int b_outer = b->depth < a->depth;
		uint64_t outer = b_outer ? vb->score : va->score, inner = b_outer ? va->score : vb->score;

		if (outer * PY_OUTER_FACTOR >= inner)
			return b_outer;
		return !b_outer;
	}
	/* Kernels: the longest idle before it; one as long: the fewer runs (a
	 * layer's kernel runs many times a step, the step's first one once). */
	if (vb->score * 10 < va->score * 9 || va->score * 10 < vb->score * 9)
		return vb->score > va->score;
	if (a->kind == SER_LIB) {
		int ra = lib_rank(cv_strtab_get(&s->names, a->name));
		int rb = lib_rank(cv_strtab_get(&s->names, b->name));

		if (ra != rb)
			return rb > ra;
	}
	if (a->n != b->n)
		return b->n < a->n;
	return vb->score > va->score;
}

/* Place the steps of the chosen series. Python: each call starts a step,
 * which runs to the next call when the gap is short (the loop's own
 * overhead, data loading) and ends with the call otherwise (another phase
 * runs in between). Library: each step ends where the call returns. */
static int place(struct cv_steps *s, uint32_t h, const struct series *x, uint64_t period)
{
	uint32_t n = x->kind == SER_PY ? x->n : x->n - 1;
	uint64_t *b = malloc((size_t)n * 2 * sizeof(*b));
	const uint64_t *t = x->t;

	if (!b)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		if (x->kind == SER_GPU) { /* from one run of the kernel to the next */
			b[i] = t[2 * i];
			b[n + i] = t[2 * i + 2];
			continue;
		}
		if (x->kind == SER_LIB) {
			b[i] = t[2 * i + 1];
			b[n + i] = t[2 * i + 3];
			continue;
		}
		b[i] = t[2 * i];
		b[n + i] = t[2 * i + 1];
		if (i + 1 < x->n && t[2 * i + 2] - t[2 * i + 1] <= period / 2)
			b[n + i] = t[2 * i + 2];
	}
	s->bounds[h] = b;
	s->res[h].n = n;
	s->res[h].start = b;
	s->res[h].end = b + n;
	s->res[h].pid = x->pid;
	s->res[h].tid = x->kind == SER_GPU ? 0 : x->tid;
	s->res[h].track = x->track;
	s->res[h].on_stream = x->kind == SER_GPU;
	s->res[h].device = x->device;
	s->res[h].stream = x->stream;
	return 0;
}

static void describe(const struct cv_steps *s, struct conv_steps *r, const struct series *x,
		     const struct verdict *v)
{
	const char *name = cv_strtab_get(&s->names, x->name);

	if (x->kind == SER_GPU)
		snprintf(r->evidence, sizeof(r->evidence),
			 "GPU kernel %.100s on device %u stream %u starts each step: %u runs, median "
			 "%.3f ms apart (%u%% within 30%% of it), after a median %.3f ms of idle stream",
			 name, x->device, x->stream, x->n, v->period / 1e6, v->regular_pct,
			 v->idle / 1e6);
	else if (x->kind == SER_PY)
		snprintf(r->evidence, sizeof(r->evidence),
			 "Python function %.120s on thread %u repeats: %u calls, median %.3f ms, "
			 "covering %.0f%% of %.3f s", name, x->tid, x->n, v->period / 1e6,
			 100.0 * (double)v->covered / (double)v->span, v->span / 1e9);
	else
		snprintf(r->evidence, sizeof(r->evidence),
			 "library call %.120s on thread %u repeats every %.3f ms (%u calls, %u%% of "
			 "intervals within 30%% of it); each step ends where it returns", name, x->tid,
			 v->period / 1e6, x->n, v->regular_pct);
}

static int detect_host(struct cv_steps *s, uint32_t h, uint64_t prof_ns, uint64_t *scratch)
{
	const struct series *best[SER_KINDS] = { NULL };
	struct verdict bv[SER_KINDS] = { { 0 } };
	struct conv_steps *r = &s->res[h];

	if (s->markers[h]) {
		r->from_markers = 1;
		snprintf(r->evidence, sizeof(r->evidence), "the job's own step markers");
		return 0;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct series *x = &s->v[i];

		if (x->host != h || x->dead || x->n < MIN_STEPS)
			continue;
		qsort(x->t, x->n, 2 * sizeof(*x->t), cmp_pair);
		struct verdict v = x->kind == SER_PY    ? judge_py(x, scratch)
				   : x->kind == SER_LIB ? judge_lib(x, scratch)
							: judge_gpu(s, x, scratch);

		if (!v.ok || v.span * 100 < prof_ns * MIN_SPAN_PCT)
			continue;
		if (better(s, best[x->kind], &bv[x->kind], x, &v)) {
			best[x->kind] = x;
			bv[x->kind] = v;
		}
	}
	int k = best[SER_PY] ? SER_PY : best[SER_LIB] ? SER_LIB : SER_GPU;

	if (!best[k]) {
		snprintf(r->evidence, sizeof(r->evidence),
			 "no steps found: no Python function repeats (%d+ calls) covering most of "
			 "its loop, no library call repeats at a steady period, and no GPU kernel "
			 "starts after the stream's long idle times",
			 MIN_STEPS);
		return 0;
	}
	describe(s, r, best[k], &bv[k]);
	return place(s, h, best[k], bv[k].period);
}

int cv_steps_detect(struct cv_steps *s, const uint64_t *prof_ns)
{
	uint32_t most = 1;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].n > most)
			most = s->v[i].n;
	uint64_t *scratch = malloc((size_t)most * sizeof(*scratch));
	int rc = scratch ? 0 : -1;

	for (uint32_t h = 0; rc == 0 && h < s->n_hosts; h++)
		rc = detect_host(s, h, prof_ns[h], scratch);
	free(scratch);
	return rc;
}

const struct conv_steps *cv_steps_of(const struct cv_steps *s, uint32_t host)
{
	return host < s->n_hosts ? &s->res[host] : NULL;
}
