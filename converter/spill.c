/* SPDX-License-Identifier: Apache-2.0 */
#include "spill.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The sort buffer is large and filled once from start to end: map it
 * directly and ask for huge pages, which saves most page-fault work. */
static void *big_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, n, MADV_HUGEPAGE);
	return p;
}

static void big_free(void *p, size_t n)
{
	if (p)
		munmap(p, n);
}

/* ------------------------------------------------------------ packing */

struct pk_head {
	uint32_t type, pid, tid, nstr;
	uint64_t ts;
};

static size_t member_size(uint32_t type)
{
	const struct evlog_event *e = NULL;

	switch (type) {
	case EV_SYSCALL: return sizeof(e->u.syscall);
	case EV_CPU_SAMPLE: return sizeof(e->u.cpu_sample);
	case EV_PY_ENTER: return sizeof(e->u.py_enter);
	case EV_PY_SAMPLE: return sizeof(e->u.py_sample);
	case EV_LIB_CALL: return sizeof(e->u.lib_call);
	case EV_GPU_KERNEL: return sizeof(e->u.gpu_kernel);
	case EV_GPU_MEMCPY: return sizeof(e->u.gpu_memcpy);
	case EV_GPU_MEMSET: return sizeof(e->u.gpu_memset);
	case EV_GPU_API: return sizeof(e->u.gpu_api);
	case EV_MARKER: return sizeof(e->u.marker);
	default: return 0;
	}
}

/* The string fields of a timeline event. Stacks are never packed: samples
 * travel as interned folded strings. */
static int str_fields(struct evlog_event *e, struct evlog_str **f)
{
	switch (e->type) {
	case EV_PY_ENTER:
		f[0] = &e->u.py_enter.func;
		f[1] = &e->u.py_enter.file;
		return 2;
	case EV_LIB_CALL:
		f[0] = &e->u.lib_call.lib;
		f[1] = &e->u.lib_call.symbol;
		f[2] = &e->u.lib_call.detail;
		return 3;
	case EV_GPU_KERNEL: f[0] = &e->u.gpu_kernel.name; return 1;
	case EV_GPU_API: f[0] = &e->u.gpu_api.name; return 1;
	case EV_MARKER:
		f[0] = &e->u.marker.name;
		f[1] = &e->u.marker.text;
		return 2;
	default: return 0;
	}
}

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

size_t cv_rec_size(const struct evlog_event *ev)
{
	struct evlog_event tmp = *ev;
	struct evlog_str *f[4];
	int n = str_fields(&tmp, f);
	size_t sz = sizeof(struct cv_rec) + sizeof(struct pk_head) + member_size(ev->type);

	for (int i = 0; i < n; i++)
		sz += 4 + f[i]->len + 1;
	return ALIGN8(sz);
}

void cv_rec_pack(struct cv_rec *r, const struct evlog_event *ev)
{
	struct evlog_event tmp = *ev;
	struct evlog_str *f[4];
	int n = str_fields(&tmp, f);
	char *p = (char *)(r + 1);
	struct pk_head h = { ev->type, ev->pid, ev->tid, (uint32_t)n, ev->ts };
	size_t msz = member_size(ev->type);

	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, &ev->u, msz);
	p += msz;
	for (int i = 0; i < n; i++) {
		uint32_t len = f[i]->len;

		memcpy(p, &len, 4);
		if (len)
			memcpy(p + 4, f[i]->ptr, len);
		p[4 + len] = 0;
		p += 4 + len + 1;
	}
	size_t used = (size_t)(p - (char *)r);

	memset(p, 0, ALIGN8(used) - used);
	r->len = (uint32_t)ALIGN8(used);
}

int cv_rec_unpack(const struct cv_rec *r, struct evlog_event *ev)
{
	const char *p = (const char *)(r + 1), *end = (const char *)r + r->len;
	struct pk_head h;
	struct evlog_str *f[4];

	if ((size_t)(end - p) < sizeof(h))
		return -1;
	memcpy(&h, p, sizeof(h));
	p += sizeof(h);
	size_t msz = member_size(h.type);

	if (!msz || (size_t)(end - p) < msz)
		return -1;
	memset(ev, 0, sizeof(*ev));
	ev->type = h.type;
	ev->pid = h.pid;
	ev->tid = h.tid;
	ev->ts = h.ts;
	memcpy(&ev->u, p, msz);
	p += msz;
	int n = str_fields(ev, f);

	if ((uint32_t)n != h.nstr)
		return -1;
	for (int i = 0; i < n; i++) {
		uint32_t len;

		if (end - p < 4)
			return -1;
		memcpy(&len, p, 4);
		if ((size_t)(end - p) < 4 + (size_t)len + 1)
			return -1;
		f[i]->ptr = p + 4;
		f[i]->len = len;
		p += 4 + len + 1;
	}
	return 0;
}

