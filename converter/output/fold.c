/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The size budget's filter (fold.h). The plan: with the sizes measured
 * before writing, the trace's bytes when every foldable call shorter than
 * bucket k is folded are
 *
 *   fixed + sum over buckets >= k of (n * item + str) + runs(k) * fold
 *
 * (fixed: what never folds, flows and track names); k is the smallest that
 * fits (k = 0: nothing folds), at most the bucket of FOLD_MAX_NS.
 *
 * The filter: items come track by track, sorted and nested; it keeps the
 * ends of the items it passed on (their nesting) and at most one open run:
 * the calls of one parent, each shorter than the threshold, one after the
 * other, and everything that starts inside them. A foldable call inside
 * the run's span (a descendant of a folded call) is counted into it; any
 * other item there, or an instant beside it, waits and is sent right after
 * the run's fold, which contains it. A longer sibling, the parent's end or
 * the track's end closes the run. A run of one call alone is sent as it is.
 */
#include "converter/output/fold.h"
#include "converter/output/evview.h"

#include <stdlib.h>
#include <string.h>

#include "converter/input/spill.h"

#define NAMES_MAX 64          /* distinct names counted per run; the rest are "others" */
#define HOLD_MAX 4096         /* items waiting in a run: past this, the run closes early */
#define CATS_MAX 16

/* An item kept back: the item, its event packed, its strings. */
struct held {
	struct conv_item it;
	struct cv_rec *rec;   /* malloc'd: record, then name, category, stack */
};

struct fold {
	struct conv_sink sink;        /* first: the sink is the object */
	struct conv_sink *inner;
	void (*inner_free)(struct conv_sink *);
	uint64_t budget;
	const struct fold_model *m;
	unsigned k;                   /* fold calls of buckets < k; 0: none */
	/* the track */
	int have_track;
	struct conv_item tk;          /* its kind, pid, tid, device, stream */
	uint64_t *ends;               /* ends of open items passed on */
	size_t n_ends, cap_ends;
	/* the open run */
	int run;
	size_t depth;
	uint64_t start, end;
	struct conv_fold info;
	struct held first;
	struct { char *name; uint64_t calls, ns; } names[NAMES_MAX];
	uint32_t n_names, last_name;
	struct held *held;
	size_t n_held, cap_held;
	char fold_name[96];
	/* what it did */
	uint64_t est_all, est_planned, folds, folded;
	struct { char *cat; uint64_t n, in_run; } cats[CATS_MAX]; /* calls folded by category */
	uint32_t n_cats;
};

/* ------------------------------------------------------------------ plan */

static uint64_t est_bytes(const struct fold_model *m, const struct conv_sizes *sz, unsigned k)
{
	uint64_t b = (sz->n_other * m->item + sz->str_other * m->str_pct / 100) +
		     sz->flows * m->flow + sz->tracks * m->track;
	int64_t runs = 0;

	for (unsigned i = 0; i < CONV_SIZE_BUCKETS; i++) {
		if (i <= k)
			runs += sz->runs_d[i];
		if (i >= k)
			b += sz->n[i] * m->item + sz->str[i] * m->str_pct / 100;
	}
	return b + (uint64_t)(runs > 0 ? runs : 0) * m->fold;
}

static int fold_plan(void *ctx, const struct conv_sizes *sz)
{
	struct fold *f = ctx;
	unsigned kmax = conv_size_bucket(FOLD_MAX_NS);

	f->est_all = f->est_planned = est_bytes(f->m, sz, 0);
	f->k = 0;
	if (f->est_all <= f->budget)
		return 0;
	for (unsigned k = 1; k <= kmax; k++) {
		f->k = k;
		f->est_planned = est_bytes(f->m, sz, k);
		if (f->est_planned <= f->budget)
			break;
	}
	return 0;
}

/* ------------------------------------------------------------------ held */

static int hold(struct held *h, const struct conv_item *it)
{
	size_t rl = cv_rec_size(it->ev), nl = strlen(it->name) + 1, cl = strlen(it->category) + 1,
	       sl = it->stack_folded ? strlen(it->stack_folded) + 1 : 0;
	char *p;

	if (!(h->rec = malloc(rl + nl + cl + sl)))
		return -1;
	h->rec->start = it->start_ns;
	cv_rec_pack(h->rec, it->ev);
	p = (char *)h->rec + rl;
	h->it = *it;
	h->it.name = memcpy(p, it->name, nl);
	h->it.category = memcpy(p + nl, it->category, cl);
	h->it.stack_folded = sl ? memcpy(p + nl + cl, it->stack_folded, sl) : NULL;
	return 0;
}

