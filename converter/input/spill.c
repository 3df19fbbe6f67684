/* SPDX-License-Identifier: Apache-2.0 */
#include "converter/input/spill.h"
#include "eventlog/evlog_format.h"
#include "common/io.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

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

/* A record's body is the event in a compact form: the type byte (its top
 * bits: the record's padding, see spill.h), then varints: pid, tid,
 * ts - start zigzagged, then the type's fields in schema order
 * (eventlog/evlog_schema.h; signed ones zigzagged, correlation ids whole);
 * strings as varint length + bytes + NUL (so unpacked strings are C
 * strings); an argument list as its count and that many values. About half
 * the bytes of the structs: the sort files are the converter's biggest I/O.
 * Stacks are never packed: samples travel as interned folded strings. One
 * field list serves sizing, packing and unpacking: each kind maps to
 * PK_U_ unsigned, PK_S_ signed, PK_T_ string, PK_A3_ three u32, PK_ARGS_
 * count + values, or nothing (stacks). Every type with a place on a timeline packs. */
#define PK_KIND_U8(m, f) PK_U_(m.f);
#define PK_KIND_U32(m, f) PK_U_(m.f);
#define PK_KIND_U64(m, f) PK_U_(m.f);
#define PK_KIND_X64(m, f) PK_U_(m.f);
#define PK_KIND_SRC(m, f) PK_U_(m.f);
#define PK_KIND_CORR(m, f) PK_U_(m.f);
#define PK_KIND_I64(m, f) PK_S_(m.f);
#define PK_KIND_STR(m, f) PK_T_(m.f);
#define PK_KIND_U32X3(m, f) PK_A3_(m.f);
#define PK_KIND_ARGS(m, f) PK_ARGS_(m.n##f, m.f);
#define PK_KIND_STACK(m, f)
#define PK_KIND_PYSTACK(m, f)
#define PK_PACKS_META(x)
#define PK_PACKS_THREAD(x) x
#define PK_PACKS_STREAM(x) x
#define PK_PACKS_DEVICE(x) x
/* Each user of PK_FIELDS defines PK_U_, PK_S_, PK_T_, PK_A3_ and PK_ARGS_. */
#define PK_FIELD(m, kind, f) PK_KIND_##kind(m, f)
#define PK_CASE(N, num, m, track, dur, corr) \
	PK_PACKS_##track(case EV_##N: EVLOG_FIELDS_##m(PK_FIELD, m) break;)
#define PK_FIELDS EVLOG_TYPES(PK_CASE)

/* The event log's varints (eventlog/evlog_format.h), on char buffers. */
static inline char *put_v(char *p, uint64_t v)
{
	return (char *)lt_varint_put((uint8_t *)p, v);
}

#define zz lt_zigzag
#define unzz lt_unzigzag

/* Bounds-checked varint read: -1 past end or on an over-long varint. */
static inline int get_v(const char **pp, const char *end, uint64_t *out)
{
	const uint8_t *q = lt_varint_get((const uint8_t *)*pp, (const uint8_t *)end, out);
	if (!q)
		return -1;
	*pp = (const char *)q;
	return 0;
}

static inline char *put_s(char *p, struct evlog_str s)
{
	p = put_v(p, s.len);
	if (s.len)
		memcpy(p, s.ptr, s.len);
	p[s.len] = 0;
	return p + s.len + 1;
}

static inline int get_s(const char **pp, const char *end, struct evlog_str *s)
{
	uint64_t n;

	if (get_v(pp, end, &n) || n >= (uint64_t)(end - *pp) || (*pp)[n])
		return -1;
	s->ptr = *pp;
	s->len = (uint32_t)n;
	*pp += n + 1;
	return 0;
}

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
#define VMAX 10
/* Sort file I/O: bytes per write() and per run read buffer (at most). */
#define SPILL_IO_BYTES (4u << 20)
/* Runs are written as zstd blocks of this many bytes (raw), each behind a
 * header {u32 raw length, u32 compressed length}: the sorted records are
 * varints and repeated names, which compress by an order of magnitude at
 * zstd's fastest levels (docs/MEASUREMENTS.md, converter throughput and
 * memory) for less CPU than the kernel spends writing and reading the raw
 * bytes back through the page cache. Small blocks keep each run's read
 * buffer small when a long log makes hundreds of runs. */
#define SPILL_BLOCK (64u << 10)
#define SPILL_ZLEVEL (1)
#define BLOCK_HEAD 8

