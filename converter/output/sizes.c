/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sizes a budget plans with (sink.h: struct conv_sizes), from one pass
 * over the sorted records before any is written: each record's duration
 * (cut to its parent as the emitter cuts it), whether a budget may fold it,
 * and its strings. Runs are counted as the folding filter (fold.c) makes
 * them: a foldable call starts a run at threshold bucket k when it is
 * folded (its bucket < k), its parent is not (nor any ancestor: it would
 * lie inside that one's fold) and the sibling before it is not, a call or
 * a longer item (instants do not part siblings). So it adds one run for k
 * in (its bucket, min(sibling's, ancestors') bucket]: a difference array.
 */
#include "converter/output/sizes.h"
#include "converter/output/evview.h"

#include <stdlib.h>
#include <string.h>

#define NB (CONV_SIZE_BUCKETS - 1) /* "never folded", as a bucket past all */

struct lvl {
	uint64_t end;
	unsigned lim;   /* the smallest bucket of this item and its ancestors (NB: none foldable) */
	unsigned last;  /* the bucket of the child before (NB: none, or one not foldable) */
};

static int foldable_rec(const struct cv_track *t, const struct evlog_event *e)
{
	return t->kind == CONV_TRACK_THREAD && cv_view_of(e->type)->fold && !cv_view_has_flow(e);
}

/* A sample's stack (it travels interned, as r->stack), and its leaf as the name. */
static uint64_t stack_bytes(const struct cv_core *c, const struct cv_rec *r)
{
	return r->stack ? strlen(cv_strtab_get(&c->stacks, r->stack - 1)) + 32 : 0;
}

/* The bytes of text the record brings to a trace: its strings and stacks
 * (eventlog/evlog_schema.h), and its made name (evview.h). */
#define SB_U8(m, f)
#define SB_U32(m, f)
#define SB_U64(m, f)
#define SB_X64(m, f)
#define SB_SRC(m, f)
#define SB_I64(m, f)
#define SB_CORR(m, f)
#define SB_U32X3(m, f)
#define SB_ARGS(m, f)
#define SB_STR(m, f) +e->u.m.f.len
#define SB_STACK(m, f) +stack_bytes(c, r)
#define SB_PYSTACK(m, f) +stack_bytes(c, r)
#define SB_FIELD(m, kind, f) SB_##kind(m, f)
#define SB_CASE(N, num, m, track, dur, corr) \
	case EV_##N: \
		return (uint64_t)0 EVLOG_FIELDS_##m(SB_FIELD, m) + cv_view_of(EV_##N)->made_bytes;

static uint64_t str_bytes(const struct cv_core *c, const struct cv_rec *r, const struct evlog_event *e)
{
	switch (e->type) {
		EVLOG_TYPES(SB_CASE)
	default:
		return cv_view_of(e->type)->made_bytes;
	}
}

struct scan {
	struct conv_sizes *sz;
	struct lvl *st;         /* st[0]: the track itself */
	size_t n, cap;
	uint32_t track;
};

static int push(struct scan *s, uint64_t end, unsigned lim)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 64;
		struct lvl *ns = realloc(s->st, nc * sizeof(*ns));

		if (!ns)
			return -1;
		s->st = ns;
		s->cap = nc;
	}
	s->st[s->n++] = (struct lvl){ .end = end, .lim = lim, .last = NB };
	return 0;
}

static int one(struct scan *s, const struct cv_core *c, const struct cv_rec *r)
{
	const struct cv_track *t = &c->tracks[r->track];
	struct conv_sizes *sz = s->sz;
	struct evlog_event e;

	if (r->track != s->track) {
		s->track = r->track;
		s->n = 0;
		sz->tracks++;
		if (push(s, UINT64_MAX, NB))
			return -1;
	}
	if (cv_rec_unpack(r, &e))
		return 0; /* the emitter skips it too */
	while (s->n > 1 && s->st[s->n - 1].end <= r->start)
		s->n--;
	struct lvl *top = &s->st[s->n - 1];
	uint64_t dur = r->dur;

	if (s->n > 1 && r->start + dur > top->end)
		dur = top->end - r->start;
	unsigned self = NB;

	if (foldable_rec(t, &e)) {
		unsigned b = conv_size_bucket(dur), up = top->last < top->lim ? top->last : top->lim;

		sz->n[b]++;
		sz->str[b] += str_bytes(c, r, &e);
		if (up > b) {
			sz->runs_d[b + 1]++;
			sz->runs_d[up + 1]--;
		}
		top->last = b;
		self = b;
	} else {
		sz->n_other++;
		sz->str_other += str_bytes(c, r, &e);
		sz->flows += cv_view_has_flow(&e);
		if (dur)
			top->last = NB;
	}
	return dur ? push(s, r->start + dur, self < top->lim ? self : top->lim) : 0;
}

int cv_sizes_scan(struct cv_core *c, struct cv_spill *sp, struct conv_sizes *sz)
{
	struct scan s = { .sz = sz, .track = UINT32_MAX };
	const struct cv_rec *r;
	uint64_t n = 0, total = cv_spill_count(sp);
	int rc;

	memset(sz, 0, sizeof(*sz));
	while ((rc = cv_spill_next(sp, &r, c->err, sizeof(c->err))) == 1) {
		if (r->track < c->n_tracks && one(&s, c, r)) {
			snprintf(c->err, sizeof(c->err), "out of memory");
			rc = -1;
			break;
		}
		if ((++n & 0xffff) == 0 && cv_progress(c, "sizing", n, total)) {
			rc = -1;
			break;
		}
	}
	free(s.st);
	if (rc == 0 && cv_spill_rewind(sp, c->err, sizeof(c->err)))
		rc = -1;
	return rc;
}
