/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Summary: where did the time go, per source. Aggregates (category, name)
 * pairs while items stream by and prints aligned top-N tables at the end of
 * each host. Memory grows with distinct names only (and the deepest nesting
 * of one track).
 *
 * Items arrive track by track, sorted by start, parents before children, so
 * one stack of open items per track gives each Python function its self time
 * (inclusive less its Python callees) and counts a recursive function's
 * inclusive time once. Percentages are of wall time: a row's time over the
 * profile's duration times the tracks (threads, streams) it ran on, so no
 * row can pass 100%, unlike a share of summed inclusive times.
 */
#include "converter/output/summary.h"
#include "converter/cv_util.h"
#include "converter/output/evview.h"
#include "converter/pairing/step_stats.h"
#include "converter/pairing/steps.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct agg {
	uint64_t count, total, max;
	uint64_t self;        /* Python functions: total less Python callees */
	uint32_t tracks;      /* distinct tracks it ran on */
	uint32_t last_track;  /* track_seq when last seen */
	uint32_t open;        /* frames of it open on the current track */
};

/* An item still open on the current track. */
struct frame {
	uint64_t end, dur, child; /* child: time in Python callees (Python frames) */
	uint32_t key;
	int32_t py;               /* nearest Python frame at or below, or -1 */
};

struct track_id {
	enum conv_track_kind kind;
	uint32_t pid, tid, device, stream;
};

struct sm {
	struct conv_sink sink;
	FILE *out;
	int top;
	int json;                 /* one JSON object at the end, no tables */
	struct json_object *root, *hosts;
	const struct conv_host_meta *meta;
	struct cv_strtab keys;      /* "category\x1fname" */
	struct agg *v;
	size_t cap;
	uint64_t items;
	struct step_stats *steps;
	struct track_id track;
	uint32_t track_seq;       /* numbers the tracks of a host from 1 */
	struct frame *stk;
	size_t depth, stk_cap;
	int width;                /* terminal columns a row may take */
	uint32_t own_pid, own_tid; /* the thread own_thread last looked up ... */
	int own;                  /* ... is the profiler's own */
};

static int is_py(const char *c) { return !strcmp(c, "python_function"); }

/* Pop the frames that ended by `t`, settling their self time. */
static void close_until(struct sm *s, uint64_t t)
{
	while (s->depth && s->stk[s->depth - 1].end <= t) {
		const struct frame *f = &s->stk[--s->depth];
		struct agg *a = &s->v[f->key];

		a->open--;
		a->self += f->dur > f->child ? f->dur - f->child : 0;
	}
}

static void enter_track(struct sm *s, const struct conv_item *it)
{
	struct track_id t = { it->track, it->pid, it->tid, it->device, it->stream };

	if (s->track_seq && !memcmp(&t, &s->track, sizeof(t)))
		return;
	close_until(s, UINT64_MAX);
	s->track = t;
	s->track_seq++;
}

/* A thread of the profiler's own in a target (EVLOG_MARK_OWN_THREAD):
 * its time is not the job's, in no table. */
static int own_thread(struct sm *s, const struct conv_item *it)
{
	if (it->track != CONV_TRACK_THREAD)
		return 0;
	if (it->pid != s->own_pid || it->tid != s->own_tid) {
		s->own_pid = it->pid;
		s->own_tid = it->tid;
		const struct conv_thread *t = conv_meta_thread(s->meta, it->pid, it->tid);
		s->own = t && t->own;
	}
	return s->own;
}

static int sm_begin(void *ctx, const struct conv_host_meta *m)
{
	struct sm *s = ctx;

	s->meta = m;
	s->own_pid = s->own_tid = UINT32_MAX;
	if (step_stats_begin(s->steps, m)) {
		snprintf(s->sink.err, sizeof(s->sink.err), "out of memory");
		return -1;
	}
	memset(&s->track, 0, sizeof(s->track));
	s->track_seq = 0;
	s->depth = 0;
	cv_strtab_free(&s->keys);
	free(s->v);
	s->v = NULL;
	s->cap = 0;
	s->items = 0;
	return 0;
}