static void unhold(struct held *h)
{
	free(h->rec);
	h->rec = NULL;
}

/* ------------------------------------------------------------------ send */

static int pass_on(struct fold *f, const struct conv_item *it)
{
	if (f->inner->item(f->inner->ctx, it)) {
		snprintf(f->sink.err, sizeof(f->sink.err), "%s", f->inner->err);
		return -1;
	}
	return 0;
}

static void pop_ended(struct fold *f, uint64_t t)
{
	while (f->n_ends && f->ends[f->n_ends - 1] <= t)
		f->n_ends--;
}

/* Send an item on, keeping its end while it is open. */
static int send(struct fold *f, const struct conv_item *it)
{
	pop_ended(f, it->start_ns);
	if (pass_on(f, it))
		return -1;
	if (!it->dur_ns)
		return 0;
	if (f->n_ends == f->cap_ends) {
		size_t nc = f->cap_ends ? f->cap_ends * 2 : 64;
		uint64_t *ne = realloc(f->ends, nc * sizeof(*ne));

		if (!ne) {
			snprintf(f->sink.err, sizeof(f->sink.err), "out of memory");
			return -1;
		}
		f->ends = ne;
		f->cap_ends = nc;
	}
	f->ends[f->n_ends++] = it->start_ns + it->dur_ns;
	return 0;
}

static int send_held(struct fold *f, struct held *h)
{
	struct evlog_event ev;
	int rc;

	if (cv_rec_unpack(h->rec, &ev)) {
		unhold(h);
		return 0;
	}
	h->it.ev = &ev;
	rc = send(f, &h->it);
	unhold(h);
	return rc;
}

/* ------------------------------------------------------------------- run */

static int foldable(const struct fold *f, const struct conv_item *it)
{
	if (it->track != CONV_TRACK_THREAD || it->flow_id || it->step || it->fold ||
	    conv_size_bucket(it->dur_ns) >= f->k)
		return 0;
	return cv_view_of(it->ev->type)->fold;
}

static void count_cat(struct fold *f, const char *cat)
{
	uint32_t i;

	for (i = 0; i < f->n_cats; i++)
		if (!strcmp(f->cats[i].cat, cat))
			break;
	if (i == f->n_cats) {
		if (i < CATS_MAX && (f->cats[i].cat = strdup(cat)))
			f->n_cats++;
		else if (f->n_cats)
			i = f->n_cats - 1; /* counted with the last: the total stays right */
		else
			return;
	}
	f->cats[i].in_run++;
}

static void count_name(struct fold *f, const char *name, uint64_t ns)
{
	uint32_t i = f->last_name;

	if (i >= f->n_names || strcmp(f->names[i].name, name)) {
		for (i = 0; i < f->n_names; i++)
			if (!strcmp(f->names[i].name, name))
				break;
		if (i == f->n_names) {
			if (i == NAMES_MAX || !(f->names[i].name = strdup(name)))
				return; /* counted in the fold's calls, not by name */
			f->names[i].calls = f->names[i].ns = 0;
			f->n_names++;
		}
		f->last_name = i;
	}
	f->names[i].calls++;
	f->names[i].ns += ns;
}

/* A call into the run: at its level (top) or inside one of its calls. */
static void take(struct fold *f, const struct conv_item *it, int top)
{
	f->info.calls++;
	if (top) {
		f->info.top_calls++;
		f->info.busy_ns += it->dur_ns;
		if (it->start_ns + it->dur_ns > f->end)
			f->end = it->start_ns + it->dur_ns;
	}
	count_name(f, it->name, it->dur_ns);
	count_cat(f, it->category);
}

static int open_run(struct fold *f, const struct conv_item *it)
{
	if (hold(&f->first, it)) {
		snprintf(f->sink.err, sizeof(f->sink.err), "out of memory");
		return -1;
	}
	f->run = 1;
	f->depth = f->n_ends;
	f->start = f->end = it->start_ns;
	memset(&f->info, 0, sizeof(f->info));
	f->n_names = f->last_name = 0;
	take(f, it, 1);
	return 0;
}