static int packs(uint32_t type)
{
	return evlog_type_traits(type)->track != EVLOG_TRACK_META;
}

_Static_assert(EV_TYPE_MAX <= CV_REC_TYPE_MASK, "a record's type byte keeps 5 bits");

/* The most numbers a packed type holds (strings apart): the size of a
 * union of one char array per type, one byte per number. */
#define PK_NUM_U8 1
#define PK_NUM_U32 1
#define PK_NUM_U64 1
#define PK_NUM_X64 1
#define PK_NUM_SRC 1
#define PK_NUM_CORR 1
#define PK_NUM_I64 1
#define PK_NUM_STR 0
#define PK_NUM_U32X3 3
#define PK_NUM_ARGS (1 + EVLOG_MAX_ARGS)
#define PK_NUM_STACK 0
#define PK_NUM_PYSTACK 0
#define PK_NUM_FIELD(m, kind, f) + PK_NUM_##kind
#define PK_NUM_MEMBER(N, num, m, track, dur, corr) char m[1 EVLOG_FIELDS_##m(PK_NUM_FIELD, m)];
union pk_nums {
	EVLOG_TYPES(PK_NUM_MEMBER)
};
#define PK_MAX_NUMS sizeof(union pk_nums)

/* An upper bound (pid, tid, ts and at most PK_MAX_NUMS numbers of VMAX
 * bytes, plus the strings): the exact length is set by cv_rec_pack
 * (r->len) and the spill reclaims the rest. */
size_t cv_rec_size(const struct evlog_event *ev)
{
	size_t sz = sizeof(struct cv_rec) + 1 + (3 + PK_MAX_NUMS) * VMAX;

#define PK_U_(m) (void)0
#define PK_S_(m) (void)0
#define PK_T_(m) (sz += VMAX + 1 + ev->u.m.len)
#define PK_A3_(m) (void)0
#define PK_ARGS_(n, a) (void)0
	switch (ev->type) {
	PK_FIELDS
	default: break;
	}
#undef PK_U_
#undef PK_S_
#undef PK_T_
#undef PK_A3_
#undef PK_ARGS_
	return ALIGN8(sz);
}

void cv_rec_pack(struct cv_rec *r, const struct evlog_event *ev)
{
	char *p = (char *)(r + 1);

	*p++ = (char)(packs(ev->type) ? ev->type : 0);
	p = put_v(p, ev->pid);
	p = put_v(p, ev->tid);
	p = put_v(p, zz((int64_t)(ev->ts - r->start)));
#define PK_U_(m) (p = put_v(p, (uint64_t)ev->u.m))
#define PK_S_(m) (p = put_v(p, zz((int64_t)ev->u.m)))
#define PK_T_(m) (p = put_s(p, ev->u.m))
#define PK_A3_(m) (p = put_v(p, ev->u.m[0]), p = put_v(p, ev->u.m[1]), p = put_v(p, ev->u.m[2]))
#define PK_ARGS_(n, a) do {                                                           \
		uint32_t n_ = ev->u.n < EVLOG_MAX_ARGS ? ev->u.n : EVLOG_MAX_ARGS;    \
		p = put_v(p, n_);                                                     \
		for (uint32_t k_ = 0; k_ < n_; k_++)                                  \
			p = put_v(p, ev->u.a[k_]);                                    \
	} while (0)
	switch (ev->type) {
	PK_FIELDS
	default: break;
	}
#undef PK_U_
#undef PK_S_
#undef PK_T_
#undef PK_A3_
#undef PK_ARGS_
	size_t used = (size_t)(p - (char *)r);

	memset(p, 0, ALIGN8(used) - used);
	r->len = (uint32_t)ALIGN8(used);
	/* The padding's length rides in the type byte's top bits: sort files
	 * store the body without it. */
	*(char *)(r + 1) |= (char)((ALIGN8(used) - used) << CV_REC_PAD_SHIFT);
}

