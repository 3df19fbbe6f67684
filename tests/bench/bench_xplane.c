/* SPDX-License-Identifier: Apache-2.0 */
/*
 * XPlane writer throughput, size and memory: the sink driven with synthetic
 * items (host threads with nested Python calls, each with its file:line, and
 * launches; GPU streams with kernels), at two sizes, each in a fresh child
 * process so its peak RSS is its own. Prints events/s, output bytes/event
 * and peak RSS side by side: with the spill-file design the peak should not
 * grow with the event count. Then the same items through the trace JSON
 * writer (.json.gz) for the size ratio, and a Python-only profile for the
 * bytes of a plain event (metadata id, offset, duration; no stats).
 *
 *   bench_xplane [EVENTS_SMALL EVENTS_LARGE]   (default 250000 2000000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "converter/output/trace_json.h"
#include "converter/output/xplane.h"

#define THREADS 16
#define STREAMS 8

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct evlog_event kern, api, py[4];
static int python_only;   /* no launches, no GPU streams */

enum { WRITER_XPLANE, WRITER_JSON };

static void init_events(void)
{
	static const char *const names[] = { "train_step", "forward", "attention", "matmul" };

	api.type = EV_GPU_API;
	kern.type = EV_GPU_KERNEL;
	kern.u.gpu_kernel.registers = 64;
	kern.u.gpu_kernel.block[0] = 256, kern.u.gpu_kernel.block[1] = kern.u.gpu_kernel.block[2] = 1;
	kern.u.gpu_kernel.grid[0] = 1024, kern.u.gpu_kernel.grid[1] = kern.u.gpu_kernel.grid[2] = 1;
	for (int i = 0; i < 4; i++) {
		py[i].type = EV_PY_ENTER;
		py[i].u.py_enter.func = evlog_s(names[i]);
		py[i].u.py_enter.file = evlog_s("/workspace/src/model/transformer_block.py");
		py[i].u.py_enter.line = 100 + 10 * (uint32_t)i;
	}
}

static int feed_thread(struct conv_sink *s, uint32_t tid, uint64_t n, uint64_t *corr)
{
	static const char *const names[] = { "train_step", "forward", "attention", "matmul",
					     "cudaLaunchKernel" };
	struct conv_item it = { .track = CONV_TRACK_THREAD, .pid = 100, .tid = tid,
				.category = "python_function" };
	uint64_t t = 1000000;
	int group = python_only ? 4 : 5;

	/* Groups of nested events: step > forward > attention > matmul > launch. */
	for (uint64_t i = 0; i < n; i++) {
		int depth = (int)(i % (uint64_t)group);

		it.start_ns = t + (uint64_t)depth * 10;
		it.dur_ns = 1000 - (uint64_t)depth * 20;
		it.name = names[depth];
		it.ev = depth < 4 ? &py[depth] : &api;
		it.category = depth < 4 ? "python_function" : "cuda_runtime";
		it.flow_id = depth == 4 ? ++*corr : 0;
		it.flow_start = depth == 4;
		if (s->item(s->ctx, &it) < 0)
			return -1;
		if (depth == group - 1)
			t += 2000;
	}
	return 0;
}

static int feed_stream(struct conv_sink *s, uint32_t stream, uint64_t n, uint64_t corr0)
{
	struct conv_item it = { .track = CONV_TRACK_STREAM, .device = 0, .stream = stream,
				.category = "kernel", .ev = &kern, .name = "gemm_kernel" };

	for (uint64_t i = 0; i < n; i++) {
		it.start_ns = 1000000 + i * 2000 + 500;
		it.dur_ns = 1200;
		it.flow_id = corr0 + i;
		if (s->item(s->ctx, &it) < 0)
			return -1;
	}
	return 0;
}

struct result {
	double eps, rss_mb, bytes_per_ev;
};

static struct conv_sink *open_writer(int writer, const char *path, char *err, size_t errsz)
{
	return writer == WRITER_XPLANE ? xplane_sink_new(path, 1, err, errsz)
				       : trace_json_new_file(path, 1, err, errsz);
}

/* Events written and bytes of the file, then the writer is freed. */
static void close_writer(int writer, struct conv_sink *s, uint64_t *events, uint64_t *bytes)
{
	if (writer == WRITER_XPLANE) {
		struct xplane_stats st;

		xplane_sink_stats(s, &st);
		*events = st.events;
		*bytes = st.bytes;
		xplane_sink_free(s);
	} else {
		struct trace_json_stats st;

		trace_json_stats(s, &st);
		*events = st.events;
		*bytes = st.bytes_file;
		trace_json_free(s);
	}
}

