/* SPDX-License-Identifier: Apache-2.0 */
/*
 * XPlane writer throughput and memory: the sink driven with synthetic items
 * (host threads with nested Python-like calls and launches, GPU streams with
 * kernels), at two sizes, each in a fresh child process so its peak RSS is
 * its own. Prints events/s, output bytes/event and peak RSS side by side:
 * with the spill-file design the peak should not grow with the event count.
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

#include "converter/xplane.h"

#define THREADS 16
#define STREAMS 8

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct evlog_event kern;

static int feed_thread(struct conv_sink *s, uint32_t tid, uint64_t n, uint64_t *corr)
{
	static const char *const names[] = { "train_step", "forward", "attention", "matmul",
					     "cudaLaunchKernel" };
	struct conv_item it = { .track = CONV_TRACK_THREAD, .pid = 100, .tid = tid,
				.category = "python_function" };
	uint64_t t = 1000000;

	/* Groups of 5 nested events: step > forward > attention > matmul > launch. */
	for (uint64_t i = 0; i < n; i++) {
		int depth = (int)(i % 5);

		it.start_ns = t + (uint64_t)depth * 10;
		it.dur_ns = 1000 - (uint64_t)depth * 20;
		it.name = names[depth];
		it.flow_id = depth == 4 ? ++*corr : 0;
		it.flow_start = depth == 4;
		if (s->item(s->ctx, &it) < 0)
			return -1;
		if (depth == 4)
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
	double eps, rss_mb;
};

static int run_once(uint64_t events, const char *dir, struct result *res)
{
	char path[512], err[256];
	struct conv_host_meta m = { .host = "bench", .start_ns = 1000000, .stop_ns = 1000000 + events * 1000,
				    .base_mono_ns = 1000000, .base_realtime_ns = 1700000000000000000ull };
	struct conv_sink *s;
	struct xplane_stats st;
	struct rusage ru;
	uint64_t per_line = events / (THREADS + STREAMS), corr = 0;
	double t0;

	kern.type = EV_GPU_KERNEL;
	kern.u.gpu_kernel.registers = 64;
	kern.u.gpu_kernel.block[0] = 256, kern.u.gpu_kernel.block[1] = kern.u.gpu_kernel.block[2] = 1;
	kern.u.gpu_kernel.grid[0] = 1024, kern.u.gpu_kernel.grid[1] = kern.u.gpu_kernel.grid[2] = 1;
	snprintf(path, sizeof(path), "%s/bench-%llu.xplane.pb", dir, (unsigned long long)events);
	s = xplane_sink_new(path, 1, err, sizeof(err));
	if (!s)
		return fprintf(stderr, "%s\n", err), 1;
	t0 = now();
	if (s->begin_host(s->ctx, &m) < 0)
		return fprintf(stderr, "%s\n", s->err), 1;
	for (uint32_t t = 0; t < THREADS; t++)
		if (feed_thread(s, 1000 + t, per_line, &corr) < 0)
			return fprintf(stderr, "%s\n", s->err), 1;
	for (uint32_t k = 0; k < STREAMS; k++)
		if (feed_stream(s, 7 + k, per_line, 1 + k * per_line) < 0)
			return fprintf(stderr, "%s\n", s->err), 1;
	if (s->end_host(s->ctx) < 0 || s->finish(s->ctx, 1) < 0)
		return fprintf(stderr, "%s\n", s->err), 1;
	xplane_sink_stats(s, &st);
	xplane_sink_free(s);
	getrusage(RUSAGE_SELF, &ru);
	double secs = now() - t0;
	printf("%-10llu %12.0f %10.1f %10.1f %12.1f\n", (unsigned long long)st.events,
	       st.events / secs, (double)st.bytes / (double)st.events, secs,
	       ru.ru_maxrss / 1024.0);
	fflush(stdout); /* the child leaves with _exit */
	res->eps = st.events / secs;
	res->rss_mb = ru.ru_maxrss / 1024.0;
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t sizes[2] = { 250000, 2000000 };
	char dir[] = "/tmp/bench_xplane.XXXXXX";
	struct result res[2] = { { 0, 0 }, { 0, 0 } };
	int status = 0;

	if (argc == 3) {
		sizes[0] = strtoull(argv[1], NULL, 10);
		sizes[1] = strtoull(argv[2], NULL, 10);
	}
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 1;
	printf("xplane writer: %d thread lines + %d stream lines, nested host events, kernels\n",
	       THREADS, STREAMS);
	printf("%-10s %12s %10s %10s %12s\n", "events", "events/s", "bytes/ev", "seconds",
	       "peak RSS MB");
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		int fds[2], ws;
		pid_t pid;

		if (pipe(fds) < 0)
			return perror("pipe"), 1;
		pid = fork();
		if (pid == 0) {
			int rc = run_once(sizes[i], dir, &res[i]);

			if (write(fds[1], &res[i], sizeof(res[i])) != sizeof(res[i]))
				rc = 1;
			_exit(rc);
		}
		close(fds[1]);
		if (pid < 0 || read(fds[0], &res[i], sizeof(res[i])) != sizeof(res[i]) ||
		    waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws))
			status = 1;
		close(fds[0]);
	}
	if (!status)
		printf("large/small: %.1fx events, %.2fx events/s, %.2fx peak RSS "
		       "(the spill file keeps memory flat)\n", (double)sizes[1] / sizes[0],
		       res[1].eps / res[0].eps, res[1].rss_mb / res[0].rss_mb);
	rmdir(dir);
	return status;
}
