/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the size budget's filter (converter/output/fold.c) against a sink
 * that records what it is sent: what folds and what does not, items kept
 * back inside a run, a run of one, a run closed early, and that what comes
 * out is sorted, nests, and accounts for every call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converter/output/fold.h"
#include "converter/output/trace_json.h"

#define US 1000ull
#define MS 1000000ull

struct got {
	uint64_t start, dur, calls; /* calls: a fold's, else 0 */
	uint32_t type, tid;
	char name[64], cat[32];
};

struct rec {
	struct conv_sink sink;
	struct got *v;
	size_t n, cap;
	int hosts;
};

static int rec_item(void *ctx, const struct conv_item *it)
{
	struct rec *r = ctx;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
		assert_non_null(r->v);
	}
	struct got *g = &r->v[r->n++];

	memset(g, 0, sizeof(*g));
	g->start = it->start_ns;
	g->dur = it->dur_ns;
	g->calls = it->fold ? it->fold->calls : 0;
	g->type = it->ev->type;
	g->tid = it->tid;
	snprintf(g->name, sizeof(g->name), "%s", it->name);
	snprintf(g->cat, sizeof(g->cat), "%s", it->category);
	if (it->fold) {
		/* the tops: most calls first, within the calls folded */
		uint64_t sum = 0;

		for (uint32_t i = 0; i < it->fold->n_top; i++) {
			sum += it->fold->top[i].calls;
			if (i)
				assert_true(it->fold->top[i].calls <= it->fold->top[i - 1].calls);
		}
		assert_true(sum <= it->fold->calls);
	}
	return 0;
}

static int rec_host(void *ctx, const struct conv_host_meta *m)
{
	(void)m;
	((struct rec *)ctx)->hosts++;
	return 0;
}

static void rec_free(struct conv_sink *s)
{
	struct rec *r = s->ctx;

	free(r->v);
	free(r);
}

/* A filter over a recording sink, planned with sizes that no budget of one
 * byte fits: every foldable call under FOLD_MAX_NS folds. */
static struct conv_sink *filter(struct rec **out, int plan)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct conv_sizes *sz = calloc(1, sizeof(*sz));
	struct conv_host_meta m = { .host = "h" };

	assert_non_null(r);
	assert_non_null(sz);
	r->sink.name = "rec";
	r->sink.ctx = r;
	r->sink.begin_host = rec_host;
	r->sink.item = rec_item;
	struct conv_sink *f = fold_new(&r->sink, rec_free, 1, &trace_json_model);

	assert_non_null(f);
	sz->n[conv_size_bucket(5 * US)] = 1000;
	if (plan)
		assert_int_equal(f->plan(f->ctx, sz), 0);
	free(sz);
	assert_int_equal(f->begin_host(f->ctx, &m), 0);
	*out = r;
	return f;
}

static void put(struct conv_sink *f, uint32_t type, uint32_t tid, uint64_t start, uint64_t dur,
		const char *name)
{
	struct evlog_event e = { .type = type, .pid = 1, .tid = tid, .ts = start };
	struct conv_item it = { .track = CONV_TRACK_THREAD, .pid = 1, .tid = tid, .start_ns = start,
				.dur_ns = dur, .name = name, .ev = &e };

	if (type == EV_PY_ENTER) {
		it.category = "python_function";
		e.u.py_enter.func = (struct evlog_str){ .ptr = name, .len = (uint32_t)strlen(name) };
		e.u.py_enter.file = (struct evlog_str){ .ptr = "f.py", .len = 4 };
	} else if (type == EV_CPU_SAMPLE) {
		it.category = "cpu_sample";
		it.stack_folded = "main;leaf";
	} else {
		it.category = "user_annotation";
	}
	assert_int_equal(f->item(f->ctx, &it), 0);
}

/* Sorted by start (longer first on ties) and nested, per thread; the calls
 * of type `type` plus those the folds stand for. */
static uint64_t check_out(const struct rec *r, uint32_t type)
{
	uint64_t ends[256], calls = 0;
	size_t n = 0;
	uint32_t tid = UINT32_MAX;

	for (size_t i = 0; i < r->n; i++) {
		const struct got *g = &r->v[i];

		if (g->tid != tid) {
			tid = g->tid;
			n = 0;
		} else if (i) {
			assert_true(r->v[i - 1].start <= g->start);
		}
		while (n && ends[n - 1] <= g->start)
			n--;
		if (n)
			assert_true(g->start + g->dur <= ends[n - 1]);
		if (g->dur) {
			assert_true(n < 256);
			ends[n++] = g->start + g->dur;
		}
		calls += g->calls + (g->type == type && !g->calls);
	}
	return calls;
}

/* parent > 100 short calls (one with a child) with a sample among them, a
 * long call, a short call alone. */
static void test_fold_run(void **state)
{
	struct rec *r;
	struct conv_sink *f = filter(&r, 1);

	(void)state;
	put(f, EV_PY_ENTER, 1, 0, 10 * MS, "parent");
	for (unsigned i = 0; i < 100; i++) {
		put(f, EV_PY_ENTER, 1, 100 * US + i * 10 * US, 5 * US, i % 10 < 7 ? "a" : "b");
		if (i == 3)
			put(f, EV_PY_ENTER, 1, 131 * US, 2 * US, "child");
		if (i == 5)
			put(f, EV_CPU_SAMPLE, 1, 152 * US, 0, "leaf");
	}
	put(f, EV_PY_ENTER, 1, 5 * MS, 2 * MS, "long");
	put(f, EV_PY_ENTER, 1, 8 * MS, 3 * US, "alone");
	assert_int_equal(f->end_host(f->ctx), 0);
	assert_int_equal(r->n, 5);
	assert_string_equal(r->v[0].name, "parent");
	assert_string_equal(r->v[1].cat, "folded");
	assert_string_equal(r->v[1].name, "101 calls folded, 500.0 us");
	assert_int_equal(r->v[1].start, 100 * US);
	assert_int_equal(r->v[1].dur, 99 * 10 * US + 5 * US);
	assert_string_equal(r->v[2].cat, "cpu_sample"); /* kept back, then sent */
	assert_int_equal(r->v[2].start, 152 * US);
	assert_string_equal(r->v[3].name, "long");
	assert_string_equal(r->v[4].name, "alone"); /* a run of one: as it is */
	assert_string_equal(r->v[4].cat, "python_function");
	assert_int_equal(check_out(r, EV_PY_ENTER), 104);
	assert_int_equal(fold_folded(f), 101);
	fold_free(f);
}

