/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lp_order_genlog: an event log for the converter's launch pairing
 * (converter/pairing/launchpair.c) in which work of one signature starts in another
 * order than its calls were made, with the real writer and exact times.
 *
 *   lp_order_genlog OUT ROUNDS
 *
 * Three threads of one process launch the same kernel (name, grid, block),
 * each on a stream of its own, one round after another, 100 us apart:
 * the main thread first (stream handle 0x0, CUPTI's legacy stream 7),
 * then thread 1 (0x1000, stream 21: its call takes 5 us), then thread 2
 * (0x2000, stream 22: 1 us). Thread 2's kernel starts first, thread 1's
 * next, the main thread's 50 us later (its stream runs behind), so by
 * start the work comes in the order 2, 1, main, and the calls 0, 1, 2.
 * CUPTI numbers the calls as they are made (main 3r+1, thread 1 3r+2,
 * thread 2 3r+3), which the records carry.
 * Recording is on (an EVLOG_MARK_CUPTI_ON marker) before the first call;
 * no API records (runtime=0). Prints, per thread, "truth TID CORR..." (the
 * id of each of its calls, in call order), as tests/progs/launch_app does
 * for tests/integration/launch_pair_check.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US 1000ull
#define PID 5000u
#define GENLOG_PID PID
#define N_THREADS 3
#define MAX_ROUNDS 10000

#include "genlog.h"

/* Per thread: its stream handle, CUPTI's stream, the call's length, when
 * its work starts after the call began. */
static const struct {
	uint64_t handle;
	uint32_t stream;
	uint64_t call_ns, work_after_ns;
} thr[N_THREADS] = {
	{ 0x0, 7, 1 * US, 50 * US },
	{ 0x1000, 21, 5 * US, 7 * US },
	{ 0x2000, 22, 1 * US, 3 * US },
};

static void preamble(uint64_t t)
{
	struct evlog_event e = ev(EV_PROCESS, t, PID);

	e.u.process.name = evlog_s("launcher");
	e.u.process.cmdline = evlog_s("launcher");
	e.u.process.exe = evlog_s("/usr/bin/launcher");
	put(&e);
	for (uint32_t i = 0; i < N_THREADS; i++) {
		e = ev(EV_THREAD, t, PID + i);
		e.u.thread.name = evlog_s("launcher");
		put(&e);
	}
	e = ev(EV_MARKER, t + 10 * US, 0);
	e.u.marker.kind = EVLOG_MARK_CUPTI_ON;
	e.u.marker.value = EVLOG_CUPTI_ALL;
	e.u.marker.dur = 10 * US;
	put(&e);
}

static void call(uint64_t t, uint32_t i)
{
	struct evlog_event e = ev(EV_LIB_CALL, t, PID + i);

	e.u.lib_call.lib_class = EVLIB_CUDA_RUNTIME;
	e.u.lib_call.lib = evlog_s("/usr/local/cuda/lib64/libcudart.so.13");
	e.u.lib_call.symbol = evlog_s("cudaLaunchKernel");
	e.u.lib_call.dur = thr[i].call_ns;
	e.u.lib_call.ret = 0;
	e.u.lib_call.kernel = evlog_s("kernel_a(float*, int)");
	e.u.lib_call.grid[0] = 4;
	e.u.lib_call.grid[1] = e.u.lib_call.grid[2] = 1;
	e.u.lib_call.block[0] = 128;
	e.u.lib_call.block[1] = e.u.lib_call.block[2] = 1;
	e.u.lib_call.stream = thr[i].handle;
	put(&e);
}

static void work(uint64_t t, uint32_t i, uint32_t corr)
{
	struct evlog_event e = ev(EV_GPU_KERNEL, t, 0);

	e.u.gpu_kernel.dur = 10 * US;
	e.u.gpu_kernel.stream = thr[i].stream;
	e.u.gpu_kernel.correlation_id = corr;
	e.u.gpu_kernel.name = evlog_s("_Z8kernel_aPfi");
	e.u.gpu_kernel.grid[0] = 4;
	e.u.gpu_kernel.grid[1] = e.u.gpu_kernel.grid[2] = 1;
	e.u.gpu_kernel.block[0] = 128;
	e.u.gpu_kernel.block[1] = e.u.gpu_kernel.block[2] = 1;
	put(&e);
}

int main(int argc, char **argv)
{
	struct evlog_header h = { 0 };
	char msg[256];
	uint64_t mono = 1000000000000ull, base = mono + 1000 * US;
	int rounds = argc == 3 ? atoi(argv[2]) : 0;

	if (rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: lp_order_genlog OUT ROUNDS (1 to %d)\n", MAX_ROUNDS);
		return 2;
	}
	h.host = evlog_s("node-a");
	h.boot_id = evlog_s("boot-1");
	h.machine = evlog_s("x86_64");
	h.producer = evlog_s("test");
	h.cmdline = evlog_s("lp_order_genlog");
	h.mono_ns = mono;
	h.realtime_ns = 1790000000000000000ull;
	if (evlog_writer_open(&w, argv[1], &h, NULL, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "lp_order_genlog: %s\n", msg);
		return 1;
	}
	preamble(mono);
	for (int r = 0; r < rounds; r++)
		for (uint32_t i = 0; i < N_THREADS; i++)
			call(base + (uint64_t)r * 100 * US + i * US, i);
	/* CUPTI delivers its records after the calls, in buffers */
	for (int r = 0; r < rounds; r++)
		for (uint32_t i = 0; i < N_THREADS; i++)
			work(base + (uint64_t)r * 100 * US + i * US + thr[i].work_after_ns, i,
			     (uint32_t)(3 * r + i + 1));
	if (evlog_writer_close(w) < 0) {
		fprintf(stderr, "lp_order_genlog: close failed\n");
		return 1;
	}
	for (uint32_t i = 0; i < N_THREADS; i++) {
		printf("truth %u", PID + i);
		for (int r = 0; r < rounds; r++)
			printf(" %d", 3 * r + (int)i + 1);
		printf("\n");
	}
	return 0;
}
