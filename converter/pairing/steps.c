/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Step detection (steps.h), per process. Evidence, in order of trust:
 *   1. the process's own step markers (`step`, `ProfilerStep#N`): detection
 *      is off for it;
 *   2. its Python loop: the repeating sequence of calls a function (or the
 *      top of what a thread recorded) makes, one iteration from the start of
 *      the sequence to the next (steps_loop.c);
 *   3. a CUDA library call repeating at a steady period on one thread
 *      (cudaDeviceSynchronize, cudaGraphLaunch, nccl*, ...): each step ends
 *      where the call returns;
 *   4. on a host where no process has steps: a GPU kernel that starts each
 *      step: the step's first kernel waits for the host's work between
 *      steps, so the stream is idle before it far longer than before its
 *      other kernels (median idle before it at least GPU_IDLE_FACTOR times
 *      the stream's mean); of those, the one after the longest idle (then
 *      the fewest runs). The steps lie on that stream.
 * Library calls and kernels are kept as series of (start, end) per (thread
 * or stream, name); a series that grows past CALLS_MAX is too frequent to
 * be a step and is dropped, and all live series share BUDGET entries (the
 * largest is dropped first). Python calls are kept per calling function
 * (steps_loop.c has their bounds). Memory is bounded whatever the log size;
 * judging sorts each series once: O(n log n) in the events kept.
 */
#include "common/grow.h"
#include "converter/pairing/steps_int.h"
#include "converter/sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALLS_MAX (1u << 16)       /* more calls than this: not a step */
#define BUDGET (1u << 19)          /* (start, end) pairs held in all series */
#define SERIES_MAX 65536
#define LIB_REGULAR_PCT 75         /* >= 75% of intervals within ±30% of the median */
#define GPU_IDLE_FACTOR 4          /* a step's first kernel: idle before it >= 4x the mean */
#define GROUP_MAX (1u << 18)       /* calls kept of one calling function on one thread */
#define GROUP_BUDGET (1u << 19)    /* calls kept in all groups (32 bytes each) */

struct stream_use {
	uint32_t host, track;
	uint64_t end;                /* end of its latest kernel + 1; 0 before the first */
	uint64_t idle, runs;         /* idle ns before its kernels, in all; its kernels */
};

int cv_is_step_marker(const struct evlog_event *e)
{
	struct evlog_str n = e->u.marker.name;

	return (n.len == 4 && !memcmp(n.ptr, "step", 4)) ||
	       (n.len >= 12 && !memcmp(n.ptr, "ProfilerStep", 12));
}

int cv_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t cv_u64_median(uint64_t *v, uint32_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cv_u64_cmp);
	return v[n / 2];
}

struct cv_steps *cv_steps_new(uint32_t n_hosts)
{
	struct cv_steps *s = calloc(1, sizeof(*s));
	int64_t c, m;

	if (!s)
		return NULL;
	s->n_hosts = n_hosts;
	s->res = calloc(n_hosts + 1, sizeof(*s->res));
	int64_t b = cv_strtab_intern(&s->names, "\x1f" "backward", 9);

	c = cv_strtab_intern(&s->names, "\x1f" "collectives", 12);
	m = cv_strtab_intern(&s->names, "\x1f" "markers", 8);
	if (!s->res || c < 0 || m < 0 || b < 0) {
		cv_steps_free(s);
		return NULL;
	}
	s->coll_name = (uint32_t)c;
	s->mark_name = (uint32_t)m;
	s->bwd_name = (uint32_t)b;
	return s;
}

static void cand_free(struct cand *c)
{
	free(c->bounds);
	free(c->num);
	c->bounds = NULL;
	c->num = NULL;
}

void cv_steps_free(struct cv_steps *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].t);
	for (size_t i = 0; i < s->ng; i++)
		free(s->g[i].v);
	for (uint32_t h = 0; s->res && h < s->n_hosts; h++) {
		for (uint32_t i = 0; i < s->res[h].n_sets; i++)
			cand_free(&s->res[h].sets[i]);
		free(s->res[h].sets);
		free(s->res[h].pubsets);
	}
	cv_ranks_free(s);
	free(s->v);
	free(s->g);
	free(s->res);
	cv_map_free(&s->idx);
	cv_map_free(&s->gidx);
	cv_map_free(&s->marked);
	cv_map_free(&s->ddp);
	cv_map_free(&s->stream_idx);
	free(s->streams);
	cv_buf_free(&s->key);
	cv_strtab_free(&s->names);
	free(s);
}

