// SPDX-License-Identifier: Apache-2.0
/* Event log: round trips of every event type, header, publishing rules. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eventlog/eventlog.h"
#include "eventlog/evlog_columns.h"
#include "eventlog/evlog_format.h"
#include "tests/progs/evlog_gen.h"

#include <libdeflate.h>
#include <sys/mman.h>
#include <zstd.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit/unit_util.h"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	return ut_mkdtemp(tmpdir, sizeof(tmpdir), "evlog-test");
}

static int teardown(void **state)
{
	(void)state;
	return ut_rmtree(tmpdir);
}

static char *tpath(const char *name)
{
	static char buf[4][256];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(b, 256, "%s/%s", tmpdir, name);
	return b;
}

static struct evlog_header test_header(void)
{
	struct evlog_header h = { 0 };
	h.host = evlog_s("node-1");
	h.boot_id = evlog_s("0b1d-boot");
	h.machine = evlog_s("x86_64");
	h.producer = evlog_s("test");
	h.cmdline = (struct evlog_str){ .ptr = "prog\0--flag", .len = 11 };
	h.options = evlog_s("");
	h.mono_ns = 123456789;
	h.realtime_ns = 1700000000000000000ull;
	h.producer_pid = 77;
	for (int i = 0; i < EVLOG_SESSION_LEN; i++)
		h.session[i] = (uint8_t)(0xa0 + i);
	return h;
}

/* Write n events of a generator, read them back, compare each. */
static void roundtrip(const char *name, int all, uint64_t n, size_t chunk)
{
	struct evgen *g = evgen_new(42, 1);
	assert_non_null(g);
	struct evlog_header h = test_header();
	struct evlog_writer_opts o = { .chunk_bytes = chunk };
	struct evlog_writer *w;
	char msg[512];
	int rc = evlog_writer_open(&w, tpath(name), &h, &o, msg, sizeof(msg));
	if (rc)
		fail_msg("open: %s", msg);
	struct evlog_event ev;
	for (uint64_t i = 0; i < n; i++) {
		all ? evgen_all(g, i, &ev) : evgen_mixed(g, i, &ev);
		rc = evlog_write(w, &ev);
		if (rc)
			fail_msg("write %llu: %s", (unsigned long long)i, evlog_writer_error(w));
	}
	struct evlog_writer_stats ws;
	assert_int_equal(evlog_writer_flush(w), 0);
	evlog_writer_stats(w, &ws);
	assert_int_equal(ws.events, n);
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), 0);

	struct evlog_reader *r;
	rc = evlog_reader_open(&r, tpath(name), msg, sizeof(msg));
	if (rc)
		fail_msg("reader: %s", msg);
	const struct evlog_header *rh = evlog_reader_header(r);
	assert_int_equal(rh->version_major, EVLOG_VERSION_MAJOR);
	assert_int_equal(rh->version_minor, EVLOG_VERSION_MINOR);
	assert_true(evgen_str_eq(rh->host, h.host));
	assert_true(evgen_str_eq(rh->cmdline, h.cmdline));
	assert_true(evgen_str_eq(rh->machine, h.machine));
	assert_int_equal(rh->options.len, 0);
	assert_int_equal(rh->mono_ns, h.mono_ns);
	assert_int_equal(rh->realtime_ns, h.realtime_ns);
	assert_int_equal(rh->producer_pid, 77);
	assert_memory_equal(rh->session, h.session, EVLOG_SESSION_LEN);

	struct evgen *g2 = evgen_new(42, 1);
	const struct evlog_event *got;
	uint64_t i = 0;
	while ((rc = evlog_next(r, &got)) == 0) {
		assert_true(i < n);
		all ? evgen_all(g2, i, &ev) : evgen_mixed(g2, i, &ev);
		char why[64];
		if (!evgen_equal(&ev, got, why, sizeof(why)))
			fail_msg("event %llu (%s): field %s differs", (unsigned long long)i,
				 evlog_type_name(ev.type), why);
		i++;
	}
	assert_int_equal(rc, -EVLOG_END);
	assert_int_equal(i, n);
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	assert_int_equal(st.events, n);
	assert_int_equal(st.chunks_ok, ws.chunks);
	assert_int_equal(st.chunks_bad, 0);
	assert_int_equal(st.truncated, 0);
	evlog_reader_close(r);
	free(g);
	free(g2);
}

static void test_roundtrip_all_types(void **state)
{
	(void)state;
	roundtrip("all.evlog", 1, 20000, 64 << 10);
}

static void test_roundtrip_all_types_big_chunks(void **state)
{
	(void)state;
	roundtrip("all-big.evlog", 1, 5000, 0);
}

static void test_roundtrip_mixed(void **state)
{
	(void)state;
	roundtrip("mixed.evlog", 0, 200000, 0);
}


static struct evlog_writer *wopen(const char *name, size_t chunk, uint64_t flush_ns)
{
	struct evlog_writer_opts o = { .chunk_bytes = chunk, .flush_ns = flush_ns };
	struct evlog_writer *w;
	char msg[512];
	if (evlog_writer_open(&w, tpath(name), NULL, &o, msg, sizeof(msg)))
		fail_msg("open %s: %s", name, msg);
	return w;
}

static struct evlog_reader *ropen(const char *path)
{
	struct evlog_reader *r;
	char msg[512];
	if (evlog_reader_open(&r, path, msg, sizeof(msg)))
		fail_msg("reader %s: %s", path, msg);
	return r;
}

