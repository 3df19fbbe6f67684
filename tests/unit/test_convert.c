/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the converter's building blocks: JSON escaping and numbers,
 * the sorted spill runs (in memory and merged from files), interning,
 * folded-stack cleaning, names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "converter/conv_int.h"
#include "converter/output/jsonw.h"
#include "converter/input/spill.h"
#include "converter/pairing/dedup.h"
#include "converter/output/evview.h"
#include "unit/unit_util.h"

static void test_json_escape(void **state)
{
	(void)state;
	/* quote, backslash, newline, control, invalid byte, valid 2-byte,
	 * a UTF-16 surrogate (invalid in UTF-8), a valid 4-byte emoji, overlong '/' */
	const char in[] = "a\"b\\c\n\x01\xff\xc3\xa9\xed\xa0\x80\xf0\x9f\x98\x80\xc0\xaf";
	const char want[] = "\"a\\\"b\\\\c\\n\\u0001\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"
			    "\xef\xbf\xbd\xf0\x9f\x98\x80\xef\xbf\xbd\xef\xbf\xbd\"";
	char out[256];
	size_t n = cv_json_escape(out, in, sizeof(in) - 1);

	out[n] = 0;
	assert_string_equal(out, want);
	/* an embedded NUL is data, not the end */
	n = cv_json_escape(out, "x\0y", 3);
	out[n] = 0;
	assert_string_equal(out, "\"x\\u0000y\"");
	/* a sequence cut by the end of the string is repaired, not overrun */
	n = cv_json_escape(out, "ok\xe2\x82", 4);
	out[n] = 0;
	assert_string_equal(out, "\"ok\xef\xbf\xbd\xef\xbf\xbd\"");
}

/* Write through a cv_out into a temp file and read it back. */
static char *through_out(void (*fn)(struct cv_out *), size_t *len)
{
	char path[] = "/tmp/test_convert.XXXXXX", file[64], err[256];
	struct cv_out o;

	assert_non_null(mkdtemp(path));
	snprintf(file, sizeof(file), "%s/o.json", path);
	assert_int_equal(cv_out_open(&o, -1, file, 0, 0, err, sizeof(err)), 0);
	fn(&o);
	assert_int_equal(cv_out_publish(&o, 0, err, sizeof(err)), 0);
	char *buf = ut_slurp(file, len);

	assert_non_null(buf);
	unlink(file);
	rmdir(path);
	return buf;
}

static void write_numbers(struct cv_out *o)
{
	cv_json_us(o, 1234567);
	CV_OUT_LIT(o, " ");
	cv_json_us(o, -1500);
	CV_OUT_LIT(o, " ");
	cv_json_us(o, 0);
	CV_OUT_LIT(o, " ");
	cv_json_u64(o, UINT64_MAX);
	CV_OUT_LIT(o, " ");
	cv_json_i64(o, INT64_MIN);
}

static void test_json_numbers(void **state)
{
	size_t n;
	char *s = through_out(write_numbers, &n);

	(void)state;
	assert_string_equal(s, "1234.567 -1.500 0.000 18446744073709551615 -9223372036854775808");
	free(s);
}

/* 10001 two-byte characters after one ASCII byte: escaping works in 4 KiB
 * pieces, so sequences straddle piece ends. */
static void write_long(struct cv_out *o)
{
	size_t n = 1 + 2 * 10001 + 1;
	char *s = malloc(n);

	s[0] = 'a';
	for (size_t i = 0; i < 10001; i++)
		memcpy(s + 1 + 2 * i, "\xc3\xa9", 2);
	s[n - 1] = (char)0xff;
	cv_json_str(o, s, n);
	free(s);
}

/* 3.5 chunks of random bytes (no member may overflow its buffer), then
 * 3 chunks of text; returns the bytes written. */