/* -------------------------------------------------------------- runs */

struct idx_ent {
	uint64_t start, dur;
	uint32_t track;
	uint32_t pad;
	uint64_t off;
};

struct run_reader {
	FILE *f;
	struct cv_rec *cur;
	size_t cap;
};

struct cv_spill {
	char *buf;
	size_t cap, used;
	struct idx_ent *idx, *sorted;
	size_t n_idx, cap_idx, cap_sorted;
	uint32_t n_tracks;
	uint32_t *counts;
	char tmpdir[4096];
	FILE **runs;
	uint32_t n_runs;
	uint64_t count;
	/* iteration */
	int in_memory;          /* a single run, never written out */
	size_t mem_pos;
	struct run_reader *rd;
	uint32_t *heap, n_heap;
	int first_pop;
};

struct cv_spill *cv_spill_new(size_t run_bytes, uint32_t n_tracks, const char *tmpdir,
			      char *err, size_t errsz)
{
	struct cv_spill *s = calloc(1, sizeof(*s));
	const char *t = tmpdir ? tmpdir : getenv("TMPDIR");

	if (!s)
		goto oom;
	s->cap = run_bytes < (1u << 16) ? (1u << 16) : run_bytes;
	s->buf = big_alloc(s->cap);
	s->n_tracks = n_tracks ? n_tracks : 1;
	s->counts = calloc((size_t)s->n_tracks + 1, sizeof(*s->counts));
	if (!s->buf || !s->counts)
		goto oom;
	snprintf(s->tmpdir, sizeof(s->tmpdir), "%s", t && *t ? t : "/tmp");
	return s;
oom:
	cv_spill_free(s);
	snprintf(err, errsz, "out of memory for the sort buffer (%zu MiB); lower LLMT_CONV_RUN_MB",
		 run_bytes >> 20);
	return NULL;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct idx_ent *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1; /* longer (the parent) first */
	return x->off < y->off ? -1 : x->off > y->off;
}

#define SORT_BLOCK 32

/* Stable merge sort of a mostly ordered track (records of a thread arrive
 * nearly in time order): insertion sort of small blocks, then merges that
 * are skipped when two blocks are already in order. tmp holds n entries. */
static void merge_sort(struct idx_ent *a, struct idx_ent *tmp, size_t n)
{
	for (size_t lo = 0; lo < n; lo += SORT_BLOCK) {
		size_t hi = lo + SORT_BLOCK < n ? lo + SORT_BLOCK : n;

		for (size_t i = lo + 1; i < hi; i++) {
			struct idx_ent x = a[i];
			size_t j = i;

			while (j > lo && cmp_ent(&a[j - 1], &x) > 0) {
				a[j] = a[j - 1];
				j--;
			}
			a[j] = x;
		}
	}
	for (size_t w = SORT_BLOCK; w < n; w *= 2) {
		for (size_t lo = 0; lo + w < n; lo += 2 * w) {
			size_t mid = lo + w, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;

			if (cmp_ent(&a[mid - 1], &a[mid]) <= 0)
				continue;
			memcpy(tmp + lo, a + lo, (mid - lo) * sizeof(*a));
			while (i < mid && j < hi)
				a[k++] = cmp_ent(&tmp[i], &a[j]) <= 0 ? tmp[i++] : a[j++];
			while (i < mid)
				a[k++] = tmp[i++];
		}
	}
}

/* Counting sort by track (stable), then each track by time: tracks are
 * mostly in order already, so most segments are only checked. The input
 * index, no longer needed once distributed, is the merge sort's scratch. */