/* The aggregate for (cat, name), made on first sight; NULL when out of memory. */
static struct agg *agg_of(struct sm *s, const char *cat, const char *name)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s\x1f%s", cat, name);
	int64_t i = cv_strtab_intern(&s->keys, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);

	if (i < 0)
		return NULL;
	if ((size_t)i >= s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		struct agg *nv = realloc(s->v, nc * sizeof(*nv));

		if (!nv)
			return NULL;
		memset(nv + s->cap, 0, (nc - s->cap) * sizeof(*nv));
		s->v = nv;
		s->cap = nc;
	}
	return &s->v[i];
}

static int add(struct sm *s, const char *cat, const char *name, uint64_t dur)
{
	struct agg *a = agg_of(s, cat, name);

	if (!a)
		return -1;
	a->count++;
	a->total += dur;
	if (dur > a->max)
		a->max = dur;
	return 0;
}

/* A timed item on the current track: nested under the frames still open. */
static int add_timed(struct sm *s, const struct conv_item *it, const char *name)
{
	int py = is_py(it->category);
	struct agg *a = agg_of(s, it->category, name);

	if (!a)
		return -1;
	close_until(s, it->start_ns);
	if (s->depth == s->stk_cap) {
		size_t nc = s->stk_cap ? s->stk_cap * 2 : 64;
		struct frame *nf = realloc(s->stk, nc * sizeof(*nf));

		if (!nf)
			return -1;
		s->stk = nf;
		s->stk_cap = nc;
	}
	int32_t below = s->depth ? s->stk[s->depth - 1].py : -1;

	if (py && below >= 0)
		s->stk[below].child += it->dur_ns;
	a->count++;
	if (!a->open) /* an outer call of the same function already counts this time */
		a->total += it->dur_ns;
	if (it->dur_ns > a->max)
		a->max = it->dur_ns;
	if (a->last_track != s->track_seq) {
		a->last_track = s->track_seq;
		a->tracks++;
	}
	a->open++;
	s->stk[s->depth] = (struct frame){ .end = it->start_ns + it->dur_ns, .dur = it->dur_ns,
					   .key = (uint32_t)(a - s->v),
					   .py = py ? (int32_t)s->depth : below };
	s->depth++;
	return 0;
}

/* Functions that share a bare name are told apart by where they are
 * defined: "name\x1ffile:first line". */
static const char *py_key(const struct conv_item *it, char *buf, size_t bufsz)
{
	const struct evlog_event *e = it->ev;

	if (!e || e->type != EV_PY_ENTER)
		return it->name;
	snprintf(buf, bufsz, "%s\x1f%.*s:%u", it->name, (int)e->u.py_enter.file.len,
		 e->u.py_enter.file.ptr ? e->u.py_enter.file.ptr : "", e->u.py_enter.line);
	return buf;
}

static int sm_item(void *ctx, const struct conv_item *it)
{
	struct sm *s = ctx;
	int rc;

	s->items++;
	if (own_thread(s, it))
		return 0;
	if (step_stats_item(s->steps, it)) {
		rc = -1;
	} else if (it->step) {
		rc = 0; /* in the steps table, not among the calls */
	} else if (it->stack_folded) {
		const char *leaf = strrchr(it->stack_folded, ';');
		int py = it->ev && it->ev->type == EV_PY_SAMPLE;

		rc = add(s, py ? "#pyleaf" : "#cpuleaf", leaf ? leaf + 1 : it->stack_folded, 0) ||
		     add(s, py ? "#pystack" : "#cpustack", it->stack_folded, 0);
	} else if (it->ev && cv_view_of(it->ev->type)->instant) {
		rc = 0; /* no time to count */
	} else {
		char buf[1024];

		enter_track(s, it);
		rc = add_timed(s, it, is_py(it->category) ? py_key(it, buf, sizeof(buf)) : it->name);
	}
	if (rc)
		snprintf(s->sink.err, sizeof(s->sink.err), "out of memory");
	return rc ? -1 : 0;
}

struct row {
	const char *name;
	const struct agg *a;
};

static int by_total(const void *x, const void *y)
{
	const struct agg *a = ((const struct row *)x)->a, *b = ((const struct row *)y)->a;

	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return a->count > b->count ? -1 : a->count < b->count;
}