/* ------------------------------------------------------------- series */

static void kill(struct cv_steps *s, struct series *x)
{
	s->live -= x->n;
	free(x->t);
	x->t = NULL;
	x->n = x->cap = 0;
	x->dead = 1;
}

/* Over budget: the series with the most calls is the least likely step.
 * Collectives and markers are not candidates: kept. */
static void kill_largest(struct cv_steps *s)
{
	struct series *big = NULL;

	for (size_t i = 0; i < s->n; i++)
		if (!s->v[i].dead && s->v[i].kind < SER_COLL && (!big || s->v[i].n > big->n))
			big = &s->v[i];
	if (big)
		kill(s, big);
}

/* Where calls of a series that found no room go: dead, never written. */
static struct series no_room = { .dead = 1 };

static uint64_t series_key(uint32_t track, int kind)
{
	return (uint64_t)track << 2 | (uint64_t)kind;
}

const struct series *cv_series_get(const struct cv_steps *s, uint32_t track, int kind, uint32_t name)
{
	const uint64_t *v = cv_map_get(&s->idx, series_key(track, kind), name);

	return v && *v ? &s->v[*v - 1] : NULL;
}

/* How many of set's steps hold a call of series x (sorted). */
static uint32_t steps_holding(const struct series *x, const struct conv_step_set *set)
{
	uint32_t n = 0, k = 0;

	for (uint32_t i = 0; x && i < set->n; i++) {
		while (k < x->n && x->t[2 * k] < set->start[i])
			k++;
		n += k < x->n && x->t[2 * k] < set->end[i];
	}
	return n;
}

const struct series *cv_coll_series(const struct cv_steps *s, uint32_t host,
				    const struct conv_step_set *set)
{
	const struct series *x = cv_series_get(s, set->track, SER_COLL, s->coll_name);

	/* a barrier before and after the loop is not the loop's collectives */
	if (steps_holding(x, set) * 2 < set->n && cv_map_get(&s->ddp, host, set->pid))
		x = cv_series_get(s, set->track, SER_COLL, s->bwd_name);
	return x && x->n ? x : NULL;
}

static struct series *series_of(struct cv_steps *s, uint32_t host, uint32_t track, uint8_t kind,
				uint32_t name, const struct evlog_event *e)
{
	int is_new;
	uint64_t *v = cv_map_put(&s->idx, series_key(track, kind), name, &is_new);

	if (!v)
		return NULL;
	if (is_new) {
		if (s->n == SERIES_MAX)
			return &no_room; /* *v stays 0: looked up again, still no room */
		if (lt_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v), 256))
			return NULL;
		s->v[s->n] = (struct series){ .host = host, .track = track, .pid = e->pid,
					     .tid = e->tid ? e->tid : e->pid, .name = name,
					     .kind = kind, .depth = UINT32_MAX };
		*v = ++s->n;
	}
	return *v ? &s->v[*v - 1] : &no_room;
}

static struct series *named_series(struct cv_steps *s, uint32_t host, uint32_t track, uint8_t kind,
				   struct evlog_str n, const struct evlog_event *e)
{
	int64_t ni = cv_strtab_intern(&s->names, n.ptr, n.len);