static int sort_run(struct cv_spill *s)
{
	size_t n = s->n_idx;
	struct idx_ent *out = s->sorted;

	/* One output array for every run: reallocated only when it grows. */
	if (n > s->cap_sorted || !out) {
		out = realloc(s->sorted, (n ? n : 1) * sizeof(*out));
		if (!out)
			return -1;
		s->sorted = out;
		s->cap_sorted = n ? n : 1;
	}
	memset(s->counts, 0, ((size_t)s->n_tracks + 1) * sizeof(*s->counts));
	for (size_t i = 0; i < n; i++)
		s->counts[s->idx[i].track + 1]++;
	for (uint32_t t = 0; t < s->n_tracks; t++)
		s->counts[t + 1] += s->counts[t];
	for (size_t i = 0; i < n; i++)
		out[s->counts[s->idx[i].track]++] = s->idx[i];
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		int sorted = 1;

		while (j < n && out[j].track == out[i].track) {
			if (sorted && cmp_ent(&out[j - 1], &out[j]) > 0)
				sorted = 0;
			j++;
		}
		if (!sorted)
			merge_sort(out + i, s->idx + i, j - i);
		i = j;
	}
	return 0;
}

static FILE *anon_file(const char *dir, char *err, size_t errsz)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0) {
		char tmpl[4200];

		snprintf(tmpl, sizeof(tmpl), "%s/.llmt-sort.XXXXXX", dir);
		fd = mkstemp(tmpl);
		if (fd >= 0)
			unlink(tmpl);
	}
	FILE *f = fd >= 0 ? fdopen(fd, "w+") : NULL;

	if (!f) {
		snprintf(err, errsz, "cannot create a sort file in %s: %s; set TMPDIR to a "
			 "writable directory with space", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return f;
}

static void refresh_keys(struct cv_spill *s);

static int write_run(struct cv_spill *s, char *err, size_t errsz)
{
	FILE *f;

	refresh_keys(s);
	if (sort_run(s)) {
		snprintf(err, errsz, "out of memory sorting a run");
		return -1;
	}
	if (!(f = anon_file(s->tmpdir, err, errsz)))
		return -1;
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	for (size_t i = 0; i < s->n_idx; i++) {
		const struct cv_rec *r = (const struct cv_rec *)(s->buf + s->sorted[i].off);

		if (fwrite(r, r->len, 1, f) != 1)
			goto ioerr;
	}
	if (fflush(f) || fseek(f, 0, SEEK_SET))
		goto ioerr;
	FILE **nr = realloc(s->runs, (s->n_runs + 1) * sizeof(*nr));

	if (!nr) {
		fclose(f);
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	s->runs = nr;
	s->runs[s->n_runs++] = f;
	s->used = 0;
	s->n_idx = 0;
	return 0;
ioerr:
	snprintf(err, errsz, "writing a sort file in %s: %s; set TMPDIR to a directory with "
		 "more space", s->tmpdir, strerror(errno));
	fclose(f);
	return -1;
}

struct cv_rec *cv_spill_reserve(struct cv_spill *s, size_t len, char *err, size_t errsz)
{
	if (len > s->cap) {
		snprintf(err, errsz, "event of %zu bytes larger than the sort buffer", len);
		return NULL;
	}
	if (s->used + len > s->cap && write_run(s, err, errsz))
		return NULL;
	if (s->n_idx == s->cap_idx) {
		size_t nc = s->cap_idx ? s->cap_idx * 2 : 4096;
		struct idx_ent *ni = realloc(s->idx, nc * sizeof(*ni));

		if (!ni) {
			snprintf(err, errsz, "out of memory");
			return NULL;
		}
		s->idx = ni;
		s->cap_idx = nc;
	}
	struct cv_rec *r = (struct cv_rec *)(s->buf + s->used);

	s->idx[s->n_idx].off = s->used;
	s->n_idx++;
	s->used += len;
	s->count++;
	return r;
}

/* The index entry takes its key from the filled record, lazily: records
 * are filled after reserve(), so keys are read at sort time. */
static void refresh_keys(struct cv_spill *s)
{
	for (size_t i = 0; i < s->n_idx; i++) {
		const struct cv_rec *r = (const struct cv_rec *)(s->buf + s->idx[i].off);

		s->idx[i].start = r->start;
		s->idx[i].dur = r->dur;
		s->idx[i].track = r->track < s->n_tracks ? r->track : s->n_tracks - 1;
	}
}

static int rec_less(const struct cv_rec *a, const struct cv_rec *b)
{
	if (a->track != b->track)
		return a->track < b->track;
	if (a->start != b->start)
		return a->start < b->start;
	if (a->dur != b->dur)
		return a->dur > b->dur;
	return 0;
}

/* Heap order: the records, then the run (earlier runs arrived first). */
static int heap_less(const struct cv_spill *s, uint32_t x, uint32_t y)
{
	const struct cv_rec *a = s->rd[x].cur, *b = s->rd[y].cur;

	return rec_less(a, b) || (!rec_less(b, a) && x < y);
}

static int read_rec(struct run_reader *rd, char *err, size_t errsz)
{
	struct cv_rec h;

	if (fread(&h, sizeof(h), 1, rd->f) != 1)
		return 0;
	if (h.len < sizeof(h) || h.len > (1u << 30)) {
		snprintf(err, errsz, "sort file damaged");
		return -1;
	}
	if (h.len > rd->cap) {
		void *n = realloc(rd->cur, h.len);

		if (!n) {
			snprintf(err, errsz, "out of memory");
			return -1;
		}
		rd->cur = n;
		rd->cap = h.len;
	}
	memcpy(rd->cur, &h, sizeof(h));
	if (fread((char *)rd->cur + sizeof(h), h.len - sizeof(h), 1, rd->f) != 1) {
		snprintf(err, errsz, "sort file cut short");
		return -1;
	}
	return 1;
}

static void heap_down(struct cv_spill *s, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;

		if (l < s->n_heap && heap_less(s, s->heap[l], s->heap[m]))
			m = l;
		if (l + 1 < s->n_heap && heap_less(s, s->heap[l + 1], s->heap[m]))
			m = l + 1;
		if (m == i)
			return;
		uint32_t t = s->heap[i];

		s->heap[i] = s->heap[m];
		s->heap[m] = t;
		i = m;
	}
}

int cv_spill_finish(struct cv_spill *s, char *err, size_t errsz)
{
	/* keys are refreshed before every sort (see write_run / below) */
	if (s->n_runs == 0) {
		refresh_keys(s);
		if (sort_run(s)) {
			snprintf(err, errsz, "out of memory sorting");
			return -1;
		}
		s->in_memory = 1;
		s->mem_pos = 0;
		return 0;
	}
	if (s->n_idx && write_run(s, err, errsz))
		return -1;
	big_free(s->buf, s->cap);
	s->buf = NULL;
	free(s->idx);
	s->idx = NULL;
	free(s->sorted);
	s->sorted = NULL;
	s->rd = calloc(s->n_runs, sizeof(*s->rd));
	s->heap = calloc(s->n_runs, sizeof(*s->heap));
	if (!s->rd || !s->heap) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (uint32_t i = 0; i < s->n_runs; i++) {
		int r;

		s->rd[i].f = s->runs[i];
		setvbuf(s->rd[i].f, NULL, _IOFBF, 1 << 20);
		if ((r = read_rec(&s->rd[i], err, errsz)) < 0)
			return -1;
		if (r)
			s->heap[s->n_heap++] = i;
	}
	for (uint32_t i = s->n_heap / 2 + 1; i-- > 0;)
		heap_down(s, i);
	s->first_pop = 1;
	return 0;
}

int cv_spill_next(struct cv_spill *s, const struct cv_rec **out, char *err, size_t errsz)
{
	if (s->in_memory) {
		if (s->mem_pos >= s->n_idx)
			return 0;
		*out = (const struct cv_rec *)(s->buf + s->sorted[s->mem_pos++].off);
		return 1;
	}
	/* Advance the run whose record was handed out last time. */
	if (!s->first_pop && s->n_heap) {
		uint32_t top = s->heap[0];
		int r = read_rec(&s->rd[top], err, errsz);

		if (r < 0)
			return -1;
		if (!r)
			s->heap[0] = s->heap[--s->n_heap];
		if (s->n_heap)
			heap_down(s, 0);
	}
	s->first_pop = 0;
	if (!s->n_heap)
		return 0;
	*out = s->rd[s->heap[0]].cur;
	return 1;
}

uint32_t cv_spill_runs(const struct cv_spill *s)
{
	return s->n_runs ? s->n_runs : 1;
}

uint64_t cv_spill_count(const struct cv_spill *s)
{
	return s->count;
}

void cv_spill_free(struct cv_spill *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_runs; i++)
		fclose(s->runs[i]);
	if (s->rd)
		for (uint32_t i = 0; i < s->n_runs; i++)
			free(s->rd[i].cur);
	free(s->rd);
	free(s->heap);
	free(s->runs);
	big_free(s->buf, s->cap);
	free(s->idx);
	free(s->sorted);
	free(s->counts);
	free(s);
}
