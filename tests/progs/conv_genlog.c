/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes a realistic mixed event log with the real writer, for converter
 * tests and benchmarks: a training process whose main thread runs steps
 * (step marker, Python train_step > forward, a cudaLaunchKernel library call
 * wrapping the CUPTI runtime record, cudaMemcpyAsync, cudaMemsetAsync, an
 * NCCL call, CPU and Python samples) and worker threads doing system calls;
 * GPU kernels / copies / sets with matching correlation ids, written one
 * step late as CUPTI buffers arrive; device properties; symbols and lost
 * counters at the end.
 *
 *   conv_genlog OUT -n EVENTS [--host H] [--boot ID] [--pid P] [--threads T]
 *               [--part all|host|gpu] [--mono NS] [--realtime NS]
 *               [--overlap] [--odd-names] [--unbound K] [--uprobe-cuda] [--session HEX]
 *               [--no-markers] [--ns-tids D] [--launch-args] [--graph K]
 *
 * --part host leaves out what the injected library writes (GPU records),
 * --part gpu writes only that, as two producers on one node would.
 * --overlap adds a system call that outlives its Python parent (cut by the
 * converter), --odd-names a function name with invalid UTF-8 and control
 * bytes, --unbound K a kernel without a launch every K steps.
 * --uprobe-cuda: the collector's uprobes see the CUDA calls CUPTI sees, as
 * on a GPU host: cudaLaunchKernel (no correlation id) around CUPTI's record
 * with a cuLaunchKernel child, cudaMemcpyAsync_ptsz around CUPTI's
 * cudaMemcpyAsync, a uretprobe system call straddling every uprobed return;
 * the CUPTI part has no boot id nor machine, and a synchronization marker
 * without a thread before its cudaEventSynchronize on a worker thread.
 * --no-markers leaves the step markers out (the converter then finds the
 * steps itself, from train_step).
 * --session HEX: the header's session id (32 hex digits), as `profile` gives
 * its own log and the injected library's; without it the log has none.
 * --ns-tids D: the process runs in a pid namespace of its own where each of
 * its ids is the node's minus D: the host part writes the collector's
 * EVLOG_MARK_NS_TID marker per thread, the gpu part (the injected library's)
 * writes the namespace's tids and its own pid there as producer_pid.
 * --launch-args: CUDA recorded as by default (kernels, copies and sets
 * without CUPTI's API records), the launch, copy and set calls seen by
 * the uprobes with their decoded arguments, so the converter links the
 * work to them itself (converter/pairing/launchpair.c).
 * --graph K (with --launch-args): each step also replays a CUDA graph of K
 * kernels (graph id 1, the launch's correlation id), launched by a probed
 * cudaGraphLaunch: the GPT loop has ~860 a step.
 * --lib-log PATH (up to 8): the log records the injected library's log at
 * PATH (its file name, size and SHA-256, EV_LIB_LOG) as the collector does
 * for each one it publishes: only those join the profile in the converter.
 * Prints "steps S events N" at the end.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/digest.h"
#include "eventlog/eventlog.h"

#define US 1000ull
#define STEP (1000 * US)

struct opts {
	const char *out, *host, *boot, *part, *session;
	uint64_t events, mono, realtime;
	uint32_t pid, threads, unbound, ns_delta, graph;
	int overlap, odd, uprobe_cuda, no_markers, launch_args;
	const char *lib_logs[8];
	int n_lib_logs;
};

static struct evlog_writer *w;
static uint64_t written;
static struct opts o = { .host = "node-a", .boot = "boot-1", .part = "all", .pid = 4000,
			 .threads = 4, .mono = 1000000000000ull,
			 .realtime = 1790000000000000000ull };

static int want_host(void);

static void put(const struct evlog_event *e)
{
	struct evlog_event ns;

	if (o.ns_delta && !want_host() && e->pid == o.pid && e->tid) {
		ns = *e; /* the injected library sees its namespace's tids */
		ns.tid -= o.ns_delta;
		e = &ns;
	}
	if (evlog_write(w, e) < 0) {
		fprintf(stderr, "conv_genlog: %s\n", evlog_writer_error(w));
		exit(1);
	}
	written++;
}

static struct evlog_event ev(uint32_t type, uint64_t ts, uint32_t tid)
{
	struct evlog_event e;

	memset(&e, 0, sizeof(e));
	e.type = type;
	e.ts = ts;
	e.pid = o.pid;
	e.tid = tid;
	return e;
}

static int want_host(void) { return strcmp(o.part, "gpu") != 0; }
static int want_gpu(void) { return strcmp(o.part, "host") != 0; }

/* ------------------------------------------------------------ stacks */
#define NUSER 16
#define NKERN 4
static uint64_t user_ip(int i) { return 0x401000ull + (uint64_t)i * 0x100; }
static uint64_t kern_ip(int i) { return 0xffffffff81000000ull + (uint64_t)i * 0x40; }

static void cpu_sample(uint64_t ts, uint32_t tid, uint64_t k)
{
	struct evlog_event e = ev(EV_CPU_SAMPLE, ts, tid);
	uint64_t ips[8];
	uint32_t nk = (uint32_t)(k % 3 == 0 ? 2 : 0), nu = (uint32_t)(3 + k % 4);

	for (uint32_t i = 0; i < nk; i++)
		ips[i] = kern_ip((int)((k + i) % NKERN));
	/* user frames leaf first: leaf varies, root is always frame 0 (main) */
	for (uint32_t i = 0; i < nu; i++)
		ips[nk + i] = user_ip(i == nu - 1 ? 0 : (int)((k * 7 + i) % NUSER));
	e.u.cpu_sample.cpu = (uint32_t)(k % 2);
	e.u.cpu_sample.stack = (struct evlog_stack){ nk, nu, ips };
	put(&e);
}

static void py_sample(uint64_t ts, uint32_t tid, uint64_t k)
{
	struct evlog_event e = ev(EV_PY_SAMPLE, ts, tid);
	struct evlog_str fr[3] = { evlog_s(k % 2 ? "forward (/app/model.py:42)" : "backward (/app/model.py:77)"),
				   evlog_s("train_step (/app/train.py:10)"),
				   evlog_s("<module> (/app/train.py:1)") };

	e.u.py_sample.stack = (struct evlog_pystack){ 3, fr };
	put(&e);
}

static void symbols(void)
{
	static const char *const names[] = { "main", "run_loop", "_ZN5torch8autograd6Engine7executeEv",
					     "at::native::add_kernel(at::TensorIterator&)", "PyEval_EvalFrameDefault",
					     "memcpy", "cudaLaunchKernel", "ncclAllReduce", "pthread_cond_wait",
					     "std::vector<int, std::allocator<int> >::push_back(int const&)",
					     "compute;with;semicolons", "do_work" };

	for (int i = 0; i < NUSER; i++) {
		if (i >= 14)
			continue; /* unknown: no symbol at all -> 0xaddr */
		struct evlog_event e = ev(EV_SYMBOL, 0, 0);

		e.u.symbol.addr = user_ip(i);
		if (i < 12)
			e.u.symbol.name = evlog_s(names[i]);
		e.u.symbol.module = evlog_s(i < 12 ? "/app/bin/trainer" : "/usr/lib/libfoo.so.1");
		e.u.symbol.offset = 0x1234 + (uint64_t)i;
		put(&e);
	}
	static const char *const kn[] = { "do_syscall_64", "entry_SYSCALL_64", "schedule",
					  "copy_user_generic" };

	for (int i = 0; i < NKERN; i++) {
		struct evlog_event e = ev(EV_SYMBOL, 0, 0);

		e.pid = 0;
		e.u.symbol.addr = kern_ip(i);
		e.u.symbol.name = evlog_s(kn[i]);
		e.u.symbol.module = evlog_s("[kernel]");
		put(&e);
	}
}

/* ----------------------------------------------------------- metadata */
static void preamble(void)
{
	struct evlog_event e = ev(EV_PROCESS, o.mono, o.pid);

	e.u.process.name = evlog_s("python3");
	e.u.process.cmdline = evlog_s("python3 train.py --epochs 1");
	e.u.process.exe = evlog_s("/usr/bin/python3.11");
	put(&e);
	for (uint32_t t = 0; t < o.threads; t++) {
		char n[32];

		snprintf(n, sizeof(n), t ? "worker-%u" : "python3", t);
		e = ev(EV_THREAD, o.mono, o.pid + t);
		e.u.thread.name = evlog_s(n);
		put(&e);
		if (o.ns_delta && want_host()) {
			e = ev(EV_MARKER, o.mono, o.pid + t);
			e.u.marker.kind = EVLOG_MARK_NS_TID;
			e.u.marker.value = o.pid + t - o.ns_delta;
			put(&e);
		}
	}
	if (want_gpu()) {
		e = ev(EV_GPU_DEVICE, o.mono, 0);
		e.u.gpu_device.device = 0;
		e.u.gpu_device.name = evlog_s("NVIDIA H200");
		e.u.gpu_device.sm_count = 132;
		e.u.gpu_device.clock_khz = 1980000;
		e.u.gpu_device.memory_bytes = 150109880320ull;
		e.u.gpu_device.memory_bandwidth = 4800000000000ull;
		e.u.gpu_device.cc_major = 9;
		e.u.gpu_device.max_threads_per_sm = 2048;
		e.u.gpu_device.max_regs_per_sm = 65536;
		e.u.gpu_device.max_smem_per_sm = 233472;
		put(&e);
	}
}

/* -------------------------------------------------------------- steps */
static void py(uint32_t type, uint64_t ts, const char *f, uint32_t line)
{
	struct evlog_event e = ev(type, ts, o.pid);

	if (type == EV_PY_ENTER) {
		e.u.py_enter.func = evlog_s(f);
		e.u.py_enter.file = evlog_s(line == 10 ? "/app/train.py" : "/app/model.py");
		e.u.py_enter.line = line;
	} else {
		e.u.py_exit.func = evlog_s(f);
	}
	put(&e);
}

static void api(uint64_t ts, uint64_t dur, const char *name, uint64_t corr)
{
	struct evlog_event e = ev(EV_GPU_API, ts, o.pid);

	e.u.gpu_api.dur = dur;
	e.u.gpu_api.api_class = EVLIB_CUDA_RUNTIME;
	e.u.gpu_api.cbid = 211;
	e.u.gpu_api.correlation_id = corr;
	e.u.gpu_api.name = evlog_s(name);
	put(&e);
}

static void lib(uint64_t ts, uint64_t dur, uint8_t cls, const char *l, const char *sym,
		uint64_t corr)
{
	struct evlog_event e = ev(EV_LIB_CALL, ts, o.pid);

	e.u.lib_call.lib_class = cls;
	e.u.lib_call.lib = evlog_s(l);
	e.u.lib_call.symbol = evlog_s(sym);
	e.u.lib_call.dur = dur;
	e.u.lib_call.correlation_id = corr;
	e.u.lib_call.nargs = 2;
	e.u.lib_call.args[0] = 0x7f0000001000ull;
	e.u.lib_call.args[1] = 256;
	e.u.lib_call.detail = evlog_s(cls == EVLIB_NCCL ? "count=1048576 datatype=float op=sum" : "");
	if (o.launch_args && !strcmp(sym, "cudaLaunchKernel")) {
		e.u.lib_call.kernel = evlog_s("gemm_kernel(float*, float*, int)");
		e.u.lib_call.grid[0] = 264;
		e.u.lib_call.grid[1] = e.u.lib_call.grid[2] = 1;
		e.u.lib_call.block[0] = 256;
		e.u.lib_call.block[1] = e.u.lib_call.block[2] = 1;
	} else if (o.launch_args && !strcmp(sym, "cudaMemcpyAsync")) {
		e.u.lib_call.bytes = 1048576;
		e.u.lib_call.copy_kind = EVLOG_COPY_HTOD;
	} else if (o.launch_args && !strcmp(sym, "cudaMemsetAsync")) {
		e.u.lib_call.bytes = 4096;
		e.u.lib_call.stream = 0x5008; /* CUPTI stream 8 */
	}
	put(&e);
}

/* The uretprobe trampoline's system call, which straddles the return. */
static void uretprobe_sys(uint64_t ret_ts)
{
	struct evlog_event y = ev(EV_SYSCALL, ret_ts - 700, o.pid);

	y.u.syscall.nr = 335;
	y.u.syscall.dur = 600 + 700;
	put(&y);
}

/* CUPTI's synchronization record (no thread), then the waiting call. */
static void cupti_sync(uint64_t t0, uint64_t c)
{
	struct evlog_event e = ev(EV_GPU_SYNC, t0 + 750 * US, 0);

	e.u.gpu_sync.kind = 1; /* event synchronize */
	e.u.gpu_sync.context = 1;
	e.u.gpu_sync.stream = 7;
	e.u.gpu_sync.cuda_event = UINT32_MAX;
	e.u.gpu_sync.correlation_id = c + 3;
	e.u.gpu_sync.dur = 30 * US;
	put(&e);
	e = ev(EV_GPU_API, t0 + 749 * US, o.pid + 1);
	e.u.gpu_api.dur = 32 * US;
	e.u.gpu_api.api_class = EVLIB_CUDA_RUNTIME;
	e.u.gpu_api.correlation_id = c + 3;
	e.u.gpu_api.name = evlog_s("cudaEventSynchronize");
	put(&e);
}

static void uprobe_cuda(uint64_t t0)
{
	const char *rt = "/usr/lib/libcudart.so.13", *drv = "/usr/lib/libcuda.so.1";

	lib(t0 + 101500, 7 * US, EVLIB_CUDA_DRIVER, drv, "cuLaunchKernel", 0);
	uretprobe_sys(t0 + 108500);
	uretprobe_sys(t0 + 110 * US);
	lib(t0 + 199500, 6 * US, EVLIB_CUDA_RUNTIME, rt, "cudaMemcpyAsync_ptsz", 0);
	uretprobe_sys(t0 + 205500);
}

static void host_step(uint64_t s, uint64_t t0, uint64_t c)
{
	struct evlog_event e = ev(EV_MARKER, t0, o.pid);

	e.u.marker.name = evlog_s("step");
	e.u.marker.dur = 900 * US;
	e.u.marker.value = s;
	if (!o.no_markers)
		put(&e);
	py(EV_PY_ENTER, t0 + 10 * US, "train_step", 10);
	py(EV_PY_ENTER, t0 + 20 * US, o.odd && s == 0 ? "bad\xff\x01name\"q\\" : "forward", 42);
	lib(t0 + 100 * US, 10 * US, EVLIB_CUDA_RUNTIME, "/usr/lib/libcudart.so.13", "cudaLaunchKernel",
	    o.uprobe_cuda || o.launch_args ? 0 : c);
	if (o.uprobe_cuda)
		uprobe_cuda(t0);
	if (o.launch_args) {
		lib(t0 + 200 * US, 5 * US, EVLIB_CUDA_RUNTIME, "/usr/lib/libcudart.so.13",
		    "cudaMemcpyAsync", 0);
		lib(t0 + 300 * US, 4 * US, EVLIB_CUDA_RUNTIME, "/usr/lib/libcudart.so.13",
		    "cudaMemsetAsync", 0);
		if (o.graph)
			lib(t0 + 340 * US, 8 * US, EVLIB_CUDA_RUNTIME, "/usr/lib/libcudart.so.13",
			    "cudaGraphLaunch", 0);
	}
	if (want_gpu() && !o.launch_args)
		api(t0 + 102 * US, 6 * US, "cudaLaunchKernel", c);
	if (want_gpu() && !o.launch_args) {
		api(t0 + 200 * US, 5 * US, "cudaMemcpyAsync", c + 1);
		api(t0 + 300 * US, 4 * US, "cudaMemsetAsync", c + 2);
		if (o.uprobe_cuda)
			cupti_sync(t0, c);
	}
	lib(t0 + 400 * US, 50 * US, EVLIB_NCCL, "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "ncclAllReduce", 0);
	if (o.overlap && s % 10 == 5) {
		/* a syscall that starts inside forward() and ends after it */
		struct evlog_event y = ev(EV_SYSCALL, t0 + 480 * US, o.pid);

		y.u.syscall.nr = 0;
		y.u.syscall.dur = 100 * US;
		y.u.syscall.ret = 10;
		put(&y);
	}
	py(EV_PY_EXIT, t0 + 500 * US, "forward", 0);
	cpu_sample(t0 + 600 * US, o.pid, s);
	py_sample(t0 + 650 * US, o.pid, s);
	py(EV_PY_EXIT, t0 + 800 * US, "train_step", 0);
}

static void worker_step(uint64_t s, uint64_t t0, uint32_t tid)
{
	static const uint32_t nr[3] = { 0, 1, 202 }; /* read, write, futex on x86_64 */

	for (int k = 0; k < 3; k++) {
		struct evlog_event e = ev(EV_SYSCALL, t0 + (50 + 100 * (uint64_t)k) * US + tid, tid);

		e.u.syscall.nr = nr[k];
		e.u.syscall.dur = (k == 2 ? 80 : 20) * US;
		e.u.syscall.ret = k == 2 ? 0 : 4096;
		e.u.syscall.arg0 = 3 + (uint64_t)k;
		e.u.syscall.arg2 = 4096;
		put(&e);
	}
	cpu_sample(t0 + 700 * US, tid, s * 31 + tid);
}

static void gpu_step(uint64_t s, uint64_t t0, uint64_t c)
{
	struct evlog_event e = ev(EV_GPU_KERNEL, t0 + 120 * US, 0);

	e.u.gpu_kernel.dur = 250 * US;
	e.u.gpu_kernel.device = 0;
	e.u.gpu_kernel.context = 1;
	e.u.gpu_kernel.stream = 7;
	e.u.gpu_kernel.correlation_id = c;
	e.u.gpu_kernel.name = evlog_s("_Z11gemm_kernelPfS_i");
	e.u.gpu_kernel.grid[0] = 264;
	e.u.gpu_kernel.grid[1] = e.u.gpu_kernel.grid[2] = 1;
	e.u.gpu_kernel.block[0] = 256;
	e.u.gpu_kernel.block[1] = e.u.gpu_kernel.block[2] = 1;
	e.u.gpu_kernel.registers = 64;
	e.u.gpu_kernel.static_smem = 16384;
	put(&e);
	e = ev(EV_GPU_MEMCPY, t0 + 450 * US, 0);
	e.u.gpu_memcpy.dur = 40 * US;
	e.u.gpu_memcpy.context = 1;
	e.u.gpu_memcpy.stream = 7;
	e.u.gpu_memcpy.correlation_id = c + 1;
	e.u.gpu_memcpy.bytes = 1 << 20;
	e.u.gpu_memcpy.copy_kind = 1;
	e.u.gpu_memcpy.src_kind = 1;
	e.u.gpu_memcpy.dst_kind = 3;
	put(&e);
	e = ev(EV_GPU_MEMSET, t0 + 320 * US, 0);
	e.u.gpu_memset.dur = 10 * US;
	e.u.gpu_memset.context = 1;
	e.u.gpu_memset.stream = 8;
	e.u.gpu_memset.correlation_id = c + 2;
	e.u.gpu_memset.bytes = 4096;
	put(&e);
	for (uint32_t k = 0; o.launch_args && k < o.graph; k++) {
		e = ev(EV_GPU_KERNEL, t0 + 500 * US + k * (400 * US / o.graph), 0);
		e.u.gpu_kernel.dur = 400 * US / o.graph / 2 + 1;
		e.u.gpu_kernel.context = 1;
		e.u.gpu_kernel.stream = 7;
		e.u.gpu_kernel.correlation_id = c + 3;
		e.u.gpu_kernel.graph_id = 1;
		e.u.gpu_kernel.name = evlog_s(k % 2 ? "_Z11gemm_kernelPfS_i" : "_Z9layernormPf");
		e.u.gpu_kernel.grid[0] = 132;
		e.u.gpu_kernel.grid[1] = e.u.gpu_kernel.grid[2] = 1;
		e.u.gpu_kernel.block[0] = 128;
		e.u.gpu_kernel.block[1] = e.u.gpu_kernel.block[2] = 1;
		put(&e);
	}
	if (o.unbound && s % o.unbound == 0) {
		e = ev(EV_GPU_KERNEL, t0 + 600 * US, 0);
		e.u.gpu_kernel.dur = 20 * US;
		e.u.gpu_kernel.stream = 7;
		e.u.gpu_kernel.correlation_id = c + 3; /* no launch record: unbound */
		e.u.gpu_kernel.name = evlog_s("orphan_kernel");
		put(&e);
	}
}

static uint64_t per_step(void)
{
	uint64_t n = 0;

	if (want_host())
		n += 10 + 4ull * (o.threads - 1) + (o.uprobe_cuda ? 5 : 0) + (o.graph && o.launch_args);
	if (want_gpu())
		n += 6 + (o.uprobe_cuda ? 2 : 0) + (o.launch_args ? o.graph : 0);
	return n ? n : 1;
}

static int parse(int argc, char **argv)
{
	if (argc < 2 || argv[1][0] == '-')
		return -1; /* "--help" is not an output path */
	o.out = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--overlap")) { o.overlap = 1; continue; }
		if (!strcmp(a, "--no-markers")) { o.no_markers = 1; continue; }
		if (!strcmp(a, "--odd-names")) { o.odd = 1; continue; }
		if (!strcmp(a, "--uprobe-cuda")) { o.uprobe_cuda = 1; continue; }
		if (!strcmp(a, "--launch-args")) { o.launch_args = 1; continue; }
		if (!v)
			return -1;
		i++;
		if (!strcmp(a, "-n")) o.events = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--host")) o.host = v;
		else if (!strcmp(a, "--boot")) o.boot = v;
		else if (!strcmp(a, "--part")) o.part = v;
		else if (!strcmp(a, "--pid")) o.pid = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--threads")) o.threads = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--mono")) o.mono = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--realtime")) o.realtime = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--unbound")) o.unbound = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--session")) o.session = v;
		else if (!strcmp(a, "--ns-tids")) o.ns_delta = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--graph")) o.graph = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--lib-log") && o.n_lib_logs < 8) o.lib_logs[o.n_lib_logs++] = v;
		else return -1;
	}
	if (o.threads < 1)
		o.threads = 1;
	return 0;
}