static size_t write_gz_input(struct cv_out *o, unsigned char *want, size_t cap)
{
	size_t n = 0;
	uint64_t x = 88172645463325252ull;

	while (n < CV_OUT_CHUNK * 7 / 2 && n < cap) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		want[n++] = (unsigned char)x;
	}
	while (n < CV_OUT_CHUNK * 13 / 2 && n + 64 < cap)
		n += (size_t)snprintf((char *)want + n, 64, "{\"ts\":%zu,\"name\":\"k\"},\n", n);
	for (size_t i = 0; i < n; i += 1000)
		assert_int_equal(cv_out_write(o, want + i, n - i < 1000 ? n - i : 1000), 0);
	return n;
}

/* .json.gz: every member decompresses (zlib reads them in a row) to what
 * was written, with the default compressor and with an asked level. */
static void test_gz_members(void **state)
{
	static const char *levels[] = { NULL, "1", "9" };
	size_t cap = CV_OUT_CHUNK * 8;
	unsigned char *want = malloc(cap), *got = malloc(cap);

	(void)state;
	for (size_t l = 0; l < 3; l++) {
		char path[] = "/tmp/test_convert.XXXXXX", file[64], err[256];
		struct cv_out o;

		if (levels[l])
			setenv("LLMT_GZIP_LEVEL", levels[l], 1);
		else
			unsetenv("LLMT_GZIP_LEVEL");
		assert_non_null(mkdtemp(path));
		snprintf(file, sizeof(file), "%s/o.json.gz", path);
		assert_int_equal(cv_out_open(&o, -1, file, 1, 0, err, sizeof(err)), 0);
		size_t n = write_gz_input(&o, want, cap);
		assert_int_equal(cv_out_publish(&o, 0, err, sizeof(err)), 0);
		gzFile g = gzopen(file, "rb");
		assert_non_null(g);
		int got_n = gzread(g, got, (unsigned)cap);
		assert_int_equal(gzclose(g), Z_OK);
		assert_int_equal((size_t)got_n, n);
		assert_memory_equal(got, want, n);
		unlink(file);
		rmdir(path);
	}
	unsetenv("LLMT_GZIP_LEVEL");
	free(want);
	free(got);
}

static void test_json_long_string(void **state)
{
	size_t n;
	char *s = through_out(write_long, &n);

	(void)state;
	assert_int_equal(n, 1 + 1 + 2 * 10001 + 3 + 1);
	assert_memory_equal(s, "\"a\xc3\xa9", 4);
	assert_memory_equal(s + n - 4, "\xef\xbf\xbd\"", 4);
	for (size_t i = 0; i < 10001; i++)
		assert_memory_equal(s + 2 + 2 * i, "\xc3\xa9", 2);
	free(s);
}

/* ------------------------------------------------------------- spill */

/* Read every record of s: sorted by (track, start, longer first, arrival),
 * whole; their order (arrival numbers) into order[], or, when again, the
 * same as order[] holds. */
