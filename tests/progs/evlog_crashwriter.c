// SPDX-License-Identifier: Apache-2.0
/*
 * Crash-test helper for the event log.
 *
 *   evlog_crashwriter write OUT SEED
 *     Writes the deterministic evgen_all() stream (seed SEED) to OUT, with
 *     small chunks and explicit flushes at random points, and after each
 *     completed flush prints on stdout (one write) how many events are on
 *     disk. Meant to be killed with SIGKILL; stops after 2M events.
 *
 *   evlog_crashwriter check LOG SEED MIN
 *     Reads LOG and checks it holds exactly events 0..N-1 of that stream,
 *     field for field, with N >= MIN and no damaged chunk. Prints
 *     "events=N chunks_ok=N chunks_bad=N truncated=0|1"; exit 0 if all
 *     holds, 1 with the reason otherwise.
 */
#include "eventlog/eventlog.h"
#include "tests/progs/evlog_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void report(uint64_t n)
{
	char buf[32];
	int k = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)n);
	if (write(1, buf, (size_t)k) != k)
		_exit(3);
}

static int do_write(const char *out, uint64_t seed)
{
	struct evgen *g = evgen_new(seed, 0);
	struct evlog_header h = { .producer = evlog_s("crashwriter") };
	struct evlog_writer_opts o = { .chunk_bytes = 8192 };
	struct evlog_writer *w;
	char msg[512];
	if (!g || evlog_writer_open(&w, out, &h, &o, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_crashwriter: %s\n", g ? msg : "out of memory");
		return 1;
	}
	struct evgen *pace = evgen_new(seed ^ 0xfeed, 0);
	uint64_t next_flush = 1 + evgen_below(pace, 300);
	struct evlog_event ev;
	for (uint64_t i = 0; i < 2000000; i++) {
		evgen_all(g, i, &ev);
		if (evlog_write(w, &ev)) {
			fprintf(stderr, "evlog_crashwriter: %s\n", evlog_writer_error(w));
			return 1;
		}
		if (i + 1 == next_flush) {
			if (evlog_writer_flush(w)) {
				fprintf(stderr, "evlog_crashwriter: %s\n", evlog_writer_error(w));
				return 1;
			}
			report(i + 1);
			next_flush += 1 + evgen_below(pace, 300);
		}
	}
	free(g);
	free(pace);
	return evlog_writer_close(w) ? 1 : 0;
}

static int do_check(const char *log, uint64_t seed, uint64_t min)
{
	char msg[512], why[64];
	struct evlog_reader *r;
	if (evlog_reader_open(&r, log, msg, sizeof(msg))) {
		fprintf(stderr, "evlog_crashwriter: %s\n", msg);
		return 1;
	}
	struct evgen *g = evgen_new(seed, 0);
	const struct evlog_event *got;
	struct evlog_event want;
	uint64_t i = 0;
	int rc, bad = 0;
	while ((rc = evlog_next(r, &got)) == 0) {
		evgen_all(g, i, &want);
		if (!evgen_equal(&want, got, why, sizeof(why))) {
			fprintf(stderr, "event %llu differs in %s\n", (unsigned long long)i, why);
			bad = 1;
			break;
		}
		i++;
	}
	struct evlog_reader_stats st;
	evlog_reader_stats(r, &st);
	printf("events=%llu chunks_ok=%llu chunks_bad=%llu truncated=%d\n",
	       (unsigned long long)st.events, (unsigned long long)st.chunks_ok,
	       (unsigned long long)st.chunks_bad, st.truncated);
	if (!bad && rc != -EVLOG_END)
		bad = fprintf(stderr, "read error: %s\n", evlog_reader_error(r)) > 0;
	if (!bad && i < min)
		bad = fprintf(stderr, "only %llu events, %llu were flushed\n",
			      (unsigned long long)i, (unsigned long long)min) > 0;
	if (!bad && st.chunks_bad)
		bad = fprintf(stderr, "%llu damaged chunks\n",
			      (unsigned long long)st.chunks_bad) > 0;
	evlog_reader_close(r);
	free(g);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "write"))
		return do_write(argv[2], strtoull(argv[3], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "check"))
		return do_check(argv[2], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0));
	fprintf(stderr, "usage: evlog_crashwriter write OUT SEED | check LOG SEED MIN\n");
	return 2;
}
