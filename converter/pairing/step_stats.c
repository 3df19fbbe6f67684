/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-step tables and breakdowns for the summary, one per process with
 * steps (markers or detected), kept across hosts for the job's ranks.
 *
 * GPU time: each kernel, copy or set is added to the step(s) of its process
 * it overlaps, found by binary search, clipped to each step. Time on several
 * streams at once is counted per stream, so the parts are capped in a fixed
 * order (collectives, compute, copies, host launching) and the rest is idle.
 *
 * Host time: the driving thread's calls are walked as they nest (items of a
 * track come sorted, parents first). Each call's own time (less its
 * children's) goes to its class, or its caller's: collectives
 * (torch.distributed, nccl*: cv_is_collective), input (a DataLoader's
 * __next__), compute (forward, backward, an optimizer's step, CUDA calls);
 * the rest of the step is other host time. Time in collectives is split
 * into waiting for a later rank and communication with the job's arrivals
 * (steps_ranks.c). The parts always add up to the step time.
 *
 * Stragglers: while a late rank's driving thread is walked, the Python
 * calls' own time before it reached the collectives (from its step's start
 * to its arrival) and its CPU samples' leaf frames there are summed per
 * name, for its late steps one by one and for its other steps together:
 * "where" names what a late step did most beyond the rank's usual step.
 */
#include "converter/pairing/step_stats.h"
#include "converter/pairing/steps.h"
#include "converter/cv_util.h"
#include "common/grow.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#define STEPS_MAX (1u << 16)         /* per process */
#define STEPS_BUDGET (1u << 20)      /* in all processes of all hosts */

enum gpart { G_NCCL, G_COMPUTE, G_COPY, G_LAUNCH, G_N };
enum hpart { H_COMPUTE, H_COMM, H_INPUT, H_N };

struct step {
	uint64_t start, end;
	uint32_t num;
	uint64_t g[G_N], h[H_N];
};

struct table {
	const char *host;
	uint32_t host_index;
	int64_t off;                 /* host clock + off = wall clock */
	uint32_t pid, tid;
	int on_stream, from_markers, has_gpu;
	uint32_t device, stream;
	int32_t rank;
	char label[64], evidence[320];
	const struct conv_rank *rk;  /* its rank in the job, or NULL */
	struct step *v;
	uint32_t n, cap;
	uint64_t dropped;
	int32_t *late;               /* per step of its rank's set: the straggler, or -1 */
	uint32_t n_usual;            /* steps of its set where it was not late */
};

struct frame {
	uint64_t end, cur;           /* its end; its own time is counted up to cur */
	int cls;                     /* enum hpart, or -1 */
	int32_t name;                /* for "where" (-1: not kept) */
};

struct step_stats {
	const struct conv_host_meta *m;
	const struct conv_job *job;
	struct table *t;
	size_t nt, capt, host_first;
	uint64_t steps_total;
	/* the driving thread being walked */
	struct table *walk;
	uint32_t w_pid, w_tid;
	int w_kind;
	struct frame *stk;
	size_t depth, cap_stk;
	struct cv_strtab names;      /* Python functions and native frames, for "where" */
	struct cv_map py_where;      /* (straggler or USUAL + table, name) -> ns of its own time */
	struct cv_map native_where;  /* (straggler or USUAL + table, name) -> samples */
	int oom;
};

struct step_stats *step_stats_new(void)
{
	return calloc(1, sizeof(struct step_stats));
}

