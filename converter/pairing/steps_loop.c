/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A process's Python loop, from the calls each function makes (steps_int.h:
 * a group per calling function and thread; calls at the top of what a
 * thread recorded form a group of their own). A loop body, inline or a
 * function, shows as a repeating sequence of calls:
 *
 *   prologue  [load_batch fwd loss bwd all_reduce step] x N  epilogue
 *
 * The anchor is the call covering most time among those made at least
 * MIN_STEPS times whose intervals (the calls between two anchor calls) are
 * mostly (>= TYPICAL_PCT) the same sequence: the typical iteration around
 * it, T (after it) then H (before the next one). H, where the iteration
 * starts, is the longest end of the typical sequence that also ends the
 * calls before the first anchor (the prologue never holds the body's
 * calls in the body's order); where those match it whole, at the top of
 * a thread recorded from the middle of a run, the calls after the last
 * anchor (T, then the epilogue) tell it instead. (A loop over a Python
 * iterator ends with one more __next__, which such a tail also matches:
 * a profile attached while the anchor ran can start its steps one call
 * late.) A step runs from the first call of H to the next
 * iteration's; an iteration with a long excursion (over a median step of
 * calls the typical one does not make: evaluation, a checkpoint) ends
 * after its T, so the excursion is no step. The last iteration ends after
 * its T (and the loop's usual overhead); one cut before its T ends is left
 * out.
 *
 * Imports (importlib's frames) are no loop. A loop spans MIN_SPAN_PCT of the
 * profile, unless its steps hold collective calls (a distributed job's loop
 * after a long start). A function its caller runs more often than it loops (a layer's forward
 * looping over sub-layers: m calls in I instances with m < I^2) is no step.
 * Of a process's loops, one whose steps hold collective calls wins; then,
 * of two in the same stretch of time covering within half of each other's,
 * one with at least twice the steps (batches within epochs); then the one
 * whose typical iterations cover most time (within half: the one with more
 * of its steps typical, the same loop seen from its better anchor).
 */
#include "common/grow.h"
#include "converter/pairing/steps_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANCHORS_TRY 6
#define TYPICAL_PCT 60
#define COVER_PCT 50               /* the steps cover >= 50% of their span */
#define SIG_NONE UINT64_MAX

struct name_stat {
	uint32_t name, count;
	uint64_t covered;
};

static int cmp_call(const void *a, const void *b)
{
	const struct pycall *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

static int by_covered(const void *a, const void *b)
{
	const struct name_stat *x = a, *y = b;

	if (x->covered != y->covered)
		return x->covered > y->covered ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* The names a group calls, with their counts and time, most time first. */
static struct name_stat *name_stats(const struct group *g, uint32_t *n_out)
{
	struct cv_map ix = { 0 };
	struct name_stat *st = NULL;
	size_t n = 0, cap = 0;
	int is_new;

	for (uint32_t i = 0; i < g->n; i++) {
		uint64_t *v = cv_map_put(&ix, g->v[i].name, 0, &is_new);

		if (!v || (is_new && lt_grow((void **)&st, &cap, n + 1, sizeof(*st), 16))) {
			cv_map_free(&ix);
			free(st);
			return NULL;
		}
		if (is_new) {
			st[n] = (struct name_stat){ .name = g->v[i].name };
			*v = ++n;
		}
		st[*v - 1].count++;
		st[*v - 1].covered += g->v[i].end - g->v[i].start;
	}
	cv_map_free(&ix);
	if (st)
		qsort(st, n, sizeof(*st), by_covered);
	*n_out = (uint32_t)n;
	return st ? st : calloc(1, sizeof(*st));
}

/* ----------------------------------------------------- one anchor's loop */

struct loop {
	const struct group *g;
	const struct pycall *v;
	uint32_t *pos, m;        /* the anchor's calls */
	uint64_t *sig;           /* per interval j (pos[j], pos[j+1]): its calls' sequence */
	uint64_t typical;
	uint32_t jt;             /* a typical interval */
	uint32_t L, h;           /* its length; H's */
	uint64_t tail_gap, step; /* medians over typical iterations */
};

static uint64_t seq_hash(const struct pycall *v, uint32_t from, uint32_t to)
{
	uint64_t x = 0xcbf29ce484222325ull ^ (to - from);

	for (uint32_t k = from; k < to; k++) {
		x ^= v[k].name;
		x *= 0x100000001b3ull;
	}
	return x == SIG_NONE ? 0 : x;
}

/* The intervals' sequences and the most common one; 0, or -1 when the
 * anchor repeats no sequence. */
static int typical_of(struct loop *l, uint64_t *tmp)
{
	uint32_t nv = 0, best = 0;

	for (uint32_t j = 0; j + 1 < l->m; j++) {
		const struct pycall *a = &l->v[l->pos[j]], *b = &l->v[l->pos[j + 1]];

		l->sig[j] = a->inst == b->inst ? seq_hash(l->v, l->pos[j] + 1, l->pos[j + 1]) : SIG_NONE;
		if (l->sig[j] != SIG_NONE)
			tmp[nv++] = l->sig[j];
	}
	if (nv + 1 < MIN_STEPS)
		return -1;
	qsort(tmp, nv, sizeof(*tmp), cv_u64_cmp);
	for (uint32_t i = 0, run = 1; i < nv; i++, run++) {
		if (i + 1 < nv && tmp[i + 1] == tmp[i])
			continue;
		if (run > best) {
			best = run;
			l->typical = tmp[i];
		}
		run = 0;
	}
	if (best * 100 < nv * TYPICAL_PCT)
		return -1;
	for (l->jt = 0; l->sig[l->jt] != l->typical; l->jt++)
		;
	l->L = l->pos[l->jt + 1] - l->pos[l->jt] - 1;
	return 0;
}

/* Where the iteration starts: H's length (see the top of the file). */
static void head_of(struct loop *l)
{
	const struct pycall *v = l->v, *gt = &v[l->pos[l->jt] + 1];
	uint32_t p0 = l->pos[0], pl = l->pos[l->m - 1], hp = 0, tp = 0;

	while (hp < l->L && hp < p0 && v[p0 - 1 - hp].inst == v[p0].inst &&
	       v[p0 - 1 - hp].name == gt[l->L - 1 - hp].name)
		hp++;
	while (tp < l->L && pl + 1 + tp < l->g->n && v[pl + 1 + tp].inst == v[pl].inst &&
	       v[pl + 1 + tp].name == gt[tp].name)
		tp++;
	/* The calls before the first anchor end where the prologue (or what
	 * was recorded of an iteration in flight) stops matching: trusted
	 * unless they match the whole typical sequence at the top of a
	 * thread recorded from the middle of a run. */
	l->h = hp < l->L || l->g->parent != GROUP_ROOT ? hp : l->L - tp;
}

/* Start of iteration j: the first call of H before its anchor call, H's
 * calls found in order going back (other calls between them are this
 * iteration's extras); the anchor call when they are not all there. */
static uint64_t start_of(const struct loop *l, uint32_t j)
{
	const struct pycall *v = l->v, *gt = &v[l->pos[l->jt] + 1];
	uint32_t p = l->pos[j], lo = j && v[l->pos[j - 1]].inst == v[p].inst ? l->pos[j - 1] + 1 : 0;
	uint32_t need = l->h, first = p;

	for (uint32_t k = p; need && k-- > lo && v[k].inst == v[p].inst;)
		if (v[k].name == gt[l->L - l->h + need - 1].name) {
			need--;
			first = k;
		}
	return need ? v[p].start : v[first].start;
}

/* End of iteration j's T (the calls after its anchor, found in order, other
 * calls between them allowed); 0 when they are not all there (a last
 * iteration cut short). */
static uint64_t tail_end(const struct loop *l, uint32_t j)
{
	const struct pycall *v = l->v, *gt = &v[l->pos[l->jt] + 1];
	uint32_t p = l->pos[j], t = l->L - l->h, got = 0, last = p;
	uint32_t hi = j + 1 < l->m && v[l->pos[j + 1]].inst == v[p].inst ? l->pos[j + 1] : l->g->n;

	for (uint32_t k = p + 1; got < t && k < hi && v[k].inst == v[p].inst; k++)
		if (v[k].name == gt[got].name) {
			got++;
			last = k;
		}
	return got == t ? v[last].end : 0;
}

static void medians(struct loop *l, const uint64_t *b, uint64_t *tmp)
{
	uint32_t n = 0;

	for (uint32_t j = 0; j + 1 < l->m; j++) {
		uint64_t te = tail_end(l, j);

		if (l->sig[j] == l->typical && te && b[j + 1] >= te)
			tmp[n++] = b[j + 1] - te;
	}
	l->tail_gap = cv_u64_median(tmp, n);
	n = 0;
	for (uint32_t j = 0; j + 1 < l->m; j++)
		if (l->sig[j] == l->typical)
			tmp[n++] = b[j + 1] - b[j];
	l->step = cv_u64_median(tmp, n);
}

/* Each iteration's bounds into c (start[k], end[k]); its coverage. */
static int place(struct loop *l, struct cand *c, uint64_t *tmp)
{
	uint64_t *b = malloc((size_t)l->m * sizeof(*b)), *out = malloc((size_t)l->m * 2 * sizeof(*out));
	uint32_t n = 0;

	if (!b || !out) {
		free(b);
		free(out);
		return -1;
	}
	for (uint32_t j = 0; j < l->m; j++)
		b[j] = start_of(l, j);
	medians(l, b, tmp);
	for (uint32_t j = 0; j < l->m; j++) {
		int next = j + 1 < l->m && l->v[l->pos[j + 1]].inst == l->v[l->pos[j]].inst;
		uint64_t te = tail_end(l, j), e;

		if (next && l->sig[j] == l->typical) {
			e = b[j + 1];
			c->typical += e - b[j];
			c->n_typical++;
		} else if (!te)
			e = next ? b[j + 1] : 0;
		else if (next && b[j + 1] - te <= l->step + l->tail_gap)
			e = b[j + 1]; /* a little more than usual: still this iteration */
		else
			e = next && te + l->tail_gap > b[j + 1] ? b[j + 1] : te + l->tail_gap;
		if (e <= b[j])
			continue;
		tmp[n] = b[j];
		out[l->m + n] = e;
		n++;
	}
	free(b);
	memcpy(out, tmp, (size_t)n * sizeof(*out));
	memmove(out + n, out + l->m, (size_t)n * sizeof(*out));
	c->bounds = out;
	c->set.n = n;
	c->coverage = 0;
	for (uint32_t k = 0; k < n; k++)
		c->coverage += out[n + k] - out[k];
	return 0;
}

/* The bare name of a "func\x1ffile:line". */
static int bare_len(const char *f)
{
	const char *sep = strchr(f, '\x1f');

	return sep ? (int)(sep - f) : (int)strlen(f);
}

/* "load_batch, forward, ..." in buf: the iteration's calls from H on. */
static void body_names(const struct cv_steps *s, const struct loop *l, uint32_t anchor,
		       char *buf, size_t n)
{
	const struct pycall *gt = &l->v[l->pos[l->jt] + 1];
	size_t o = 0;

	buf[0] = 0;
	for (uint32_t k = 0; k <= l->L && o < n; k++) {
		/* H (the end of the typical interval), the anchor, then T */
		uint32_t name = k < l->h ? gt[l->L - l->h + k].name : k == l->h ? anchor
							: gt[k - l->h - 1].name;
		const char *f = cv_strtab_get(&s->names, name), *loc;
		int len = bare_len(f);

		/* a closure's qualified name: from its innermost function on */
		while ((loc = memmem(f, (size_t)len, "<locals>.", 9))) {
			len -= (int)(loc + 9 - f);
			f = loc + 9;
		}
		o += (size_t)snprintf(buf + o, n - o, "%s%.*s", k ? ", " : "", len, f);
	}
	if (o >= n)
		snprintf(buf + n - 4, 4, "...");
}

static void evidence(const struct cv_steps *s, const struct loop *l, uint32_t anchor, struct cand *c)
{
	char body[160];
	const char *p = l->g->parent == GROUP_ROOT ? NULL : cv_strtab_get(&s->names, l->g->parent);
	char where[120];

	if (p)
		snprintf(where, sizeof(where), "in %.*s on", bare_len(p) < 80 ? bare_len(p) : 80, p);
	else
		snprintf(where, sizeof(where), "at the top of");
	body_names(s, l, anchor, body, sizeof(body));
	snprintf(c->set.evidence, sizeof(c->set.evidence),
		 "Python loop %s thread %u: %u iterations of [%s], median %.3f ms", where, l->g->tid,
		 c->set.n, body, l->step / 1e6);
}

/* How many of c's steps hold a collective call of their thread. */
static uint32_t steps_with_coll(const struct cv_steps *s, const struct cand *c)
{
	const struct series *x = cv_series_get(s, c->set.track, SER_COLL, s->coll_name);
	uint32_t n = 0, k = 0;

	for (uint32_t i = 0; x && i < c->set.n; i++) {
		while (k < x->n && x->t[2 * k] < c->bounds[i])
			k++;
		n += k < x->n && x->t[2 * k] < c->bounds[c->set.n + i];
	}
	return n;
}

/* Do a's and b's steps lie in the same stretch (one loop inside the other)? */
static int nested(const struct cand *a, const struct cand *b)
{
	uint64_t a0 = a->bounds[0], a1 = a->bounds[2 * a->set.n - 1];
	uint64_t b0 = b->bounds[0], b1 = b->bounds[2 * b->set.n - 1];
	uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
	uint64_t shorter = a1 - a0 < b1 - b0 ? a1 - a0 : b1 - b0;

	return hi > lo && (hi - lo) * 2 > shorter;
}

/* Is b the better loop of a process than a (see the top of the file)? */
static int better_loop(const struct cand *a, const struct cand *b)
{
	int ca = a->with_coll * 2 >= a->set.n, cb = b->with_coll * 2 >= b->set.n;

	if (ca != cb)
		return cb;
	if (nested(a, b) && a->typical <= 2 * b->typical && b->typical <= 2 * a->typical &&
	    (a->set.n >= 2 * b->set.n || b->set.n >= 2 * a->set.n))
		return b->set.n > a->set.n; /* batches within epochs */
	if (a->typical > 2 * b->typical || b->typical > 2 * a->typical)
		return b->typical > a->typical;
	/* the same loop seen through two anchors: the more regular view */
	if ((uint64_t)a->n_typical * b->set.n != (uint64_t)b->n_typical * a->set.n)
		return (uint64_t)b->n_typical * a->set.n > (uint64_t)a->n_typical * b->set.n;
	if (a->typical != b->typical)
		return b->typical > a->typical;
	return b->set.tid == b->set.pid && a->set.tid != a->set.pid;
}

/* The loop around anchor `a` in group g, into c; 1 found, 0 none, -1. */
static int try_anchor(const struct cv_steps *s, const struct group *g, const struct name_stat *a,
		      uint64_t prof_ns, struct cand *c)
{
	struct loop l = { .g = g, .v = g->v, .m = a->count };
	uint64_t *tmp = malloc((size_t)g->n * sizeof(*tmp));
	uint32_t inst = 0, last = UINT32_MAX;
	int rc = 0;

	l.pos = malloc((size_t)a->count * sizeof(*l.pos));
	l.sig = malloc((size_t)a->count * sizeof(*l.sig));
	if (!tmp || !l.pos || !l.sig) {
		rc = -1;
		goto out;
	}
	for (uint32_t i = 0, k = 0; i < g->n; i++)
		if (g->v[i].name == a->name) {
			l.pos[k++] = i;
			inst += g->v[i].inst != last;
			last = g->v[i].inst;
		}
	if ((uint64_t)inst * inst > l.m || typical_of(&l, tmp))
		goto out;
	head_of(&l);
	memset(c, 0, sizeof(*c));
	if (place(&l, c, tmp)) {
		rc = -1;
		goto out;
	}
	uint64_t span = c->set.n ? c->bounds[2 * c->set.n - 1] - c->bounds[0] : 0;

	c->set.track = g->track;
	c->with_coll = steps_with_coll(s, c);
	if (c->set.n < MIN_STEPS || c->coverage * 100 < span * COVER_PCT ||
	    (span * 100 < prof_ns * MIN_SPAN_PCT && c->with_coll * 2 < c->set.n)) {
		free(c->bounds);
		c->bounds = NULL;
		goto out;
	}
	c->set.pid = g->pid;
	c->set.tid = g->tid;
	evidence(s, &l, a->name, c);
	rc = 1;
out:
	free(tmp);
	free(l.pos);
	free(l.sig);
	return rc;
}

/* The group's loop: of the anchors covering most time, the best. */
static int judge_group(const struct cv_steps *s, struct group *g, uint64_t prof_ns, struct cand *c)
{
	uint32_t n = 0, inst = 0;
	int rc = 0;

	qsort(g->v, g->n, sizeof(*g->v), cmp_call);
	for (uint32_t i = 0; i < g->n; i++) {
		inst += i && g->v[i].pstart != g->v[i - 1].pstart;
		g->v[i].inst = inst;
	}
	struct name_stat *st = name_stats(g, &n);

	if (!st)
		return -1;
	for (uint32_t i = 0, tried = 0; i < n && tried < ANCHORS_TRY; i++) {
		struct cand x;
		int got;

		/* an import statement is no loop's work */
		if (st[i].count < MIN_STEPS ||
		    strstr(cv_strtab_get(&s->names, st[i].name), "\x1f<frozen importlib"))
			continue;
		tried++;
		if ((got = try_anchor(s, g, &st[i], prof_ns, &x)) < 0) {
			if (rc)
				free(c->bounds);
			rc = -1;
			break;
		}
		if (got && rc && !better_loop(c, &x)) {
			free(x.bounds);
		} else if (got) {
			if (rc)
				free(c->bounds);
			*c = x;
			rc = 1;
		}
	}
	free(st);
	return rc;
}

int cv_loops_judge(struct cv_steps *s, uint32_t h, uint64_t prof_ns)
{
	struct cand *best = NULL;   /* per process, in the order first met */
	size_t n = 0, cap = 0;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < s->ng; i++) {
		struct group *g = &s->g[i];
		struct cand c;
		size_t k;

		if (g->host != h || g->dead || g->n < MIN_STEPS || cv_steps_marked(s, h, g->pid))
			continue;
		if ((rc = judge_group(s, g, prof_ns, &c)) <= 0)
			continue;
		rc = 0;
		for (k = 0; k < n && best[k].set.pid != g->pid; k++)
			;
		if (k == n && lt_grow((void **)&best, &cap, n + 1, sizeof(*best), 4)) {
			free(c.bounds);
			rc = -1;
		} else if (k == n) {
			best[n++] = c;
		} else if (better_loop(&best[k], &c)) {
			free(best[k].bounds);
			best[k] = c;
		} else {
			free(c.bounds);
		}
	}
	for (size_t k = 0; k < n; k++) {
		if (rc == 0)
			rc = cv_steps_add_set(s, h, &best[k]);
		free(best[k].bounds);
	}
	free(best);
	return rc;
}