/* The names with the most calls, most first (a selection: a run has few). */
static void pick_tops(struct fold *f, struct conv_fold *fi)
{
	fi->n_top = 0;
	for (uint32_t n = 0; n < CONV_FOLD_TOP && n < f->n_names; n++) {
		uint32_t best = UINT32_MAX;

		for (uint32_t i = 0; i < f->n_names; i++) {
			int taken = 0;

			for (uint32_t j = 0; j < fi->n_top; j++)
				taken |= fi->top[j].name == f->names[i].name;
			if (!taken && (best == UINT32_MAX || f->names[i].calls > f->names[best].calls))
				best = i;
		}
		fi->top[n].name = f->names[best].name;
		fi->top[n].calls = f->names[best].calls;
		fi->top[n].ns = f->names[best].ns;
		fi->n_top++;
	}
}

/* The run's item: its span, and its most frequent names. */
static int send_fold(struct fold *f)
{
	struct evlog_event ev = { .type = 0, .ts = f->start, .pid = f->tk.pid, .tid = f->tk.tid };
	struct conv_item it = f->tk;
	struct conv_fold *fi = &f->info;

	pick_tops(f, fi);
	snprintf(f->fold_name, sizeof(f->fold_name), "%llu calls folded, %.1f us",
		 (unsigned long long)fi->calls, (double)fi->busy_ns / 1e3);
	it.start_ns = f->start;
	it.dur_ns = f->end - f->start;
	it.name = f->fold_name;
	it.category = "folded";
	it.flow_id = 0;
	it.stack_folded = NULL;
	it.step = 0;
	it.fold = fi;
	it.ev = &ev;
	f->folds++;
	return send(f, &it);
}

static int close_run(struct fold *f)
{
	int rc;

	if (!f->run)
		return 0;
	f->run = 0;
	for (uint32_t i = 0; i < f->n_cats; i++) {
		if (f->info.calls > 1)
			f->cats[i].n += f->cats[i].in_run;
		f->cats[i].in_run = 0;
	}
	if (f->info.calls == 1) { /* a call alone: sent as it is */
		rc = send_held(f, &f->first);
	} else {
		f->folded += f->info.calls;
		unhold(&f->first);
		rc = send_fold(f);
	}
	for (size_t i = 0; i < f->n_held; i++)
		if (rc == 0)
			rc = send_held(f, &f->held[i]);
		else
			unhold(&f->held[i]);
	f->n_held = 0;
	for (uint32_t i = 0; i < f->n_names; i++)
		free(f->names[i].name);
	f->n_names = 0;
	return rc;
}

static int defer(struct fold *f, const struct conv_item *it)
{
	if (f->n_held == f->cap_held) {
		size_t nc = f->cap_held ? f->cap_held * 2 : 16;
		struct held *nh = realloc(f->held, nc * sizeof(*nh));

		if (!nh)
			goto oom;
		f->held = nh;
		f->cap_held = nc;
	}
	if (hold(&f->held[f->n_held], it))
		goto oom;
	f->n_held++;
	/* Bounded: the run closes early; what follows nests in its fold. */
	return f->n_held >= HOLD_MAX ? close_run(f) : 0;
oom:
	snprintf(f->sink.err, sizeof(f->sink.err), "out of memory");
	return -1;
}

static int same_track(const struct conv_item *a, const struct conv_item *b)
{
	return a->track == b->track &&
	       (a->track == CONV_TRACK_THREAD ? a->pid == b->pid && a->tid == b->tid
					      : a->device == b->device && a->stream == b->stream);
}

