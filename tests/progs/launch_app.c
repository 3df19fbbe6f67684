// SPDX-License-Identifier: Apache-2.0
/*
 * launch_app: the target of tests/integration/launch_pair.sh. Makes real
 * libcudart launch calls (cudaLaunchKernel, cudaMemcpyAsync,
 * cudaMemsetAsync, cudaGraphLaunch: without a driver each fails fast, and
 * the -t cuda uprobes see it all the same) and hands each call's work to
 * the stand-in CUPTI (tests/progs/fake_cupti.c, fake_cupti_work), which
 * records it as CUPTI would: one correlation id per call, the RUNTIME
 * kind's API record when on, the kernels queued on their stream.
 *
 *   launch_app FAKE_LIB ROUNDS [go | hold N]
 *
 * Prints "ready PID", waits until cudaLaunchKernel is probed and the
 * stand-in records kernels (up to 60 s), with "go" then until a line "go"
 * comes on stdin (the test sends it once the collector says recording is
 * on: every kind); with "hold N" it starts as soon as the stand-in holds
 * the MEMCPY kind off (kernels on), makes N calls, lets it go on once they
 * have ended and waits for that line (calls made while recording is being
 * switched on, none in flight across a kind's switch). Then: two threads, released
 * together each round, each launches kernels A and B (the same names and
 * dims in both threads, on a stream of its own), a copy and a set of the
 * same sizes; the main thread launches kernel A on the legacy stream, kernel
 * B there through cudaLaunchKernelExC, and a graph. Prints, per thread,
 * "truth TID CORR..." (the correlation id of each of its calls, in call
 * order), "recorded TID N..." (how many records the stand-in made of each
 * call's work: 0 for a call made before its kind was on), "late N" (records
 * the stand-in made later of graph replays launched before recording:
 * FAKE_CUPTI_GRAPH_KEEP), "calls N" (calls made) and "done", then waits
 * for stdin to close.
 *
 * With LAUNCH_APP_DISTINCT=1 the racing threads' calls differ: each its own
 * grids, copy and set sizes (none the main thread's either).
 *
 * With LAUNCH_APP_GRAPH2=1 the first racing thread also launches the graph
 * each round, on its own stream. With LAUNCH_APP_LATE=N, after "done" it
 * waits until the stand-in holds (FAKE_CUPTI_HOLD_AT=flush: recording has
 * stopped), makes N kernel launches and lets it go on.
 *
 * With LAUNCH_APP_CUDA=PATH (a libcuda.so: the toolkit's stub will do) the
 * kernels are launched as libraries with a runtime of their own launch
 * them, through the driver: kernel A by cuLaunchKernel, kernel B by
 * cuLaunchKernelEx (its dims behind a pointer), each with a handle and no
 * symbol, and memsets by cuMemsetD8Async; copies and the graph stay runtime
 * calls. The main thread also calls cudaLaunchKernel and cudaMemsetAsync
 * once a round, with no work (the runtime stops short of a stub driver):
 * with kernels recorded, the default probe file probes launches and
 * memsets at the driver only, so those calls must not be seen.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Kernels' host stubs, named as nvcc names them. */
void kernel_a(float *x, int n) __asm__("_Z8kernel_aPfi");
__attribute__((noinline)) void kernel_a(float *x, int n)
{
	(void)x;
	(void)n;
	__asm__ volatile("");
}
void kernel_b(float *x) __asm__("_Z8kernel_bPf");
__attribute__((noinline)) void kernel_b(float *x)
{
	(void)x;
	__asm__ volatile("");
}

typedef unsigned (*work_fn)(int, const char *, const unsigned *, unsigned long long, unsigned,
			    unsigned long long, unsigned long long);
static work_fn work;
static int (*recorded)(void);
static unsigned long long (*late)(void);
static int rounds;
static pthread_barrier_t bar;
static unsigned long long calls[3];
/* The correlation id the stand-in gave each call, per thread slot, in call
 * order: the truth the test checks the trace's links against. */
#define TRUTH_MAX 16384
static unsigned truth[3][TRUTH_MAX];
static unsigned char n_recorded[3][TRUTH_MAX];
static pid_t truth_tid[3];