/* EV_LIB_LOG for the library log at path, as the collector writes it. */
static int record_lib_log(const char *path, uint64_t ts)
{
	char hex[LT_SHA256_HEX], digest[8 + LT_SHA256_HEX];
	uint64_t size = 0;
	const char *base = strrchr(path, '/');
	int fd = open(path, O_RDONLY);

	if (fd < 0 || lt_sha256_fd(fd, UINT64_MAX, hex, &size)) {
		fprintf(stderr, "conv_genlog: cannot read %s\n", path);
		return -1;
	}
	close(fd);
	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	struct evlog_event e = ev(EV_LIB_LOG, ts, 0);

	e.u.lib_log.name = evlog_s(base ? base + 1 : path);
	e.u.lib_log.size = size;
	e.u.lib_log.digest = evlog_s(digest);
	put(&e);
	return 0;
}

int main(int argc, char **argv)
{
	struct evlog_header h = { 0 };
	char msg[256];

	if (parse(argc, argv)) {
		fprintf(stderr, "usage: conv_genlog OUT -n EVENTS [--host H] [--boot ID] [--pid P] "
			"[--threads T] [--part all|host|gpu] [--mono NS] [--realtime NS] "
			"[--overlap] [--odd-names] [--unbound K] [--uprobe-cuda] [--session HEX] "
			"[--no-markers] [--ns-tids D] [--launch-args] [--graph K] [--lib-log PATH]...\n");
		return 2;
	}
	if (o.session && evlog_session_parse(o.session, h.session)) {
		fprintf(stderr, "conv_genlog: --session needs 32 hex digits\n");
		return 2;
	}
	h.host = evlog_s(o.host);
	/* The injected library's logs carry neither (it runs in the target). */
	h.boot_id = evlog_s(o.uprobe_cuda && !want_host() ? "" : o.boot);
	h.machine = evlog_s(o.uprobe_cuda && !want_host() ? "" : "x86_64");
	h.producer = evlog_s(want_host() ? "test" : "inject");
	h.cmdline = evlog_s("conv_genlog");
	if (o.ns_delta && !want_host())
		h.producer_pid = o.pid - o.ns_delta;
	h.mono_ns = o.mono;
	h.realtime_ns = o.realtime;
	if (evlog_writer_open(&w, o.out, &h, NULL, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "conv_genlog: %s\n", msg);
		return 1;
	}
	preamble();
	uint64_t steps = o.events / per_step() + 1, s;

	for (s = 0; s < steps; s++) {
		uint64_t t0 = o.mono + 1000 * US + s * STEP, c = 1 + s * 4;

		if (want_host()) {
			host_step(s, t0, c);
			for (uint32_t t = 1; t < o.threads; t++)
				worker_step(s, t0, o.pid + t);
		} else {
			api(t0 + 102 * US, 6 * US, "cudaLaunchKernel", c);
			api(t0 + 200 * US, 5 * US, "cudaMemcpyAsync", c + 1);
			api(t0 + 300 * US, 4 * US, "cudaMemsetAsync", c + 2);
			if (o.uprobe_cuda)
				cupti_sync(t0, c);
		}
		/* CUPTI delivers activity in buffers: the previous step's now. */
		if (want_gpu() && s)
			gpu_step(s - 1, t0 - STEP, c - 4);
	}
	if (want_gpu() && s)
		gpu_step(s - 1, o.mono + 1000 * US + (s - 1) * STEP, 1 + (s - 1) * 4);
	if (want_host()) {
		symbols();
		struct evlog_event e = ev(EV_LOST, o.mono + 1000 * US + s * STEP, 0);

		e.u.lost.source = EVSRC_CPU;
		e.u.lost.count = 3;
		put(&e);
	}
	for (int i = 0; i < o.n_lib_logs; i++)
		if (record_lib_log(o.lib_logs[i], o.mono + 1000 * US + s * STEP))
			return 1;
	if (evlog_writer_close(w) < 0) {
		fprintf(stderr, "conv_genlog: close failed\n");
		return 1;
	}
	printf("steps %llu events %llu\n", (unsigned long long)steps, (unsigned long long)written);
	return 0;
}