static int fold_item(void *ctx, const struct conv_item *it)
{
	struct fold *f = ctx;

	if (!f->k)
		return pass_on(f, it);
	if (!f->have_track || !same_track(&f->tk, it)) {
		if (close_run(f))
			return -1;
		memset(&f->tk, 0, sizeof(f->tk));
		f->tk.track = it->track;
		f->tk.pid = it->pid;
		f->tk.tid = it->tid;
		f->tk.device = it->device;
		f->tk.stream = it->stream;
		f->have_track = 1;
		f->n_ends = 0;
	}
	pop_ended(f, it->start_ns);
	if (f->run) {
		int fold = foldable(f, it);

		if (it->start_ns < f->end) {
			if (!fold)
				return defer(f, it);
			take(f, it, 0);
			return 0;
		}
		if (f->n_ends == f->depth && fold) {
			take(f, it, 1);
			return 0;
		}
		if (f->n_ends == f->depth && !it->dur_ns)
			return defer(f, it);
		if (close_run(f))
			return -1;
		pop_ended(f, it->start_ns);
	}
	return foldable(f, it) ? open_run(f, it) : send(f, it);
}

/* ------------------------------------------------------------- lifecycle */

static int fold_begin_host(void *ctx, const struct conv_host_meta *m)
{
	struct fold *f = ctx;

	f->have_track = 0;
	if (f->inner->begin_host && f->inner->begin_host(f->inner->ctx, m)) {
		snprintf(f->sink.err, sizeof(f->sink.err), "%s", f->inner->err);
		return -1;
	}
	return 0;
}

static int fold_end_host(void *ctx)
{
	struct fold *f = ctx;

	if (close_run(f))
		return -1;
	f->have_track = 0;
	if (f->inner->end_host && f->inner->end_host(f->inner->ctx)) {
		snprintf(f->sink.err, sizeof(f->sink.err), "%s", f->inner->err);
		return -1;
	}
	return 0;
}

static int fold_finish(void *ctx, int ok)
{
	struct fold *f = ctx;

	if (f->inner->finish && f->inner->finish(f->inner->ctx, ok)) {
		snprintf(f->sink.err, sizeof(f->sink.err), "%s", f->inner->err);
		return -1;
	}
	return 0;
}

struct conv_sink *fold_new(struct conv_sink *inner, void (*inner_free)(struct conv_sink *),
			   uint64_t budget, const struct fold_model *model)
{
	struct fold *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->inner = inner;
	f->inner_free = inner_free;
	f->budget = budget;
	f->m = model;
	f->sink.name = inner->name;
	f->sink.ctx = f;
	f->sink.plan = fold_plan;
	f->sink.begin_host = fold_begin_host;
	f->sink.item = fold_item;
	f->sink.end_host = fold_end_host;
	f->sink.finish = fold_finish;
	return &f->sink;
}

struct conv_sink *fold_inner(const struct conv_sink *s)
{
	return ((const struct fold *)s->ctx)->inner;
}

uint64_t fold_folded(const struct conv_sink *s)
{
	return ((const struct fold *)s->ctx)->folded;
}

static void mb(FILE *out, uint64_t b)
{
	fprintf(out, "%.1f MB", (double)b / 1e6);
}

void fold_report(const struct conv_sink *s, FILE *out)
{
	const struct fold *f = s->ctx;

	if (!f->k)
		return;
	fprintf(out, "; %s: %llu calls shorter than %.3f us folded into %llu slices (", f->m->what,
		(unsigned long long)f->folded, (double)conv_size_lower(f->k) / 1e3,
		(unsigned long long)f->folds);
	for (uint32_t i = 0; i < f->n_cats; i++)
		fprintf(out, "%s%llu %s", i ? ", " : "", (unsigned long long)f->cats[i].n,
			f->cats[i].cat);
	fprintf(out, ") to keep it under ");
	mb(out, f->budget);
	fprintf(out, " (--max-trace-mb; about ");
	mb(out, f->est_all);
	fprintf(out, " whole)");
	if (f->est_planned > f->budget) {
		fprintf(out, "; still about ");
		mb(out, f->est_planned);
		fprintf(out, ": the rest never folds (calls of 1 ms or more, samples, GPU work)");
	}
}

void fold_free(struct conv_sink *s)
{
	if (!s)
		return;
	struct fold *f = s->ctx;

	unhold(&f->first);
	for (size_t i = 0; i < f->n_held; i++)
		unhold(&f->held[i]);
	for (uint32_t i = 0; i < f->n_names; i++)
		free(f->names[i].name);
	for (uint32_t i = 0; i < f->n_cats; i++)
		free(f->cats[i].cat);
	free(f->held);
	free(f->ends);
	if (f->inner_free)
		f->inner_free(f->inner);
	free(f);
}