/* Odd strings in every string field of every type, read back exactly. */
static void test_odd_strings(void **state)
{
	(void)state;
	static char big[EVGEN_BIG];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + 1);
	big[5] = 0;
	const struct evlog_str odd[] = {
		{ .ptr = "", .len = 0 }, { .ptr = NULL, .len = 0 }, { .ptr = big, .len = sizeof(big) },
		{ .ptr = "\xff\xfe\xc0\x80\xed\xa0\x80", .len = 7 }, { .ptr = "a\0b\0", .len = 4 },
		{ .ptr = "\0", .len = 1 }, { .ptr = "line\nbreak tab\t", .len = 15 },
	};
	const size_t nodd = sizeof(odd) / sizeof(odd[0]);
	struct evlog_writer *w = wopen("odd.evlog", 0, 0);
	struct evlog_event ev;
	struct evlog_str frames[3];
	int nev = 0;
	for (size_t k = 0; k < nodd; k++) {
		struct evlog_str s = odd[k], t = odd[(k + 1) % nodd];
		for (uint32_t ti = 0; ti < EVGEN_NTYPES; ti++) {
			uint32_t type = evgen_types[ti];
			memset(&ev, 0, sizeof(ev));
			ev.type = type;
			ev.ts = 1000 + (uint64_t)nev;
			ev.pid = 1;
			ev.tid = 2;
			typeof(ev.u) *u = &ev.u;
			u->process.name = s; /* overlays first string of most types */
			switch (type) {
			case EV_PROCESS: u->process.cmdline = t; u->process.exe = s; break;
			case EV_PY_ENTER: u->py_enter.func = s; u->py_enter.file = t; break;
			case EV_PY_EXIT: u->py_exit.func = s; break;
			case EV_THREAD: u->thread.name = s; break;
			case EV_PY_SAMPLE:
				memset(u, 0, sizeof(*u));
				frames[0] = s; frames[1] = t; frames[2] = s;
				u->py_sample.stack = (struct evlog_pystack){ 3, frames };
				break;
			case EV_LIB_CALL:
				memset(u, 0, sizeof(*u));
				u->lib_call.lib = s; u->lib_call.symbol = t; u->lib_call.detail = s;
				break;
			case EV_GPU_KERNEL: memset(u, 0, sizeof(*u)); u->gpu_kernel.name = s; break;
			case EV_GPU_API: memset(u, 0, sizeof(*u)); u->gpu_api.name = t; break;
			case EV_GPU_DEVICE:
				memset(u, 0, sizeof(*u));
				u->gpu_device.name = s; u->gpu_device.uuid = t;
				break;
			case EV_SYMBOL: memset(u, 0, sizeof(*u)); u->symbol.name = s; u->symbol.module = t; break;
			case EV_MARKER: memset(u, 0, sizeof(*u)); u->marker.name = s; u->marker.text = t; break;
			default: memset(u, 0, sizeof(*u)); break;
			}
			assert_int_equal(evlog_write(w, &ev), 0);
			nev++;
		}
	}
	assert_int_equal(evlog_writer_close(w), 0);

	struct evlog_reader *r = ropen(tpath("odd.evlog"));
	const struct evlog_event *got;
	int i = 0;
	while (evlog_next(r, &got) == 0) {
		size_t k = (size_t)i / EVGEN_NTYPES;
		struct evlog_str s = odd[k], t = odd[(k + 1) % nodd];
		const typeof(got->u) *u = &got->u;
		assert_int_equal(got->type, evgen_types[i % EVGEN_NTYPES]);
		switch (got->type) {
		case EV_PROCESS:
			assert_true(evgen_str_eq(u->process.name, s));
			assert_true(evgen_str_eq(u->process.cmdline, t));
			assert_true(evgen_str_eq(u->process.exe, s));
			assert_int_equal(u->process.name.ptr[u->process.name.len], 0);
			break;
		case EV_PY_ENTER:
			assert_true(evgen_str_eq(u->py_enter.func, s));
			assert_true(evgen_str_eq(u->py_enter.file, t));
			break;
		case EV_PY_SAMPLE:
			assert_int_equal(u->py_sample.stack.n, 3);
			assert_true(evgen_str_eq(u->py_sample.stack.frames[0], s));
			assert_true(evgen_str_eq(u->py_sample.stack.frames[1], t));
			assert_true(evgen_str_eq(u->py_sample.stack.frames[2], s));
			break;
		case EV_LIB_CALL:
			assert_true(evgen_str_eq(u->lib_call.lib, s));
			assert_true(evgen_str_eq(u->lib_call.symbol, t));
			assert_true(evgen_str_eq(u->lib_call.detail, s));
			break;
		case EV_GPU_DEVICE:
			assert_true(evgen_str_eq(u->gpu_device.name, s));
			assert_true(evgen_str_eq(u->gpu_device.uuid, t));
			break;
		case EV_SYMBOL:
			assert_true(evgen_str_eq(u->symbol.name, s));
			assert_true(evgen_str_eq(u->symbol.module, t));
			break;
		case EV_MARKER:
			assert_true(evgen_str_eq(u->marker.name, s));
			assert_true(evgen_str_eq(u->marker.text, t));
			break;
		case EV_GPU_API: assert_true(evgen_str_eq(u->gpu_api.name, t)); break;
		case EV_GPU_KERNEL: assert_true(evgen_str_eq(u->gpu_kernel.name, s)); break;
		case EV_THREAD: assert_true(evgen_str_eq(u->thread.name, s)); break;
		case EV_PY_EXIT: assert_true(evgen_str_eq(u->py_exit.func, s)); break;
		}
		i++;
	}
	assert_int_equal(i, nev);
	evlog_reader_close(r);
}

/* The largest string allowed round-trips; one byte more is refused. */
static void test_string_limit(void **state)
{
	(void)state;
	char *big = malloc(EVLOG_STR_MAX + 1);
	assert_non_null(big);
	memset(big, 'x', EVLOG_STR_MAX + 1);
	struct evlog_writer *w = wopen("limit.evlog", 0, 0);
	struct evlog_event ev = { .type = EV_MARKER, .ts = 5, .pid = 1, .tid = 1 };
	ev.u.marker.name = (struct evlog_str){ .ptr = big, .len = EVLOG_STR_MAX + 1 };
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	assert_non_null(strstr(evlog_writer_error(w), "marker.name"));
	ev.u.marker.name.len = EVLOG_STR_MAX;
	ev.u.marker.text = evlog_s("after");
	assert_int_equal(evlog_write(w, &ev), 0);
	assert_int_equal(evlog_writer_close(w), 0);
	struct evlog_reader *r = ropen(tpath("limit.evlog"));
	const struct evlog_event *got;
	assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(got->u.marker.name.len, EVLOG_STR_MAX);
	assert_memory_equal(got->u.marker.name.ptr, big, EVLOG_STR_MAX);
	assert_int_equal(evlog_next(r, &got), -EVLOG_END);
	evlog_reader_close(r);
	free(big);
}

/* Invalid events are refused with a reason; the writer stays usable. */
static void test_invalid_events(void **state)
{
	(void)state;
	struct evlog_writer *w = wopen("inval.evlog", 0, 0);
	struct evlog_event ev = { .type = 0 };
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	assert_non_null(strstr(evlog_writer_error(w), "unknown event type"));
	ev.type = EV_TYPE_MAX + 1;
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	ev.type = EV_LIB_CALL;
	ev.u.lib_call.nargs = EVLOG_MAX_ARGS + 1;
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	memset(&ev.u, 0, sizeof(ev.u));
	ev.type = EV_CPU_SAMPLE;
	static uint64_t ips[EVLOG_MAX_FRAMES + 1];
	ev.u.cpu_sample.stack = (struct evlog_stack){ 1, EVLOG_MAX_FRAMES, ips };
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	ev.u.cpu_sample.stack = (struct evlog_stack){ 1, 1, NULL };
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	ev.type = EV_PY_EXIT;
	ev.u.py_exit.func = (struct evlog_str){ .ptr = NULL, .len = 3 };
	assert_int_equal(evlog_write(w, &ev), -EVLOG_EINVAL);
	ev.u.py_exit.func = evlog_s("ok");
	assert_int_equal(evlog_write(w, &ev), 0);
	ev.type = EV_CPU_SAMPLE;
	ev.u.cpu_sample.stack = (struct evlog_stack){ 0, EVLOG_MAX_FRAMES, ips };
	assert_int_equal(evlog_write(w, &ev), 0);
	assert_int_equal(evlog_writer_close(w), 0);
	struct evlog_reader *r = ropen(tpath("inval.evlog"));
	const struct evlog_event *got;
	assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(got->type, EV_PY_EXIT);
	assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(got->u.cpu_sample.stack.n_user, EVLOG_MAX_FRAMES);
	assert_int_equal(evlog_next(r, &got), -EVLOG_END);
	evlog_reader_close(r);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	uint8_t *b = (uint8_t *)ut_slurp(path, len);

	assert_non_null(b);
	return b;
}

/* Offsets of each chunk of a log (walking the verified headers). */
static int chunk_offsets(const uint8_t *b, size_t len, size_t *off, int max)
{
	size_t pos = EVF_FILE_FIXED + evf_get32(b + 12);
	int n = 0;
	while (pos + EVF_CHUNK_HDR <= len && n < max) {
		off[n++] = pos;
		pos += EVF_CHUNK_HDR + evf_get32(b + pos + 8);
	}
	return n;
}

/* Write the evgen_all stream in chunks of exactly `per` events. */
static void write_chunked(const char *name, int nchunks, int per)
{
	struct evgen *g = evgen_new(9, 0);
	struct evlog_writer *w = wopen(name, 1 << 20, 0);
	struct evlog_event ev;
	for (int i = 0; i < nchunks * per; i++) {
		evgen_all(g, (uint64_t)i, &ev);
		assert_int_equal(evlog_write(w, &ev), 0);
		if ((i + 1) % per == 0)
			assert_int_equal(evlog_writer_flush(w), 0);
	}
	assert_int_equal(evlog_writer_close(w), 0);
	free(g);
}