int cv_rec_unpack(const struct cv_rec *r, struct evlog_event *ev)
{
	const char *p = (const char *)(r + 1), *end = (const char *)r + r->len;
	uint64_t v, pid, tid, dts;
	uint32_t type = cv_rec_type(r);

	if (r->len < sizeof(*r) + 1 || !packs(type))
		return -1;
	p++;
	if (get_v(&p, end, &pid) || get_v(&p, end, &tid) || get_v(&p, end, &dts))
		return -1;
	memset(ev, 0, sizeof(*ev));
	ev->type = type;
	ev->pid = (uint32_t)pid;
	ev->tid = (uint32_t)tid;
	ev->ts = r->start + (uint64_t)unzz(dts);
#define PK_U_(m) do { if (get_v(&p, end, &v)) return -1; ev->u.m = (typeof(ev->u.m))v; } while (0)
#define PK_S_(m) do { if (get_v(&p, end, &v)) return -1; ev->u.m = (typeof(ev->u.m))unzz(v); } while (0)
#define PK_T_(m) do { if (get_s(&p, end, &ev->u.m)) return -1; } while (0)
#define PK_A3_(m) do { PK_U_(m[0]); PK_U_(m[1]); PK_U_(m[2]); } while (0)
#define PK_ARGS_(n, a) do {                                                           \
		PK_U_(n);                                                             \
		if (ev->u.n > EVLOG_MAX_ARGS)                                         \
			return -1;                                                    \
		for (uint32_t k_ = 0; k_ < ev->u.n; k_++)                             \
			PK_U_(a[k_]);                                                 \
	} while (0)
	switch (type) {
	PK_FIELDS
	default: return -1;
	}
#undef PK_U_
#undef PK_S_
#undef PK_T_
#undef PK_A3_
#undef PK_ARGS_
	return 0;
}

/* -------------------------------------------------------------- runs */

struct idx_ent {
	uint64_t start, dur;
	uint32_t track;
	uint32_t off8;          /* the record's offset in the buffer / 8 */
};

#define ENT_OFF(e) ((size_t)(e).off8 << 3)

/* Decompression state the run readers share (they run one at a time). */
struct spill_unz {
	ZSTD_DCtx *dctx;
	char *zin;              /* one compressed block */
	size_t zcap;
};

/* A run is read through its own buffer, a block at a time; a record lying
 * whole in the buffer is handed out in place. */
struct run_reader {
	int fd;                 /* the one sort file, read with pread */
	struct spill_unz *unz;
	uint64_t off, left;     /* the run's unread (compressed) bytes in it */
	char *buf;
	size_t cap, pos, end;   /* unread bytes: buf[pos..end) */
	struct cv_rec *cur;     /* the record read last, decoded */
	size_t cur_cap;
	uint32_t track;         /* ... its key: the next one is coded against it */
	uint64_t start;
};

struct cv_spill {
	char *buf;
	size_t cap, used;
	struct idx_ent *idx, *sorted;
	size_t n_idx, cap_idx, cap_sorted;
	uint32_t n_tracks;
	uint32_t *counts;
	char tmpdir[4096];
	int fd;                 /* one sort file for every run, or -1 */
	struct run_span { uint64_t off, len; } *runs; /* each run's bytes in it */
	uint32_t n_runs;
	uint64_t file_len;
	char *wbuf;             /* write_run's raw block */
	char *obuf;             /* compressed blocks waiting to be written */
	size_t o_len, o_cap;
	ZSTD_CCtx *cctx;
	struct spill_unz unz;
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
	if (s->cap > (16ULL << 30))
		s->cap = 16ULL << 30; /* offsets / 8 fit 32 bits */
	s->buf = big_alloc(s->cap);
	s->fd = -1;
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
	return x->off8 < y->off8 ? -1 : x->off8 > y->off8;
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

static int anon_file(const char *dir, char *err, size_t errsz)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0) {
		char tmpl[4200];

		snprintf(tmpl, sizeof(tmpl), "%s/.llmt-sort.XXXXXX", dir);
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0)
			unlink(tmpl);
	}
	if (fd < 0)
		snprintf(err, errsz, "cannot create a sort file in %s: %s; set TMPDIR to a "
			 "writable directory with space", dir, strerror(errno));
	return fd;
}

/* Exactly n bytes at off; -1 (errno 0 if the file is short) otherwise. */
static int pread_all(int fd, char *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = 0;
			return -1;
		}
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static void refresh_keys(struct cv_spill *s);
static void trim_last(struct cv_spill *s);

/* In a sort file a record is: varint track - previous track, varint start
 * (- previous start on the same track), varints dur, log, stack, body
 * length, then the body without its padding. */
#define DISK_HEAD_MAX (6 * VMAX)

static size_t rec_body_len(const struct cv_rec *r)
{
	return r->len - sizeof(*r) - (*(const uint8_t *)(r + 1) >> CV_REC_PAD_SHIFT);
}

