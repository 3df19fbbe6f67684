/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job across ranks (steps.h, conv_job): the processes with steps are
 * the ranks (where some make collective calls, only those; numbered from
 * their environment, one process a rank, the one with most steps: a worker
 * it forked has its environment too; else in the order they started);
 * their steps are numbered by iteration, and at each iteration every
 * rank's arrival at the collectives is compared.
 *
 * Numbering: a rank's steps end where its collectives end, at about the
 * same moment on every rank (a blocking collective completes for all at
 * once), so each rank's steps are matched to the rank with the most steps
 * (the reference) by the offset that brings their ends closest (median
 * distance, wall clock: hosts are aligned through their clocks). Marker
 * steps keep their own numbers.
 *
 * Arrival (HTA's straggler metric, without NCCL kernels: the start of the
 * collective call on the rank's own loop thread; in DDP, whose all-reduce
 * runs in C++ inside backward, the start of backward): at each iteration every
 * rank's k-th collective of the step is compared, and the k whose starts
 * spread the most decides (where the late rank's extra time shows). The
 * latest rank is late by its start less the median of the others'; named
 * when that is at least LATE_MIN_NS and LATE_PCT% of the ranks' median step.
 * Waiting: in each collective, the time before the last rank arrived
 * (clipped to the call); the rest of the call is communication. Memory:
 * a few words per rank and step.
 */
#include "common/grow.h"
#include "converter/sink.h"
#include "converter/pairing/steps_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LATE_MIN_NS 2000000ull     /* 2 ms */
#define LATE_PCT 20                /* of the median step */
#define STEADY_PCT 50              /* late at half the iterations: steadily slow */
#define ONE_RANK_PCT 75            /* of the late steps: one rank's */

struct rk {
	struct conv_rank pub;
	struct conv_step_set *set, *pubset;  /* the host's copies (first is written to both) */
	const uint32_t *num;                 /* marker steps' numbers */
	int32_t env_rank;
	uint64_t first_ns;                   /* when the process started (order of start) */
	int64_t off;                         /* host clock + off = wall clock */
	uint64_t *coll;                      /* its collectives: start, end (nested ones dropped) */
	uint32_t n_coll;
};

static uint32_t num_of(const struct rk *r, uint32_t i)
{
	return r->num ? r->num[i] : r->set->first + i;
}

static int by_rank(const void *a, const void *b)
{
	const struct rk *x = a, *y = b;

	if (x->pub.rank != y->pub.rank)
		return x->pub.rank < y->pub.rank ? -1 : 1;
	return x->pub.pid < y->pub.pid ? -1 : x->pub.pid > y->pub.pid;
}

static int by_start(const void *a, const void *b)
{
	const struct rk *x = a, *y = b;

	if (x->first_ns != y->first_ns)
		return x->first_ns < y->first_ns ? -1 : 1;
	if (x->pub.host != y->pub.host)
		return x->pub.host < y->pub.host ? -1 : 1;
	return x->pub.pid < y->pub.pid ? -1 : x->pub.pid > y->pub.pid;
}


/* Keep v[i] for which keep(i) holds; returns the new count. */
static size_t keep_if(struct rk *v, size_t n, int (*keep)(const struct rk *, const struct rk *))
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++)
		if (keep(&v[i], o ? &v[o - 1] : NULL))
			v[o++] = v[i];
	return o;
}

static int with_rank(const struct rk *r, const struct rk *prev)
{
	(void)prev;
	return r->pub.rank >= 0;
}

static int with_coll(const struct rk *r, const struct rk *prev)
{
	(void)prev;
	return r->n_coll > 0;
}

/* One process a rank (by rank, then most steps first): a process forked
 * from a rank (a DataLoader worker) has its environment too. */
static int first_of_rank(const struct rk *r, const struct rk *prev)
{
	return !prev || prev->pub.rank != r->pub.rank;
}

static int by_rank_steps(const void *a, const void *b)
{
	const struct rk *x = a, *y = b;

	if (x->pub.rank != y->pub.rank)
		return x->pub.rank < y->pub.rank ? -1 : 1;
	if (x->set->n != y->set->n)
		return x->set->n > y->set->n ? -1 : 1;
	return x->pub.pid < y->pub.pid ? -1 : x->pub.pid > y->pub.pid;
}