	return ni < 0 ? NULL : series_of(s, host, track, kind, (uint32_t)ni, e);
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

static int add_call(struct cv_steps *s, struct series *x, uint64_t start, uint64_t end,
		    uint32_t depth, uint64_t num)
{
	uint32_t stride = x->kind == SER_MARK ? 3 : 2;

	if (x->dead)
		return 0;
	if (x->n == CALLS_MAX) {
		if (x->kind < SER_COLL)
			kill(s, x);
		return 0; /* collectives and markers: the first CALLS_MAX are kept */
	}
	if (x->n == x->cap) {
		uint32_t nc = x->cap ? x->cap * 2 : 16;
		uint64_t *nt = realloc(x->t, (size_t)nc * stride * sizeof(*nt));

		if (!nt)
			return -1;
		x->t = nt;
		x->cap = nc;
	}
	x->t[stride * x->n] = start;
	x->t[stride * x->n + 1] = end;
	if (stride == 3)
		x->t[stride * x->n + 2] = num;
	x->n++;
	if (depth < x->depth)
		x->depth = depth;
	if (++s->live > BUDGET)
		kill_largest(s);
	return 0;
}

/* A collective call of a communication library (NCCL's; gloo has no C
 * entry points of its own to probe). */
static int is_nccl_collective(struct evlog_str n)
{
	static const char *const names[] = { "ncclAllReduce", "ncclBroadcast", "ncclReduce",
					     "ncclAllGather", "ncclReduceScatter", "ncclAlltoAll",
					     "ncclSend", "ncclRecv", "ncclBcast" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (n.len == strlen(names[i]) && !memcmp(n.ptr, names[i], n.len))
			return 1;
	return 0;
}

static int marker_step(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		       uint64_t dur, const struct evlog_event *e)
{
	int is_new;
	uint64_t *m = cv_map_put(&s->marked, host, e->pid, &is_new);
	struct series *x = series_of(s, host, track, SER_MARK, s->mark_name, e);

	if (!m || !x)
		return -1;
	*m = 1;
	return add_call(s, x, start, start + dur, 0, e->u.marker.value);
}

static int is_py_collective(const struct evlog_event *e);

int cv_is_collective(const struct evlog_event *e)
{
	return e->type == EV_PY_ENTER ? is_py_collective(e)
	       : e->type == EV_LIB_CALL && is_nccl_collective(e->u.lib_call.symbol);
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
		return cv_is_step_marker(e) ? marker_step(s, host, track, start, dur, e) : 0;
	case EV_LIB_CALL:
		n = e->u.lib_call.symbol;
		kind = SER_LIB;
		if (is_nccl_collective(n)) {
			struct series *c = series_of(s, host, track, SER_COLL, s->coll_name, e);

			if (!c || add_call(s, c, start, start + dur, 0, 0))
				return -1;
		}
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
	if (!n.len)
		return 0;
	struct series *x = named_series(s, host, track, kind, n, e);

	if (x && kind == SER_GPU && x->n == 0) {
		x->device = e->u.gpu_kernel.device;
		x->stream = e->u.gpu_kernel.stream;
	}
	return x ? add_call(s, x, start, start + dur, depth, 0) : -1;
}

/* ------------------------------------------------------- Python calls */

int64_t cv_steps_py_name(struct cv_steps *s, const struct evlog_event *e)
{
	struct evlog_str f = e->u.py_enter.func, file = e->u.py_enter.file;
	char line[16];
	int ll = snprintf(line, sizeof(line), ":%u", e->u.py_enter.line);

	s->key.len = 0;
	if ((f.len && cv_buf_append(&s->key, f.ptr, f.len)) || cv_buf_putc(&s->key, '\x1f') ||
	    (file.len && cv_buf_append(&s->key, file.ptr, file.len)) ||
	    cv_buf_append(&s->key, line, (size_t)ll))
		return -1;
	return cv_strtab_intern(&s->names, s->key.p, s->key.len);
}

/* torch.distributed's collectives (distributed_c10d.py), by their last name. */
static int is_py_collective(const struct evlog_event *e)
{
	static const char *const names[] = {
		"all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base",
		"reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast",
		"reduce", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter",
		"all_reduce_coalesced", "all_gather_coalesced", "send", "recv",
		/* DDP's communication hooks: a bucket's collective issued from Python */
		"allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "_allreduce_fut",
	};
	struct evlog_str f = e->u.py_enter.func, file = e->u.py_enter.file;
	const char *dot = f.len ? memrchr(f.ptr, '.', f.len) : NULL;
	size_t off = dot ? (size_t)(dot + 1 - f.ptr) : 0;

	if (!file.len || !memmem(file.ptr, file.len, "distributed", 11))
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f.len - off == strlen(names[i]) && !memcmp(f.ptr + off, names[i], f.len - off))
			return 1;
	return 0;
}

static int file_has(struct evlog_str file, const char *part)
{
	return file.len && memmem(file.ptr, file.len, part, strlen(part));
}

static int bare_is(struct evlog_str f, const char *name)
{
	const char *dot = f.len ? memrchr(f.ptr, '.', f.len) : NULL;
	size_t off = dot ? (size_t)(dot + 1 - f.ptr) : 0;

	return f.len - off == strlen(name) && !memcmp(f.ptr + off, name, f.len - off);
}

/* autograd's backward (Tensor.backward, torch.autograd.backward). */
static int is_backward(const struct evlog_event *e)
{
	return bare_is(e->u.py_enter.func, "backward") &&
	       (file_has(e->u.py_enter.file, "torch/_tensor.py") ||
		file_has(e->u.py_enter.file, "torch/autograd/__init__.py"));
}

static int is_ddp_forward(const struct evlog_event *e)
{
	return bare_is(e->u.py_enter.func, "forward") &&
	       file_has(e->u.py_enter.file, "nn/parallel/distributed.py");
}

/* Over budget: the group with the most instances of its caller (a helper
 * called everywhere, a layer's forward) is the least likely loop; then the
 * largest. Freed down to 7/8 of the budget, so that this runs rarely. */
static void gkill_some(struct cv_steps *s)
{
	while (s->glive > GROUP_BUDGET / 8 * 7) {
		struct group *big = NULL;

		for (size_t i = 0; i < s->ng; i++) {
			struct group *g = &s->g[i];

			if (g->dead || !g->n)
				continue;
			if (!big || g->instances > big->instances ||
			    (g->instances == big->instances && g->n > big->n))
				big = g;
		}
		if (!big)
			return;
		s->glive -= big->n;
		free(big->v);
		big->v = NULL;
		big->n = big->cap = 0;
		big->dead = 1;
	}
}

static struct group *group_of(struct cv_steps *s, uint32_t host, uint32_t track, uint32_t parent,
			      const struct evlog_event *e)
{
	int is_new;
	uint64_t *v = cv_map_put(&s->gidx, track, parent, &is_new);

	if (!v)
		return NULL;
	if (is_new) {
		if (lt_grow((void **)&s->g, &s->capg, s->ng + 1, sizeof(*s->g), 256))
			return NULL;
		s->g[s->ng] = (struct group){ .host = host, .track = track, .pid = e->pid,
					     .tid = e->tid ? e->tid : e->pid, .parent = parent };
		*v = ++s->ng;
	}
	return &s->g[*v - 1];
}

static int group_add(struct cv_steps *s, struct group *g, uint64_t start, uint64_t end,
		     uint64_t pstart, uint32_t name)
{
	if (g->dead || g->full)
		return 0;
	if (g->n == GROUP_MAX) {
		g->full = 1; /* the loop's first GROUP_MAX calls are judged */
		return 0;
	}
	if (lt_grow((void **)&g->v, &g->cap, g->n + 1, sizeof(*g->v), 16))
		return -1;
	if (!g->n || g->v[g->n - 1].pstart != pstart)
		g->instances++;
	g->v[g->n++] = (struct pycall){ .start = start, .end = end, .pstart = pstart, .name = name };
	if (++s->glive > GROUP_BUDGET)
		gkill_some(s);
	return 0;
}

int cv_steps_feed_py(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		     uint64_t dur, const struct evlog_event *e, uint32_t name, uint32_t parent,
		     uint64_t pstart)
{
	if (host >= s->n_hosts)
		return 0;
	if (is_py_collective(e) || is_backward(e)) {
		struct series *c = series_of(s, host, track, SER_COLL,
					     is_backward(e) ? s->bwd_name : s->coll_name, e);

		if (!c || add_call(s, c, start, start + dur, 0, 0))
			return -1;
	}
	if (is_ddp_forward(e) && !cv_map_put(&s->ddp, host, e->pid, NULL))
		return -1;
	struct group *g = group_of(s, host, track, parent, e);

	return g ? group_add(s, g, start, start + dur, parent != CV_STEPS_TOP ? pstart : 0, name) : -1;
}

/* ------------------------------------------------------------- judging */

static int cmp_pair(const void *a, const void *b)
{
	return cv_u64_cmp(a, b);
}

static int cmp_triple(const void *a, const void *b)
{
	return cv_u64_cmp(a, b);
}

/* What one library or kernel series looks like as a loop; ok = 0 when not. */
struct verdict {
	int ok;
	uint64_t score;   /* library: span of the period; kernels: median idle before it */
	uint64_t span, period;
	uint32_t regular_pct;
	uint64_t idle;
};

static struct verdict judge_lib(const struct series *x, uint64_t *scratch)
{
	struct verdict v = { 0 };
	const uint64_t *t = x->t;
	uint32_t m = x->n - 1, regular = 0;

