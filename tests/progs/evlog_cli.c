// SPDX-License-Identifier: Apache-2.0
/*
 * Small command-line front end to the event log library, for tests.
 *
 *   evlog_cli write OUT N [all|all12|mixed] [CHUNK_BYTES] [overwrite]
 *       Write N generated events (default mixed) to OUT; publish on success.
 *       all: every type in turn; all12: types 1-19 only, a stream that stays
 *       the same when types are added.
 *   evlog_cli count LOG
 *       Read LOG; print "events=N chunks_ok=N chunks_bad=N truncated=0|1".
 *   evlog_cli pauseread LOG N
 *       Read N events of LOG, print "paused" and wait for a line on stdin
 *       (another process may cut the file meanwhile), then read on and print
 *       the count line plus "shrank=0|1" and "error=<reader error>".
 *
 * Exit 0 on success, 1 with a one-line message on stderr on failure, 2 on
 * bad usage.
 */
#include "eventlog/eventlog.h"
#include "tests/progs/evlog_gen.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int do_write(int argc, char **argv)
{
	const char *out = argv[2];
	uint64_t n = strtoull(argv[3], NULL, 0);
	int all = argc > 4 && !strcmp(argv[4], "all");
	int all12 = argc > 4 && !strcmp(argv[4], "all12");
	struct evlog_writer_opts o = { 0 };
	if (argc > 5)
		o.chunk_bytes = strtoull(argv[5], NULL, 0);
	for (int i = 6; i < argc; i++)
		o.overwrite |= !strcmp(argv[i], "overwrite");
	struct evgen *g = evgen_new(7, 0);
	struct evlog_header h = { .host = evlog_s("testhost"), .producer = evlog_s("evlog_cli") };
	evlog_session_parse("5e55105e55105e55105e55105e55105e", h.session);
	struct evlog_writer *w;
	char msg[512];
	if (!g) {
		fprintf(stderr, "evlog_cli: out of memory\n");
		return 1;
	}
	if (evlog_writer_open(&w, out, &h, &o, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_cli: %s\n", msg);
		free(g);
		return 1;
	}
	struct evlog_event ev;
	for (uint64_t i = 0; i < n; i++) {
		if (all12)
			evgen_all_upto(g, i, &ev, 19);
		else
			all ? evgen_all(g, i, &ev) : evgen_mixed(g, i, &ev);
		if (evlog_write(w, &ev)) {
			fprintf(stderr, "evlog_cli: %s\n", evlog_writer_error(w));
			free(g);
			/* Keep the partial file: what was flushed stays readable. */
			evlog_writer_close_msg(w, NULL, 0);
			return 1;
		}
	}
	free(g);
	if (evlog_writer_close_msg(w, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_cli: %s\n", msg);
		return 1;
	}
	return 0;
}

static int do_count(const char *log)
{
	char msg[512];
	struct evlog_reader *r;
	if (evlog_reader_open(&r, log, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_cli: %s\n", msg);
		return 1;
	}
	const struct evlog_event *ev;
	int rc;
	while ((rc = evlog_next(r, &ev)) == 0)
		;
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	printf("events=%llu chunks_ok=%llu chunks_bad=%llu truncated=%d\n",
	       (unsigned long long)st.events, (unsigned long long)st.chunks_ok,
	       (unsigned long long)st.chunks_bad, st.truncated);
	if (rc != -EVLOG_END)
		fprintf(stderr, "evlog_cli: %s\n", evlog_reader_error(r));
	evlog_reader_close(r);
	return rc != -EVLOG_END;
}

static int do_pauseread(const char *log, uint64_t n)
{
	char msg[512], line[64];
	struct evlog_reader *r;
	if (evlog_reader_open(&r, log, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_cli: %s\n", msg);
		return 1;
	}
	const struct evlog_event *ev;
	int rc = 0;
	for (uint64_t i = 0; i < n && (rc = evlog_next(r, &ev)) == 0; i++)
		;
	printf("paused\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	while (rc == 0 && (rc = evlog_next(r, &ev)) == 0)
		;
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	printf("events=%llu chunks_ok=%llu chunks_bad=%llu truncated=%d shrank=%d error=%s\n",
	       (unsigned long long)st.events, (unsigned long long)st.chunks_ok,
	       (unsigned long long)st.chunks_bad, st.truncated, st.shrank, evlog_reader_error(r));
	evlog_reader_close(r);
	return rc != -EVLOG_END;
}

int main(int argc, char **argv)
{
	/* A file size limit must surface as EFBIG, not kill us. */
	signal(SIGXFSZ, SIG_IGN);
	if (argc >= 4 && !strcmp(argv[1], "write"))
		return do_write(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "count"))
		return do_count(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "pauseread"))
		return do_pauseread(argv[2], strtoull(argv[3], NULL, 0));
	fprintf(stderr, "usage: evlog_cli write OUT N [all|mixed] [CHUNK_BYTES] [overwrite]\n"
			"       evlog_cli count LOG\n"
			"       evlog_cli pauseread LOG N\n");
	return 2;
}