/* The processes with steps (not on a GPU stream), with their ranks: where
 * some make collective calls, only those. */
static int gather(struct cv_steps *s, struct conv_host_meta *const *metas, struct rk **out, size_t *n)
{
	size_t cap = 0;
	int any_env = 0, any_coll = 0;

	*out = NULL;
	*n = 0;
	for (uint32_t h = 0; h < s->n_hosts; h++) {
		struct host_res *r = &s->res[h];
		const struct conv_host_meta *m = metas[h];

		for (uint32_t i = 0; i < r->n_sets; i++) {
			struct cand *c = &r->sets[i];
			const struct conv_process *p = conv_meta_process(m, c->set.pid);

			if (c->set.on_stream || !c->set.n)
				continue;
			if (lt_grow((void **)out, &cap, *n + 1, sizeof(**out), 8))
				return -1;
			struct rk *k = &(*out)[(*n)++];

			memset(k, 0, sizeof(*k));
			k->pub = (struct conv_rank){ .host = h, .pid = c->set.pid, .tid = c->set.tid,
						     .rank = -1 };
			k->set = &c->set;
			k->pubset = &r->pubsets[i];
			k->num = c->num;
			k->env_rank = p ? p->rank : -1;
			k->first_ns = p && p->start_ns ? p->start_ns : UINT64_MAX;
			k->off = (int64_t)(m->base_realtime_ns - m->base_mono_ns);
			k->n_coll = cv_coll_series(s, h, &c->set) != NULL; /* counted by collectives() */
			any_coll |= k->n_coll > 0;
		}
	}
	if (!*n)
		return 0;
	if (any_coll)
		*n = keep_if(*out, *n, with_coll);
	for (size_t i = 0; i < *n; i++)
		any_env |= (*out)[i].env_rank >= 0;
	/* Ranks from the environment; without any, in the order they started. */
	if (!any_env)
		qsort(*out, *n, sizeof(**out), by_start);
	for (size_t i = 0; i < *n; i++)
		(*out)[i].pub.rank = any_env ? (*out)[i].env_rank : (int32_t)i;
	if (any_env) {
		*n = keep_if(*out, *n, with_rank); /* among ranks, a process without one is none */
		qsort(*out, *n, sizeof(**out), by_rank_steps);
		*n = keep_if(*out, *n, first_of_rank);
	}
	qsort(*out, *n, sizeof(**out), by_rank);
	return 0;
}

/* The rank's collectives, sorted, those inside another dropped. */
static int collectives(const struct cv_steps *s, struct rk *r)
{
	const struct series *x = cv_coll_series(s, r->pub.host, r->set);
	uint32_t n = 0;

	if (!x)
		return 0;
	if (!(r->coll = malloc((size_t)x->n * 2 * sizeof(*r->coll))))
		return -1;
	memcpy(r->coll, x->t, (size_t)x->n * 2 * sizeof(*r->coll));
	qsort(r->coll, x->n, 2 * sizeof(*r->coll), cv_u64_cmp);
	for (uint32_t i = 0; i < x->n; i++) {
		if (n && r->coll[2 * i + 1] <= r->coll[2 * n - 1])
			continue; /* inside the previous one */
		r->coll[2 * n] = r->coll[2 * i];
		r->coll[2 * n + 1] = r->coll[2 * i + 1];
		n++;
	}
	r->n_coll = n;
	return 0;
}

/* ------------------------------------------------------------ numbering */

static uint64_t wall_end(const struct rk *r, uint32_t i)
{
	return r->set->start[i + r->set->n] + (uint64_t)r->off; /* end[i] */
}

/* The index of ref's step whose end is closest to t. */
static uint32_t nearest_end(const struct rk *ref, uint64_t t)
{
	uint32_t lo = 0, hi = ref->set->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (wall_end(ref, mid) < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ref->set->n || (lo && t - wall_end(ref, lo - 1) < wall_end(ref, lo) - t))
		lo--;
	return lo;
}

/* Median distance between r's step ends and ref's, r's step i against
 * ref's i + k; UINT64_MAX when they share no step. */
