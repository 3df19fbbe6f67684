/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes a small, fully known GPU training profile as an event log, with
 * the real event log writer: one GPU (H200 properties), a Python process
 * with a main and a loader thread, and per step a "step" marker, a Python
 * function, a kernel launch + kernel, a copy launch + memcpy, a read()
 * system call and a CPU sample (with its symbols).
 *
 *   xplane_genlog OUT.log HOST STEPS [--partial]
 *
 * --partial flushes the events and exits without publishing, leaving the
 * writer's ".OUT.log.partial" as a crashed collector would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PID 4242
#define GENLOG_PID PID
#define LOADER 4243
#define MS 1000000ull
#define US 1000ull

#include "genlog.h"

static void preamble(uint64_t t)
{
	struct evlog_event e = ev(EV_GPU_DEVICE, t, 0);

	e.u.gpu_device.device = 0;
	e.u.gpu_device.name = evlog_s("NVIDIA H200");
	e.u.gpu_device.sm_count = 132;
	e.u.gpu_device.clock_khz = 1980000;
	e.u.gpu_device.memory_bytes = 150109880320ull;
	e.u.gpu_device.memory_bandwidth = 4814304000000ull;
	e.u.gpu_device.cc_major = 9;
	e.u.gpu_device.max_threads_per_sm = 2048;
	e.u.gpu_device.max_regs_per_sm = 65536;
	e.u.gpu_device.max_smem_per_sm = 233472;
	put(&e);
	e = ev(EV_PROCESS, t, PID);
	e.u.process.name = evlog_s("python3");
	e.u.process.cmdline = evlog_s("python3 train.py");
	put(&e);
	e = ev(EV_THREAD, t, PID);
	e.u.thread.name = evlog_s("python3");
	put(&e);
	e = ev(EV_THREAD, t, LOADER);
	e.u.thread.name = evlog_s("loader");
	put(&e);
	e = ev(EV_SYMBOL, t, 0);
	e.u.symbol.addr = 0x401000;
	e.u.symbol.name = evlog_s("main");
	e.u.symbol.module = evlog_s("/usr/bin/python3");
	put(&e);
	e.u.symbol.addr = 0x402000;
	e.u.symbol.name = evlog_s("PyEval_EvalFrame");
	put(&e);
}

static void launch(uint64_t t, const char *api, uint64_t corr)
{
	struct evlog_event e = ev(EV_GPU_API, t, PID);

	e.u.gpu_api.dur = 5 * US;
	e.u.gpu_api.api_class = EVLIB_CUDA_RUNTIME;
	e.u.gpu_api.correlation_id = corr;
	e.u.gpu_api.name = evlog_s(api);
	put(&e);
}

static void gpu_work(uint64_t t, uint64_t corr)
{
	struct evlog_event e = ev(EV_GPU_KERNEL, t + 100 * US, PID);

	e.u.gpu_kernel.dur = 2 * MS;
	e.u.gpu_kernel.device = 0;
	e.u.gpu_kernel.context = 1;
	e.u.gpu_kernel.stream = 7;
	e.u.gpu_kernel.correlation_id = corr;
	e.u.gpu_kernel.name = evlog_s("_Z11gemm_kernelPfS_i");
	e.u.gpu_kernel.grid[0] = 128, e.u.gpu_kernel.grid[1] = e.u.gpu_kernel.grid[2] = 1;
	e.u.gpu_kernel.block[0] = 384, e.u.gpu_kernel.block[1] = e.u.gpu_kernel.block[2] = 1;
	e.u.gpu_kernel.registers = 168;
	e.u.gpu_kernel.dynamic_smem = 231424;
	put(&e);
	e = ev(EV_GPU_MEMCPY, t + 3100 * US, PID);
	e.u.gpu_memcpy.dur = 500 * US;
	e.u.gpu_memcpy.context = 1;
	e.u.gpu_memcpy.stream = 7;
	e.u.gpu_memcpy.correlation_id = corr + 1;
	e.u.gpu_memcpy.bytes = 1 << 20;
	e.u.gpu_memcpy.copy_kind = 1;  /* HtoD */
	e.u.gpu_memcpy.src_kind = 1;   /* pageable */
	e.u.gpu_memcpy.dst_kind = 3;   /* device */
	put(&e);
}

static void step(uint64_t t, uint32_t s)
{
	struct evlog_event e = ev(EV_MARKER, t, PID);
	uint64_t ips[2] = { 0x402000, 0x401000 };
	uint64_t corr = 100 + 2 * (uint64_t)s;

	e.u.marker.name = evlog_s("step");
	e.u.marker.dur = 9 * MS;
	e.u.marker.value = s;
	put(&e);
	e = ev(EV_PY_ENTER, t + 10 * US, PID);
	e.u.py_enter.func = evlog_s("train_step");
	e.u.py_enter.file = evlog_s("/app/train.py");
	e.u.py_enter.line = 10;
	put(&e);
	launch(t + 1 * MS, "cudaLaunchKernel", corr);
	e = ev(EV_SYSCALL, t + 2 * MS, LOADER);
	e.u.syscall.nr = 0;
	e.u.syscall.dur = 50 * US;
	e.u.syscall.ret = 4096;
	put(&e);
	launch(t + 3 * MS, "cudaMemcpyAsync", corr + 1);
	e = ev(EV_CPU_SAMPLE, t + 5 * MS, PID);
	e.u.cpu_sample.stack.n_user = 2;
	e.u.cpu_sample.stack.ips = ips;
	put(&e);
	e = ev(EV_PY_EXIT, t + 8 * MS, PID);
	e.u.py_exit.func = evlog_s("train_step");
	put(&e);
	gpu_work(t + 1 * MS, corr);
}

int main(int argc, char **argv)
{
	struct evlog_header h;
	char msg[512];
	uint64_t t0 = 1000 * MS;
	int steps, partial;

	if (argc < 4) {
		fprintf(stderr, "usage: xplane_genlog OUT.log HOST STEPS [--partial]\n");
		return 2;
	}
	steps = atoi(argv[3]);
	partial = argc > 4 && !strcmp(argv[4], "--partial");
	memset(&h, 0, sizeof(h));
	h.host = evlog_s(argv[2]);
	h.producer = evlog_s("test");
	h.machine = evlog_s("x86_64");
	h.mono_ns = t0;
	h.realtime_ns = 1700000000000000000ull;
	if (evlog_writer_open(&w, argv[1], &h, NULL, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "xplane_genlog: %s\n", msg);
		return 1;
	}
	preamble(t0);
	for (int s = 0; s < steps; s++)
		step(t0 + 1 * MS + (uint64_t)s * 10 * MS, (uint32_t)s);
	if (partial) {
		evlog_writer_flush(w);
		return 0; /* no close: the partial file stays, as after a crash */
	}
	if (evlog_writer_close(w) < 0) {
		fprintf(stderr, "xplane_genlog: close failed\n");
		return 1;
	}
	return 0;
}
