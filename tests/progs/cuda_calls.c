// SPDX-License-Identifier: Apache-2.0
/*
 * cuda_calls: a target for the -t cuda tests. Calls the real CUDA runtime
 * (and, loaded later with dlopen, NCCL and cuBLAS) a known number of times
 * with known arguments. Without a GPU driver every call fails fast; its
 * return code is printed ("ret SYMBOL CODE") so the test can compare.
 *
 *   cuda_calls [calls]      the fixed sequence (see main)
 *   cuda_calls bench N      N calls of cudaGetDeviceCount, prints ns/call
 *   cuda_calls nested N     N calls of cp_outer() -> cp_inner()
 *   cuda_calls mapfile PATH map PATH executable without loading it (its
 *                           dependencies stay unloaded), print "mapped",
 *                           wait up to 30 s to be killed
 *   cuda_calls spawn N      fork a child that execs `cuda_calls nested N`
 *   cuda_calls loop N TRUTH N steps of a training loop: ~50 ms of host work
 *                           (75 ms the first time: warm-up), then
 *                           cudaGetDeviceCount and cudaDeviceSynchronize;
 *                           each step's true bounds (CLOCK_REALTIME ns) go
 *                           to TRUTH as "train START END in START_LO END_LO":
 *                           the step ends somewhere in its closing calls
 *                           [END_LO, END] and the next one starts between
 *                           them and its own work, [START_LO, START] (the
 *                           windows are microseconds unless the machine
 *                           preempts the loop there)
 *   cuda_calls watch        call cp_outer() every 10 ms; print "probed" when
 *                           a breakpoint appears on it and "unprobed" (then
 *                           exit 0) once it is gone again; exit 1 after 20 s
 *
 * With CUDA_CALLS_WAIT=SEC it first waits (up to SEC s) until a breakpoint is
 * planted on each function it is about to call, so a profiler attaching
 * while it starts misses none of them.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A kernel's host stub, as nvcc would name it: vector_step(float*, int). */
void vector_step(float *x, int n) __asm__("_Z11vector_stepPfi");
__attribute__((noinline)) void vector_step(float *x, int n)
{
	(void)x;
	(void)n;
	__asm__ volatile("");
}

__attribute__((noinline)) int cp_inner(int x)
{
	__asm__ volatile("");
	return x * 2;
}

__attribute__((noinline)) int cp_outer(int x)
{
	__asm__ volatile("");
	return cp_inner(x) + 1;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A uprobe replaces the function's first byte with int3 (x86). */
static void wait_probe(const char *what, const void *fn)
{
	const char *w = getenv("CUDA_CALLS_WAIT");
	uint64_t end = now_ns() + (uint64_t)((w ? atof(w) : 0) * 1e9);

	if (!w || !fn)
		return;
	while (*(const volatile unsigned char *)fn != 0xcc) {
		if (now_ns() > end) {
			fprintf(stderr, "cuda_calls: %s was never probed\n", what);
			return;
		}
		usleep(2000);
	}
	usleep(200000); /* the profiler may still be attaching the rest (return probes) */
}

static void *sym(void *h, const char *name)
{
	return dlsym(h ? h : RTLD_DEFAULT, name);
}

static void runtime_calls(void)
{
	static char host[64 << 10], host2[64 << 10];
	void *dev[7] = { 0 };
	int i;

	wait_probe("cudaMalloc", sym(NULL, "cudaMalloc"));
	wait_probe("cudaMemcpy", sym(NULL, "cudaMemcpy"));
	wait_probe("cudaLaunchKernel", sym(NULL, "cudaLaunchKernel"));
	wait_probe("cudaStreamSynchronize", sym(NULL, "cudaStreamSynchronize"));
	for (i = 0; i < 7; i++)
		printf("ret cudaMalloc %d bytes=%d\n", cudaMalloc(&dev[i], (size_t)(i + 1) << 20),
		       (i + 1) << 20);
	for (i = 0; i < 11; i++) {
		enum cudaMemcpyKind k = (enum cudaMemcpyKind)(i % 4);
		printf("ret cudaMemcpy %d bytes=%d kind=%d\n",
		       cudaMemcpy(host2, host, (size_t)(i + 1) * 1000, k), (i + 1) * 1000, (int)k);
	}
	for (i = 0; i < 5; i++) {
		float *arg0 = NULL;
		int arg1 = 100 + i;
		void *args[] = { &arg0, &arg1 };
		dim3 grid = { 4, 2, 1 }, block = { 256, 1, 1 };

		printf("ret cudaLaunchKernel %d\n",
		       cudaLaunchKernel((const void *)vector_step, grid, block, args, 128 * (size_t)(i + 1), 0));
	}
	for (i = 0; i < 3; i++)
		printf("ret cudaStreamSynchronize %d\n", cudaStreamSynchronize(0));
}

/* NCCL, loaded late: found through the mmap watch and a glob. */
static void nccl_calls(void)
{
	typedef int (*allreduce_t)(const void *, void *, size_t, int, int, void *, void *);
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	allreduce_t ar;
	int i;

	if (!h) {
		printf("nccl absent\n");
		return;
	}
	ar = (allreduce_t)sym(h, "ncclAllReduce");
	wait_probe("ncclAllReduce", (void *)ar);
	/* count 1000, float32 (7), sum (0), no communicator, stream 0x5000 */
	for (i = 0; i < 2; i++)
		printf("ret ncclAllReduce %d\n", ar(NULL, NULL, 1000, 7, 0, NULL, (void *)0x5000));
}

/* cuBLAS, loaded late: a gemm shape. */
static void cublas_calls(void)
{
	typedef int (*sgemm_t)(void *, int, int, int, int, int, const float *, const float *, int,
			       const float *, int, const float *, float *, int);
	void *h = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
	float one = 1;
	sgemm_t g;

	if (!h) {
		printf("cublas absent\n");
		return;
	}
	g = (sgemm_t)sym(h, "cublasSgemm_v2");
	wait_probe("cublasSgemm_v2", (void *)g);
	/* No handle: fails at once. m=64 n=32 k=16, transa=T transb=N. */
	printf("ret cublasSgemm_v2 %d\n", g(NULL, 1, 0, 64, 32, 16, &one, NULL, 64, NULL, 16, &one, NULL, 64));
}

static int bench(long n)
{
	uint64_t t0;
	int count = 0;
	long i;

	wait_probe("cudaGetDeviceCount", sym(NULL, "cudaGetDeviceCount"));
	cudaGetDeviceCount(&count); /* the first call loads the driver (or fails to) */
	t0 = now_ns();
	for (i = 0; i < n; i++)
		cudaGetDeviceCount(&count);
	printf("ns_per_call %.1f\n", (double)(now_ns() - t0) / (double)n);
	return 0;
}

static int nested(long n)
{
	long i, s = 0;

	wait_probe("cp_outer", (void *)cp_outer);
	wait_probe("cp_inner", (void *)cp_inner);
	for (i = 0; i < n; i++)
		s += cp_outer((int)i);
	printf("nested %ld sum %ld\n", n, s);
	return 0;
}

static int mapfile(const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st) ||
	    mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
		perror(path);
		return 1;
	}
	printf("mapped\n");
	sleep(30);
	return 0;
}