static uint64_t fit(const struct rk *ref, const struct rk *r, int64_t k, uint64_t *tmp)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->set->n; i++) {
		int64_t q = (int64_t)i + k;

		if (q < 0 || q >= ref->set->n)
			continue;
		uint64_t a = wall_end(ref, (uint32_t)q), b = wall_end(r, i);

		tmp[n++] = a > b ? a - b : b - a;
	}
	return n ? cv_u64_median(tmp, n) : UINT64_MAX;
}

/* Number each detected rank's steps after the reference's iterations. */
static int number(struct rk *v, size_t n)
{
	size_t ref = 0, most = 0;
	int64_t lowest = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].set->n > v[ref].set->n)
			ref = i;
	for (size_t i = 0; i < n; i++)
		if (v[i].set->n > most)
			most = v[i].set->n;
	uint64_t *tmp = malloc(most * sizeof(*tmp));
	int64_t *first = calloc(n, sizeof(*first));

	if (!tmp || !first) {
		free(tmp);
		free(first);
		return -1;
	}
	int64_t ref_first = v[ref].num ? v[ref].num[0] : 0;

	for (size_t i = 0; i < n; i++) {
		struct rk *r = &v[i];

		if (r->num || i == ref) {
			first[i] = r->num ? r->num[0] : ref_first;
			continue;
		}
		uint32_t mid = r->set->n / 2;
		int64_t k0 = (int64_t)nearest_end(&v[ref], wall_end(r, mid)) - mid, best = k0;
		uint64_t bf = UINT64_MAX;

		for (int64_t k = k0 - 1; k <= k0 + 1; k++) {
			uint64_t f = fit(&v[ref], r, k, tmp);

			if (f < bf) {
				bf = f;
				best = k;
			}
		}
		first[i] = ref_first + best;
		if (first[i] < lowest)
			lowest = first[i];
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i].num)
			continue;
		v[i].set->first = v[i].pubset->first = (uint32_t)(first[i] - lowest);
	}
	free(tmp);
	free(first);
	return 0;
}

/* ------------------------------------------------------------- arrival */

/* Rank r's collectives in its step i: [*lo, *hi) of r->coll. */
static void colls_in(const struct rk *r, uint32_t i, uint32_t *lo, uint32_t *hi)
{
	uint64_t a = r->set->start[i], b = r->set->start[i + r->set->n];
	uint32_t l = 0, h = r->n_coll;

	while (l < h) {
		uint32_t mid = l + (h - l) / 2;

		if (r->coll[2 * mid] < a)
			l = mid + 1;
		else
			h = mid;
	}
	*lo = l;
	while (l < r->n_coll && r->coll[2 * l] < b)
		l++;
	*hi = l;
}

/* Step index of number `num` in r, or -1. */
static int64_t index_of(const struct rk *r, uint32_t num)
{
	if (!r->num)
		return num >= r->set->first && num - r->set->first < r->set->n
			       ? (int64_t)(num - r->set->first) : -1;
	uint32_t lo = 0, hi = r->set->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r->num[mid] < num)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->set->n && r->num[lo] == num ? (int64_t)lo : -1;
}

struct iter {
	uint32_t num;
	int64_t *idx;          /* per rank: its step index */
	uint32_t *lo, *cnt;    /* per rank: its collectives in the step */
};