/* Read buf; return how many leading events match the stream, and check the
 * rest also match the stream at the given index mapping (skip: index of the
 * first event lost, count lost). */
static uint64_t read_check(const uint8_t *buf, size_t len, uint64_t skip_at, uint64_t skip_n,
			   struct evlog_reader_stats *st)
{
	struct evlog_reader *r;
	char msg[256], why[64];
	if (evlog_reader_open_mem(&r, buf, len, "mem", msg, sizeof(msg)))
		fail_msg("%s", msg);
	struct evgen *g = evgen_new(9, 0);
	struct evlog_event want;
	const struct evlog_event *got;
	uint64_t i = 0, n = 0;
	int rc;
	while ((rc = evlog_next(r, &got)) == 0) {
		if (i == skip_at)
			i += skip_n;
		evgen_all(g, i, &want);
		if (!evgen_equal(&want, got, why, sizeof(why)))
			fail_msg("event %llu: %s differs", (unsigned long long)i, why);
		i++;
		n++;
	}
	assert_int_equal(rc, -EVLOG_END);
	evlog_reader_stats(r, st);
	evlog_reader_close(r);
	free(g);
	return n;
}

/* A damaged chunk is skipped and counted; the chunks after it are read. */
static void test_corrupt_chunk_skipped(void **state)
{
	(void)state;
	write_chunked("corrupt.evlog", 10, 100);
	size_t len, off[16];
	uint8_t *b = slurp(tpath("corrupt.evlog"), &len);
	assert_int_equal(chunk_offsets(b, len, off, 16), 10);
	struct evlog_reader_stats st;
	/* payload byte, header byte, magic byte of chunk 3 */
	size_t where[] = { off[3] + EVF_CHUNK_HDR + 40, off[3] + 20, off[3] };
	for (int k = 0; k < 3; k++) {
		uint8_t *c = malloc(len);
		memcpy(c, b, len);
		c[where[k]] ^= 0x55;
		assert_int_equal(read_check(c, len, 300, 100, &st), 900);
		assert_int_equal(st.chunks_bad, 1);
		assert_int_equal(st.chunks_ok, 9);
		assert_int_equal(st.bytes_skipped, off[4] - off[3]);
		assert_int_equal(st.truncated, 0);
		free(c);
	}
	/* Garbage between chunks is skipped too. */
	uint8_t *c = malloc(len + 1000);
	memcpy(c, b, off[5]);
	memset(c + off[5], 'E', 1000);
	memcpy(c + off[5] + 1000, b + off[5], len - off[5]);
	assert_int_equal(read_check(c, len + 1000, 1000000, 0, &st), 1000);
	assert_int_equal(st.chunks_bad, 1);
	assert_int_equal(st.bytes_skipped, 1000);
	free(c);
	free(b);
}

/* Cut anywhere: the reader returns exactly the complete chunks before the
 * cut, never an error, and flags the torn tail. */
static void test_truncation_every_offset(void **state)
{
	(void)state;
	write_chunked("cut.evlog", 4, 30);
	size_t len, off[8];
	uint8_t *b = slurp(tpath("cut.evlog"), &len);
	assert_int_equal(chunk_offsets(b, len, off, 8), 4);
	off[4] = len;
	for (size_t cut = off[0]; cut <= len; cut++) {
		uint8_t *c = malloc(cut + 1); /* exact size: ASan catches overreads */
		memcpy(c, b, cut);
		struct evlog_reader_stats st;
		uint64_t n = read_check(c, cut, 1000000, 0, &st);
		int whole = 0;
		while (whole < 4 && off[whole + 1] <= cut)
			whole++;
		assert_int_equal(n, (uint64_t)whole * 30);
		assert_int_equal(st.chunks_bad, 0);
		assert_int_equal(st.truncated, cut != off[whole]);
		free(c);
	}
	free(b);
}

/* Build a log by hand: header with an unknown field, then chunks. */
static size_t put_chunk(uint8_t *dst, const uint8_t *raw, size_t rawlen, uint32_t count,
			uint64_t seq)
{
	uint8_t *h = dst;
	size_t c = ZSTD_compress(h + EVF_CHUNK_HDR, ZSTD_compressBound(rawlen), raw, rawlen, 1);
	assert_false(ZSTD_isError(c));
	memset(h, 0, EVF_CHUNK_HDR);
	evf_put32(h, EVF_CHUNK_MAGIC);
	evf_put32(h + 8, (uint32_t)c);
	evf_put32(h + 12, (uint32_t)rawlen);
	evf_put32(h + 16, count);
	evf_put64(h + 24, seq);
	evf_put64(h + 32, 5000);
	evf_put32(h + 40, libdeflate_crc32(0, h + EVF_CHUNK_HDR, c));
	evf_put32(h + 4, libdeflate_crc32(0, h + 8, EVF_CHUNK_HDR - 8));
	return EVF_CHUNK_HDR + c;
}

/* Session ids: drawn set, text form both ways, absent when not given, and a
 * session tag of the wrong length is a corrupt header. */
static void test_session(void **state)
{
	(void)state;
	uint8_t a[EVLOG_SESSION_LEN], b[EVLOG_SESSION_LEN];
	char hex[EVLOG_SESSION_HEX], msg[256];
	assert_int_equal(evlog_session_new(a), 0);
	assert_true(evlog_session_set(a));
	assert_int_equal(strlen(evlog_session_hex(a, hex)), 32);
	assert_int_equal(evlog_session_parse(hex, b), 0);
	assert_memory_equal(a, b, EVLOG_SESSION_LEN);
	assert_int_equal(evlog_session_parse("00112233445566778899AABBCCDDEEFF", b), 0);
	assert_string_equal(evlog_session_hex(b, hex), "00112233445566778899aabbccddeeff");
	assert_int_equal(evlog_session_parse("0011223344556677889", b), -EVLOG_EINVAL);
	assert_false(evlog_session_set(b));
	assert_int_equal(evlog_session_parse("-", b), -EVLOG_EINVAL);
	assert_int_equal(evlog_session_parse("0011223344556677889xaabbccddeeff", b), -EVLOG_EINVAL);
	assert_false(evlog_session_set(b));

	/* No session given: none written, none read. */
	struct evlog_header h = test_header();
	memset(h.session, 0, sizeof(h.session));
	struct evlog_writer *w;
	assert_int_equal(evlog_writer_open(&w, tpath("nosession.evlog"), &h, NULL, msg, sizeof(msg)), 0);
	assert_int_equal(evlog_writer_close(w), 0);
	struct evlog_reader *r;
	assert_int_equal(evlog_reader_open(&r, tpath("nosession.evlog"), msg, sizeof(msg)), 0);
	assert_false(evlog_session_set(evlog_reader_header(r)->session));
	evlog_reader_close(r);

	/* A session tag of 15 bytes. */
	uint8_t buf[64];
	memcpy(buf, EVF_MAGIC, EVF_MAGIC_LEN);
	evf_put16(buf + 8, 1);
	evf_put16(buf + 10, 2);
	uint8_t *p = buf + EVF_FILE_FIXED;
	evf_put16(p, EVF_TAG_SESSION); evf_put32(p + 2, 15); memset(p + 6, 7, 15); p += 21;
	uint32_t blen = (uint32_t)(p - (buf + EVF_FILE_FIXED));
	evf_put32(buf + 12, blen);
	evf_put32(buf + 16, libdeflate_crc32(0, buf + EVF_FILE_FIXED, blen));
	assert_int_equal(evlog_reader_open_mem(&r, buf, (size_t)(p - buf), "short", msg, sizeof(msg)),
			 -EVLOG_EHEADER);
	assert_non_null(strstr(msg, "header field 10"));
}