typedef int (*cat_pred)(const char *cat);

static int is_kernel(const char *c) { return !strcmp(c, "kernel"); }
static int is_mem(const char *c) { return !strcmp(c, "gpu_memcpy") || !strcmp(c, "gpu_memset"); }
static int is_sys(const char *c) { return !strcmp(c, "syscall"); }
static int is_cpuleaf(const char *c) { return !strcmp(c, "#cpuleaf"); }
static int is_cpustack(const char *c) { return !strcmp(c, "#cpustack"); }
static int is_pyleaf(const char *c) { return !strcmp(c, "#pyleaf"); }
static int is_pystack(const char *c) { return !strcmp(c, "#pystack"); }
static int is_lib(const char *c)
{
	return c[0] != '#' && !is_kernel(c) && !is_mem(c) && !is_sys(c) && !is_py(c) &&
	       strcmp(c, "user_annotation") && strcmp(c, "cuda_sync") && strcmp(c, "overhead");
}

/* Collect the rows of one table, sorted. */
static size_t rows_of(const struct sm *s, cat_pred pred, struct row *rows, uint64_t *sum)
{
	size_t n = 0;

	*sum = 0;
	for (size_t i = 0; i < s->keys.n; i++) {
		const char *k = cv_strtab_get(&s->keys, (uint32_t)i);
		const char *sep = strchr(k, '\x1f');
		char cat[64];
		size_t cl = sep ? (size_t)(sep - k) : 0;

		if (!sep || cl >= sizeof(cat))
			continue;
		memcpy(cat, k, cl);
		cat[cl] = 0;
		if (!pred(cat))
			continue;
		rows[n].name = sep + 1;
		rows[n].a = &s->v[i];
		*sum += s->v[i].total ? s->v[i].total : s->v[i].count;
		n++;
	}
	qsort(rows, n, sizeof(*rows), by_total);
	return n;
}

/* Names may hold anything: one line per row, at most `w` columns; a longer
 * name keeps its start (a function's or kernel's name says most there). */
static void put_name(FILE *f, const char *s, int w)
{
	size_t n = strlen(s), keep = n <= (size_t)w ? n : w > 3 ? (size_t)w - 3 : 0;

	for (size_t i = 0; i < keep; i++)
		fputc((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i], f);
	if (keep < n)
		fputs("...", f);
	fputc('\n', f);
}

/* A folded stack (root;...;leaf) in `w` columns: a long one keeps its leaf
 * end from a frame's start (the leaf and its callers say where time went;
 * the root, <module>;main, is the same in every row). */
static void put_stack(FILE *f, const char *s, int w)
{
	size_t n = strlen(s);

	if (w <= 3 || n <= (size_t)w) {
		put_name(f, s, w);
		return;
	}
	const char *tail = s + n - ((size_t)w - 3), *semi = strchr(tail, ';');

	if (semi && semi[1])
		tail = semi + 1;
	fputs("...;", f);
	put_name(f, tail, w - 4);
}

/* "name\x1ffile:line" as "name (file:line)" in `w` columns: a long file
 * loses its start, which is the least telling part of a path. */
static void put_py_name(FILE *f, const char *key, int w)
{
	const char *sep = strchr(key, '\x1f');
	char buf[2048];

	if (!sep) {
		put_name(f, key, w);
		return;
	}
	size_t nl = (size_t)(sep - key), ll = strlen(sep + 1);
	size_t room = (size_t)w > nl + 3 ? (size_t)w - nl - 3 : 0; /* " (" and ")" */
	const char *loc = sep + 1, *dots = "";

	if (ll > room && room >= 12) { /* else the end is cut as any name */
		loc += ll - (room - 3);
		dots = "...";
	}
	snprintf(buf, sizeof(buf), "%.*s (%s%s)", (int)nl, key, dots, loc);
	put_name(f, buf, w);
}

static double pct(uint64_t t, uint64_t wall) { return wall ? 100.0 * t / wall : 0.0; }

/* A row's wall time: the profile's duration on each track it ran on. */
static uint64_t wall_of(const struct sm *s, const struct agg *a)
{
	return (s->meta->stop_ns - s->meta->start_ns) * (a->tracks ? a->tracks : 1);
}