void step_stats_free(struct step_stats *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nt; i++) {
		free(s->t[i].v);
		free(s->t[i].late);
	}
	free(s->t);
	free(s->stk);
	cv_strtab_free(&s->names);
	cv_map_free(&s->py_where);
	cv_map_free(&s->native_where);
	free(s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#define USUAL (1ull << 32)     /* py_where's key of a table's usual steps */

/* Which steps of t's rank were late ones. */
static int late_steps(struct step_stats *s, struct table *t)
{
	const struct conv_job *j = s->job;
	const struct conv_step_set *set = t->rk ? t->rk->set : NULL;
	uint32_t n = 0;

	for (uint32_t i = 0; set && i < j->n_stragglers; i++)
		n += &j->ranks[j->stragglers[i].who] == t->rk;
	if (!n)
		return 0;
	if (!(t->late = malloc(set->n * sizeof(*t->late))))
		return -1;
	for (uint32_t k = 0; k < set->n; k++)
		t->late[k] = -1;
	for (uint32_t i = 0; i < j->n_stragglers; i++) {
		const struct conv_straggler *g = &j->stragglers[i];
		uint32_t k = g->step - set->first;

		if (&j->ranks[g->who] != t->rk)
			continue;
		if (set->from_markers) /* marker numbers may skip */
			for (k = 0; k < set->n && set->first + k != g->step; k++)
				;
		if (k < set->n)
			t->late[k] = (int32_t)i;
	}
	for (uint32_t k = 0; k < set->n; k++)
		t->n_usual += t->late[k] < 0;
	return 0;
}

static int add_table(struct step_stats *s, const struct conv_step_set *set)
{
	const struct conv_host_meta *m = s->m;
	const struct conv_process *p = conv_meta_process(m, set->pid);

	if (lt_grow((void **)&s->t, &s->capt, s->nt + 1, sizeof(*s->t), 8))
		return -1;
	struct table *t = &s->t[s->nt++];

	memset(t, 0, sizeof(*t));
	t->host = m->host;
	t->host_index = m->host_index;
	t->off = (int64_t)(m->base_realtime_ns - m->base_mono_ns);
	t->pid = set->pid;
	t->tid = set->tid;
	t->on_stream = set->on_stream;
	t->from_markers = set->from_markers;
	t->device = set->device;
	t->stream = set->stream;
	t->rank = p ? p->rank : -1;
	snprintf(t->label, sizeof(t->label), "%s", p && *p->label ? p->label : "");
	snprintf(t->evidence, sizeof(t->evidence), "%s", set->evidence);
	for (uint32_t r = 0; s->job && r < s->job->n_ranks; r++)
		if (s->job->ranks[r].host == m->host_index && s->job->ranks[r].pid == set->pid)
			t->rk = &s->job->ranks[r];
	return late_steps(s, t);
}

int step_stats_begin(struct step_stats *s, const struct conv_host_meta *m)
{
	const struct conv_steps *st = m->steps;

	s->m = m;
	s->job = m->job;
	s->host_first = s->nt;
	s->walk = NULL;
	s->depth = 0;
	for (uint32_t i = 0; st && i < st->n_sets; i++)
		if (add_table(s, &st->sets[i]))
			return -1;
	return 0;
}

/* The current host's table of pid, or NULL. */
static struct table *table_of(struct step_stats *s, uint32_t pid)
{
	for (size_t i = s->host_first; i < s->nt; i++)
		if (s->t[i].pid == pid)
			return &s->t[i];
	return NULL;
}

static int add_step(struct step_stats *s, const struct conv_item *it)
{
	struct table *t = table_of(s, it->pid);

	if (!t)
		return 0; /* markers of a process the detector did not take */
	if (t->n == STEPS_MAX || s->steps_total == STEPS_BUDGET) {
		t->dropped++;
		return 0;
	}
	if (t->n && (it->start_ns < t->v[t->n - 1].start || it->tid != t->tid))
		return 0; /* steps of a second thread: the first one's table stands */
	if (t->n == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 256;
		struct step *nv = realloc(t->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		t->v = nv;
		t->cap = nc;
	}
	if (!t->n)
		t->tid = it->tid;
	t->v[t->n++] = (struct step){ .start = it->start_ns, .end = it->start_ns + it->dur_ns,
				      .num = it->step - 1 };
	s->steps_total++;
	return 0;
}

/* The first step of t ending after a. */
static uint32_t first_after(const struct table *t, uint64_t a)
{
	uint32_t lo = 0, hi = t->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->v[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Add [a, b) to part p of every step it overlaps (gpu: the GPU parts). */
static void spread(struct table *t, int gpu, int p, uint64_t a, uint64_t b)
{
	for (uint32_t i = first_after(t, a); i < t->n && t->v[i].start < b; i++) {
		uint64_t x = a > t->v[i].start ? a : t->v[i].start;
		uint64_t y = b < t->v[i].end ? b : t->v[i].end;

		if (y > x)
			(gpu ? t->v[i].g : t->v[i].h)[p] += y - x;
	}
}

/* [a, b) of `name` (a sample: a == b, counted once) in the part of each
 * step of t's rank before it reached the collectives, into `where`. */
static void before_arrival(struct step_stats *s, struct table *t, struct cv_map *where,
			   int32_t name, uint64_t a, uint64_t b)
{
	const struct conv_step_set *set = t->rk->set;
	const uint64_t *end = set->start + set->n;
	uint32_t lo = 0, hi = set->n;

	if (name < 0)
		return;
	while (lo < hi) { /* the first step ending after a */
		uint32_t mid = lo + (hi - lo) / 2;

		if (end[mid] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t k = lo; k < set->n && set->start[k] <= b; k++) {
		uint64_t until = t->rk->x[k].arrive ? t->rk->x[k].arrive : end[k];
		uint64_t x = a > set->start[k] ? a : set->start[k], y = b < until ? b : until;
		uint64_t *v;

		if (a == b ? a < set->start[k] || a >= until : y <= x)
			continue;
		v = cv_map_put(where, t->late[k] >= 0 ? (uint64_t)t->late[k] : USUAL + (uint64_t)(t - s->t),
			       (uint64_t)name, NULL);
		if (!v) {
			s->oom = 1;
			return;
		}
		*v += a == b ? 1 : y - x;
	}
}

/* Own time [a, b) of a frame of class cls on the walked thread. */
static void own_time(struct step_stats *s, const struct frame *f, uint64_t a, uint64_t b)
{
	if (b <= a)
		return;
	if (f->cls >= 0)
		spread(s->walk, 0, f->cls, a, b);
	if (s->walk->late)
		before_arrival(s, s->walk, &s->py_where, f->name, a, b);
}

static void pop_until(struct step_stats *s, uint64_t t)
{
	while (s->depth && s->stk[s->depth - 1].end <= t) {
		const struct frame *f = &s->stk[--s->depth];

		own_time(s, f, f->cur, f->end);
		if (s->depth && s->stk[s->depth - 1].cur < f->end)
			s->stk[s->depth - 1].cur = f->end;
	}
}

/* A bare function name: the last part of a qualified one. */
static int bare_is(struct evlog_str f, const char *name)
{
	const char *dot = f.len ? memrchr(f.ptr, '.', f.len) : NULL;
	size_t off = dot ? (size_t)(dot + 1 - f.ptr) : 0;

	return f.len - off == strlen(name) && !memcmp(f.ptr + off, name, f.len - off);
}

static int file_has(struct evlog_str file, const char *part)
{
	return file.len && memmem(file.ptr, file.len, part, strlen(part));
}

/* A call's class (enum hpart), or -1: its caller's. */
static int classify(const struct conv_item *it)
{
	static const char *const compute[] = { "forward", "_call_impl", "_wrapped_call_impl",
					       "backward", "generate", "training_step" };
	const struct evlog_event *e = it->ev;

	if (cv_is_collective(e))
		return H_COMM;
	if (e->type == EV_PY_ENTER) {
		struct evlog_str f = e->u.py_enter.func, file = e->u.py_enter.file;

		if (file_has(file, "dataloader") && (bare_is(f, "__next__") || bare_is(f, "_next_data")))
			return H_INPUT;
		if (file_has(file, "/optim/") || file_has(file, "/autograd/"))
			return H_COMPUTE;
		for (size_t i = 0; i < sizeof(compute) / sizeof(compute[0]); i++)
			if (bare_is(f, compute[i]))
				return H_COMPUTE;
		return -1;
	}
	return strstr(it->category, "cuda") ? H_COMPUTE : -1;
}

/* "func (file:line)" of a Python call, interned; -1 when not kept. */
static int32_t where_name(struct step_stats *s, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;
	char buf[512];
	int n;

	if (!s->walk->late || e->type != EV_PY_ENTER)
		return -1;
	struct evlog_str file = e->u.py_enter.file;
	const char *base = file.len ? memrchr(file.ptr, '/', file.len) : NULL;
	size_t off = base ? (size_t)(base + 1 - file.ptr) : 0;

	n = snprintf(buf, sizeof(buf), "%s (%.*s:%u)", it->name, (int)(file.len - off),
		     file.ptr ? file.ptr + off : "", e->u.py_enter.line);
	int64_t id = cv_strtab_intern(&s->names, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);

	if (id < 0)
		s->oom = 1;
	return (int32_t)id;
}

/* Done with the walked thread: its open frames end. */
static void walk_end(struct step_stats *s)
{
	if (s->walk)
		pop_until(s, UINT64_MAX);
	s->walk = NULL;
	s->depth = 0;
}

/* A sample of the walked thread: its leaf frame, for "where". */
static void sample(struct step_stats *s, const struct conv_item *it)
{
	const char *leaf = strrchr(it->stack_folded, ';');

	leaf = leaf ? leaf + 1 : it->stack_folded;
	int64_t id = cv_strtab_intern(&s->names, leaf, strlen(leaf));

	if (id < 0)
		s->oom = 1;
	else
		before_arrival(s, s->walk, &s->native_where, (int32_t)id, it->start_ns, it->start_ns);
}

/* An item of the thread that drives t's steps. */
static int walk_item(struct step_stats *s, struct table *t, const struct conv_item *it)
{
	if (s->walk != t || s->w_pid != it->pid || s->w_tid != it->tid) {
		walk_end(s);
		s->walk = t;
		s->w_pid = it->pid;
		s->w_tid = it->tid;
	}
	if (it->stack_folded) {
		if (t->late && it->ev->type == EV_CPU_SAMPLE)
			sample(s, it);
		return 0;
	}
	if (!it->dur_ns)
		return 0;
	pop_until(s, it->start_ns);
	if (s->depth) {
		struct frame *top = &s->stk[s->depth - 1];

		own_time(s, top, top->cur, it->start_ns);
		top->cur = it->start_ns;
	}
	if (lt_grow((void **)&s->stk, &s->cap_stk, s->depth + 1, sizeof(*s->stk), 64))
		return -1;
	int cls = classify(it);

	if (cls < 0 && s->depth)
		cls = s->stk[s->depth - 1].cls;
	s->stk[s->depth++] = (struct frame){ .end = it->start_ns + it->dur_ns, .cur = it->start_ns,
					     .cls = cls, .name = where_name(s, it) };
	return s->oom ? -1 : 0;
}

static int gpu_part(const struct conv_item *it)
{
	const char *c = it->category;

	if (!strcmp(c, "kernel"))
		return strncmp(it->name, "nccl", 4) ? G_COMPUTE : G_NCCL;
	return strcmp(c, "gpu_memcpy") && strcmp(c, "gpu_memset") ? -1 : G_COPY;
}

int step_stats_item(struct step_stats *s, const struct conv_item *it)
{
	struct table *t;
	int p;

	if (it->step)
		return add_step(s, it);
	if (it->track == CONV_TRACK_STREAM) {
		walk_end(s);
		if (!it->dur_ns || (p = gpu_part(it)) < 0 || !(t = table_of(s, it->pid)) || !t->n)
			return 0;
		t->has_gpu = 1;
		spread(t, 1, p, it->start_ns, it->start_ns + it->dur_ns);
		return 0;
	}
	if (!(t = table_of(s, it->pid)) || !t->n || it->tid != t->tid)
		return 0;
	/* The driving thread inside the CUDA runtime or driver: launching. */
	if (it->dur_ns && strstr(it->category, "cuda") && strcmp(it->category, "cuda_sync"))
		spread(t, 1, G_LAUNCH, it->start_ns, it->start_ns + it->dur_ns);
	return walk_item(s, t, it);
}

void step_stats_end(struct step_stats *s)
{
	walk_end(s);
}

/* ------------------------------------------------------------ the parts */

/* A step's parts, capped in order so that they add up to it. */
static void gpu_parts(const struct step *st, uint64_t out[G_N + 1])
{
	uint64_t left = st->end - st->start;

	for (int p = 0; p < G_N; p++) {
		out[p] = st->g[p] < left ? st->g[p] : left;
		left -= out[p];
	}
	out[G_N] = left;
}

enum { X_COMPUTE, X_COMM, X_WAIT, X_INPUT, X_OTHER, X_N };

/* Host parts: compute, communication, waiting, input, other. */
static void host_parts(const struct table *t, uint32_t i, uint64_t out[X_N])
{
	const struct step *st = &t->v[i];
	uint64_t left = st->end - st->start, coll = st->h[H_COMM];
	uint64_t wait = 0;
	int64_t k = -1;

	if (t->rk) { /* the rank's step of that number */
		const struct conv_step_set *set = t->rk->set;

		if (st->num >= set->first && st->num - set->first < set->n)
			k = st->num - set->first;
		if (set->from_markers)
			for (k = 0; k < set->n && set->start[k] != st->start; k++)
				;
		if (k >= 0 && k < set->n)
			wait = t->rk->x[k].wait_ns;
	}
	/* DDP waits inside backward (compute): what it waited comes out of it */
	uint64_t over = wait > coll ? wait - coll : 0, comp = st->h[H_COMPUTE];
	uint64_t raw[X_N - 1] = { comp - (over < comp ? over : comp), coll - (wait < coll ? wait : coll),
				  (wait < coll ? wait : coll) + (over < comp ? over : comp), st->h[H_INPUT] };

	for (int p = 0; p < X_OTHER; p++) {
		out[p] = raw[p] < left ? raw[p] : left;
		left -= out[p];
	}
	out[X_OTHER] = left;
}

/* Each label fits 80 columns after the figures' 29 (51 at most). */
static const char *const host_names[X_N] = {
	"compute (forward, backward, optimizer; CUDA calls)",
	"communication (torch.distributed/nccl* collectives)",
	"waiting in collectives for a later rank",
	"input (DataLoader __next__)",
	"other host time (the loop's own and other calls)",
};

static void print_breakdown(const struct table *t, FILE *out, uint64_t total)
{
	static const char *const gnames[G_N + 1] = {
		"collectives (NCCL kernels)", "GPU compute (kernels)", "copies and sets",
		"GPU idle, host launching (CUDA calls, its thread)",
		"idle: no GPU work, no launch (input, Python, waits)",
	};
	uint64_t gsum[G_N + 1] = { 0 }, hsum[X_N] = { 0 };

	for (uint32_t i = 0; i < t->n; i++) {
		uint64_t g[G_N + 1], h[X_N];

		gpu_parts(&t->v[i], g);
		host_parts(t, i, h);
		for (int p = 0; p <= G_N; p++)
			gsum[p] += g[p];
		for (int p = 0; p < X_N; p++)
			hsum[p] += h[p];
	}
	fprintf(out, "  step time breakdown (adds up to the steps' %.3f ms):\n", total / 1e6);
	if (t->has_gpu)
		for (int p = 0; p <= G_N; p++)
			fprintf(out, "    %12.3f ms %6.1f%%  %s\n", gsum[p] / 1e6,
				total ? 100.0 * gsum[p] / total : 0.0, gnames[p]);
	if (t->has_gpu && hsum[X_OTHER] == total)
		return;
	if (t->has_gpu)
		fprintf(out, "  its driving thread's time:\n");
	for (int p = 0; p < X_N; p++)
		fprintf(out, "    %12.3f ms %6.1f%%  %s\n", hsum[p] / 1e6,
			total ? 100.0 * hsum[p] / total : 0.0, host_names[p]);
}

static void print_slowest(const struct table *t, FILE *out, int top, uint64_t p50)
{
	uint32_t *idx = malloc(t->n * sizeof(*idx));

	if (!idx)
		return;
	for (uint32_t i = 0; i < t->n; i++)
		idx[i] = i;
	/* Partial selection: top is small. */
	uint32_t k = (uint32_t)top < t->n ? (uint32_t)top : t->n;

	for (uint32_t i = 0; i < k; i++)
		for (uint32_t j = i + 1; j < t->n; j++) {
			const struct step *a = &t->v[idx[i]], *b = &t->v[idx[j]];

			if (b->end - b->start > a->end - a->start) {
				uint32_t x = idx[i];

				idx[i] = idx[j];
				idx[j] = x;
			}
		}
	fprintf(out, "  slowest steps (what differs from the median step is in its parts):\n");
	if (t->has_gpu)
		fprintf(out, "    %7s %10s %6s %9s %9s %9s %9s %9s\n", "step", "ms", "x p50", "nccl",
			"compute", "copies", "launching", "idle");
	else
		fprintf(out, "    %7s %10s %6s %9s %9s %9s %9s %9s\n", "step", "ms", "x p50", "compute",
			"comm", "wait", "input", "other");
	for (uint32_t i = 0; i < k; i++) {
		const struct step *st = &t->v[idx[i]];
		uint64_t g[G_N + 1], h[X_N], *v = g;

		gpu_parts(st, g);
		host_parts(t, idx[i], h);
		if (!t->has_gpu)
			v = h;
		fprintf(out, "    %7u %10.3f %6.2f %9.3f %9.3f %9.3f %9.3f %9.3f\n", st->num,
			(st->end - st->start) / 1e6, p50 ? (double)(st->end - st->start) / p50 : 0.0,
			v[0] / 1e6, v[1] / 1e6, v[2] / 1e6, v[3] / 1e6, v[4] / 1e6);
	}
	free(idx);
}

/* Warm-up (the first steps over twice the median) and the time between
 * steps (evaluation, checkpoints: each gap over half a median step). */
static void print_phases(const struct table *t, FILE *out, uint64_t p50)
{
	uint32_t warm = 0, gaps = 0;
	uint64_t warm_ns = 0, gap_ns = 0, longest = 0;
	uint32_t after = 0;

	while (warm < t->n && t->v[warm].end - t->v[warm].start > 2 * p50)
		warm_ns += t->v[warm].end - t->v[warm].start, warm++;
	for (uint32_t i = 1; i < t->n; i++) {
		uint64_t g = t->v[i].start > t->v[i - 1].end ? t->v[i].start - t->v[i - 1].end : 0;

		if (g * 2 <= p50)
			continue;
		gaps++;
		gap_ns += g;
		if (g > longest) {
			longest = g;
			after = t->v[i - 1].num;
		}
	}
	if (warm == 1)
		fprintf(out, "    warm-up: the first step took %.1fx the median step\n",
			p50 ? (double)warm_ns / p50 : 0.0);
	else if (warm)
		fprintf(out, "    warm-up: the first %u steps took %.1fx the median step\n", warm,
			p50 ? (double)warm_ns / warm / p50 : 0.0);
	if (gaps)
		fprintf(out, "    between steps: %u gap%s, %.3f ms in all (the longest %.3f ms, after "
			"step %u: evaluation, checkpoints, ...)\n", gaps, gaps > 1 ? "s" : "",
			gap_ns / 1e6, longest / 1e6, after);
}

static void print_table(const struct table *t, FILE *out, int top, int several)
{
	if (several)
		fprintf(out, "\nSteps, %s: %s\n", *t->label ? t->label : "pid", t->evidence);
	else
		fprintf(out, "\nSteps: %s\n", t->evidence);
	if (!t->n)
		return;
	uint64_t *d = malloc(t->n * sizeof(*d)), total = 0;

	if (!d)
		return;
	for (uint32_t i = 0; i < t->n; i++)
		total += d[i] = t->v[i].end - t->v[i].start;
	qsort(d, t->n, sizeof(*d), cmp_u64);
	uint64_t p50 = d[t->n / 2], p99 = d[(uint32_t)((t->n - 1) * 0.99 + 0.5)];
	char where[96];

	if (t->on_stream)
		snprintf(where, sizeof(where), "GPU %u stream %u", t->device, t->stream);
	else if (*t->label)
		snprintf(where, sizeof(where), "thread %u of %s", t->tid, t->label);
	else
		snprintf(where, sizeof(where), "thread %u", t->tid);
	/* two lines, to fit 80 columns */
	fprintf(out, "  %u steps on %s: mean %.3f ms, p50 %.3f ms, p99 %.3f ms\n"
		"    min %.3f ms, max %.3f ms%s\n", t->n, where, total / 1e6 / t->n, p50 / 1e6,
		p99 / 1e6, d[0] / 1e6, d[t->n - 1] / 1e6, t->dropped ? " (more steps not counted)" : "");
	free(d);
	print_phases(t, out, p50);
	print_breakdown(t, out, total);
	print_slowest(t, out, top < 5 ? top : 5, p50);
}

void step_stats_print(const struct step_stats *s, FILE *out, int top)
{
	const struct conv_steps *st = s->m ? s->m->steps : NULL;
	size_t n = s->nt - s->host_first;

	if (!n) {
		fprintf(out, "\nSteps: %s\n", st ? st->evidence : "not looked for");
		return;
	}
	for (size_t i = s->host_first; i < s->nt; i++)
		print_table(&s->t[i], out, top, n > 1);
}

/* ------------------------------------------------------------ the job */

struct where {
	int32_t py, native;          /* names, -1: none */
	double py_ns, usual_ns, native_n;
};

static const struct table *table_of_rank(const struct step_stats *s, const struct conv_rank *r)
{
	for (size_t i = 0; i < s->nt; i++)
		if (s->t[i].rk == r)
			return &s->t[i];
	return NULL;
}

/* In each straggler's late step: the name it spent most beyond its usual
 * (its mean over the rank's other steps), from the map of what was summed. */
static void most_beyond(const struct step_stats *s, const struct cv_map *m, struct where *w,
			int py)
{
	const struct conv_job *j = s->job;

	for (size_t i = 0; i < m->n; i++) {
		const struct cv_map_ent *e = &m->ents[i];

		if (e->a >= j->n_stragglers)
			continue;
		const struct table *t = table_of_rank(s, &j->ranks[j->stragglers[e->a].who]);
		const uint64_t *u = t ? cv_map_get(m, USUAL + (uint64_t)(t - s->t), e->b) : NULL;
		double usual = u && t->n_usual ? (double)*u / t->n_usual : 0, more = e->val - usual;
		struct where *x = &w[e->a];

		if (py && (x->py < 0 || more > x->py_ns - x->usual_ns)) {
			x->py = (int32_t)e->b;
			x->py_ns = e->val;
			x->usual_ns = usual;
		} else if (!py && more > 0 && (x->native < 0 || more > x->native_n)) {
			x->native = (int32_t)e->b;
			x->native_n = more;
		}
	}
}

static struct where *wheres(const struct step_stats *s)
{
	uint32_t n = s->job->n_stragglers;
	struct where *w = calloc(n + 1, sizeof(*w));

	if (!w)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		w[i].py = w[i].native = -1;
	most_beyond(s, &s->py_where, w, 1);
	most_beyond(s, &s->native_where, w, 0);
	return w;
}

static void where_text(const struct step_stats *s, const struct where *w, uint64_t late,
		       char *buf, size_t n)
{
	int o;

	if (w->py >= 0)
		o = snprintf(buf, n, "%s %.1f ms (usually %.1f)%s", cv_strtab_get(&s->names, (uint32_t)w->py),
			     w->py_ns / 1e6, w->usual_ns / 1e6,
			     (w->py_ns - w->usual_ns) * 2 < late ? ", most of the lateness not in one "
								   "Python call's own time" : "");
	else
		o = snprintf(buf, n, "no Python call recorded before the collectives");
	if (o < 0 || (size_t)o >= n)
		return;
	if (w->native >= 0)
		snprintf(buf + o, n - (size_t)o, "; native: %s (%.1f CPU samples more than usually)",
			 cv_strtab_get(&s->names, (uint32_t)w->native), w->native_n);
	else
		snprintf(buf + o, n - (size_t)o, "; native: no more CPU samples than usually (off CPU)");
}

void step_stats_print_job(const struct step_stats *s, FILE *out)
{
	const struct conv_job *j = s->job;
	struct where *w;
	char buf[512];

	if (!j || !(w = wheres(s)))
		return;
	fprintf(out, "\nRanks: %u with steps; iterations %u-%u compared on all (%u)\n", j->n_ranks,
		j->first, j->last, j->n_compared);
	fprintf(out, "  %6s %8s %-14s %6s %9s %9s %9s %9s %9s %9s\n", "rank", "pid", "host", "steps",
		"mean ms", "compute", "comm", "wait", "input", "other");
	for (uint32_t r = 0; r < j->n_ranks; r++) {
		const struct table *t = table_of_rank(s, &j->ranks[r]);
		uint64_t sum[X_N] = { 0 }, total = 0;

		if (!t || !t->n)
			continue;
		for (uint32_t i = 0; i < t->n; i++) {
			uint64_t h[X_N];

			host_parts(t, i, h);
			total += t->v[i].end - t->v[i].start;
			for (int p = 0; p < X_N; p++)
				sum[p] += h[p];
		}
		fprintf(out, "  %6d %8u %-14.14s %6u %9.3f", j->ranks[r].rank, t->pid, t->host, t->n,
			total / 1e6 / t->n);
		for (int p = 0; p < X_N; p++)
			fprintf(out, " %9.3f", sum[p] / 1e6 / t->n);
		fputc('\n', out);
	}
	fprintf(out, "  (ms per step: mean; parts as in each rank's breakdown)\n");
	if (j->n_stragglers) {
		fprintf(out, "Stragglers: a rank reaching the collectives %.1f ms or more after the "
			"others (their median)\n  %6s %6s %8s %9s  %s\n", j->threshold_ns / 1e6, "step",
			"rank", "pid", "late ms", "where: its most beyond its usual step, before the collectives");
		for (uint32_t i = 0; i < j->n_stragglers; i++) {
			const struct conv_straggler *g = &j->stragglers[i];

			where_text(s, &w[i], g->late_ns, buf, sizeof(buf));
			fprintf(out, "  %6u %6d %8u %9.3f  %s\n", g->step, j->ranks[g->who].rank,
				j->ranks[g->who].pid, g->late_ns / 1e6, buf);
		}
	}
	fprintf(out, "Verdict: %s\n", j->verdict);
	free(w);
}

static int put(struct json_object *o, const char *k, struct json_object *v)
{
	if (!v)
		return -1;
	json_object_object_add(o, k, v);
	return 0;
}

static struct json_object *ms(uint64_t ns)
{
	return json_object_new_double(ns / 1e6);
}

static struct json_object *table_json(const struct table *t)
{
	static const char *const keys[X_N] = { "compute_ms", "comm_ms", "wait_ms", "input_ms",
					       "other_ms" };
	struct json_object *o = json_object_new_object(), *steps = json_object_new_array();

	if (o)
		json_object_object_add(o, "rank", NULL); /* null: not a rank; set below */
	if (!o || !steps || (t->rank >= 0 && put(o, "rank", json_object_new_int(t->rank))) ||
	    put(o, "pid", json_object_new_int64(t->pid)) ||
	    put(o, "tid", json_object_new_int64(t->tid)) ||
	    put(o, "host", json_object_new_string(t->host)) ||
	    put(o, "evidence", json_object_new_string(t->evidence))) {
		json_object_put(o);
		json_object_put(steps);
		return NULL;
	}
	json_object_object_add(o, "steps", steps);
	for (uint32_t i = 0; i < t->n; i++) {
		struct json_object *x = json_object_new_object();
		uint64_t h[X_N];

		host_parts(t, i, h);
		if (!x || json_object_array_add(steps, x)) {
			json_object_put(x);
			json_object_put(o);
			return NULL;
		}
		if (put(x, "step", json_object_new_int64(t->v[i].num)) ||
		    put(x, "start_ns", json_object_new_int64((int64_t)(t->v[i].start + (uint64_t)t->off))) ||
		    put(x, "dur_ms", ms(t->v[i].end - t->v[i].start))) {
			json_object_put(o);
			return NULL;
		}
		for (int p = 0; p < X_N; p++)
			if (put(x, keys[p], ms(h[p]))) {
				json_object_put(o);
				return NULL;
			}
	}
	return o;
}

static int stragglers_json(const struct step_stats *s, struct json_object *root)
{
	const struct conv_job *j = s->job;
	struct json_object *a = json_object_new_array();
	struct where *w = j ? wheres(s) : NULL;
	char buf[512];
	int rc = 0;

	if (!a || (j && !w)) {
		json_object_put(a);
		free(w);
		return -1;
	}
	json_object_object_add(root, "stragglers", a);
	for (uint32_t i = 0; j && rc == 0 && i < j->n_stragglers; i++) {
		const struct conv_straggler *g = &j->stragglers[i];
		struct json_object *x = json_object_new_object();

		where_text(s, &w[i], g->late_ns, buf, sizeof(buf));
		if (!x || json_object_array_add(a, x)) {
			json_object_put(x);
			rc = -1;
			break;
		}
		rc = put(x, "step", json_object_new_int64(g->step)) ||
		     put(x, "rank", json_object_new_int(j->ranks[g->who].rank)) ||
		     put(x, "pid", json_object_new_int64(j->ranks[g->who].pid)) ||
		     put(x, "late_ms", ms(g->late_ns)) || put(x, "where", json_object_new_string(buf))
			     ? -1 : 0;
	}
	free(w);
	if (rc)
		return -1;
	if (!j)
		return put(root, "verdict", json_object_new_string("not compared: fewer than two "
								   "ranks with steps"));
	return put(root, "verdict", json_object_new_string(j->verdict)) ||
	       put(root, "threshold_ms", ms(j->threshold_ns)) ||
	       put(root, "iterations_compared", json_object_new_int64(j->n_compared));
}

int step_stats_json(const struct step_stats *s, struct json_object *root)
{
	struct json_object *ranks = json_object_new_array();

	if (!ranks)
		return -1;
	json_object_object_add(root, "ranks", ranks);
	/* the job's ranks by rank, then other processes with steps */
	for (uint32_t r = 0; s->job && r < s->job->n_ranks; r++) {
		const struct table *t = table_of_rank(s, &s->job->ranks[r]);
		struct json_object *o = t ? table_json(t) : NULL;

		if (t && (!o || json_object_array_add(ranks, o))) {
			json_object_put(o);
			return -1;
		}
	}
	for (size_t i = 0; i < s->nt; i++) {
		struct json_object *o;

		if (s->t[i].rk)
			continue;
		if (!(o = table_json(&s->t[i])) || json_object_array_add(ranks, o)) {
			json_object_put(o);
			return -1;
		}
	}
	return stragglers_json(s, root);
}