/* One column's bytes in a hand-made payload. */
struct colbytes {
	unsigned k; /* column */
	const uint8_t *b;
	size_t len;
};
#define COL(k, ...) { (k), (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }) }

/* A column payload: mark, `ncols` columns (those not given empty), data. */
static size_t cols_payload(uint8_t *p, unsigned ncols, const struct colbytes *c, size_t n)
{
	uint8_t *q = p;
	*q++ = EVC_MARK;
	q = lt_varint_put(q, ncols);
	for (unsigned k = 0; k < ncols; k++) {
		size_t len = 0;
		for (size_t i = 0; i < n; i++)
			len += c[i].k == k ? c[i].len : 0;
		q = lt_varint_put(q, len);
	}
	for (unsigned k = 0; k < ncols; k++)
		for (size_t i = 0; i < n; i++)
			if (c[i].k == k) {
				memcpy(q, c[i].b, c[i].len);
				q += c[i].len;
			}
	return (size_t)(q - p);
}

/* A column payload of one clock event (pid 7, value 42), with `extra` bytes
 * appended to the clock column and the directory claiming `ncols` columns
 * and `clen` bytes for that column. */
static size_t col_payload(uint8_t *p, uint64_t ncols, uint64_t clen, int extra)
{
	uint8_t base[EV_TYPE_MAX + 2];
	evc_bases(base);
	uint8_t *q = p;
	*q++ = EVC_MARK;
	q = lt_varint_put(q, ncols);
	for (unsigned k = 0; k < ncols; k++) {
		uint64_t len = k == EVC_TYPE || k == EVC_TS ? 1 : k == EVC_TID ? 2 : 0;
		q = lt_varint_put(q, k == base[EV_CLOCK] ? clen : len);
	}
	*q++ = EV_CLOCK; /* type */
	*q++ = 0;        /* ts delta */
	*q++ = 7;        /* pid */
	*q++ = 0;        /* tid - pid */
	*q++ = 42;       /* realtime_ns */
	for (int i = 0; i < extra; i++)
		*q++ = 1;
	return (size_t)(q - p);
}

/* A later minor version: an unknown header tag is skipped; an event type
 * this reader does not know ends its chunk (the events before it stay
 * read), a payload of another layout is skipped whole, both counted as
 * chunks_unknown; the next chunk is read. */
static void test_forward_compat(void **state)
{
	(void)state;
	uint8_t *b = calloc(1, 4096);
	memcpy(b, EVF_MAGIC, 8);
	evf_put16(b + 8, EVLOG_VERSION_MAJOR);
	evf_put16(b + 10, EVLOG_VERSION_MINOR + 3); /* a later minor */
	uint8_t *p = b + EVF_FILE_FIXED;
	evf_put16(p, 999); evf_put32(p + 2, 3); memcpy(p + 6, "new", 3); p += 9;
	evf_put16(p, EVF_TAG_HOST); evf_put32(p + 2, 2); memcpy(p + 6, "h1", 2); p += 8;
	uint32_t blen = (uint32_t)(p - (b + EVF_FILE_FIXED));
	evf_put32(b + 12, blen);
	evf_put32(b + 16, libdeflate_crc32(0, b + EVF_FILE_FIXED, blen));
	/* Chunk 1: a thread_exit (pid 7, tid 8), then an unknown type 40 with
	 * bytes this reader cannot interpret. Chunk 2: another layout. Chunk
	 * 3: one clock event. */
	const struct colbytes c1[] = {
		COL(EVC_TYPE, EV_THREAD_EXIT, 40), COL(EVC_TS, 2 /* +1 */, 0),
		COL(EVC_TID, 7, 2 /* tid-pid=+1 */, 7, 0), COL(EVC_NCOLS - 1, 1, 2, 3, 4),
	};
	const uint8_t other[] = { EV_CLOCK, 0, 7, 0, 42 };
	uint8_t pay[1024];
	size_t len = (size_t)(p - b);
	len += put_chunk(b + len, pay, cols_payload(pay, EVC_NCOLS, c1, 4), 2, 0);
	len += put_chunk(b + len, other, sizeof(other), 1, 1);
	len += put_chunk(b + len, pay, col_payload(pay, EVC_NCOLS, 1, 0), 1, 2);

	struct evlog_reader *r;
	char msg[256];
	if (evlog_reader_open_mem(&r, b, len, "compat", msg, sizeof(msg)))
		fail_msg("%s", msg);
	const struct evlog_header *h = evlog_reader_header(r);
	assert_int_equal(h->version_minor, EVLOG_VERSION_MINOR + 3);
	assert_true(evgen_str_eq(h->host, evlog_s("h1")));
	const struct evlog_event *ev;
	assert_int_equal(evlog_next(r, &ev), 0);
	assert_int_equal(ev->type, EV_THREAD_EXIT);
	assert_int_equal(ev->ts, 5001);
	assert_int_equal(ev->pid, 7);
	assert_int_equal(ev->tid, 8);
	assert_int_equal(evlog_next(r, &ev), 0);
	assert_int_equal(ev->type, EV_CLOCK);
	assert_int_equal(ev->pid, 7);
	assert_int_equal(ev->tid, 7);
	assert_int_equal(ev->u.clock.realtime_ns, 42);
	assert_int_equal(evlog_next(r, &ev), -EVLOG_END);
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	assert_int_equal(st.chunks_unknown, 2);
	assert_int_equal(st.chunks_bad, 0);
	assert_int_equal(st.events, 2);
	evlog_reader_close(r);
	free(b);
}

/* Corrupt structure inside a chunk whose checksums verify. */
static void test_bad_payload(void **state)
{
	(void)state;
	uint8_t base[EV_TYPE_MAX + 2];
	evc_bases(base);
	const struct colbytes cases[][5] = {
		{ COL(EVC_TYPE, EV_PY_EXIT), COL(EVC_TS, 0), COL(EVC_TID, 1, 0),
		  COL(base[EV_PY_EXIT], 5 /* string id 5 > next id 0 */) },
		{ COL(EVC_TYPE, EV_SYSCALL), COL(EVC_TS, 0x80 /* varint runs off the end */) },
		{ COL(EVC_TYPE, EV_PY_EXIT), COL(EVC_TS, 0), COL(EVC_TID, 1, 0),
		  COL(base[EV_PY_EXIT], 0), COL(EVC_STRDEF, 60 /* length 60 past the end */) },
		{ COL(EVC_TYPE, EV_LIB_CALL), COL(EVC_TS, 0), COL(EVC_TID, 1, 0) /* runs out */ },
		{ COL(EVC_TYPE, EV_THREAD), COL(EVC_TS, 0), COL(EVC_TID, 1, 0), COL(base[EV_THREAD], 0),
		  COL(base[EV_THREAD] + 1, 7 /* is_new ok */, 9 /* trailing */) },
	};
	const size_t ncases[] = { 4, 2, 5, 3, 5 };
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		uint8_t *b = calloc(1, 4096), pay[1024];
		memcpy(b, EVF_MAGIC, 8);
		evf_put16(b + 8, 1);
		evf_put32(b + 16, libdeflate_crc32(0, b, 0));
		size_t len = EVF_FILE_FIXED;
		len += put_chunk(b + len, pay, cols_payload(pay, EVC_NCOLS, cases[k], ncases[k]), 1, 0);
		len += put_chunk(b + len, pay, col_payload(pay, EVC_NCOLS, 1, 0), 1, 1);
		struct evlog_reader *r;
		char msg[256];
		assert_int_equal(evlog_reader_open_mem(&r, b, len, "bad", msg, sizeof(msg)), 0);
		const struct evlog_event *ev;
		int n = 0;
		while (evlog_next(r, &ev) == 0)
			n++;
		struct evlog_reader_stats st;
		evlog_reader_stats(r, &st);
		if (st.chunks_bad != 1 || st.chunks_ok != 1 || n < 1)
			fail_msg("case %zu: %llu bad, %llu ok, %d events", k,
				 (unsigned long long)st.chunks_bad, (unsigned long long)st.chunks_ok, n);
		evlog_reader_close(r);
		free(b);
	}
}