/* Compress wbuf[0..n) as one block into obuf; obuf goes to the file when
 * the next block might not fit (few, large writes). */
static int put_block(struct cv_spill *s, size_t n)
{
	size_t bound = ZSTD_compressBound(SPILL_BLOCK) + BLOCK_HEAD;

	if (!n)
		return 0;
	if (s->o_len + bound > s->o_cap) {
		if (lt_write_all(s->fd, s->obuf, s->o_len))
			return -1;
		s->file_len += s->o_len;
		s->o_len = 0;
	}
	char *h = s->obuf + s->o_len;
	size_t z = ZSTD_compressCCtx(s->cctx, h + BLOCK_HEAD, s->o_cap - s->o_len - BLOCK_HEAD,
				     s->wbuf, n, SPILL_ZLEVEL);

	if (ZSTD_isError(z)) {
		errno = EIO;
		return -1;
	}
	uint32_t raw = (uint32_t)n, comp = (uint32_t)z;

	memcpy(h, &raw, 4);
	memcpy(h + 4, &comp, 4);
	s->o_len += BLOCK_HEAD + z;
	return 0;
}

static int write_alloc(struct cv_spill *s)
{
	if (!s->wbuf && !(s->wbuf = malloc(SPILL_BLOCK)))
		return -1;
	if (!s->obuf) {
		s->o_cap = SPILL_IO_BYTES + ZSTD_compressBound(SPILL_BLOCK) + BLOCK_HEAD;
		if (!(s->obuf = malloc(s->o_cap)))
			return -1;
	}
	if (!s->cctx && !(s->cctx = ZSTD_createCCtx()))
		return -1;
	struct run_span *nr = realloc(s->runs, (s->n_runs + 1) * sizeof(*nr));

	if (!nr)
		return -1;
	s->runs = nr;
	return 0;
}

/* A sorted run, as blocks of varint-coded records appended to the sort
 * file: the sort files are the converter's biggest I/O. */
static int write_run(struct cv_spill *s, char *err, size_t errsz)
{
	size_t wl = 0;

	trim_last(s);
	refresh_keys(s);
	if (sort_run(s) || write_alloc(s)) {
		snprintf(err, errsz, "out of memory writing a sorted run");
		return -1;
	}
	/* One file for every run (pread at each run's offset): a long log
	 * makes hundreds of runs, and a file each would run out of fds. */
	if (s->fd < 0 && (s->fd = anon_file(s->tmpdir, err, errsz)) < 0)
		return -1;
	uint64_t begin = s->file_len + s->o_len;
	uint32_t track = 0;
	uint64_t start = 0;

	for (size_t i = 0; i < s->n_idx; i++) {
		const struct cv_rec *r = (const struct cv_rec *)(s->buf + ENT_OFF(s->sorted[i]));
		size_t body = rec_body_len(r);
		const char *b = (const char *)(r + 1);

		/* Sorted order jumps around the buffer: fetch ahead. */
		if (i + 16 < s->n_idx)
			__builtin_prefetch(s->buf + ENT_OFF(s->sorted[i + 16]));

		if (wl + DISK_HEAD_MAX > SPILL_BLOCK) {
			if (put_block(s, wl))
				goto ioerr;
			wl = 0;
		}
		char *p = s->wbuf + wl;

		/* Sorted by track then start: both coded as small deltas. */
		p = put_v(p, r->track - track);
		p = put_v(p, r->track != track ? r->start : r->start - start);
		p = put_v(p, r->dur);
		p = put_v(p, r->log);
		p = put_v(p, r->stack);
		p = put_v(p, body);
		track = r->track;
		start = r->start;
		wl = (size_t)(p - s->wbuf);
		/* The body may run on into the next blocks. */
		while (body) {
			size_t k = SPILL_BLOCK - wl < body ? SPILL_BLOCK - wl : body;

			memcpy(s->wbuf + wl, b, k);
			wl += k;
			b += k;
			body -= k;
			if (body || wl == SPILL_BLOCK) {
				if (put_block(s, wl))
					goto ioerr;
				wl = 0;
			}
		}
	}
	if (put_block(s, wl) || lt_write_all(s->fd, s->obuf, s->o_len))
		goto ioerr;
	s->file_len += s->o_len;
	s->o_len = 0;
	s->runs[s->n_runs].off = begin;
	s->runs[s->n_runs].len = s->file_len - begin;
	s->n_runs++;
	s->used = 0;
	s->n_idx = 0;
	return 0;
ioerr:
	snprintf(err, errsz, "writing a sort file in %s: %s; set TMPDIR to a directory with "
		 "more space", s->tmpdir, strerror(errno));
	return -1;
}