static void print_timed(struct sm *s, const char *title, cat_pred pred, struct row *rows)
{
	uint64_t sum;
	size_t n = rows_of(s, pred, rows, &sum);

	if (!n)
		return;
	fprintf(s->out, "\n%s (%zu distinct)\n  %%wall: of the profile's duration on each thread "
		"or stream it ran on\n", title, n);
	fprintf(s->out, "  %10s %6s %9s %10s %10s  %s\n", "total ms", "%wall", "count", "avg us",
		"max us", "name");
	for (size_t i = 0; i < n && i < (size_t)s->top; i++) {
		const struct agg *a = rows[i].a;

		int w = fprintf(s->out, "  %10.3f %6.1f %9llu %10.3f %10.3f  ", a->total / 1e6,
				pct(a->total, wall_of(s, a)), (unsigned long long)a->count,
				a->count ? a->total / 1e3 / a->count : 0.0, a->max / 1e3);
		put_name(s->out, rows[i].name, s->width - (w > 0 ? w : 0));
	}
}

static void print_python(struct sm *s, struct row *rows)
{
	uint64_t sum;
	size_t n = rows_of(s, is_py, rows, &sum);

	if (!n)
		return;
	fprintf(s->out, "\nPython functions by inclusive time (%zu distinct)\n  recursion counted "
		"once; %%wall: of the profile's duration per thread it ran on\n", n);
	fprintf(s->out, "  %10s %6s %10s %6s %9s %10s  %s\n", "incl ms", "%wall", "self ms", "%wall",
		"calls", "avg us", "function (file:line)");
	for (size_t i = 0; i < n && i < (size_t)s->top; i++) {
		const struct agg *a = rows[i].a;
		uint64_t wall = wall_of(s, a);

		/* the name takes what the numbers leave: a long time widens them */
		int w = fprintf(s->out, "  %10.3f %6.1f %10.3f %6.1f %9llu %10.3f  ", a->total / 1e6,
				pct(a->total, wall), a->self / 1e6, pct(a->self, wall),
				(unsigned long long)a->count, a->count ? a->total / 1e3 / a->count : 0.0);
		put_py_name(s->out, rows[i].name, s->width - (w > 0 ? w : 0));
	}
}

static int by_count(const void *x, const void *y)
{
	const struct agg *a = ((const struct row *)x)->a, *b = ((const struct row *)y)->a;

	return a->count > b->count ? -1 : a->count < b->count;
}

static void print_counted(struct sm *s, const char *title, cat_pred pred, struct row *rows,
			  int stacks)
{
	uint64_t sum;
	size_t n = rows_of(s, pred, rows, &sum);

	if (!n)
		return;
	qsort(rows, n, sizeof(*rows), by_count);
	fprintf(s->out, "\n%s (%llu samples, %zu distinct)\n", title, (unsigned long long)sum, n);
	fprintf(s->out, "  %10s %6s  %s\n", "samples", "%", stacks ? "stack (root;...;leaf)" : "function");
	for (size_t i = 0; i < n && i < (size_t)s->top; i++) {
		int w = fprintf(s->out, "  %10llu %6.1f  ", (unsigned long long)rows[i].a->count,
				sum ? 100.0 * rows[i].a->count / sum : 0.0);
		(stacks ? put_stack : put_name)(s->out, rows[i].name, s->width - (w > 0 ? w : 0));
	}
}

/* --json: the host in "hosts"; after the last one, the whole object. */
static int json_host(struct sm *s)
{
	const struct conv_host_meta *m = s->meta;
	struct json_object *h = json_object_new_object();
	const struct conv_steps *st = m->steps;

	if (!h || json_object_array_add(s->hosts, h)) {
		json_object_put(h);
		return -1;
	}
	json_object_object_add(h, "host", json_object_new_string(m->host));
	json_object_object_add(h, "profiled_s", json_object_new_double((m->stop_ns - m->start_ns) / 1e9));
	json_object_object_add(h, "processes", json_object_new_int64(m->n_processes));
	json_object_object_add(h, "steps", json_object_new_string(st ? st->evidence : "not looked for"));
	if (m->host_index + 1 < m->n_hosts)
		return 0;
	if (step_stats_json(s->steps, s->root))
		return -1;
	const char *text = json_object_to_json_string_ext(s->root, JSON_C_TO_STRING_PRETTY |
							  JSON_C_TO_STRING_NOSLASHESCAPE);

	return text && fprintf(s->out, "%s\n", text) >= 0 ? 0 : -1;
}

