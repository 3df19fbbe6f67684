// SPDX-License-Identifier: Apache-2.0
/*
 * Event log throughput on one core, for a realistic mixed stream (syscalls,
 * CPU samples with repeated stacks, Python enter/exit, GPU kernels, library
 * calls, a few memcpys and Python samples). Events are generated up front so
 * only the library is timed. Prints writer and reader events/s and bytes per
 * event on disk; goals: writer >= 10 M/s, reader >= 20 M/s, <= 8 B/event.
 */
#include "eventlog/eventlog.h"
#include "tests/progs/evlog_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef NEV
#define NEV 2000000u
#endif
/* Distinct pre-generated events, cycled. The cycle (~3.5 MB encoded) is
 * longer than a chunk (1 MiB), so zstd never sees a pass repeat itself
 * inside one frame: a shorter pool would flatter larger zstd windows. */
#define POOL (1u << 18)

/* Thread CPU time (user + system), so rates are per core-second and other
 * load on a shared machine does not skew them. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Pre-generated events whose strings and stacks are copied out of the
 * generator, so the timed loop is the library alone. */
static struct evlog_event *make_pool(void)
{
	struct evgen *g = evgen_new(1, 0);
	struct evlog_event *p = calloc(POOL, sizeof(*p));
	if (!g || !p)
		return NULL;
	for (uint32_t i = 0; i < POOL; i++) {
		evgen_mixed(g, i, &p[i]);
		if (p[i].type == EV_CPU_SAMPLE) {
			struct evlog_stack *s = &p[i].u.cpu_sample.stack;
			size_t n = (size_t)(s->n_kernel + s->n_user) * 8;
			uint64_t *ips = malloc(n + 8);
			memcpy(ips, s->ips, n);
			s->ips = ips;
		} else if (p[i].type == EV_PY_SAMPLE) {
			struct evlog_pystack *s = &p[i].u.py_sample.stack;
			struct evlog_str *f = calloc(s->n + 1, sizeof(*f));
			for (uint32_t k = 0; k < s->n; k++) {
				f[k].len = s->frames[k].len;
				f[k].ptr = strndup(s->frames[k].ptr, s->frames[k].len);
			}
			s->frames = f;
		}
	}
	free(g);
	return p;
}

static int bench(const char *dir, int level)
{
	struct evlog_event *pool = make_pool();
	if (!pool)
		return 1;
	char path[256], msg[512];
	snprintf(path, sizeof(path), "%s/bench-l%d.evlog", dir, level);
	struct evlog_writer_opts o = { .zstd_level = level, .overwrite = 1 };
	struct evlog_header h = { .producer = evlog_s("bench") };
	struct evlog_writer *w;
	if (evlog_writer_open(&w, path, &h, &o, msg, sizeof(msg))) {
		fprintf(stderr, "bench_eventlog: %s\n", msg);
		return 1;
	}
	uint64_t ts = 0;
	double t0 = now_s();
	for (uint32_t i = 0; i < NEV; i++) {
		struct evlog_event *e = &pool[i % POOL];
		if (i % POOL == 0 && i)
			ts += pool[POOL - 1].ts - pool[0].ts + 1000;
		/* Shift each pass over the pool so time keeps rising. */
		e->ts += ts;
		int rc = evlog_write(w, e);
		e->ts -= ts;
		if (rc) {
			fprintf(stderr, "bench_eventlog: %s\n", evlog_writer_error(w));
			return 1;
		}
	}
	struct evlog_writer_stats ws;
	evlog_writer_flush(w);
	evlog_writer_stats(w, &ws);
	if (evlog_writer_close_msg(w, msg, sizeof(msg))) {
		fprintf(stderr, "bench_eventlog: %s\n", msg);
		return 1;
	}
	double tw = now_s() - t0;
	struct stat sb;
	stat(path, &sb);

	struct evlog_reader *r;
	if (evlog_reader_open(&r, path, msg, sizeof(msg))) {
		fprintf(stderr, "bench_eventlog: %s\n", msg);
		return 1;
	}
	t0 = now_s();
	const struct evlog_event *ev;
	uint64_t n = 0, sum = 0;
	while (evlog_next(r, &ev) == 0) {
		n++;
		sum += ev->ts;
	}
	double tr = now_s() - t0;
	evlog_reader_close(r);
	unlink(path);
	printf("zstd level %d: %u events, writer %.1f M events/s, reader %.1f M events/s, "
	       "%.2f bytes/event on disk (%.2f before zstd)%s\n",
	       level, NEV, NEV / tw / 1e6, n / tr / 1e6,
	       (double)sb.st_size / NEV,
	       (double)ws.raw_bytes / NEV, n == NEV && sum ? "" : " READ MISMATCH");
	return n == NEV ? 0 : 1;
}

int main(void)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	printf("rates per CPU-second of the writing/reading thread (compression and write() included)\n");
	printf("goals: writer >= 10 M events/s, reader >= 20 M events/s, <= 8 bytes/event\n");
	return bench(dir, 1) | bench(dir, 3);
}