/* The last record reserved was filled since: keep only its real length
 * (reserve got an upper bound). */
static void trim_last(struct cv_spill *s)
{
	if (!s->n_idx)
		return;
	size_t off = ENT_OFF(s->idx[s->n_idx - 1]);
	const struct cv_rec *r = (const struct cv_rec *)(s->buf + off);

	if (r->len >= sizeof(*r) && off + r->len <= s->used)
		s->used = off + r->len;
}

struct cv_rec *cv_spill_reserve(struct cv_spill *s, size_t len, char *err, size_t errsz)
{
	if (len + 2 * sizeof(struct idx_ent) > s->cap) {
		snprintf(err, errsz, "event of %zu bytes larger than the sort buffer", len);
		return NULL;
	}
	trim_last(s);
	/* The budget holds the records and their two index entries (the
	 * index and the sorted copy). */
	if (s->used + len + (s->n_idx + 1) * 2 * sizeof(struct idx_ent) > s->cap &&
	    write_run(s, err, errsz))
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

	r->len = 0;
	s->idx[s->n_idx].off8 = (uint32_t)(s->used >> 3);
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
		const struct cv_rec *r = (const struct cv_rec *)(s->buf + ENT_OFF(s->idx[i]));

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

/* Make at least want bytes available at rd->buf + rd->pos (fewer at the
 * end of the file); the buffer grows only for a record larger than it. */
/* Room for n more bytes after what is unread: compact, then grow. */
static int rd_room(struct run_reader *rd, size_t n)
{
	if (rd->cap - rd->end < n) {
		memmove(rd->buf, rd->buf + rd->pos, rd->end - rd->pos);
		rd->end -= rd->pos;
		rd->pos = 0;
	}
	if (rd->cap - rd->end < n) {
		char *b = realloc(rd->buf, rd->end + n);

		if (!b)
			return -1;
		rd->buf = b;
		rd->cap = rd->end + n;
	}
	return 0;
}

/* Decompress blocks until want bytes are unread (fewer at the run's end). */
static int rd_fill(struct run_reader *rd, size_t want, char *err, size_t errsz)
{
	struct spill_unz *u = rd->unz;

	while (rd->end - rd->pos < want && rd->left) {
		unsigned char h[BLOCK_HEAD];
		uint32_t raw, comp;

		if (rd->left < BLOCK_HEAD || pread_all(rd->fd, (char *)h, BLOCK_HEAD, rd->off))
			goto ioerr;
		memcpy(&raw, h, 4);
		memcpy(&comp, h + 4, 4);
		if (!raw || raw > SPILL_BLOCK || comp > u->zcap || BLOCK_HEAD + (uint64_t)comp > rd->left)
			goto damaged;
		if (rd_room(rd, raw)) {
			snprintf(err, errsz, "out of memory");
			return -1;
		}
		if (pread_all(rd->fd, u->zin, comp, rd->off + BLOCK_HEAD))
			goto ioerr;
		size_t got = ZSTD_decompressDCtx(u->dctx, rd->buf + rd->end, raw, u->zin, comp);

		if (ZSTD_isError(got) || got != raw)
			goto damaged;
		rd->end += raw;
		rd->off += BLOCK_HEAD + comp;
		rd->left -= BLOCK_HEAD + comp;
	}
	return 0;
ioerr:
	snprintf(err, errsz, "reading a sort file: %s", errno ? strerror(errno) : "cut short");
	return -1;
damaged:
	snprintf(err, errsz, "sort file damaged");
	return -1;
}

static int read_rec(struct run_reader *rd, char *err, size_t errsz)
{
	uint64_t v[6];
	const char *p, *end;

	if (rd_fill(rd, DISK_HEAD_MAX, err, errsz))
		return -1;
	if (rd->end == rd->pos)
		return 0;
	p = rd->buf + rd->pos;
	end = rd->buf + rd->end;
	for (int i = 0; i < 6; i++)
		if (get_v(&p, end, &v[i])) {
			snprintf(err, errsz, "sort file damaged");
			return -1;
		}
	/* v: track delta, start (delta), dur, log, stack, body length */
	if (v[0] > UINT32_MAX - rd->track || v[3] > UINT32_MAX || v[4] > UINT32_MAX ||
	    v[5] < 1 || v[5] > (1u << 30)) {
		snprintf(err, errsz, "sort file damaged");
		return -1;
	}
	rd->pos = (size_t)(p - rd->buf);
	size_t body = (size_t)v[5], len = ALIGN8(sizeof(struct cv_rec) + body);

	if (rd_fill(rd, body, err, errsz))
		return -1;
	if (rd->end - rd->pos < body) {
		snprintf(err, errsz, "sort file cut short");
		return -1;
	}
	if (len > rd->cur_cap) {
		void *n = realloc(rd->cur, len);

		if (!n) {
			snprintf(err, errsz, "out of memory");
			return -1;
		}
		rd->cur = n;
		rd->cur_cap = len;
	}
	struct cv_rec *r = rd->cur;

	r->start = v[0] ? v[1] : rd->start + v[1];
	r->track = rd->track + (uint32_t)v[0];
	r->dur = v[2];
	r->log = (uint32_t)v[3];
	r->stack = (uint32_t)v[4];
	r->len = (uint32_t)len;
	memcpy(r + 1, rd->buf + rd->pos, body);
	memset((char *)(r + 1) + body, 0, len - sizeof(*r) - body);
	rd->pos += body;
	rd->track = r->track;
	rd->start = r->start;
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

static int merge_start(struct cv_spill *s, char *err, size_t errsz);

int cv_spill_finish(struct cv_spill *s, char *err, size_t errsz)
{
	/* keys are refreshed before every sort (see write_run / below) */
	trim_last(s);
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
	s->unz.zcap = ZSTD_compressBound(SPILL_BLOCK);
	s->unz.zin = malloc(s->unz.zcap);
	s->unz.dctx = ZSTD_createDCtx();
	if (!s->unz.zin || !s->unz.dctx) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	/* The read buffers share what the sort buffer had (each holds at
	 * least two blocks): memory stays flat however many runs a long log
	 * makes. */
	size_t per = s->cap / s->n_runs;

	per = per > 8 * SPILL_BLOCK ? 8 * SPILL_BLOCK : per < 2 * SPILL_BLOCK ? 2 * SPILL_BLOCK : per;
	for (uint32_t i = 0; i < s->n_runs; i++) {
		s->rd[i].cap = per;
		if (!(s->rd[i].buf = malloc(per))) {
			snprintf(err, errsz, "out of memory");
			return -1;
		}
	}
	return merge_start(s, err, errsz);
}

/* Every run read from its start, the first records in the heap. */
static int merge_start(struct cv_spill *s, char *err, size_t errsz)
{
	s->n_heap = 0;
	for (uint32_t i = 0; i < s->n_runs; i++) {
		struct run_reader *rd = &s->rd[i];
		int r;

		rd->fd = s->fd;
		rd->unz = &s->unz;
		rd->off = s->runs[i].off;
		rd->left = s->runs[i].len;
		rd->pos = rd->end = 0;
		rd->track = 0;
		rd->start = 0;
		if ((r = read_rec(rd, err, errsz)) < 0)
			return -1;
		if (r)
			s->heap[s->n_heap++] = i;
	}
	for (uint32_t i = s->n_heap / 2 + 1; i-- > 0;)
		heap_down(s, i);
	s->first_pop = 1;
	return 0;
}

int cv_spill_rewind(struct cv_spill *s, char *err, size_t errsz)
{
	if (s->in_memory) {
		s->mem_pos = 0;
		return 0;
	}
	return merge_start(s, err, errsz);
}

int cv_spill_next(struct cv_spill *s, const struct cv_rec **out, char *err, size_t errsz)
{
	if (s->in_memory) {
		if (s->mem_pos >= s->n_idx)
			return 0;
		*out = (const struct cv_rec *)(s->buf + ENT_OFF(s->sorted[s->mem_pos++]));
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
	if (s->fd >= 0)
		close(s->fd);
	if (s->rd)
		for (uint32_t i = 0; i < s->n_runs; i++) {
			free(s->rd[i].buf);
			free(s->rd[i].cur);
		}
	free(s->wbuf);
	free(s->obuf);
	ZSTD_freeCCtx(s->cctx);
	ZSTD_freeDCtx(s->unz.dctx);
	free(s->unz.zin);
	free(s->rd);
	free(s->heap);
	free(s->runs);
	big_free(s->buf, s->cap);
	free(s->idx);
	free(s->sorted);
	free(s->counts);
	free(s);
}
