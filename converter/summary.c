/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Summary: where did the time go, per source. Aggregates (category, name)
 * pairs while items stream by and prints aligned top-N tables at the end of
 * each host. Memory grows with distinct names only.
 */
#include "summary.h"
#include "cv_util.h"
#include "step_stats.h"

#include <stdlib.h>
#include <string.h>

struct agg {
	uint64_t count, total, max;
};

struct sm {
	struct conv_sink sink;
	FILE *out;
	int top;
	const struct conv_host_meta *meta;
	struct cv_strtab keys;      /* "category\x1fname" */
	struct agg *v;
	size_t cap;
	uint64_t items;
	struct step_stats *steps;
};

static int sm_begin(void *ctx, const struct conv_host_meta *m)
{
	struct sm *s = ctx;

	s->meta = m;
	step_stats_begin(s->steps, m);
	cv_strtab_free(&s->keys);
	free(s->v);
	s->v = NULL;
	s->cap = 0;
	s->items = 0;
	return 0;
}

static int add(struct sm *s, const char *cat, const char *name, uint64_t dur)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s\x1f%s", cat, name);
	int64_t i = cv_strtab_intern(&s->keys, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);

	if (i < 0)
		return -1;
	if ((size_t)i >= s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		struct agg *nv = realloc(s->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		memset(nv + s->cap, 0, (nc - s->cap) * sizeof(*nv));
		s->v = nv;
		s->cap = nc;
	}
	struct agg *a = &s->v[i];

	a->count++;
	a->total += dur;
	if (dur > a->max)
		a->max = dur;
	return 0;
}

static int sm_item(void *ctx, const struct conv_item *it)
{
	struct sm *s = ctx;
	int rc;

	s->items++;
	if (step_stats_item(s->steps, it)) {
		rc = -1;
	} else if (it->step) {
		rc = 0; /* in the steps table, not among the calls */
	} else if (it->stack_folded) {
		const char *leaf = strrchr(it->stack_folded, ';');
		int py = it->ev && it->ev->type == EV_PY_SAMPLE;

		rc = add(s, py ? "#pyleaf" : "#cpuleaf", leaf ? leaf + 1 : it->stack_folded, 0) ||
		     add(s, py ? "#pystack" : "#cpustack", it->stack_folded, 0);
	} else {
		rc = add(s, it->category, it->name, it->dur_ns);
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
static int is_py(const char *c) { return !strcmp(c, "python_function"); }
static int is_cpuleaf(const char *c) { return !strcmp(c, "#cpuleaf"); }
static int is_cpustack(const char *c) { return !strcmp(c, "#cpustack"); }
static int is_pyleaf(const char *c) { return !strcmp(c, "#pyleaf"); }
static int is_pystack(const char *c) { return !strcmp(c, "#pystack"); }
static int is_lib(const char *c)
{
	return c[0] != '#' && !is_kernel(c) && !is_mem(c) && !is_sys(c) && !is_py(c) &&
	       strcmp(c, "user_annotation");
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

/* Names may hold anything: keep the table one line per row. */
static void put_name(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
	fputc('\n', f);
}

static void print_timed(struct sm *s, const char *title, cat_pred pred, struct row *rows)
{
	uint64_t sum;
	size_t n = rows_of(s, pred, rows, &sum);

	if (!n)
		return;
	fprintf(s->out, "\n%s (%zu distinct, %.3f ms in all)\n", title, n, sum / 1e6);
	fprintf(s->out, "  %12s %6s %10s %12s %12s  %s\n", "total ms", "%", "count", "avg us",
		"max us", "name");
	for (size_t i = 0; i < n && i < (size_t)s->top; i++) {
		const struct agg *a = rows[i].a;

		fprintf(s->out, "  %12.3f %6.1f %10llu %12.3f %12.3f  ", a->total / 1e6,
			sum ? 100.0 * a->total / sum : 0.0, (unsigned long long)a->count,
			a->count ? a->total / 1e3 / a->count : 0.0, a->max / 1e3);
		put_name(s->out, rows[i].name);
	}
}

static int by_count(const void *x, const void *y)
{
	const struct agg *a = ((const struct row *)x)->a, *b = ((const struct row *)y)->a;

	return a->count > b->count ? -1 : a->count < b->count;
}

static void print_counted(struct sm *s, const char *title, cat_pred pred, struct row *rows)
{
	uint64_t sum;
	size_t n = rows_of(s, pred, rows, &sum);

	if (!n)
		return;
	qsort(rows, n, sizeof(*rows), by_count);
	fprintf(s->out, "\n%s (%llu samples, %zu distinct)\n", title, (unsigned long long)sum, n);
	fprintf(s->out, "  %10s %6s  %s\n", "samples", "%", "stack");
	for (size_t i = 0; i < n && i < (size_t)s->top; i++) {
		fprintf(s->out, "  %10llu %6.1f  ", (unsigned long long)rows[i].a->count,
			sum ? 100.0 * rows[i].a->count / sum : 0.0);
		put_name(s->out, rows[i].name);
	}
}

static int sm_end(void *ctx)
{
	struct sm *s = ctx;
	const struct conv_host_meta *m = s->meta;
	struct row *rows = malloc((s->keys.n ? s->keys.n : 1) * sizeof(*rows));

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
	print_timed(s, "Python functions (inclusive time)", is_py, rows);
	print_counted(s, "CPU samples: hottest functions (leaf)", is_cpuleaf, rows);
	print_counted(s, "CPU samples: hottest stacks", is_cpustack, rows);
	print_counted(s, "Python samples: hottest functions (leaf)", is_pyleaf, rows);
	print_counted(s, "Python samples: hottest stacks", is_pystack, rows);
	fputc('\n', s->out);
	free(rows);
	return 0;
}

static int sm_finish(void *ctx, int ok)
{
	(void)ok;
	return fflush(((struct sm *)ctx)->out) ? -1 : 0;
}

struct conv_sink *summary_new(FILE *out, int top_n)
{
	struct sm *s = calloc(1, sizeof(*s));

	if (!s || !(s->steps = step_stats_new())) {
		free(s);
		return NULL;
	}
	s->out = out;
	s->top = top_n > 0 ? top_n : 15;
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
	free(m->v);
	free(m);
}