	for (uint32_t i = 0; i < m; i++)
		scratch[i] = t[2 * i + 3] - t[2 * i + 1];
	v.period = cv_u64_median(scratch, m);
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
	v.period = cv_u64_median(scratch, m);
	for (uint32_t i = 0; i < m; i++)
		regular += scratch[i] * 10 >= v.period * 7 && scratch[i] * 10 <= v.period * 13;
	v.regular_pct = regular * 100 / m;
	v.span = t[2 * m] - t[0];
	for (uint32_t i = 0; i < x->n; i++)
		scratch[i] = t[2 * i + 1] - t[2 * i];
	v.idle = cv_u64_median(scratch, x->n);
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

/* Is candidate b better than a (both ok, same kind)? Close scores (within
 * 10%) go to the library call that syncs or launches a graph, then the
 * fewer calls (a step, not a part). */
static int better(const struct cv_steps *s, const struct series *a, const struct verdict *va,
		  const struct series *b, const struct verdict *vb)
{
	if (!a)
		return 1;
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

int cv_steps_marked(const struct cv_steps *s, uint32_t h, uint32_t pid)
{
	return cv_map_get(&s->marked, h, pid) != NULL;
}

static int has_set(const struct cv_steps *s, uint32_t h, uint32_t pid)
{
	for (uint32_t i = 0; i < s->res[h].n_sets; i++)
		if (s->res[h].sets[i].set.pid == pid)
			return 1;
	return 0;
}

int cv_steps_add_set(struct cv_steps *s, uint32_t h, struct cand *c)
{
	struct host_res *r = &s->res[h];
	size_t cap = r->cap_sets;

	if (lt_grow((void **)&r->sets, &cap, r->n_sets + 1, sizeof(*r->sets), 4))
		return -1;
	r->cap_sets = (uint32_t)cap;
	r->sets[r->n_sets++] = *c;
	memset(c, 0, sizeof(*c));
	return 0;
}

/* Bounds of a library or kernel series' steps. Library: each step runs
 * from one return of the call to the next; kernels: from one run to the
 * next (on the stream). */
static int series_cand(const struct series *x, struct cand *c)
{
	uint32_t n = x->n - 1;
	uint64_t *b = malloc((size_t)n * 2 * sizeof(*b));
	const uint64_t *t = x->t;

	if (!b)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		b[i] = x->kind == SER_GPU ? t[2 * i] : t[2 * i + 1];
		b[n + i] = x->kind == SER_GPU ? t[2 * i + 2] : t[2 * i + 3];
	}
	memset(c, 0, sizeof(*c));
	c->bounds = b;
	c->set.n = n;
	c->set.pid = x->pid;
	c->set.tid = x->kind == SER_GPU ? 0 : x->tid;
	c->set.track = x->track;
	c->set.on_stream = x->kind == SER_GPU;
	c->set.device = x->device;
	c->set.stream = x->stream;
	return 0;
}

static void describe(const struct cv_steps *s, struct cand *c, const struct series *x,
		     const struct verdict *v)
{
	const char *name = cv_strtab_get(&s->names, x->name);

	if (x->kind == SER_GPU)
		snprintf(c->set.evidence, sizeof(c->set.evidence),
			 "GPU kernel %.100s on device %u stream %u starts each step: %u runs, median "
			 "%.3f ms apart (%u%% within 30%% of it), after a median %.3f ms of idle stream",
			 name, x->device, x->stream, x->n, v->period / 1e6, v->regular_pct,
			 v->idle / 1e6);
	else
		snprintf(c->set.evidence, sizeof(c->set.evidence),
			 "library call %.120s on thread %u repeats every %.3f ms (%u calls, %u%% of "
			 "intervals within 30%% of it); each step ends where it returns", name, x->tid,
			 v->period / 1e6, x->n, v->regular_pct);
}

/* Library calls per process (those without a Python loop), kernels per
 * host (when no process has steps). */
static int judge_series(struct cv_steps *s, uint32_t h, uint64_t prof_ns, int kind, uint64_t *scratch)
{
	for (;;) {
		const struct series *best = NULL;
		struct verdict bv = { 0 };

		for (size_t i = 0; i < s->n; i++) {
			struct series *x = &s->v[i];

			if (x->host != h || x->dead || x->kind != kind || x->n < MIN_STEPS ||
			    cv_steps_marked(s, h, x->pid) || has_set(s, h, x->pid))
				continue;
			if (best && x->pid != best->pid)
				continue;
			struct verdict v = kind == SER_LIB ? judge_lib(x, scratch) : judge_gpu(s, x, scratch);

			if (!v.ok || v.span * 100 < prof_ns * MIN_SPAN_PCT)
				continue;
			if (better(s, best, &bv, x, &v)) {
				best = x;
				bv = v;
			}
		}
		if (!best)
			return 0;
		struct cand c;

		if (series_cand(best, &c))
			return -1;
		describe(s, &c, best, &bv);
		if (cv_steps_add_set(s, h, &c)) {
			cand_free(&c);
			return -1;
		}
		if (kind == SER_GPU)
			return 0; /* one stream carries a host's steps */
	}
}

/* A process's own step markers: its steps as they are. */
static int marker_sets(struct cv_steps *s, uint32_t h)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct series *x = &s->v[i];

