/* SPDX-License-Identifier: Apache-2.0 */
/* Pairing the uprobe's and CUPTI's records of one CUDA call (see dedup.h). */
#include "converter/pairing/dedup.h"
#include "eventlog/evlog_format.h"

#include <stdlib.h>
#include <string.h>

enum { PEND_OTHER, PEND_LIB, PEND_API };

#define NAME_MAX_LEN 64

struct cv_pend {
	size_t off;            /* the record's copy in buf */
	uint64_t start, end;
	uint64_t corr;         /* API: its id; LIB: the paired API's id */
	uint32_t track;
	uint8_t kind;
	uint8_t gone;          /* an API record merged into its LIB twin */
	uint8_t paired;
	uint8_t name_len;
	char name[NAME_MAX_LEN];
};

/* Length of name without trailing "_v<digits>", "_ptsz", "_ptds". */
static size_t base_len(const char *s, size_t n)
{
	for (;;) {
		if (n > 5 && (!memcmp(s + n - 5, "_ptsz", 5) || !memcmp(s + n - 5, "_ptds", 5))) {
			n -= 5;
			continue;
		}
		size_t k = n;

		while (k && s[k - 1] >= '0' && s[k - 1] <= '9')
			k--;
		if (k < n && k > 2 && s[k - 1] == 'v' && s[k - 2] == '_') {
			n = k - 2;
			continue;
		}
		return n;
	}
}

int cv_dedup_same_func(const char *a, size_t alen, const char *b, size_t blen)
{
	alen = base_len(a, alen);
	blen = base_len(b, blen);
	return alen == blen && !memcmp(a, b, alen);
}

void cv_dedup_init(struct cv_dedup *d, cv_dedup_emit_fn emit, void *ctx)
{
	memset(d, 0, sizeof(*d));
	d->emit = emit;
	d->ctx = ctx;
}

void cv_dedup_free(struct cv_dedup *d)
{
	free(d->q);
	free(d->buf);
	d->q = NULL;
	d->buf = NULL;
	d->head = d->n = d->cap = d->buf_len = d->buf_cap = 0;
}

static int release_one(struct cv_dedup *d)
{
	struct cv_pend *p = &d->q[d->head++];
	int rc = p->gone ? 0
		 : d->emit(d->ctx, (const struct cv_rec *)(d->buf + p->off),
			   p->kind == PEND_LIB ? p->corr : 0);

	if (d->head == d->n)
		d->head = d->n = d->buf_len = 0;
	return rc;
}

/* Release what no later record (at start on track) can pair with. */
static int release_until(struct cv_dedup *d, uint32_t track, uint64_t start)
{
	while (d->head < d->n) {
		const struct cv_pend *p = &d->q[d->head];

		if (p->track == track && p->start + CV_DUP_START_NS + CV_DUP_SLACK_NS >= start &&
		    d->n - d->head < CV_DUP_QUEUE_MAX)
			break;
		if (release_one(d))
			return -1;
	}
	return 0;
}

int cv_dedup_flush(struct cv_dedup *d)
{
	while (d->head < d->n)
		if (release_one(d))
			return -1;
	return 0;
}

/* One call's two records overlap, and one holds the other: CUPTI's inside
 * the uprobe's (stamped from inside the function, give or take the
 * slack), or the uprobe's whole inside CUPTI's (stamps taken around the
 * call). Overlap is required: back-to-back calls a microsecond apart fit
 * the slack, and the next call's record must not take this one's place. */
static int pairs(const struct cv_pend *lib, const struct cv_pend *api)
{
	if (lib->name_len != api->name_len || memcmp(lib->name, api->name, lib->name_len) ||
	    api->start >= lib->end || lib->start >= api->end)
		return 0;
	return (api->start + CV_DUP_SLACK_NS >= lib->start &&
		api->start <= lib->start + CV_DUP_START_NS &&
		api->end <= lib->end + CV_DUP_SLACK_NS) ||
	       (api->start <= lib->start && lib->end <= api->end);
}

/* The held record of the other kind that n pairs with, closest start first. */
static struct cv_pend *find_twin(struct cv_dedup *d, const struct cv_pend *n)
{
	struct cv_pend *best = NULL;
	uint64_t best_gap = UINT64_MAX;

	for (size_t i = d->head; i < d->n; i++) {
		struct cv_pend *p = &d->q[i];

		if (p->paired || p->gone || p->kind == PEND_OTHER || p->kind == n->kind)
			continue;
		if (!(n->kind == PEND_LIB ? pairs(n, p) : pairs(p, n)))
			continue;
		uint64_t gap = p->start > n->start ? p->start - n->start : n->start - p->start;

		if (gap < best_gap) {
			best = p;
			best_gap = gap;
		}
	}
	return best;
}

/* Fill n's kind, bounds, name and id from the record. */
static void describe(struct cv_pend *n, const struct cv_rec *r)
{
	struct evlog_event e;
	struct evlog_str name = { 0 };

	n->kind = PEND_OTHER;
	n->start = r->start;
	n->end = r->start + r->dur;
	n->track = r->track;
	if (cv_rec_unpack(r, &e))
		return;
	if (e.type == EV_LIB_CALL) {
		name = e.u.lib_call.symbol;
		n->corr = 0;
	} else if (e.type == EV_GPU_API) {
		name = e.u.gpu_api.name;
		n->corr = e.u.gpu_api.correlation_id;
	} else {
		return;
	}
	size_t len = base_len(name.ptr ? name.ptr : "", name.len);

	if (!len || len > NAME_MAX_LEN)
		return; /* not a CUDA entry point: never paired */
	memcpy(n->name, name.ptr, len);
	n->name_len = (uint8_t)len;
	n->kind = e.type == EV_LIB_CALL ? PEND_LIB : PEND_API;
}

static int grow(struct cv_dedup *d, size_t rec_len)
{
	return lt_grow((void **)&d->q, &d->cap, d->n + 1, sizeof(*d->q), 256) ||
	       lt_grow((void **)&d->buf, &d->buf_cap, d->buf_len + rec_len, 1, 1u << 16) ? -1 : 0;
}

static int hold(struct cv_dedup *d, const struct cv_rec *r, int candidate)
{
	struct cv_pend n = { 0 };

	if (candidate)
		describe(&n, r);
	else
		n = (struct cv_pend){ .start = r->start, .end = r->start + r->dur, .track = r->track };
	if (n.kind != PEND_OTHER) {
		struct cv_pend *twin = find_twin(d, &n);

		if (twin) {
			d->merged++;
			twin->paired = n.paired = 1;
			if (n.kind == PEND_API) {
				twin->corr = n.corr;
				return 0; /* the LIB twin stands for both */
			}
			n.corr = twin->corr;
			twin->gone = 1;
		}
	}
	if (grow(d, r->len)) {
		/* No memory to hold it: keep the order, give up merging here. */
		d->oom = 1;
		return cv_dedup_flush(d) ? -1 : d->emit(d->ctx, r, n.kind == PEND_LIB ? n.corr : 0);
	}
	n.off = d->buf_len;
	memcpy(d->buf + d->buf_len, r, r->len);
	d->buf_len += r->len;
	d->q[d->n++] = n;
	return 0;
}

int cv_dedup_feed(struct cv_dedup *d, const struct cv_rec *r)
{
	uint32_t t = cv_rec_type(r);
	int candidate = t == EV_LIB_CALL || t == EV_GPU_API;

	if (release_until(d, r->track, r->start))
		return -1;
	if (d->head == d->n && !candidate)
		return d->emit(d->ctx, r, 0);
	return hold(d, r, candidate);
}