/* Column chunks: a good one is read; a damaged directory or leftover column
 * bytes are damage; more columns than this reader knows is a newer minor
 * version (counted, skipped). The next chunk is read in every case. */
static void test_column_chunks(void **state)
{
	(void)state;
	uint8_t base[EV_TYPE_MAX + 2];
	evc_bases(base);
	assert_int_equal(base[EV_TYPE_MAX + 1], EVC_NCOLS);
	const struct { uint64_t ncols, clen; int extra, events, bad, unknown; } cases[] = {
		{ EVC_NCOLS, 1, 0, 2, 0, 0 },      /* good */
		{ EVC_NCOLS, 2, 1, 2, 1, 0 },      /* a byte left over in a column */
		{ EVC_NCOLS, 9, 0, 1, 1, 0 },      /* column runs past the payload */
		{ EVC_NCOLS + 7, 1, 0, 1, 0, 1 },  /* newer columns */
		{ EVC_NCOLS, 0, 1, 1, 1, 0 },      /* clock value in the wrong column */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t *b = calloc(1, 8192), pay[1024];
		memcpy(b, EVF_MAGIC, 8);
		evf_put16(b + 8, 1);
		evf_put16(b + 10, 1);
		evf_put32(b + 16, libdeflate_crc32(0, b, 0));
		size_t len = EVF_FILE_FIXED;
		size_t n = col_payload(pay, cases[i].ncols, cases[i].clen, cases[i].extra);
		len += put_chunk(b + len, pay, n, 1, 0);
		n = col_payload(pay, EVC_NCOLS, 1, 0);
		len += put_chunk(b + len, pay, n, 1, 1);
		struct evlog_reader *r;
		char msg[256];
		assert_int_equal(evlog_reader_open_mem(&r, b, len, "cols", msg, sizeof(msg)), 0);
		const struct evlog_event *ev;
		int got = 0;
		while (evlog_next(r, &ev) == 0) {
			assert_int_equal(ev->type, EV_CLOCK);
			assert_int_equal(ev->pid, 7);
			assert_int_equal(ev->u.clock.realtime_ns, 42);
			got++;
		}
		struct evlog_reader_stats st;
		evlog_reader_stats(r, &st);
		if (got != cases[i].events || (int)st.chunks_bad != cases[i].bad ||
		    (int)st.chunks_unknown != cases[i].unknown)
			fail_msg("case %zu: %d events, %llu bad, %llu unknown", i, got,
				 (unsigned long long)st.chunks_bad,
				 (unsigned long long)st.chunks_unknown);
		evlog_reader_close(r);
		free(b);
	}
}

/* A log cut to half while it is being read: the read ends cleanly where the
 * file now ends, the stats and the error text say it shrank. */
static void test_shrink_while_reading(void **state)
{
	(void)state;
	struct evlog_writer *w = wopen("shrink.evlog", 16384, 0);
	struct evgen *g = evgen_new(5, 0);
	struct evlog_event ev;
	const uint64_t n = 50000;
	for (uint64_t i = 0; i < n; i++) {
		evgen_mixed(g, i, &ev);
		assert_int_equal(evlog_write(w, &ev), 0);
	}
	assert_int_equal(evlog_writer_close(w), 0);
	free(g);
	struct stat sb;
	assert_int_equal(stat(tpath("shrink.evlog"), &sb), 0);
	struct evlog_reader *r = ropen(tpath("shrink.evlog"));
	const struct evlog_event *got;
	uint64_t k = 0;
	for (; k < 100; k++)
		assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(truncate(tpath("shrink.evlog"), sb.st_size / 2), 0);
	int rc;
	while ((rc = evlog_next(r, &got)) == 0)
		k++;
	assert_int_equal(rc, -EVLOG_END);
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	assert_int_equal(st.shrank, 1);
	assert_int_equal(st.truncated, 1);
	assert_int_equal(st.chunks_bad, 0);
	assert_true(k > 100 && k < n);
	assert_non_null(strstr(evlog_reader_error(r), "file shrank"));
	evlog_reader_close(r);
}

/* tick() flushes a quiet chunk once it is older than flush_ns. */
static void test_tick_flush(void **state)
{
	(void)state;
	struct evlog_writer *w = wopen("tick.evlog", 0, 2000000 /* 2 ms */);
	struct evlog_event ev = { .type = EV_LOST, .ts = 1, .pid = 3, .tid = 3 };
	ev.u.lost.count = 17;
	assert_int_equal(evlog_write(w, &ev), 0);
	assert_int_equal(evlog_writer_tick(w), 0);
	struct evlog_writer_stats st;
	evlog_writer_stats(w, &st);
	assert_int_equal(st.chunks, 0);
	usleep(5000);
	assert_int_equal(evlog_writer_tick(w), 0);
	evlog_writer_stats(w, &st);
	assert_int_equal(st.chunks, 1);
	/* The partial file is readable while the writer is still open. */
	struct evlog_reader *r = ropen(evlog_writer_partial_path(w));
	const struct evlog_event *got;
	assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(got->u.lost.count, 17);
	evlog_reader_close(r);
	evlog_writer_abort(w);
	assert_int_equal(access(tpath(".tick.evlog.partial"), F_OK), -1);
	assert_int_equal(access(tpath("tick.evlog"), F_OK), -1);
}

/* close refuses to replace a file that appeared meanwhile, keeps the data. */
static void test_publish_race(void **state)
{
	(void)state;
	struct evlog_writer *w = wopen("race.evlog", 0, 0);
	struct evlog_event ev = { .type = EV_THREAD_EXIT, .ts = 1, .pid = 3, .tid = 4 };
	assert_int_equal(evlog_write(w, &ev), 0);
	FILE *f = fopen(tpath("race.evlog"), "w");
	fputs("other writer", f);
	fclose(f);
	char msg[512];
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), -EVLOG_EEXIST);
	assert_non_null(strstr(msg, ".race.evlog.partial"));
	size_t len;
	uint8_t *b = slurp(tpath("race.evlog"), &len);
	assert_int_equal(len, 12);
	free(b);
	struct evlog_reader *r = ropen(tpath(".race.evlog.partial"));
	const struct evlog_event *got;
	assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(got->tid, 4);
	evlog_reader_close(r);
}

/* The fd-only writer (the injected library's): writes into a file its
 * creator made, renames nothing, keeps flushed chunks readable while open,
 * refuses a file that is not empty and regular, and empties it on abort. */