static int sm_end(void *ctx)
{
	struct sm *s = ctx;
	const struct conv_host_meta *m = s->meta;
	struct row *rows;

	close_until(s, UINT64_MAX);
	step_stats_end(s->steps);
	if (s->json) {
		if (json_host(s) == 0)
			return 0;
		snprintf(s->sink.err, sizeof(s->sink.err), "out of memory");
		return -1;
	}
	rows = malloc((s->keys.n ? s->keys.n : 1) * sizeof(*rows));
	if (!rows) {
		snprintf(s->sink.err, sizeof(s->sink.err), "out of memory");
		return -1;
	}
	fprintf(s->out, "== host %s: %.3f s profiled, %u processes, %u threads, %u GPUs, "
		"%llu timeline items\n", m->host, (m->stop_ns - m->start_ns) / 1e9, m->n_processes,
		m->n_threads, m->n_gpus, (unsigned long long)s->items);
	step_stats_print(s->steps, s->out, s->top);
	print_timed(s, "GPU kernels by total time", is_kernel, rows);
	print_timed(s, "GPU memory copies and sets", is_mem, rows);
	print_timed(s, "Library calls (CUDA runtime/driver, NCCL, ...)", is_lib, rows);
	print_timed(s, "System calls", is_sys, rows);
	print_python(s, rows);
	print_counted(s, "CPU samples: hottest functions (leaf)", is_cpuleaf, rows, 0);
	print_counted(s, "CPU samples: hottest stacks", is_cpustack, rows, 1);
	print_counted(s, "Python samples: hottest functions (leaf)", is_pyleaf, rows, 0);
	print_counted(s, "Python samples: hottest stacks", is_pystack, rows, 1);
	if (m->host_index + 1 == m->n_hosts)
		step_stats_print_job(s->steps, s->out);
	fputc('\n', s->out);
	free(rows);
	return 0;
}

static int sm_finish(void *ctx, int ok)
{
	(void)ok;
	return fflush(((struct sm *)ctx)->out) ? -1 : 0;
}

/* $COLUMNS, else the terminal's width, else wide enough for most names. */
static int term_width(FILE *out)
{
	const char *c = getenv("COLUMNS");
	struct winsize ws;
	int w = c ? atoi(c) : 0;

	if (w <= 0 && isatty(fileno(out)) && !ioctl(fileno(out), TIOCGWINSZ, &ws))
		w = ws.ws_col;
	if (w <= 0)
		w = 160;
	return w < 80 ? 80 : w;
}

struct conv_sink *summary_new(FILE *out, int top_n, int json)
{
	struct sm *s = calloc(1, sizeof(*s));

	if (!s || !(s->steps = step_stats_new())) {
		free(s);
		return NULL;
	}
	if (json && (!(s->root = json_object_new_object()) || !(s->hosts = json_object_new_array()))) {
		json_object_put(s->root);
		step_stats_free(s->steps);
		free(s);
		return NULL;
	}
	if (json)
		json_object_object_add(s->root, "hosts", s->hosts);
	s->json = json;
	s->out = out;
	s->top = top_n > 0 ? top_n : 15;
	s->width = term_width(out);
	s->sink.name = "summary";
	s->sink.ctx = s;
	s->sink.begin_host = sm_begin;
	s->sink.item = sm_item;
	s->sink.end_host = sm_end;
	s->sink.finish = sm_finish;
	return &s->sink;
}

void summary_free(struct conv_sink *s)
{
	if (!s)
		return;
	struct sm *m = s->ctx;

	cv_strtab_free(&m->keys);
	step_stats_free(m->steps);
	json_object_put(m->root);
	free(m->stk);
	free(m->v);
	free(m);
}
