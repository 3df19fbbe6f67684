// SPDX-License-Identifier: Apache-2.0
/* Event log: round trips of every event type, header, publishing rules. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "eventlog/eventlog.h"
#include "tests/progs/evlog_gen.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(tmpdir, "/tmp/evlog-test-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
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
	h.cmdline = (struct evlog_str){ "prog\0--flag", 11 };
	h.options = evlog_s("");
	h.mono_ns = 123456789;
	h.realtime_ns = 1700000000000000000ull;
	h.producer_pid = 77;
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
	assert_true(evgen_str_eq(rh->host, h.host));
	assert_true(evgen_str_eq(rh->cmdline, h.cmdline));
	assert_true(evgen_str_eq(rh->machine, h.machine));
	assert_int_equal(rh->options.len, 0);
	assert_int_equal(rh->mono_ns, h.mono_ns);
	assert_int_equal(rh->realtime_ns, h.realtime_ns);
	assert_int_equal(rh->producer_pid, 77);

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_all_types),
		cmocka_unit_test(test_roundtrip_all_types_big_chunks),
		cmocka_unit_test(test_roundtrip_mixed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