static void test_fd_writer(void **state)
{
	(void)state;
	struct evlog_header h = test_header();
	struct evlog_writer_opts o = { .flush_ns = 1000000 };
	struct evlog_writer *w = NULL;
	char msg[512];
	int fd = open(tpath(".fd.partial"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(evlog_writer_open_fd(&w, fd, "fd log", &h, &o, msg, sizeof(msg)), 0);
	struct evlog_event ev = { .type = EV_LOST, .ts = 1, .pid = 3, .tid = 3 };
	ev.u.lost.count = 5;
	assert_int_equal(evlog_write(w, &ev), 0);
	assert_int_equal(evlog_writer_flush(w), 0);
	struct evlog_reader *r = ropen(tpath(".fd.partial"));
	const struct evlog_event *got;
	assert_int_equal(evlog_next(r, &got), 0);
	assert_int_equal(got->u.lost.count, 5);
	evlog_reader_close(r);
	ev.u.lost.count = 6;
	assert_int_equal(evlog_write(w, &ev), 0);
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), 0);
	/* Nothing published or created beside it: the creator publishes. */
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s' | grep fd)\" = .fd.partial", tmpdir);
	assert_int_equal(system(cmd), 0);
	r = ropen(tpath(".fd.partial"));
	int n = 0;
	while (evlog_next(r, &got) == 0)
		assert_int_equal(got->u.lost.count, 5 + n++);
	assert_int_equal(n, 2);
	evlog_reader_close(r);

	/* Not empty, a directory, no fd: refused, with the fd closed. */
	fd = open(tpath(".fd.partial"), O_WRONLY | O_CLOEXEC);
	assert_int_equal(evlog_writer_open_fd(&w, fd, "full", &h, NULL, msg, sizeof(msg)), -EVLOG_EINVAL);
	assert_non_null(strstr(msg, "full: not an empty regular file"));
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(evlog_writer_open_fd(&w, fd, "dir", &h, NULL, msg, sizeof(msg)), -EVLOG_EINVAL);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(evlog_writer_open_fd(&w, -1, "none", &h, NULL, msg, sizeof(msg)), -EVLOG_EINVAL);
	assert_null(w);

	/* Abort: the file is left empty (the creator drops it), not removed. */
	fd = open(tpath(".ab.partial"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_int_equal(evlog_writer_open_fd(&w, fd, "ab", &h, NULL, msg, sizeof(msg)), 0);
	assert_int_equal(evlog_write(w, &ev), 0);
	evlog_writer_abort(w);
	struct stat sb;
	assert_int_equal(stat(tpath(".ab.partial"), &sb), 0);
	assert_int_equal(sb.st_size, 0);
}

static void test_dump_format(void **state)
{
	(void)state;
	char *buf = NULL;
	size_t sz = 0;
	FILE *f = open_memstream(&buf, &sz);
	struct evlog_event ev = { .type = EV_SYSCALL, .ts = 12, .pid = 3, .tid = 4 };
	ev.u.syscall = (typeof(ev.u.syscall)){ .nr = 1, .dur = 50, .ret = -11, .arg0 = 255 };
	evlog_dump_event(f, &ev);
	struct evlog_str fr[2] = { evlog_s("f (a.py:1)"), { .ptr = "g,\\\0", .len = 4 } };
	memset(&ev.u, 0, sizeof(ev.u));
	ev.type = EV_PY_SAMPLE;
	ev.u.py_sample.stack = (struct evlog_pystack){ 2, fr };
	evlog_dump_event(f, &ev);
	uint64_t ips[3] = { 0xffffffff81000000ull, 0x401000, 0x7f00 };
	ev.type = EV_CPU_SAMPLE;
	ev.u.cpu_sample.cpu = 1;
	ev.u.cpu_sample.stack = (struct evlog_stack){ 1, 2, ips };
	evlog_dump_event(f, &ev);
	memset(&ev.u, 0, sizeof(ev.u));
	ev.type = EV_LOST;
	ev.u.lost.source = EVSRC_CUPTI;
	ev.u.lost.count = 9;
	evlog_dump_event(f, &ev);
	fclose(f);
	assert_string_equal(buf,
		"syscall ts=12 pid=3 tid=4 nr=1 dur=50 ret=-11 arg0=0xff arg1=0x0 arg2=0x0\n"
		"py_sample ts=12 pid=3 tid=4 n=2 frames=f\\x20(a.py:1),g\\x2c\\x5c\\x00\n"
		"cpu_sample ts=12 pid=3 tid=4 cpu=1 n_kernel=1 n_user=2 "
		"stack=0xffffffff81000000,0x401000,0x7f00\n"
		"lost ts=12 pid=3 tid=4 source=cupti count=9\n");
	free(buf);
}

/* More distinct strings than a chunk may define: the writer starts new
 * chunks on its own, everything reads back. */
static void test_chunk_table_caps(void **state)
{
	(void)state;
	const uint32_t n = EVF_CHUNK_STRS_MAX + 1000;
	struct evlog_writer *w = wopen("caps.evlog", 32u << 20, 0);
	struct evlog_event ev = { .type = EV_PY_EXIT, .pid = 1, .tid = 1 };
	char name[32];
	for (uint32_t i = 0; i < n; i++) {
		int k = snprintf(name, sizeof(name), "f%u", i);
		ev.ts = i;
		ev.u.py_exit.func = (struct evlog_str){ .ptr = name, .len = (uint32_t)k };
		assert_int_equal(evlog_write(w, &ev), 0);
	}
	struct evlog_writer_stats ws;
	assert_int_equal(evlog_writer_flush(w), 0);
	evlog_writer_stats(w, &ws);
	assert_true(ws.chunks >= 2);
	assert_int_equal(evlog_writer_close(w), 0);
	struct evlog_reader *r = ropen(tpath("caps.evlog"));
	const struct evlog_event *got;
	uint32_t i = 0;
	while (evlog_next(r, &got) == 0) {
		int k = snprintf(name, sizeof(name), "f%u", i);
		assert_true(evgen_str_eq(got->u.py_exit.func, (struct evlog_str){ .ptr = name, .len = (uint32_t)k }));
		i++;
	}
	assert_int_equal(i, n);
	evlog_reader_close(r);
}

/* Strings given with their hash (evlog_str.hash): the right hash interns as
 * the writer's own does (same bytes written); a wrong one only loses the
 * interning, never the string. */
static uint64_t write_hashed(const char *name, int how)
{
	struct evlog_writer *w = wopen(name, 0, 0);
	struct evlog_event ev = { .type = EV_PY_ENTER, .pid = 1, .tid = 1 };
	const char *fn[2] = { "forward", "/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py" };
	for (uint32_t i = 0; i < 1000; i++) {
		struct evlog_str s[2];
		for (int k = 0; k < 2; k++) {
			s[k] = evlog_s(fn[(i + (uint32_t)k) % 2]);
			s[k].hash = how == 0 ? 0 : how == 1 ? evlog_str_hash(s[k].ptr, s[k].len) : i * 2654435761u + 1;
		}
		ev.ts = i;
		ev.u.py_enter.func = s[0];
		ev.u.py_enter.file = s[1];
		ev.u.py_enter.line = i;
		assert_int_equal(evlog_write(w, &ev), 0);
	}
	struct evlog_writer_stats ws;
	assert_int_equal(evlog_writer_flush(w), 0);
	evlog_writer_stats(w, &ws);
	assert_int_equal(evlog_writer_close(w), 0);
	struct evlog_reader *r = ropen(tpath(name));
	const struct evlog_event *got;
	uint32_t i = 0;
	while (evlog_next(r, &got) == 0) {
		assert_true(evgen_str_eq(got->u.py_enter.func, evlog_s(fn[i % 2])));
		assert_true(evgen_str_eq(got->u.py_enter.file, evlog_s(fn[(i + 1) % 2])));
		i++;
	}
	assert_int_equal(i, 1000);
	evlog_reader_close(r);
	return ws.raw_bytes;
}

static void test_hashed_strings(void **state)
{
	(void)state;
	uint64_t own = write_hashed("h0.evlog", 0), given = write_hashed("h1.evlog", 1);
	uint64_t wrong = write_hashed("h2.evlog", 2);
	assert_int_equal(given, own);
	assert_true(wrong > own + 1000 * 8); /* each string sent again */
}

/* ---------------------------------------------------------------- segments */

/* Write n mixed events in segments of seg_bytes (chunks of 4 KiB) into
 * NAME; closed unless crash (then the process holding it _exits, as a
 * killed writer would, leaving the open segment's partial file). Returns
 * the segments begun. */
static uint32_t seg_write(const char *name, uint64_t n, uint64_t seg_bytes, int crash)
{
	struct evgen *g = evgen_new(7, 0);
	struct evlog_header h = test_header();
	struct evlog_writer_opts o = { .chunk_bytes = 4096, .segment_bytes = seg_bytes };
	struct evlog_writer *w;
	struct evlog_event ev;
	char msg[512];

	if (evlog_writer_open(&w, tpath(name), &h, &o, msg, sizeof(msg)))
		fail_msg("open %s: %s", name, msg);
	for (uint64_t i = 0; i < n; i++) {
		evgen_mixed(g, i, &ev);
		if (evlog_write(w, &ev))
			fail_msg("write %llu: %s", (unsigned long long)i, evlog_writer_error(w));
	}
	struct evlog_writer_stats st;
	assert_int_equal(evlog_writer_flush(w), 0);
	evlog_writer_stats(w, &st);
	free(g);
	if (crash)
		_exit(0);
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), 0);
	return st.segments;
}