static void spill_check_sorted(struct cv_spill *s, unsigned n, uint64_t *order, int again)
{
	const struct cv_rec *r;
	struct cv_rec prev = { 0 };
	uint64_t prev_seq = 0; /* arrival order: the correlation id */
	unsigned got = 0;
	char err[256];
	int rc;

	while ((rc = cv_spill_next(s, &r, err, sizeof(err))) == 1) {
		struct evlog_event e;
		char want[32];

		assert_int_equal(cv_rec_unpack(r, &e), 0);
		if (got) {
			int ok = prev.track < r->track ||
				 (prev.track == r->track &&
				  (prev.start < r->start ||
				   (prev.start == r->start &&
				    (prev.dur > r->dur || (prev.dur == r->dur && prev_seq < e.u.lib_call.correlation_id)))));
			assert_true(ok);
		}
		prev = *r;
		prev_seq = e.u.lib_call.correlation_id;
		assert_int_equal(e.type, EV_LIB_CALL);
		snprintf(want, sizeof(want), "sym%llu", (unsigned long long)e.u.lib_call.correlation_id);
		assert_int_equal(e.u.lib_call.symbol.len, strlen(want));
		assert_memory_equal(e.u.lib_call.symbol.ptr, want, strlen(want));
		assert_int_equal(e.tid, (uint32_t)e.u.lib_call.correlation_id);
		assert_true(got < n);
		if (again)
			assert_int_equal(order[got], e.u.lib_call.correlation_id);
		order[got++] = e.u.lib_call.correlation_id;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(got, n);
}

static void spill_roundtrip(size_t buf_bytes, unsigned n, uint32_t tracks)
{
	char err[256];
	struct cv_spill *s = cv_spill_new(buf_bytes, tracks, NULL, err, sizeof(err));
	uint64_t rng = 42;

	assert_non_null(s);
	for (unsigned i = 0; i < n; i++) {
		struct evlog_event e = { .type = EV_LIB_CALL, .pid = 7, .tid = i };
		char sym[32];

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		snprintf(sym, sizeof(sym), "sym%u", i);
		e.u.lib_call.symbol = evlog_s(sym);
		e.u.lib_call.lib = evlog_s(i % 3 ? "libx.so" : "");
		e.u.lib_call.correlation_id = i;
		struct cv_rec *r = cv_spill_reserve(s, cv_rec_size(&e), err, sizeof(err));

		assert_non_null(r);
		r->track = (uint32_t)((rng >> 33) % tracks);
		r->start = (rng >> 40) % 1000;      /* many ties on purpose */
		r->dur = (rng >> 20) % 7;
		r->log = 0;
		r->stack = 0;
		cv_rec_pack(r, &e);
	}
	assert_int_equal(cv_spill_finish(s, err, sizeof(err)), 0);
	uint64_t *order = calloc(n, sizeof(*order));

	assert_non_null(order);
	spill_check_sorted(s, n, order, 0);
	/* again from the start: the same records in the same order */
	assert_int_equal(cv_spill_rewind(s, err, sizeof(err)), 0);
	spill_check_sorted(s, n, order, 1);
	free(order);
	if (buf_bytes < 100000)
		assert_true(cv_spill_runs(s) > 1);
	cv_spill_free(s);
}

static void test_spill_in_memory(void **state)
{
	(void)state;
	spill_roundtrip(64 << 20, 20000, 5);
}

static void test_spill_merged_runs(void **state)
{
	(void)state;
	spill_roundtrip(64 << 10, 20000, 5); /* ~40 runs on disk, merged */
}

/* Records larger than a compressed block of a run (bodies of up to ~300 KiB
 * among small ones) come back whole and in order from merged runs. */
static void test_spill_big_records(void **state)
{
	char err[256];
	struct cv_spill *s = cv_spill_new(1 << 20, 3, NULL, err, sizeof(err));
	size_t big = 300 << 10;
	char *detail = malloc(big);
	unsigned n = 60, got = 0;
	const struct cv_rec *r;
	int rc;

	(void)state;
	assert_non_null(s);
	assert_non_null(detail);
	for (size_t i = 0; i < big; i++)
		detail[i] = (char)('a' + (i * 7919 % 26));
	for (unsigned i = 0; i < n; i++) {
		struct evlog_event e = { .type = EV_LIB_CALL, .pid = 7, .tid = i };

		e.u.lib_call.symbol = evlog_s("sym");
		e.u.lib_call.detail.ptr = detail;
		e.u.lib_call.detail.len = i % 3 ? (uint32_t)(big - i * 1000) : 5;
		e.u.lib_call.correlation_id = i;
		struct cv_rec *w = cv_spill_reserve(s, cv_rec_size(&e), err, sizeof(err));

		assert_non_null(w);
		w->track = i % 3;
		w->start = 1000 - i;
		w->dur = 1;
		w->log = w->stack = 0;
		cv_rec_pack(w, &e);
	}
	assert_int_equal(cv_spill_finish(s, err, sizeof(err)), 0);
	assert_true(cv_spill_runs(s) > 1);
	while ((rc = cv_spill_next(s, &r, err, sizeof(err))) == 1) {
		struct evlog_event e;
		unsigned i;

		assert_int_equal(cv_rec_unpack(r, &e), 0);
		i = (unsigned)e.u.lib_call.correlation_id;
		assert_int_equal(r->track, i % 3);
		assert_int_equal(e.u.lib_call.detail.len, i % 3 ? big - i * 1000 : 5);
		assert_memory_equal(e.u.lib_call.detail.ptr, detail, e.u.lib_call.detail.len);
		got++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(got, n);
	cv_spill_free(s);
	free(detail);
}

static void test_rec_unpack_rejects_garbage(void **state)
{
	uint64_t buf[32] = { 0 };
	struct cv_rec *r = (struct cv_rec *)buf;
	struct evlog_event e;

	(void)state;
	r->len = sizeof(buf);
	memset(r + 1, 0xff, sizeof(buf) - sizeof(*r)); /* type 0xffffffff */
	assert_int_equal(cv_rec_unpack(r, &e), -1);
}

/* ------------------------------------------------------------- names */

static void test_strtab(void **state)
{
	struct cv_strtab t = { 0 };
	char s[32];

	(void)state;
	for (int i = 0; i < 50000; i++) {
		snprintf(s, sizeof(s), "frame%d", i);
		assert_int_equal(cv_strtab_intern(&t, s, strlen(s)), i);
	}
	assert_int_equal(cv_strtab_intern(&t, "frame123", 8), 123);
	assert_string_equal(cv_strtab_get(&t, 49999), "frame49999");
	assert_int_equal(cv_strtab_intern(&t, "a\0b", 3), 50000); /* binary-safe */
	assert_int_equal(cv_strtab_intern(&t, "a", 1), 50001);
	cv_strtab_free(&t);
}

static void test_fold_py_cleans_frames(void **state)
{
	struct evlog_str fr[2] = { evlog_s("leaf;x (/a.py:1)"), evlog_s("root\n(/b.py:2)") };
	struct evlog_pystack st = { 2, fr };
	struct cv_buf b = { 0 };

	(void)state;
	assert_int_equal(cv_fold_py(&st, &b), 0);
	cv_buf_cstr(&b);
	assert_string_equal(b.p, "root (/b.py:2);leaf:x (/a.py:1)");
	st.n = 0;
	assert_int_equal(cv_fold_py(&st, &b), 0);
	cv_buf_cstr(&b);
	assert_string_equal(b.p, "[no frames]");
	cv_buf_free(&b);
}

static void test_names(void **state)
{
	char buf[64];

	(void)state;
#if defined(__x86_64__)
	assert_string_equal(cv_syscall_name(1, 0, buf, sizeof(buf)), "read");
	assert_string_equal(cv_syscall_name(1, 202, buf, sizeof(buf)), "futex");
#endif
	assert_string_equal(cv_syscall_name(0, 0, buf, sizeof(buf)), "syscall_0");
	assert_string_equal(cv_syscall_name(1, 99999, buf, sizeof(buf)), "syscall_99999");
	assert_string_equal(cv_memcpy_name(1, 1, 3, buf, sizeof(buf)),
			    "Memcpy HtoD (Pageable -> Device)");
	assert_string_equal(cv_memcpy_name(200, 99, 2, buf, sizeof(buf)),
			    "Memcpy Unknown (Unknown -> Pinned)");
	assert_string_equal(cv_lib_category(EVLIB_NCCL, "x", buf, sizeof(buf)), "nccl");
	assert_string_equal(cv_lib_category(EVLIB_OTHER, "/usr/lib/libfoo.so.1", buf, sizeof(buf)),
			    "foo");
	assert_string_equal(cv_lib_category(EVLIB_OTHER, "", buf, sizeof(buf)), "library");
	/* the trace writes a category unescaped: a hostile name becomes a plain word */
	assert_string_equal(cv_lib_category(EVLIB_OTHER, "/opt/lib\"x\\y z.so", buf, sizeof(buf)),
			    "_x_y_z");
}

static void test_demangle(void **state)
{
	struct cv_core c;

	(void)state;
	memset(&c, 0, sizeof(c));
	const char *m = "_Z11gemm_kernelPfS_i";
	const char *d = cv_demangle(&c, m, strlen(m));

	assert_non_null(d);
	assert_string_equal(d, "gemm_kernel(float*, float*, int)");
	assert_ptr_equal(cv_demangle(&c, m, strlen(m)), d); /* cached */
	assert_null(cv_demangle(&c, "cudaLaunchKernel", 16));
	assert_null(cv_demangle(&c, "_Zgarbage", 9));
	cv_core_free(&c);
}

static void test_dedup_names(void **state)
{
	(void)state;
	assert_true(cv_dedup_same_func("cudaMemcpyAsync", 15, "cudaMemcpyAsync_ptsz", 20));
	assert_true(cv_dedup_same_func("cudaLaunchKernel_v7000", 22, "cudaLaunchKernel", 16));
	assert_true(cv_dedup_same_func("cuMemcpyDtoDAsync_v2", 20, "cuMemcpyDtoDAsync", 17));
	assert_true(cv_dedup_same_func("cuMemcpy_v2_ptds", 16, "cuMemcpy", 8));
	assert_false(cv_dedup_same_func("cudaLaunchKernel", 16, "cudaLaunchKernelExC", 19));
	assert_false(cv_dedup_same_func("cuLaunchKernel", 14, "cudaLaunchKernel", 16));
	assert_false(cv_dedup_same_func("cuda_v", 6, "cuda", 4)); /* "_v" needs digits */
}

/* Records released by the dedup stage, with the id it attached. */
struct got {
	uint32_t type[16];
	uint64_t start[16], corr[16];
	int n;
};

static int got_rec(void *ctx, const struct cv_rec *r, uint64_t corr)
{
	struct got *g = ctx;

	assert_true(g->n < 16);
	g->type[g->n] = cv_rec_type(r);
	g->start[g->n] = r->start;
	g->corr[g->n++] = corr;
	return 0;
}

static void feed(struct cv_dedup *d, uint32_t track, uint32_t type, const char *name,
		 uint64_t start, uint64_t dur, uint64_t corr)
{
	struct evlog_event e = { .type = type, .ts = start, .pid = 1, .tid = 1 };
	uint64_t buf[64];
	struct cv_rec *r = (struct cv_rec *)buf;

	if (type == EV_LIB_CALL) {
		e.u.lib_call.symbol = evlog_s(name);
		e.u.lib_call.dur = dur;
	} else if (type == EV_GPU_API) {
		e.u.gpu_api.name = evlog_s(name);
		e.u.gpu_api.dur = dur;
		e.u.gpu_api.correlation_id = corr;
	} else {
		e.u.syscall.dur = dur;
	}
	assert_true(cv_rec_size(&e) <= sizeof(buf));
	memset(buf, 0, sizeof(buf));
	r->track = track;
	r->start = start;
	r->dur = dur;
	cv_rec_pack(r, &e);
	assert_int_equal(cv_dedup_feed(d, r), 0);
}

static void test_dedup_pairs(void **state)
{
	struct cv_dedup d;
	struct got g = { .n = 0 };

	(void)state;
	cv_dedup_init(&d, got_rec, &g);
	/* uprobe call, CUPTI's record inside it, a child syscall */
	feed(&d, 0, EV_LIB_CALL, "cudaLaunchKernel", 1000000, 10000, 0);
	feed(&d, 0, EV_GPU_API, "cudaLaunchKernel_v7000", 1000600, 9000, 77);
	feed(&d, 0, EV_SYSCALL, NULL, 1002000, 500, 0);
	/* CUPTI's record first (a clock hair earlier), then the uprobe's */
	feed(&d, 0, EV_GPU_API, "cudaMemcpyAsync", 2000000, 5000, 78);
	feed(&d, 0, EV_LIB_CALL, "cudaMemcpyAsync_ptsz", 2001000, 6000, 0);
	/* too far apart, different names, or sticking out: both kept */
	feed(&d, 0, EV_LIB_CALL, "cudaEventRecord", 3000000, 5000, 0);
	feed(&d, 0, EV_GPU_API, "cudaEventRecord", 3030000, 2000, 79);
	feed(&d, 0, EV_LIB_CALL, "cudaFree", 4000000, 5000, 0);
	feed(&d, 0, EV_GPU_API, "cudaFree", 4001000, 9000, 80);
	/* same call on another track: never paired */
	feed(&d, 1, EV_GPU_API, "cudaFree", 4001000, 1000, 81);
	/* CUPTI's record around the uprobe's (stamps taken around the call,
	 * the thread preempted before the uprobe), then the next call's: the
	 * first pairs with the first, the second with the second, never the
	 * next call's record (0.3 us after the first ends, within the slack)
	 * with the first */
	feed(&d, 0, EV_GPU_API, "cudaLaunchKernel", 5000000, 12900, 82);
	feed(&d, 0, EV_LIB_CALL, "cudaLaunchKernel", 5012100, 600, 0);
	feed(&d, 0, EV_GPU_API, "cudaLaunchKernel", 5013000, 1100, 83);
	feed(&d, 0, EV_LIB_CALL, "cudaLaunchKernel", 5013200, 300, 0);
	assert_int_equal(cv_dedup_flush(&d), 0);
	assert_int_equal(d.merged, 4);
	assert_int_equal(g.n, 10);
	assert_int_equal(g.corr[8], 82);
	assert_int_equal(g.corr[9], 83);
	assert_int_equal(g.type[0], EV_LIB_CALL);
	assert_int_equal(g.corr[0], 77);
	assert_int_equal(g.type[1], EV_SYSCALL);
	assert_int_equal(g.type[2], EV_LIB_CALL);
	assert_int_equal(g.start[2], 2001000);
	assert_int_equal(g.corr[2], 78);
	for (int i = 3; i < 8; i++)
		assert_int_equal(g.corr[i], 0);
	assert_int_equal(g.type[8], EV_LIB_CALL);
	assert_int_equal(g.start[8], 5012100);
	assert_int_equal(g.start[9], 5013200);
	assert_int_equal(g.type[4], EV_GPU_API);
	assert_int_equal(g.type[6], EV_GPU_API);
	assert_int_equal(g.start[7], 4001000);
	cv_dedup_free(&d);
}

/* One gpu_memory item of track (pid 7, tid t) counted into g. */
static uint64_t mem_op(struct cv_gpumem *g, uint32_t tid, uint8_t op, uint8_t kind, uint64_t addr,
		       uint64_t bytes)
{
	struct evlog_event e = { .type = EV_GPU_MEMORY, .pid = 7 };
	struct conv_item it = { .track = CONV_TRACK_THREAD, .pid = 7, .tid = tid, .ev = &e };

	e.u.gpu_memory.op = op;
	e.u.gpu_memory.memory_kind = kind;
	e.u.gpu_memory.address = addr;
	e.u.gpu_memory.bytes = bytes;
	assert_int_equal(cv_gpumem_add(g, &it), 0);
	return g->total[cv_gpumem_class(&e)];
}

/* The bytes a process holds on a GPU, as both outputs show them: frees of
 * memory allocated before recording change nothing, host memory counts
 * apart, a new track starts again, and the addresses remembered stay
 * bounded while the totals stay right through their compaction. */
static void test_gpumem_totals(void **state)
{
	struct cv_gpumem g = { 0 };
	const uint32_t t = CV_DEVICE_TID(0);

	(void)state;
	assert_int_equal(mem_op(&g, t, 1, 3, 0x1000, 100), 100);
	assert_int_equal(mem_op(&g, t, 1, 3, 0x2000, 50), 150);
	assert_int_equal(mem_op(&g, t, 2, 3, 0x9000, 1 << 30), 150); /* allocated before */
	assert_int_equal(mem_op(&g, t, 1, 2, 0x1000, 4096), 4096);   /* pinned: apart */
	assert_int_equal(mem_op(&g, t, 2, 3, 0x1000, 100), 50);
	assert_int_equal(mem_op(&g, t, 2, 3, 0x1000, 100), 50);      /* freed twice: once */
	assert_int_equal(mem_op(&g, t, 0, 3, 0x3000, 7), 50);        /* CUPTI's "invalid" */
	assert_int_equal(g.peak[CV_GPUMEM_DEVICE], 150);
	assert_int_equal(g.total[CV_GPUMEM_HOST], 4096);
	assert_int_equal(mem_op(&g, t + 1, 1, 3, 0x5000, 8), 8);     /* another track */
	assert_int_equal(g.peak[CV_GPUMEM_DEVICE], 8);

	/* addresses that come and go, many more than are remembered at once,
	 * fewer than half of those held: exact throughout */
	const uint64_t n = 3 * (uint64_t)CV_GPUMEM_LIVE_MAX;
	uint64_t held = 8;
	for (uint64_t i = 0; i < n; i++) {
		held += 16;
		assert_int_equal(mem_op(&g, t + 1, 1, 3, 0x100000 + 64 * i, 16), held);
		if (i % 8) { /* seven in eight freed again */
			held -= 16;
			assert_int_equal(mem_op(&g, t + 1, 2, 3, 0x100000 + 64 * i, 16), held);
		}
	}
	assert_true(g.live.n <= CV_GPUMEM_LIVE_MAX);
	assert_false(g.full);
	for (uint64_t i = 0; i < n; i += 8) /* each still held is known */
		held = mem_op(&g, t + 1, 2, 3, 0x100000 + 64 * i, 16);
	assert_int_equal(held, 8);

	/* held past the bound: counted, not remembered, the map no larger */
	for (uint64_t i = 0; i < 2 * (uint64_t)CV_GPUMEM_LIVE_MAX; i++)
		held = mem_op(&g, t + 1, 1, 3, 0x40000000000 + 64 * i, 1);
	assert_int_equal(held, 8 + 2 * (uint64_t)CV_GPUMEM_LIVE_MAX);
	assert_true(g.full && g.live.n <= CV_GPUMEM_LIVE_MAX);
	uint64_t last = 0x40000000000 + 64 * (2 * (uint64_t)CV_GPUMEM_LIVE_MAX - 1);
	assert_int_equal(mem_op(&g, t + 1, 2, 3, last, 1), held);           /* not remembered */
	assert_int_equal(mem_op(&g, t + 1, 2, 3, 0x40000000000, 1), held - 1); /* remembered */
	cv_gpumem_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_escape),
		cmocka_unit_test(test_json_numbers),
		cmocka_unit_test(test_json_long_string),
		cmocka_unit_test(test_gz_members),
		cmocka_unit_test(test_spill_in_memory),
		cmocka_unit_test(test_spill_merged_runs),
		cmocka_unit_test(test_spill_big_records),
		cmocka_unit_test(test_rec_unpack_rejects_garbage),
		cmocka_unit_test(test_strtab),
		cmocka_unit_test(test_fold_py_cleans_frames),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_demangle),
		cmocka_unit_test(test_dedup_names),
		cmocka_unit_test(test_dedup_pairs),
		cmocka_unit_test(test_gpumem_totals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