		if (x->host != h || x->kind != SER_MARK || !x->n || has_set(s, h, x->pid))
			continue;
		struct cand c = { .set = { .from_markers = 1, .pid = x->pid, .tid = x->tid,
					   .track = x->track, .n = x->n } };

		c.bounds = malloc((size_t)x->n * 2 * sizeof(*c.bounds));
		c.num = malloc((size_t)x->n * sizeof(*c.num));
		if (!c.bounds || !c.num) {
			cand_free(&c);
			return -1;
		}
		for (uint32_t k = 0; k < x->n; k++) {
			c.bounds[k] = x->t[3 * k];
			c.bounds[x->n + k] = x->t[3 * k + 1];
			c.num[k] = (uint32_t)x->t[3 * k + 2];
		}
		c.set.first = c.num[0];
		snprintf(c.set.evidence, sizeof(c.set.evidence), "the job's own step markers");
		if (cv_steps_add_set(s, h, &c)) {
			cand_free(&c);
			return -1;
		}
	}
	return 0;
}

static int cmp_set(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->set.track < y->set.track ? -1 : x->set.track > y->set.track;
}

/* The host's result as sinks see it. */
static int publish(struct cv_steps *s, uint32_t h)
{
	struct host_res *r = &s->res[h];

	if (!r->n_sets) {
		snprintf(r->pub.evidence, sizeof(r->pub.evidence),
			 "no steps found: no Python loop repeats a sequence of calls (%d+ times) over "
			 "%d%% of the profile, no library call repeats at a steady period, and no GPU "
			 "kernel starts after the stream's long idle times",
			 MIN_STEPS, MIN_SPAN_PCT);
		return 0;
	}
	qsort(r->sets, r->n_sets, sizeof(*r->sets), cmp_set);
	if (!(r->pubsets = calloc(r->n_sets, sizeof(*r->pubsets))))
		return -1;
	for (uint32_t i = 0; i < r->n_sets; i++) {
		struct cand *c = &r->sets[i];

		c->set.start = c->bounds;
		c->set.end = c->bounds + c->set.n;
		r->pubsets[i] = c->set;
	}
	r->pub.n_sets = r->n_sets;
	r->pub.sets = r->pubsets;
	snprintf(r->pub.evidence, sizeof(r->pub.evidence), "%s", r->sets[0].set.evidence);
	return 0;
}