/* Read path whole: the n generated events in order, each segment after the
 * first opened by its record (name, size, digest) of the one before. */
static void seg_read(const char *path, const char *name, uint64_t n, uint32_t segs)
{
	struct evlog_reader *r = ropen(path);
	struct evgen *g = evgen_new(7, 0);
	const struct evlog_event *got;
	struct evlog_event ev;
	uint64_t i = 0;
	uint32_t recs = 0;
	int rc;

	assert_int_equal(evlog_reader_header(r)->segment, 0); /* the first file's */
	while ((rc = evlog_next(r, &got)) == 0) {
		if (got->type == EV_SEGMENT) {
			char want[300], sz[400];
			struct stat sb;
			snprintf(want, sizeof(want), "%s.%u", name, ++recs);
			assert_int_equal(got->u.segment.name.len, strlen(want));
			assert_memory_equal(got->u.segment.name.ptr, want, strlen(want));
			assert_int_equal(stat(tpath(want), &sb), 0);
			assert_int_equal(got->u.segment.size, sb.st_size);
			snprintf(sz, sizeof(sz), "sha256sum '%s' | grep -q '^%.64s '", tpath(want),
				 got->u.segment.digest.ptr + 7);
			assert_int_equal(system(sz), 0);
			continue;
		}
		assert_true(i < n);
		evgen_mixed(g, i, &ev);
		char why[64];
		if (!evgen_equal(&ev, got, why, sizeof(why)))
			fail_msg("event %llu: %s differs", (unsigned long long)i, why);
		i++;
	}
	assert_int_equal(rc, -EVLOG_END);
	if (n != UINT64_MAX)
		assert_int_equal(i, n);
	assert_int_equal(recs + 1, segs);
	evlog_reader_close(r);
	free(g);
}

static void test_segments(void **state)
{
	(void)state;
	uint32_t segs = seg_write("seg.evlog", 20000, 16384, 0);
	char name[64];
	struct stat sb;

	assert_true(segs >= 5);
	for (uint32_t k = 1; k < segs; k++) {
		snprintf(name, sizeof(name), "seg.evlog.%u", k);
		assert_int_equal(stat(tpath(name), &sb), 0);
		/* bounded: one 4 KiB chunk past the bound at most (zstd never grows it much) */
		assert_true(sb.st_size >= 16384 && sb.st_size < 16384 + 4096 + 512);
	}
	snprintf(name, sizeof(name), "seg.evlog.%u", segs);
	assert_int_equal(stat(tpath(name), &sb), -1); /* the last is NAME */
	assert_int_equal(access(tpath(".seg.evlog.partial"), F_OK), -1);
	seg_read(tpath("seg.evlog"), "seg.evlog", 20000, segs);
	/* A segment reads with those before it: fewer events, in order. */
	snprintf(name, sizeof(name), "seg.evlog.%u", segs - 1);
	seg_read(tpath(name), "seg.evlog", UINT64_MAX, segs - 1);
	/* NAME.1 taken: refused to a log in segments (its first would fail to
	 * publish), not to one without. */
	struct evlog_writer *w;
	char msg[512];
	struct evlog_writer_opts so = { .segment_ns = 1000000000ull };
	FILE *f = fopen(tpath("pre.evlog.1"), "w");
	fclose(f);
	assert_int_equal(evlog_writer_open(&w, tpath("pre.evlog"), NULL, &so, msg, sizeof(msg)),
			 -EVLOG_EEXIST);
	assert_non_null(strstr(msg, "pre.evlog.1' already exists"));
	assert_int_equal(evlog_writer_open(&w, tpath("pre.evlog"), NULL, NULL, msg, sizeof(msg)), 0);
	evlog_writer_abort(w);
	/* A log that fits its bound is one file, as without segments. */
	assert_int_equal(seg_write("one.evlog", 10, 1 << 20, 0), 1);
	seg_read(tpath("one.evlog"), "one.evlog", 10, 1);
	assert_int_equal(access(tpath("one.evlog.1"), F_OK), -1);
}

/* A missing, cut or altered segment stops the read with its name. */
static void test_segments_damaged(void **state)
{
	(void)state;
	uint32_t segs = seg_write("dmg.evlog", 12000, 16384, 0);
	struct evlog_reader *r;
	char msg[512];

	assert_true(segs >= 4);
	assert_int_equal(rename(tpath("dmg.evlog.2"), tpath("moved")), 0);
	assert_int_equal(evlog_reader_open(&r, tpath("dmg.evlog"), msg, sizeof(msg)), -EVLOG_ESEGMENT);
	assert_non_null(strstr(msg, "dmg.evlog.2: missing (No such file or directory): segment 2 "
				   "of the log, recorded by"));
	assert_int_equal(rename(tpath("moved"), tpath("dmg.evlog.2")), 0);
	/* one byte changed in place: same size, another digest */
	int fd = open(tpath("dmg.evlog.1"), O_RDWR);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, 5000), 1);
	b ^= 1;
	assert_int_equal(pwrite(fd, &b, 1, 5000), 1);
	assert_int_equal(evlog_reader_open(&r, tpath("dmg.evlog"), msg, sizeof(msg)), -EVLOG_ESEGMENT);
	assert_non_null(strstr(msg, "dmg.evlog.1: its content differs from the SHA-256"));
	b ^= 1;
	assert_int_equal(pwrite(fd, &b, 1, 5000), 1);
	/* cut */
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(ftruncate(fd, sb.st_size - 1), 0);
	close(fd);
	assert_int_equal(evlog_reader_open(&r, tpath("dmg.evlog.3"), msg, sizeof(msg)), -EVLOG_ESEGMENT);
	assert_non_null(strstr(msg, "dmg.evlog.1:"));
	assert_non_null(strstr(msg, "bytes, but"));
	/* a segment alone without the one before it: named, not read as a whole log */
	assert_int_equal(symlink("x", tpath("dmg.evlog.1.lnk")), 0);
	assert_int_equal(unlink(tpath("dmg.evlog.1")), 0);
	assert_int_equal(symlink(tpath("dmg.evlog.1.lnk"), tpath("dmg.evlog.1")), 0);
	assert_int_equal(evlog_reader_open(&r, tpath("dmg.evlog.2"), msg, sizeof(msg)), -EVLOG_ESEGMENT);
	assert_non_null(strstr(msg, "dmg.evlog.1: missing (Too many levels of symbolic links)"));
}

/* A killed writer leaves its published segments and the open one's
 * partial file, which reads as the log so far. */