/* More items kept back than a run may hold: it closes early; all come out,
 * nested in the folds. */
static void test_fold_early_close(void **state)
{
	struct rec *r;
	struct conv_sink *f = filter(&r, 1);
	unsigned n = 6000, samples = 0;

	(void)state;
	put(f, EV_PY_ENTER, 1, 0, 100 * MS, "parent");
	for (unsigned i = 0; i < n; i++) {
		put(f, EV_PY_ENTER, 1, 10 * US + i * 10 * US, 4 * US, "tiny");
		put(f, EV_CPU_SAMPLE, 1, 10 * US + i * 10 * US + 2 * US, 0, "leaf");
	}
	assert_int_equal(f->end_host(f->ctx), 0);
	for (size_t i = 0; i < r->n; i++)
		samples += !strcmp(r->v[i].cat, "cpu_sample");
	assert_int_equal(samples, n);
	assert_int_equal(check_out(r, EV_PY_ENTER), n + 1);
	assert_true(r->n < 2 * n); /* the calls folded */
	fold_free(f);
}

/* Another thread closes the run; markers never fold; without a plan
 * nothing does. */
static void test_fold_tracks_and_kinds(void **state)
{
	struct rec *r;
	struct conv_sink *f = filter(&r, 1);

	(void)state;
	put(f, EV_PY_ENTER, 1, 0, 2 * US, "x");
	put(f, EV_PY_ENTER, 1, 3 * US, 2 * US, "x");
	put(f, EV_PY_ENTER, 2, 1 * US, 2 * US, "y");
	put(f, EV_MARKER, 2, 4 * US, 1 * US, "mark");
	put(f, EV_PY_ENTER, 2, 6 * US, 1 * US, "y");
	assert_int_equal(f->end_host(f->ctx), 0);
	assert_int_equal(r->n, 4);
	assert_string_equal(r->v[0].name, "2 calls folded, 4.0 us");
	assert_int_equal(r->v[0].tid, 1);
	assert_string_equal(r->v[1].name, "y");
	assert_string_equal(r->v[2].name, "mark");
	assert_string_equal(r->v[3].name, "y");
	fold_free(f);

	f = filter(&r, 0);
	put(f, EV_PY_ENTER, 1, 0, 2 * US, "x");
	put(f, EV_PY_ENTER, 1, 3 * US, 2 * US, "x");
	assert_int_equal(f->end_host(f->ctx), 0);
	assert_int_equal(r->n, 2);
	assert_int_equal(r->hosts, 1);
	fold_free(f);
}

/* The plan: nothing folds while the trace fits; the smallest threshold
 * that fits otherwise. */
static void test_fold_plan(void **state)
{
	struct rec *r = calloc(1, sizeof(*r));
	struct conv_sizes *sz = calloc(1, sizeof(*sz));
	unsigned small = conv_size_bucket(300), big = conv_size_bucket(50 * US);

	(void)state;
	assert_non_null(r);
	assert_non_null(sz);
	r->sink.ctx = r;
	r->sink.item = rec_item;
	/* 1e6 calls of 300 ns in 1000 runs, 1000 calls of 50 us */
	sz->n[small] = 1000000;
	sz->n[big] = 1000;
	sz->runs_d[small + 1] = 1000;
	sz->runs_d[big + 1] = 1000;
	struct conv_sink *f = fold_new(&r->sink, rec_free, 200000000, &trace_json_model);

	assert_int_equal(f->plan(f->ctx, sz), 0); /* ~130 MB fits 200 */
	put(f, EV_PY_ENTER, 1, 0, 200, "x");
	put(f, EV_PY_ENTER, 1, 300, 200, "x");
	assert_int_equal(r->n, 2);
	fold_free(f);

	r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->sink.ctx = r;
	r->sink.item = rec_item;
	f = fold_new(&r->sink, rec_free, 10000000, &trace_json_model);
	assert_int_equal(f->plan(f->ctx, sz), 0); /* the short ones fold, the 50 us stay */
	put(f, EV_PY_ENTER, 1, 0, 300, "x");
	put(f, EV_PY_ENTER, 1, 400, 300, "x");
	put(f, EV_PY_ENTER, 1, 1000, 50 * US, "y");
	put(f, EV_PY_ENTER, 1, 60 * US, 50 * US, "y");
	assert_int_equal(f->end_host(f->ctx), 0);
	assert_int_equal(r->n, 3);
	assert_string_equal(r->v[0].cat, "folded");
	assert_string_equal(r->v[1].name, "y");
	assert_string_equal(r->v[2].name, "y");
	fold_free(f);
	free(sz);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fold_run),
		cmocka_unit_test(test_fold_early_close),
		cmocka_unit_test(test_fold_tracks_and_kinds),
		cmocka_unit_test(test_fold_plan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