static int detect_host(struct cv_steps *s, uint32_t h, uint64_t prof_ns, uint64_t *scratch)
{
	for (size_t i = 0; i < s->n; i++) {
		struct series *x = &s->v[i];

		if (x->host != h || x->dead || x->n < 2)
			continue;
		if (x->kind == SER_MARK)
			qsort(x->t, x->n, 3 * sizeof(*x->t), cmp_triple);
		else
			qsort(x->t, x->n, 2 * sizeof(*x->t), cmp_pair);
	}
	if (marker_sets(s, h) || cv_loops_judge(s, h, prof_ns) ||
	    judge_series(s, h, prof_ns, SER_LIB, scratch))
		return -1;
	if (!s->res[h].n_sets && judge_series(s, h, prof_ns, SER_GPU, scratch))
		return -1;
	return publish(s, h);
}

int cv_steps_detect(struct cv_steps *s, struct conv_host_meta *const *metas)
{
	uint32_t most = 1;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].n > most)
			most = s->v[i].n;
	uint64_t *scratch = malloc((size_t)most * sizeof(*scratch));
	int rc = scratch ? 0 : -1;

	for (uint32_t h = 0; rc == 0 && h < s->n_hosts; h++)
		rc = detect_host(s, h, metas[h]->stop_ns - metas[h]->start_ns, scratch);
	free(scratch);
	/* The candidates are judged: what they held is not needed any more. */
	for (size_t i = 0; i < s->ng; i++) {
		free(s->g[i].v);
		s->g[i].v = NULL;
	}
	s->ng = 0;
	if (rc == 0)
		rc = cv_ranks_relate(s, metas);
	return rc;
}

const struct conv_steps *cv_steps_of(const struct cv_steps *s, uint32_t host)
{
	return host < s->n_hosts ? &s->res[host].pub : NULL;
}

const struct conv_job *cv_steps_job(const struct cv_steps *s)
{
	return s->job.n_ranks >= 2 ? &s->job : NULL;
}