static void test_segments_crash(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		seg_write("crash.evlog", 15000, 16384, 1);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(access(tpath("crash.evlog"), F_OK), -1);
	assert_int_equal(access(tpath("crash.evlog.3"), F_OK), 0);
	/* every event: the writer flushed before it died */
	uint32_t segs = 0;
	char name[64];
	do
		snprintf(name, sizeof(name), "crash.evlog.%u", ++segs);
	while (access(tpath(name), F_OK) == 0);
	seg_read(tpath(".crash.evlog.partial"), "crash.evlog", 15000, segs);
}

/* Segments also end by age, at a tick once they hold events. */
static void test_segments_by_time(void **state)
{
	(void)state;
	struct evlog_writer_opts o = { .segment_ns = 20 * 1000000ull, .flush_ns = 1000000 };
	struct evlog_writer *w;
	struct evlog_event ev = { .type = EV_LOST, .ts = 1, .pid = 3, .tid = 3 };
	char msg[512];

	assert_int_equal(evlog_writer_open(&w, tpath("time.evlog"), NULL, &o, msg, sizeof(msg)), 0);
	for (int i = 0; i < 3; i++) {
		ev.u.lost.count = (uint64_t)i;
		assert_int_equal(evlog_write(w, &ev), 0);
		usleep(25000);
		assert_int_equal(evlog_writer_tick(w), 0); /* the chunk */
		assert_int_equal(evlog_writer_tick(w), 0); /* the segment */
	}
	usleep(25000);
	assert_int_equal(evlog_writer_tick(w), 0); /* nothing since: no empty segment */
	struct evlog_writer_stats st;
	evlog_writer_stats(w, &st);
	assert_int_equal(st.segments, 4);
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), 0);
	assert_int_equal(access(tpath("time.evlog.3"), F_OK), 0);
	assert_int_equal(access(tpath("time.evlog.4"), F_OK), -1);
	struct evlog_reader *r = ropen(tpath("time.evlog"));
	const struct evlog_event *got;
	int lost = 0, segrec = 0;
	while (evlog_next(r, &got) == 0) {
		lost += got->type == EV_LOST && got->u.lost.count == (uint64_t)lost;
		segrec += got->type == EV_SEGMENT;
	}
	assert_int_equal(lost, 3);
	assert_int_equal(segrec, 3);
	evlog_reader_close(r);

	/* A segment old enough ends at a tick even with its chunk young: the
	 * chunk goes first, then the next segment starts with its record. */
	o.flush_ns = 60 * 1000000000ull;
	assert_int_equal(evlog_writer_open(&w, tpath("young.evlog"), NULL, &o, msg, sizeof(msg)), 0);
	for (int i = 0; i < 3; i++) {
		ev.u.lost.count = (uint64_t)i;
		assert_int_equal(evlog_write(w, &ev), 0);
		usleep(25000);
		assert_int_equal(evlog_writer_tick(w), 0);
	}
	evlog_writer_stats(w, &st);
	assert_int_equal(st.segments, 4);
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), 0);
	r = ropen(tpath("young.evlog")); /* each record checked: the first event of its segment */
	for (lost = 0, segrec = 0; evlog_next(r, &got) == 0;) {
		lost += got->type == EV_LOST && got->u.lost.count == (uint64_t)lost;
		segrec += got->type == EV_SEGMENT;
	}
	assert_int_equal(lost, 3);
	assert_int_equal(segrec, 3);
	evlog_reader_close(r);
}

/* A sink that drops every other chunk of events (a full queue): the writer
 * counts what it dropped, by type, and the log keeps the rest. */
struct drop_sink {
	struct evlog_files *f;
	int n;
};

static int ds_begin(void *ctx, uint32_t seg, char *err, size_t errsz)
{
	return evlog_files_sink.begin(((struct drop_sink *)ctx)->f, seg, err, errsz);
}

static int ds_put(void *ctx, uint32_t seg, const void *p, size_t n, const struct evlog_put *pi,
		  char *err, size_t errsz)
{
	struct drop_sink *d = ctx;
	if (!pi->keep && d->n++ % 2)
		return 1;
	return evlog_files_sink.put(d->f, seg, p, n, pi, err, errsz);
}

static int ds_end(void *ctx, uint32_t seg, int last, char *err, size_t errsz)
{
	return evlog_files_sink.end(((struct drop_sink *)ctx)->f, seg, last, err, errsz);
}

static void ds_abort(void *ctx)
{
	evlog_files_sink.abort(((struct drop_sink *)ctx)->f);
}

static void test_sink_drops(void **state)
{
	(void)state;
	static const struct evlog_sink sink = { ds_begin, ds_put, ds_end, ds_abort };
	struct drop_sink d = { 0 };
	struct evlog_writer_opts o = { .chunk_bytes = 4096, .segment_bytes = 2048 };
	struct evlog_writer *w;
	char msg[512];

	assert_int_equal(evlog_files_open(&d.f, tpath("drop.evlog"), EVLOG_FILES_SEGMENTS, msg,
					  sizeof(msg)), 0);
	assert_int_equal(evlog_writer_open_sink(&w, "drop.evlog", &sink, &d, NULL, &o, msg,
						sizeof(msg)), 0);
	struct evlog_event ev = { .type = EV_SYSCALL, .ts = 1, .pid = 3, .tid = 3 };
	for (uint32_t i = 0; i < 20000; i++) {
		ev.ts += 1000;
		ev.u.syscall.nr = i;
		assert_int_equal(evlog_write(w, &ev), 0);
	}
	struct evlog_writer_stats st;
	assert_int_equal(evlog_writer_flush(w), 0);
	evlog_writer_stats(w, &st);
	assert_int_equal(evlog_writer_close_msg(w, msg, sizeof(msg)), 0);
	evlog_files_close(d.f);
	assert_true(st.dropped_chunks > 3 && st.segments > 3);
	assert_int_equal(st.dropped_by_type[EV_SYSCALL], st.dropped_events);
	struct evlog_reader *r = ropen(tpath("drop.evlog"));
	const struct evlog_event *got;
	uint64_t kept = 0, segrec = 0, last = 0;
	while (evlog_next(r, &got) == 0) {
		segrec += got->type == EV_SEGMENT;
		if (got->type == EV_SYSCALL) {
			assert_true(!kept || got->u.syscall.nr > last);
			last = got->u.syscall.nr;
			kept++;
		}
	}
	evlog_reader_close(r);
	assert_int_equal(kept + st.dropped_events, 20000);
	assert_int_equal(segrec + 1, st.segments);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_all_types),
		cmocka_unit_test(test_session),
		cmocka_unit_test(test_roundtrip_all_types_big_chunks),
		cmocka_unit_test(test_roundtrip_mixed),
		cmocka_unit_test(test_column_chunks),
		cmocka_unit_test(test_shrink_while_reading),
		cmocka_unit_test(test_odd_strings),
		cmocka_unit_test(test_string_limit),
		cmocka_unit_test(test_invalid_events),
		cmocka_unit_test(test_corrupt_chunk_skipped),
		cmocka_unit_test(test_truncation_every_offset),
		cmocka_unit_test(test_forward_compat),
		cmocka_unit_test(test_bad_payload),
		cmocka_unit_test(test_tick_flush),
		cmocka_unit_test(test_publish_race),
		cmocka_unit_test(test_fd_writer),
		cmocka_unit_test(test_dump_format),
		cmocka_unit_test(test_chunk_table_caps),
		cmocka_unit_test(test_hashed_strings),
		cmocka_unit_test(test_segments),
		cmocka_unit_test(test_segments_damaged),
		cmocka_unit_test(test_segments_crash),
		cmocka_unit_test(test_segments_by_time),
		cmocka_unit_test(test_sink_drops),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