static int watch(void)
{
	const volatile unsigned char *code = (const void *)cp_outer;
	unsigned char orig = *code;
	uint64_t end = now_ns() + 20000000000ull;
	int probed = 0, calls = 0;

	printf("watching pid %d\n", (int)getpid());
	while (now_ns() < end) {
		calls += cp_outer(calls) > 0;
		if (!probed && *code == 0xcc) {
			probed = 1;
			printf("probed\n");
		} else if (probed && *code == orig) {
			printf("unprobed after %d calls\n", calls);
			return 0;
		}
		usleep(10000);
	}
	printf("timeout (probed=%d)\n", probed);
	return 1;
}

static int spawn(const char *n)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		execl("/proc/self/exe", "cuda_calls", "nested", n, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return 1;
	printf("child %d of %d\n", (int)pid, (int)getpid());
	if (waitpid(pid, &status, 0) < 0)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static uint64_t realtime_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

static int loop(long n, const char *truth)
{
	FILE *f = fopen(truth, "w");
	uint64_t closing = 0; /* the previous step's closing calls began */
	int count;

	if (!f)
		return 1;
	wait_probe("cudaDeviceSynchronize", (const void *)cudaDeviceSynchronize);
	for (long i = 0; i < n; i++) {
		uint64_t s = realtime_ns(), s_lo = i ? closing : s;

		spin_ns(i ? 50000000 : 75000000);
		closing = realtime_ns();
		cudaGetDeviceCount(&count);
		cudaDeviceSynchronize();
		uint64_t e = realtime_ns();

		fprintf(f, "train %llu %llu in %llu %llu\n", (unsigned long long)s,
			(unsigned long long)e, (unsigned long long)s_lo,
			(unsigned long long)closing);
	}
	return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "calls";
	long n = argc > 2 ? strtol(argv[2], NULL, 10) : 1000;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "bench"))
		return bench(n > 0 ? n : 1);
	if (!strcmp(mode, "mapfile") && argc > 2)
		return mapfile(argv[2]);
	if (!strcmp(mode, "spawn") && argc > 2)
		return spawn(argv[2]);
	if (!strcmp(mode, "watch"))
		return watch();
	if (!strcmp(mode, "loop") && argc > 3)
		return loop(n > 0 ? n : 1, argv[3]);
	if (!strcmp(mode, "nested"))
		return nested(n > 0 ? n : 1);
	if (strcmp(mode, "calls")) {
		fprintf(stderr, "usage: cuda_calls [calls | bench N | nested N | spawn N | watch | loop N TRUTH | mapfile PATH]\n");
		return 2;
	}
	vector_step(NULL, 0);
	runtime_calls();
	nccl_calls();
	cublas_calls();
	printf("done\n");
	return 0;
}