/* One iteration seen by every rank: waits, arrivals, and a straggler. */
static int compare(struct cv_steps *s, struct rk *v, size_t n, struct iter *it, uint64_t *tmp)
{
	uint32_t m = UINT32_MAX, kb = 0;
	uint64_t spread_b = 0;

	for (size_t r = 0; r < n; r++)
		if (it->cnt[r] < m)
			m = it->cnt[r];
	for (uint32_t k = 0; k < m; k++) {
		uint64_t lo = UINT64_MAX, hi = 0;

		for (size_t r = 0; r < n; r++) {
			uint64_t t = v[r].coll[2 * (it->lo[r] + k)] + (uint64_t)v[r].off;

			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
		}
		for (size_t r = 0; r < n; r++) { /* waiting: until the last rank came */
			const uint64_t *c = &v[r].coll[2 * (it->lo[r] + k)];
			uint64_t t = c[0] + (uint64_t)v[r].off, w = hi - t, d = c[1] - c[0];
			struct conv_rank_step *x = &s->rank_x[r][it->idx[r]];

			x->wait_ns += w < d ? w : d;
		}
		if (hi - lo > spread_b || k == 0) {
			spread_b = hi - lo;
			kb = k;
		}
	}
	size_t late = 0;

	for (size_t r = 0; r < n; r++) {
		struct conv_rank_step *x = &s->rank_x[r][it->idx[r]];

		x->arrive = v[r].coll[2 * (it->lo[r] + kb)];
		if (x->arrive + (uint64_t)v[r].off >
		    s->rank_x[late][it->idx[late]].arrive + (uint64_t)v[late].off)
			late = r;
	}
	uint32_t o = 0;

	for (size_t r = 0; r < n; r++)
		if (r != late)
			tmp[o++] = s->rank_x[r][it->idx[r]].arrive + (uint64_t)v[r].off;
	uint64_t med = cv_u64_median(tmp, o);
	uint64_t lateness = s->rank_x[late][it->idx[late]].arrive + (uint64_t)v[late].off - med;

	if (lateness < s->job.threshold_ns)
		return 0;
	size_t cap = s->job.n_stragglers;

	if (lt_grow((void **)&s->stragglers, &cap, s->job.n_stragglers + 1, sizeof(*s->stragglers), 16))
		return -1;
	s->stragglers[s->job.n_stragglers++] = (struct conv_straggler){
		.step = it->num, .who = (uint32_t)late, .late_ns = lateness };
	return 0;
}

/* Time in collectives of every rank's every step. */
static void coll_time(struct cv_steps *s, struct rk *v, size_t n)
{
	for (size_t r = 0; r < n; r++)
		for (uint32_t i = 0; i < v[r].set->n; i++) {
			uint32_t lo, hi;

			colls_in(&v[r], i, &lo, &hi);
			for (uint32_t k = lo; k < hi; k++)
				s->rank_x[r][i].coll_ns += v[r].coll[2 * k + 1] - v[r].coll[2 * k];
		}
}

/* The median of the ranks' median steps. */
static uint64_t median_step(const struct rk *v, size_t n, uint64_t *tmp)
{
	uint64_t *med = malloc(n * sizeof(*med)), m;

	if (!med)
		return 0;
	for (size_t r = 0; r < n; r++) {
		for (uint32_t i = 0; i < v[r].set->n; i++)
			tmp[i] = v[r].set->start[i + v[r].set->n] - v[r].set->start[i];
		med[r] = cv_u64_median(tmp, v[r].set->n);
	}
	m = cv_u64_median(med, (uint32_t)n);
	free(med);
	return m;
}

/* Every iteration numbered on all ranks, each rank with collectives in it. */
static int arrivals(struct cv_steps *s, struct rk *v, size_t n)
{
	struct iter it = { 0 };
	uint32_t lo = 0, hi = UINT32_MAX;
	uint32_t most = (uint32_t)n;
	int rc = 0;

	for (size_t r = 0; r < n; r++)
		most = v[r].set->n > most ? v[r].set->n : most;
	uint64_t *tmp = malloc(most * sizeof(*tmp));

	it.idx = malloc(n * sizeof(*it.idx));
	it.lo = malloc(n * sizeof(*it.lo));
	it.cnt = malloc(n * sizeof(*it.cnt));
	if (!tmp || !it.idx || !it.lo || !it.cnt)
		rc = -1;
	for (size_t r = 0; r < n; r++) {
		uint32_t a = num_of(&v[r], 0), b = num_of(&v[r], v[r].set->n - 1);

		lo = a > lo ? a : lo;
		hi = b < hi ? b : hi;
	}
	s->job.threshold_ns = tmp ? median_step(v, n, tmp) * LATE_PCT / 100 : 0;
	if (s->job.threshold_ns < LATE_MIN_NS)
		s->job.threshold_ns = LATE_MIN_NS;
	for (uint32_t num = lo; rc == 0 && num <= hi && hi != UINT32_MAX; num++) {
		size_t r;

		for (r = 0; r < n; r++) {
			uint32_t h;

			if ((it.idx[r] = index_of(&v[r], num)) < 0)
				break;
			colls_in(&v[r], (uint32_t)it.idx[r], &it.lo[r], &h);
			if (!(it.cnt[r] = h - it.lo[r]))
				break;
		}
		if (r < n)
			continue;
		it.num = num;
		if (!s->job.n_compared++)
			s->job.first = num;
		s->job.last = num;
		rc = compare(s, v, n, &it, tmp);
	}
	free(tmp);
	free(it.idx);
	free(it.lo);
	free(it.cnt);
	return rc;
}