/* LAUNCH_APP_CUDA: the driver's launches, NULL when kernels go through the runtime. */
static CUresult (*cu_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			     unsigned, CUstream, void **, void **);
static CUresult (*cu_launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult (*cu_memset)(CUdeviceptr, unsigned char, size_t, CUstream);

static unsigned long long hold_at; /* "hold N": N, else 0 */
static unsigned long long started, in_flight;
static void (*release_hold)(void);
static pthread_mutex_t go_mu = PTHREAD_MUTEX_INITIALIZER, call_mu = PTHREAD_MUTEX_INITIALIZER;
static int released;

/* Until a line "go" (or the end) on stdin. */
static void wait_go(void)
{
	char line[16];

	pthread_mutex_lock(&go_mu);
	while (!released && fgets(line, sizeof(line), stdin) && strcmp(line, "go\n"))
		;
	released = 1;
	pthread_mutex_unlock(&go_mu);
}

/* "hold N": before a call. Once N calls are started, none starts until
 * "go"; the last of them to end lets the stand-in go on switching kinds on,
 * so no call is in flight across a switch. */
static void call_begins(void)
{
	int wait = 0;

	if (!hold_at)
		return;
	pthread_mutex_lock(&call_mu);
	if (started >= hold_at)
		wait = 1;
	else
		started++, in_flight++;
	pthread_mutex_unlock(&call_mu);
	if (wait)
		wait_go();
}

static void call_ends(void)
{
	int last;

	if (!hold_at)
		return;
	pthread_mutex_lock(&call_mu);
	if (in_flight)
		in_flight--;
	last = started == hold_at && !in_flight;
	if (last)
		started++; /* once */
	pthread_mutex_unlock(&call_mu);
	if (last)
		release_hold();
}

static void note(int slot, unsigned corr)
{
	if (calls[slot] < TRUTH_MAX) {
		truth[slot][calls[slot]] = corr;
		n_recorded[slot][calls[slot]] = (unsigned char)recorded();
	}
	call_ends();
	calls[slot]++;
}

static unsigned long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* CUPTI's stream ids of our streams: the legacy one is 7 on CUDA 13. */
static unsigned stream_id(cudaStream_t s)
{
	return s ? 20 + (unsigned)((uintptr_t)s >> 12) : 7;
}

static void launch(const void *fn, const char *mangled, dim3 g, dim3 b, cudaStream_t s, int slot)
{
	void *args[2] = { NULL, NULL };
	unsigned dims[6] = { g.x, g.y, g.z, b.x, b.y, b.z };
	unsigned long long t0;

	call_begins();
	t0 = now_ns();

	if (!cu_launch) {
		(void)cudaLaunchKernel(fn, g, b, args, 0, s);
	} else if (fn == (const void *)kernel_a) {
		(void)cu_launch((CUfunction)0xa000, g.x, g.y, g.z, b.x, b.y, b.z, 0, (CUstream)s, args, NULL);
	} else {
		CUlaunchConfig cfg = { .gridDimX = g.x, .gridDimY = g.y, .gridDimZ = g.z, .blockDimX = b.x,
				       .blockDimY = b.y, .blockDimZ = b.z, .hStream = (CUstream)s };

		(void)cu_launch_ex(&cfg, (CUfunction)0xb000, args, NULL);
	}
	note(slot, work(0, mangled, dims, 0, stream_id(s), t0, now_ns()));
}

/* A copy of 4096 - less bytes, a set of 1024 - less. */
static void copy_set(cudaStream_t s, int slot, unsigned less)
{
	static char host[4096];
	unsigned long long t0;

	call_begins();
	t0 = now_ns();

	(void)cudaMemcpyAsync((void *)0x7f0000001000, host, sizeof(host) - less, cudaMemcpyHostToDevice, s);
	note(slot, work(1, NULL, NULL, sizeof(host) - less, stream_id(s), t0, now_ns()));
	call_begins();
	t0 = now_ns();
	if (cu_memset)
		(void)cu_memset((CUdeviceptr)0x7f0000002000, 0, 1024, (CUstream)s);
	else
		(void)cudaMemsetAsync((void *)0x7f0000002000, 0, 1024 - less, s);
	note(slot, work(2, NULL, NULL, 1024 - less, stream_id(s), t0, now_ns()));
}

static void graph_launch_on(cudaStream_t s, int slot);

static void *racer(void *arg)
{
	int t = (int)(intptr_t)arg;
	cudaStream_t s = (cudaStream_t)(uintptr_t)(0x1000 * (t + 1));
	unsigned d = getenv("LAUNCH_APP_DISTINCT") ? 1 + (unsigned)t : 0;

	truth_tid[t] = gettid();
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&bar);
		launch((const void *)kernel_a, "_Z8kernel_aPfi", (dim3){ 4 + d, 1, 1 }, (dim3){ 128, 1, 1 }, s, t);
		launch((const void *)kernel_b, "_Z8kernel_bPf", (dim3){ 8 + d, 2, 1 }, (dim3){ 64, 1, 1 }, s, t);
		copy_set(s, t, 64 * d);
		if (t == 0 && getenv("LAUNCH_APP_GRAPH2"))
			graph_launch_on(s, t);
	}
	return NULL;
}

/* cudaLaunchKernelExC: its dims behind a pointer, the kernel by name only. */
static void launch_ex(void)
{
	static const unsigned dims[6] = { 2, 1, 1, 32, 1, 1 };
	void *args[1] = { NULL };
	cudaLaunchConfig_t cfg = { .gridDim = { 2, 1, 1 }, .blockDim = { 32, 1, 1 } };
	unsigned long long t0;

	call_begins();
	t0 = now_ns();

	if (cu_launch_ex) {
		CUlaunchConfig dcfg = { .gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
					.blockDimY = 1, .blockDimZ = 1 };

		(void)cu_launch_ex(&dcfg, (CUfunction)0xb000, args, NULL);
	} else {
		(void)cudaLaunchKernelExC(&cfg, (const void *)kernel_b, args);
	}
	note(2, work(0, "_Z8kernel_bPf", dims, 0, 7, t0, now_ns()));
}