static int run_once(int writer, uint64_t events, const char *dir, struct result *res)
{
	char path[512], err[256];
	struct conv_host_meta m = { .host = "bench", .start_ns = 1000000, .stop_ns = 1000000 + events * 1000,
				    .base_mono_ns = 1000000, .base_realtime_ns = 1700000000000000000ull };
	struct conv_sink *s;
	struct rusage ru;
	uint32_t streams = python_only ? 0 : STREAMS;
	uint64_t per_line = events / (THREADS + streams), corr = 0, written, bytes;
	double t0;

	init_events();
	snprintf(path, sizeof(path), "%s/bench-%llu.%s", dir, (unsigned long long)events,
		 writer == WRITER_XPLANE ? "xplane.pb" : "json.gz");
	s = open_writer(writer, path, err, sizeof(err));
	if (!s)
		return fprintf(stderr, "%s\n", err), 1;
	t0 = now();
	if (s->begin_host(s->ctx, &m) < 0)
		return fprintf(stderr, "%s\n", s->err), 1;
	for (uint32_t t = 0; t < THREADS; t++)
		if (feed_thread(s, 1000 + t, per_line, &corr) < 0)
			return fprintf(stderr, "%s\n", s->err), 1;
	for (uint32_t k = 0; k < streams; k++)
		if (feed_stream(s, 7 + k, per_line, 1 + k * per_line) < 0)
			return fprintf(stderr, "%s\n", s->err), 1;
	if (s->end_host(s->ctx) < 0 || s->finish(s->ctx, 1) < 0)
		return fprintf(stderr, "%s\n", s->err), 1;
	close_writer(writer, s, &written, &bytes);
	getrusage(RUSAGE_SELF, &ru);
	double secs = now() - t0;
	res->rss_mb = ru.ru_maxrss / 1024.0;
	/* per item fed: the JSON writer counts its flow and metadata events too */
	written = per_line * (THREADS + streams);
	res->eps = written / secs;
	res->bytes_per_ev = (double)bytes / (double)(written ? written : 1);
	printf("%-10llu %12.0f %10.1f %10.1f %12.1f\n", (unsigned long long)written,
	       res->eps, res->bytes_per_ev, secs, res->rss_mb);
	fflush(stdout); /* the child leaves with _exit */
	unlink(path);
	return 0;
}

/* run_once in a fresh child (its own peak RSS); 0 when it worked. */
static int run_child(int writer, uint64_t events, const char *dir, struct result *res)
{
	int fds[2], ws, status = 0;
	pid_t pid;

	if (pipe(fds) < 0)
		return perror("pipe"), 1;
	pid = fork();
	if (pid == 0) {
		int rc = run_once(writer, events, dir, res);

		if (write(fds[1], res, sizeof(*res)) != sizeof(*res))
			rc = 1;
		_exit(rc);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], res, sizeof(*res)) != sizeof(*res) ||
	    waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws))
		status = 1;
	close(fds[0]);
	return status;
}

static void header(const char *what)
{
	printf("%s\n%-10s %12s %10s %10s %12s\n", what, "events", "events/s", "bytes/ev",
	       "seconds", "peak RSS MB");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	uint64_t sizes[2] = { 250000, 2000000 };
	char dir[] = "/tmp/bench_xplane.XXXXXX";
	struct result res[2], json, plain;
	int status = 0;

	if (argc == 3) {
		sizes[0] = strtoull(argv[1], NULL, 10);
		sizes[1] = strtoull(argv[2], NULL, 10);
	}
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	header("xplane writer: 16 thread lines (nested Python calls with file:line, launches) "
	       "+ 8 stream lines (kernels)");
	for (int i = 0; i < 2; i++)
		status |= run_child(WRITER_XPLANE, sizes[i], dir, &res[i]);
	if (!status)
		printf("large/small: %.1fx events, %.2fx events/s, %.2fx peak RSS "
		       "(the spill file keeps memory flat)\n", (double)sizes[1] / sizes[0],
		       res[1].eps / res[0].eps, res[1].rss_mb / res[0].rss_mb);
	header("the same items through the trace JSON writer (.json.gz)");
	status |= run_child(WRITER_JSON, sizes[0], dir, &json);
	python_only = 1;
	header("xplane writer, Python calls only (plain events: metadata id, offset, duration)");
	status |= run_child(WRITER_XPLANE, sizes[0], dir, &plain);
	if (!status)
		printf("bytes/item: xplane %.1f, json.gz %.1f (xplane/json.gz %.2fx; these "
		       "synthetic timings compress far better than real ones); plain Python "
		       "event %.1f bytes\n", res[0].bytes_per_ev, json.bytes_per_ev,
		       res[0].bytes_per_ev / json.bytes_per_ev, plain.bytes_per_ev);
	rmdir(dir);
	return status;
}