/* ------------------------------------------------------------- verdict */

static void verdict(struct cv_steps *s)
{
	struct conv_job *j = &s->job;
	uint32_t *count = calloc(j->n_ranks, sizeof(*count)), top = 0, ranks = 0;
	uint64_t *late = malloc((j->n_stragglers + 1) * sizeof(*late));
	uint32_t nl = 0;

	if (!count || !late) {
		snprintf(j->verdict, sizeof(j->verdict), "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < j->n_stragglers; i++)
		count[j->stragglers[i].who]++;
	for (uint32_t r = 0; r < j->n_ranks; r++) {
		ranks += count[r] > 0;
		if (count[r] > count[top])
			top = r;
	}
	for (uint32_t i = 0; i < j->n_stragglers; i++)
		if (j->stragglers[i].who == top)
			late[nl++] = j->stragglers[i].late_ns;
	double med = cv_u64_median(late, nl) / 1e6;
	int32_t rk = j->ranks[top].rank;

	if (!j->n_compared)
		snprintf(j->verdict, sizeof(j->verdict), "not compared: no iteration where every rank "
			 "made collective calls (torch.distributed's, nccl*)");
	else if (!j->n_stragglers)
		snprintf(j->verdict, sizeof(j->verdict), "no straggler: at each of %u iterations the "
			 "ranks reached the collectives within %.1f ms of each other", j->n_compared,
			 j->threshold_ns / 1e6);
	else if (count[top] * 100 >= j->n_stragglers * ONE_RANK_PCT &&
		 count[top] * 100 >= j->n_compared * STEADY_PCT)
		snprintf(j->verdict, sizeof(j->verdict), "rank %d is steadily slow: late at %u of %u "
			 "iterations, by a median %.1f ms", rk, count[top], j->n_compared, med);
	else if (count[top] * 100 >= j->n_stragglers * ONE_RANK_PCT)
		snprintf(j->verdict, sizeof(j->verdict), "rank %d was late at %u of %u iterations, by "
			 "a median %.1f ms; %u late iterations of other ranks", rk, count[top],
			 j->n_compared, med, j->n_stragglers - count[top]);
	else
		snprintf(j->verdict, sizeof(j->verdict), "scattered: %u ranks were late at %u of %u "
			 "iterations (most: rank %d, %u times); no one rank holds the others back",
			 ranks, j->n_stragglers, j->n_compared, rk, count[top]);
out:
	free(count);
	free(late);
}

int cv_ranks_relate(struct cv_steps *s, struct conv_host_meta *const *metas)
{
	struct rk *v;
	size_t n;
	int rc = -1;

	if (gather(s, metas, &v, &n))
		return -1;
	if (n < 2) {
		free(v);
		return 0;
	}
	s->ranks = calloc(n, sizeof(*s->ranks));
	s->rank_x = calloc(n, sizeof(*s->rank_x));
	if (!s->ranks || !s->rank_x)
		goto out;
	s->job.n_ranks = (uint32_t)n;
	s->job.ranks = s->ranks;
	for (size_t r = 0; r < n; r++) {
		if (!(s->rank_x[r] = calloc(v[r].set->n, sizeof(**s->rank_x))) || collectives(s, &v[r]))
			goto out;
		v[r].pub.set = v[r].pubset;
		v[r].pub.x = s->rank_x[r];
	}
	if (number(v, n))
		goto out;
	coll_time(s, v, n);
	if (arrivals(s, v, n))
		goto out;
	for (size_t r = 0; r < n; r++)
		s->ranks[r] = v[r].pub;
	s->job.stragglers = s->stragglers;
	verdict(s);
	rc = 0;
out:
	for (size_t r = 0; r < n; r++)
		free(v[r].coll);
	free(v);
	return rc;
}

void cv_ranks_free(struct cv_steps *s)
{
	for (uint32_t r = 0; s->rank_x && r < s->job.n_ranks; r++)
		free(s->rank_x[r]);
	free(s->rank_x);
	free(s->ranks);
	free(s->stragglers);
	s->rank_x = NULL;
	s->ranks = NULL;
	s->stragglers = NULL;
}