static void graph_launch_on(cudaStream_t s, int slot)
{
	static const unsigned dims[6] = { 1, 1, 1, 32, 1, 1 };
	unsigned long long t0;

	call_begins();
	t0 = now_ns();

	(void)cudaGraphLaunch((cudaGraphExec_t)(uintptr_t)0x5000, s);
	note(slot, work(3, "_Z10graph_nodev", dims, 0, stream_id(s), t0, now_ns()));
}

static void graph_launch(void)
{
	graph_launch_on(0, 2);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: launch_app FAKE_LIB ROUNDS\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	int (*recording)(void) = h ? (int (*)(void))dlsym(h, "fake_cupti_recording") : NULL;

	work = h ? (work_fn)dlsym(h, "fake_cupti_work") : NULL;
	recorded = h ? (int (*)(void))dlsym(h, "fake_cupti_recorded") : NULL;
	late = h ? (unsigned long long (*)(void))dlsym(h, "fake_cupti_late") : NULL;
	release_hold = h ? (void (*)(void))dlsym(h, "fake_cupti_release_hold") : NULL;
	if (argc > 4 && !strcmp(argv[3], "hold")) {
		hold_at = strtoull(argv[4], NULL, 10);
		recording = h ? (int (*)(void))dlsym(h, "fake_cupti_holding") : NULL;
	}
	if (!work || !recording || !recorded || !release_hold || !late) {
		fprintf(stderr, "launch_app: %s: %s\n", argv[1], dlerror());
		return 1;
	}
	rounds = atoi(argv[2]);
	const char *drv = getenv("LAUNCH_APP_CUDA");
	void *dh = drv ? dlopen(drv, RTLD_NOW | RTLD_LOCAL) : NULL;

	if (drv) {
		cu_launch = dh ? dlsym(dh, "cuLaunchKernel") : NULL;
		cu_launch_ex = dh ? dlsym(dh, "cuLaunchKernelEx") : NULL;
		cu_memset = dh ? dlsym(dh, "cuMemsetD8Async") : NULL;
		if (!cu_launch || !cu_launch_ex || !cu_memset) {
			fprintf(stderr, "launch_app: %s: %s\n", drv, dlerror());
			return 1;
		}
	}
	/* the launch function the uprobes must be on first */
	volatile unsigned char *probed = cu_launch ? (volatile unsigned char *)(void *)cu_launch
						   : (volatile unsigned char *)(void *)cudaLaunchKernel;

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	/* a uprobe puts int3 on the function's first byte */
	for (int i = 0; i < 6000 && (*probed != 0xcc || !recording()); i++)
		usleep(10000);
	if (*probed != 0xcc || !recording()) {
		fprintf(stderr, "launch_app: never probed and recorded\n");
		return 1;
	}
	if (argc > 3 && !strcmp(argv[3], "go"))
		wait_go();
	pthread_t th[2];

	truth_tid[2] = gettid();
	pthread_barrier_init(&bar, NULL, 3);
	for (int t = 0; t < 2; t++)
		pthread_create(&th[t], NULL, racer, (void *)(intptr_t)t);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&bar);
		launch((const void *)kernel_a, "_Z8kernel_aPfi", (dim3){ 4, 1, 1 }, (dim3){ 128, 1, 1 }, 0, 2);
		if (cu_launch) {
			void *none[1] = { NULL };

			(void)cudaLaunchKernel((const void *)kernel_a, (dim3){ 4, 1, 1 }, (dim3){ 128, 1, 1 },
					       none, 0, 0);
			(void)cudaMemsetAsync((void *)0x7f0000003000, 0, 512, 0);
		}
		launch_ex();
		graph_launch();
		usleep(200);
	}
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < 3; t++) {
		printf("truth %d", (int)truth_tid[t]);
		for (unsigned long long i = 0; i < calls[t] && i < TRUTH_MAX; i++)
			printf(" %u", truth[t][i]);
		printf("\n");
	}
	for (int t = 0; t < 3; t++) {
		printf("recorded %d", (int)truth_tid[t]);
		for (unsigned long long i = 0; i < calls[t] && i < TRUTH_MAX; i++)
			printf(" %u", n_recorded[t][i]);
		printf("\n");
	}
	printf("late %llu\ncalls %llu\ndone\n", late(), calls[0] + calls[1] + calls[2]);
	fflush(stdout);
	if (getenv("LAUNCH_APP_LATE")) {
		int (*holding)(void) = (int (*)(void))dlsym(h, "fake_cupti_holding");

		for (int i = 0; i < 60000 && holding && !holding(); i++)
			usleep(1000);
		for (long n = strtol(getenv("LAUNCH_APP_LATE"), NULL, 10); n > 0; n--)
			launch((const void *)kernel_a, "_Z8kernel_aPfi", (dim3){ 4, 1, 1 }, (dim3){ 128, 1, 1 }, 0, 2);
		release_hold();
	}
	while (getchar() != EOF)
		;
	return 0;
}
