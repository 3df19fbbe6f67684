// SPDX-License-Identifier: Apache-2.0
/*
 * CUDA activity through CUPTI's activity API, written to an event log.
 *
 * Every CUPTI (and driver) function is resolved with dlsym at run time from
 * the copy the process already has (dlopen RTLD_NOLOAD), so this library has
 * no link-time dependency on CUDA, and a process with its own CUPTI (PyTorch)
 * is never given a second one. Timestamps come through CUPTI's timestamp
 * callback as CLOCK_MONOTONIC, the eBPF clock (bpf_ktime_get_ns).
 *
 * Cost: what runs on the application's threads is kept to CUPTI's own
 * per-record work (see kind_wanted for what each mode costs). Activity
 * buffers come from a pool made ready (zeroed,
 * pages faulted in) at start, so a buffer request costs a list pop; a
 * completed buffer is queued to our encoder thread, so CUPTI's worker never
 * waits for the log's encoding or compression. No callback is enabled while
 * recording; the API callbacks only come on at detach, to finalize.
 *
 * Threads: CUPTI calls the buffer callbacks (request: the application's
 * thread; completion: CUPTI's worker or a flushing thread); the encoder
 * thread turns completed buffers into events; the control thread starts,
 * ticks and stops. `lock` guards the log writer, `pool_mu` the buffer lists.
 */
#include "inject.h"
#include "eventlog/eventlog.h"

#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (8u << 20)
#define BUF_HDR 64               /* struct lbuf before the data; keeps it 64-aligned */
#define POOL_PRE 4               /* buffers made ready at start */
#define POOL_KEEP 16             /* free buffers kept for reuse at most */
#define DRAIN_MS 5000            /* stop: longest wait for the encoder to catch up */
#define MAX_CBID 4096

#define FN(name) __typeof__(name) *name
static struct {
	void *h;
	FN(cuptiSubscribe);
	FN(cuptiUnsubscribe);
	FN(cuptiEnableDomain);
	FN(cuptiActivityEnable);
	FN(cuptiActivityDisable);
	FN(cuptiActivityRegisterCallbacks);
	FN(cuptiActivityFlushAll);
	FN(cuptiActivityGetNextRecord);
	FN(cuptiActivityGetNumDroppedRecords);
	FN(cuptiActivityRegisterTimestampCallback);
	FN(cuptiActivityEnableRuntimeApi);
	FN(cuptiActivityEnableDriverApi);
	FN(cuptiSetThreadIdType);
	FN(cuptiFinalize);
	FN(cuptiGetResultString);
	FN(cuptiGetCallbackName);
	FN(cuptiActivitySetAttribute);
	FN(cuptiActivityGetAttribute);
	FN(cuptiEnableCallback);
} cu;

static struct {
	void *h;
	FN(cuDeviceGetCount);
	FN(cuDeviceGet);
	FN(cuDeviceGetName);
	FN(cuDeviceTotalMem);
	FN(cuDeviceGetAttribute);
} drv;
#undef FN

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fin_cond = PTHREAD_COND_INITIALIZER;
static struct evlog_writer *wr;
static CUpti_SubscriberHandle sub;
static int subscribed;
static atomic_int running;
static atomic_int finalize_wanted;
static atomic_int finalized;
static atomic_int graph_seen;        /* a record of a graph's node, or a graph instantiated */
static int kept;                     /* CUPTI left subscribed at the last stop (keep_cupti) */
static struct li_config cfg;
static struct li_stats stats;
static uint32_t devices_seen;        /* bit per device id already written */
static const char *api_names[2][MAX_CBID];

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_OVERHEAD,
	CUPTI_ACTIVITY_KIND_MEMORY2,
};
static int kind_on[sizeof(kinds) / sizeof(kinds[0])];
/* Each kind's switch: before and after its cuptiActivityEnable (work of a
 * call made before it is not recorded, after it is). */
static uint64_t kind_switch[sizeof(kinds) / sizeof(kinds[0])][2];
/* When this recording began (CLOCK_MONOTONIC): its start request. */
static _Atomic uint64_t rec_since;

/* Runtime calls made so often and so cheaply that recording them costs
 * more than they tell (as Kineto drops them too). */
static const uint32_t noisy_runtime[] = {
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
	CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
	CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v10010,
	CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetFuncBySymbol_v11000,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_v11030,
	CUPTI_RUNTIME_TRACE_CBID_cudaGetDriverEntryPoint_ptsz_v11030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030,
	CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
};

static int is_noisy_runtime(uint32_t cbid)
{
	for (size_t i = 0; i < sizeof(noisy_runtime) / sizeof(noisy_runtime[0]); i++)
		if (noisy_runtime[i] == cbid)
			return 1;
	return 0;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CUPTI's calls into this library in progress, on any thread. The library
 * is unloaded after stop: cuptiFinalize, called on one thread, does not wait
 * for callbacks running on others (the autograd thread launches too), and
 * a thread still in our code when it is unmapped crashes the process. Stop
 * waits for this to stay 0 (callbacks_quiet). */
static _Atomic int in_callback;
#define CB_ENTER() atomic_fetch_add_explicit(&in_callback, 1, memory_order_acq_rel)
#define CB_LEAVE() atomic_fetch_sub_explicit(&in_callback, 1, memory_order_acq_rel)

/* CUPTI's timestamp callback: CLOCK_MONOTONIC, the eBPF clock. */
static uint64_t CUPTIAPI ts_callback(void)
{
	CB_ENTER();
	uint64_t t = mono_ns();
	CB_LEAVE();
	return t;
}

static const char *cupti_err(CUptiResult r)
{
	const char *s = NULL;
	if (cu.cuptiGetResultString)
		cu.cuptiGetResultString(r, &s);
	return s ? s : "unknown CUPTI error";
}

/* ------------------------------------------------------------ resolving */

/* Directory of the libcudart the process has mapped, for a matching CUPTI. */
static int cudart_dir(char *dir, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1200];
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		if (!p || !strstr(p, "/libcudart.so"))
			continue;
		p[strcspn(p, "\n")] = 0;
		char *slash = strrchr(p, '/');
		*slash = 0;
		snprintf(dir, len, "%s", p);
		found = 1;
	}
	if (f)
		fclose(f);
	return found;
}

static void *open_cupti(char *msg, size_t msgsz)
{
	void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
	if (h)
		return h;
	if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: " LI_ERR_NO_DRIVER ": not a "
			 "CUDA program, CUDA not initialized yet (raise --delay), or no GPU driver on this node");
		return NULL;
	}
	char dir[1024], path[1100];
	if (cudart_dir(dir, sizeof(dir))) {
		snprintf(path, sizeof(path), "%s/libcupti.so.13", dir);
		if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			return h;
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: no libcupti.so.13 loaded and "
			 "none beside the process's libcudart (%s/); install CUPTI for CUDA 13 there", dir);
		return NULL;
	}
	snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: no libcupti.so.13 loaded and no "
		 "libcudart mapped to find a matching one next to");
	return NULL;
}

#define SYM(tab, name, required)                                                        \
	do {                                                                            \
		*(void **)&tab.name = dlsym(tab.h, #name);                              \
		if (!tab.name && (required)) {                                         \
			snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: %s "    \
				 "not found in the process's CUPTI", #name);                    \
			return -ENOENT;                                                 \
		}                                                                       \
	} while (0)

static int resolve(char *msg, size_t msgsz)
{
	if (!cu.h && !(cu.h = open_cupti(msg, msgsz)))
		return -ENOENT;
	SYM(cu, cuptiGetResultString, 0);
	SYM(cu, cuptiSubscribe, 1);
	SYM(cu, cuptiUnsubscribe, 1);
	SYM(cu, cuptiEnableDomain, 1);
	SYM(cu, cuptiActivityEnable, 1);
	SYM(cu, cuptiActivityDisable, 1);
	SYM(cu, cuptiActivityRegisterCallbacks, 1);
	SYM(cu, cuptiActivityFlushAll, 1);
	SYM(cu, cuptiActivityGetNextRecord, 1);
	SYM(cu, cuptiActivityGetNumDroppedRecords, 1);
	SYM(cu, cuptiActivityRegisterTimestampCallback, 1);
	SYM(cu, cuptiFinalize, 1);
	SYM(cu, cuptiActivityEnableRuntimeApi, 0);
	SYM(cu, cuptiActivityEnableDriverApi, 0);
	SYM(cu, cuptiSetThreadIdType, 0);
	SYM(cu, cuptiGetCallbackName, 0);
	SYM(cu, cuptiActivitySetAttribute, 0);
	SYM(cu, cuptiActivityGetAttribute, 0);
	SYM(cu, cuptiEnableCallback, 0);
	drv.h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (drv.h) {
		SYM(drv, cuDeviceGetCount, 0);
		SYM(drv, cuDeviceGet, 0);
		SYM(drv, cuDeviceGetName, 0);
		*(void **)&drv.cuDeviceTotalMem = dlsym(drv.h, "cuDeviceTotalMem_v2");
		SYM(drv, cuDeviceGetAttribute, 0);
	}
	return 0;
}

/* ------------------------------------------------------------ writing */

static void emit(struct evlog_event *ev)
{
	ev->pid = cfg.pid;
	if (wr)
		evlog_write(wr, ev);
}

static const char *api_name(int driver, uint32_t cbid, char *buf, size_t len)
{
	const char *n = cbid < MAX_CBID ? api_names[driver][cbid] : NULL;
	if (!n && cu.cuptiGetCallbackName &&
	    cu.cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
				    cbid, &n) != CUPTI_SUCCESS)
		n = NULL;
	if (!n) {
		snprintf(buf, len, "%s_cbid_%u", driver ? "cu" : "cuda", cbid);
		return buf;
	}
	if (cbid < MAX_CBID && !api_names[driver][cbid]) {
		/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel", as Kineto names it. */
		char *s = strdup(n), *v = s ? strstr(s, "_v") : NULL;
		while (v && v[2] >= '0' && v[2] <= '9' && strstr(v + 2, "_v"))
			v = strstr(v + 2, "_v");
		if (v && v[2] >= '0' && v[2] <= '9')
			*v = 0;
		api_names[driver][cbid] = s;
		if (s)
			n = s;
	}
	return n;
}

static void put_api(const CUpti_ActivityAPI *a, int driver)
{
	if (!driver && is_noisy_runtime(a->cbid))
		return;
	char buf[64];
	struct evlog_event ev = { .type = EV_GPU_API, .ts = a->start, .tid = a->threadId };
	ev.u.gpu_api.dur = a->end > a->start ? a->end - a->start : 0;
	ev.u.gpu_api.api_class = driver ? EVLIB_CUDA_DRIVER : EVLIB_CUDA_RUNTIME;
	ev.u.gpu_api.cbid = a->cbid;
	ev.u.gpu_api.correlation_id = a->correlationId;
	ev.u.gpu_api.ret = a->returnValue;
	ev.u.gpu_api.name = evlog_s(api_name(driver, a->cbid, buf, sizeof(buf)));
	emit(&ev);
	stats.apis++;
}

/* Work that started before this recording began is an earlier one's: with
 * CUPTI kept attached (keep_cupti), a graph replay in flight when that
 * recording stopped is delivered at this one's first flush, started long
 * before any launch call of this window, its end (when there is one) often
 * stamped in this window (docs/MEASUREMENTS.md, launch links). Only a kept
 * graph's nodes are instrumented while the kinds are off, so what else is
 * left out is at most a node running across the switch. It is counted and
 * left out of this log. So is work CUPTI could not time (start 0, its
 * "timestamp information could not be collected": work in flight as
 * recording stopped), which at time 0 would stretch the profile back to
 * the host's boot and lead the launch pairing astray. */
static int left_out(uint64_t start)
{
	if (!start) {
		stats.untimed++;
		return 1;
	}
	if (start >= atomic_load_explicit(&rec_since, memory_order_relaxed))
		return 0;
	stats.earlier++;
	return 1;
}

static void put_kernel(const CUpti_ActivityKernel10 *k)
{
	if (left_out(k->start))
		return;
	struct evlog_event ev = { .type = EV_GPU_KERNEL, .ts = k->start };
	ev.u.gpu_kernel.dur = k->end > k->start ? k->end - k->start : 0;
	ev.u.gpu_kernel.device = k->deviceId;
	ev.u.gpu_kernel.context = k->contextId;
	ev.u.gpu_kernel.stream = k->streamId;
	ev.u.gpu_kernel.correlation_id = k->correlationId;
	ev.u.gpu_kernel.name = evlog_s(k->name ? k->name : "?");
	ev.u.gpu_kernel.grid[0] = (uint32_t)k->gridX;
	ev.u.gpu_kernel.grid[1] = (uint32_t)k->gridY;
	ev.u.gpu_kernel.grid[2] = (uint32_t)k->gridZ;
	ev.u.gpu_kernel.block[0] = (uint32_t)k->blockX;
	ev.u.gpu_kernel.block[1] = (uint32_t)k->blockY;
	ev.u.gpu_kernel.block[2] = (uint32_t)k->blockZ;
	ev.u.gpu_kernel.registers = k->registersPerThread;
	ev.u.gpu_kernel.static_smem = (uint32_t)k->staticSharedMemory;
	ev.u.gpu_kernel.dynamic_smem = (uint32_t)k->dynamicSharedMemory;
	ev.u.gpu_kernel.graph_id = k->graphId;
	if (k->graphId)
		atomic_store_explicit(&graph_seen, 1, memory_order_relaxed);
	emit(&ev);
	stats.kernels++;
}

static void put_memcpy(const CUpti_ActivityMemcpy6 *m)
{
	if (left_out(m->start))
		return;
	struct evlog_event ev = { .type = EV_GPU_MEMCPY, .ts = m->start };
	ev.u.gpu_memcpy.dur = m->end > m->start ? m->end - m->start : 0;
	ev.u.gpu_memcpy.device = m->deviceId;
	ev.u.gpu_memcpy.context = m->contextId;
	ev.u.gpu_memcpy.stream = m->streamId;
	ev.u.gpu_memcpy.correlation_id = m->correlationId;
	ev.u.gpu_memcpy.bytes = m->bytes;
	ev.u.gpu_memcpy.copy_kind = m->copyKind;
	ev.u.gpu_memcpy.src_kind = m->srcKind;
	ev.u.gpu_memcpy.dst_kind = m->dstKind;
	if (m->graphId)
		atomic_store_explicit(&graph_seen, 1, memory_order_relaxed);
	emit(&ev);
	stats.memcpys++;
}

static void put_memset(const CUpti_ActivityMemset4 *m)
{
	if (left_out(m->start))
		return;
	struct evlog_event ev = { .type = EV_GPU_MEMSET, .ts = m->start };
	ev.u.gpu_memset.dur = m->end > m->start ? m->end - m->start : 0;
	ev.u.gpu_memset.device = m->deviceId;
	ev.u.gpu_memset.context = m->contextId;
	ev.u.gpu_memset.stream = m->streamId;
	ev.u.gpu_memset.correlation_id = m->correlationId;
	ev.u.gpu_memset.bytes = m->bytes;
	ev.u.gpu_memset.value = m->value;
	if (m->graphId)
		atomic_store_explicit(&graph_seen, 1, memory_order_relaxed);
	emit(&ev);
	stats.memsets++;
}

/* GPU memory allocated or freed: CUPTI gives no thread, only the API
 * call's correlation id; the converter puts it on its process's track of
 * the device. */
static void put_memory(const CUpti_ActivityMemory4 *m)
{
	if (left_out(m->timestamp))
		return;
	struct evlog_event ev = { .type = EV_GPU_MEMORY, .ts = m->timestamp };
	ev.u.gpu_memory.op = (uint8_t)(m->memoryOperationType <= UINT8_MAX ? m->memoryOperationType : 0);
	ev.u.gpu_memory.memory_kind = (uint8_t)(m->memoryKind <= UINT8_MAX ? m->memoryKind : 0);
	ev.u.gpu_memory.device = m->deviceId;
	ev.u.gpu_memory.context = m->contextId;
	ev.u.gpu_memory.stream = m->streamId;
	ev.u.gpu_memory.correlation_id = m->correlationId;
	ev.u.gpu_memory.address = m->address;
	ev.u.gpu_memory.bytes = m->bytes;
	ev.u.gpu_memory.pool_type = (uint8_t)(m->memoryPoolConfig.memoryPoolType <= UINT8_MAX
						      ? m->memoryPoolConfig.memoryPoolType : 0);
	if (ev.u.gpu_memory.pool_type)
		ev.u.gpu_memory.pool_address = m->memoryPoolConfig.address;
	emit(&ev);
}

/* When recording began (EVLOG_MARK_CUPTI_ON): launches before t0 queued
 * nothing recorded, so the converter can pair uprobe launch calls with the
 * recorded work from there. */
static void put_recording_on(uint64_t t0, uint64_t t1, enum evlog_cupti_work what)
{
	struct evlog_event ev = { .type = EV_MARKER, .ts = t0 };
	ev.u.marker.kind = EVLOG_MARK_CUPTI_ON;
	ev.u.marker.value = what;
	ev.u.marker.dur = t1 > t0 ? t1 - t0 : 0;
	pthread_mutex_lock(&lock);
	emit(&ev);
	pthread_mutex_unlock(&lock);
}

/* Each kind of work's own switch, then the whole one: a job's calls go on
 * while the kinds are switched on one by one, and the converter tells those
 * made before, while and after their kind went on apart (a slow enable of
 * one kind leaves the others' calls certain). */
static void put_recording_switches(uint64_t t0, uint64_t t1)
{
	static const struct {
		CUpti_ActivityKind kind;
		enum evlog_cupti_work what;
	} work[] = { { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, EVLOG_CUPTI_KERNEL },
		     { CUPTI_ACTIVITY_KIND_MEMCPY, EVLOG_CUPTI_MEMCPY },
		     { CUPTI_ACTIVITY_KIND_MEMSET, EVLOG_CUPTI_MEMSET } };

	for (size_t w = 0; w < sizeof(work) / sizeof(work[0]); w++)
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			if (kinds[i] == work[w].kind && kind_on[i])
				put_recording_on(kind_switch[i][0], kind_switch[i][1], work[w].what);
	put_recording_on(t0, t1, EVLOG_CUPTI_ALL);
}

/* When recording stopped (EVLOG_MARK_CUPTI_OFF). */
static void put_recording_off(uint64_t t0, uint64_t t1)
{
	struct evlog_event ev = { .type = EV_MARKER, .ts = t0 };
	ev.u.marker.kind = EVLOG_MARK_CUPTI_OFF;
	ev.u.marker.dur = t1 > t0 ? t1 - t0 : 0;
	pthread_mutex_lock(&lock);
	emit(&ev);
	pthread_mutex_unlock(&lock);
}

/* A synchronization: CUPTI gives no thread, only the API call's correlation
 * id (the converter puts it on that call's thread). */
static void put_sync(const CUpti_ActivitySynchronization2 *s)
{
	struct evlog_event ev = { .type = EV_GPU_SYNC, .ts = s->start };
	ev.u.gpu_sync.dur = s->end > s->start ? s->end - s->start : 0;
	ev.u.gpu_sync.kind = (uint8_t)(s->type <= UINT8_MAX ? s->type : 0);
	ev.u.gpu_sync.context = s->contextId;
	ev.u.gpu_sync.stream = s->streamId;
	ev.u.gpu_sync.cuda_event = s->cudaEventId;
	ev.u.gpu_sync.correlation_id = s->correlationId;
	emit(&ev);
	stats.syncs++;
}

static void put_overhead(const CUpti_ActivityOverhead3 *o)
{
	struct evlog_event ev = { .type = EV_CUPTI_OVERHEAD, .ts = o->start };
	if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
		ev.tid = o->objectId.pt.threadId;
	ev.u.cupti_overhead.dur = o->end > o->start ? o->end - o->start : 0;
	ev.u.cupti_overhead.kind = (uint32_t)o->overheadKind;
	ev.u.cupti_overhead.object_kind = (uint8_t)(o->objectKind <= UINT8_MAX ? o->objectKind : 0);
	emit(&ev);
}

/* Every device seen in this process, kept across sessions: CUPTI's DEVICE
 * records come once per context and a kept CUPTI (keep_cupti) is never set
 * up again, yet each session's log must describe its devices. */
static struct dev_rec {
	char name[256];
	uint32_t sms, clock_khz, ccmaj, ccmin, thr_sm, regs_sm, smem_sm;
	uint64_t mem, bw;
} devs[32];
static uint32_t devs_known;          /* bit per device id in devs */

static void emit_device(uint32_t id, const struct dev_rec *d)
{
	if (id < 32 && (devices_seen & (1u << id)))
		return;
	if (id < 32)
		devices_seen |= 1u << id;
	struct evlog_event ev = { .type = EV_GPU_DEVICE, .ts = mono_ns() };
	ev.u.gpu_device.device = id;
	ev.u.gpu_device.name = evlog_s(d->name);
	ev.u.gpu_device.uuid = evlog_s("");
	ev.u.gpu_device.sm_count = d->sms;
	ev.u.gpu_device.clock_khz = d->clock_khz;
	ev.u.gpu_device.memory_bytes = d->mem;
	ev.u.gpu_device.memory_bandwidth = d->bw;
	ev.u.gpu_device.cc_major = d->ccmaj;
	ev.u.gpu_device.cc_minor = d->ccmin;
	ev.u.gpu_device.max_threads_per_sm = d->thr_sm;
	ev.u.gpu_device.max_regs_per_sm = d->regs_sm;
	ev.u.gpu_device.max_smem_per_sm = d->smem_sm;
	emit(&ev);
	stats.devices++;
}

static void put_device_ev(uint32_t id, const char *name, uint32_t sms, uint32_t clock_khz,
			  uint64_t mem, uint64_t bw, uint32_t ccmaj, uint32_t ccmin,
			  uint32_t thr_sm, uint32_t regs_sm, uint32_t smem_sm)
{
	struct dev_rec d = { .sms = sms, .clock_khz = clock_khz, .ccmaj = ccmaj, .ccmin = ccmin,
			     .thr_sm = thr_sm, .regs_sm = regs_sm, .smem_sm = smem_sm,
			     .mem = mem, .bw = bw };
	snprintf(d.name, sizeof(d.name), "%s", name);
	if (id < 32) {
		devs[id] = d;
		devs_known |= 1u << id;
	}
	emit_device(id, &d);
}

/* A new session's log: the devices an earlier session saw. Caller holds lock. */
static void replay_devices(void)
{
	devices_seen = 0;
	for (uint32_t id = 0; id < 32; id++)
		if (devs_known & (1u << id))
			emit_device(id, &devs[id]);
}

static void put_device(const CUpti_ActivityDevice5 *d)
{
	put_device_ev(d->id, d->name ? d->name : "", d->numMultiprocessors, d->coreClockRate,
		      d->globalMemorySize, d->globalMemoryBandwidth * 1000ull,
		      d->computeCapabilityMajor, d->computeCapabilityMinor,
		      d->maxWarpsPerMultiprocessor * d->numThreadsPerWarp,
		      d->maxRegistersPerMultiprocessor, d->maxSharedMemoryPerMultiprocessor);
}

/* Devices of an already running process (the DEVICE activity only comes
 * at context creation): ask the driver the process has loaded. */
static void query_devices(void)
{
	int n = 0;
	if (!drv.cuDeviceGetCount || !drv.cuDeviceGet || !drv.cuDeviceGetAttribute ||
	    drv.cuDeviceGetCount(&n) != CUDA_SUCCESS)
		return;
	for (int i = 0; i < n && i < 32; i++) {
		CUdevice d;
		char name[256] = "";
		size_t mem = 0;
		int a[9] = { 0 };
		static const CUdevice_attribute attrs[9] = {
			CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_CLOCK_RATE,
			CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
			CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
			CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
			CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
		};
		if (drv.cuDeviceGet(&d, i) != CUDA_SUCCESS)
			continue;
		if (drv.cuDeviceGetName)
			drv.cuDeviceGetName(name, sizeof(name) - 1, d);
		if (drv.cuDeviceTotalMem)
			drv.cuDeviceTotalMem(&mem, d);
		for (int j = 0; j < 9; j++)
			drv.cuDeviceGetAttribute(&a[j], attrs[j], d);
		/* DDR: two transfers per memory clock (kHz) over the bus width. */
		uint64_t bw = (uint64_t)a[2] * 1000ull * 2ull * (uint64_t)a[3] / 8ull;
		put_device_ev((uint32_t)i, name, (uint32_t)a[0], (uint32_t)a[1], mem, bw,
			      (uint32_t)a[4], (uint32_t)a[5], (uint32_t)a[6], (uint32_t)a[7], (uint32_t)a[8]);
	}
}

static void put_record(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		put_kernel((const CUpti_ActivityKernel10 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		put_memcpy((const CUpti_ActivityMemcpy6 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		put_memset((const CUpti_ActivityMemset4 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_RUNTIME:
		put_api((const CUpti_ActivityAPI *)r, 0);
		break;
	case CUPTI_ACTIVITY_KIND_DRIVER:
		put_api((const CUpti_ActivityAPI *)r, 1);
		break;
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		put_sync((const CUpti_ActivitySynchronization2 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		put_overhead((const CUpti_ActivityOverhead3 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMORY2:
		put_memory((const CUpti_ActivityMemory4 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_DEVICE:
		put_device((const CUpti_ActivityDevice5 *)r);
		break;
	default:
		break;
	}
}

static void put_lost(uint64_t n)
{
	struct evlog_event ev = { .type = EV_LOST, .ts = mono_ns() };
	ev.u.lost.source = EVSRC_CUPTI;
	ev.u.lost.count = n;
	emit(&ev);
	stats.dropped += n;
}

/* ------------------------------------------------------------ buffers */

/* A CUPTI activity buffer with our bookkeeping in front of it. */
struct lbuf {
	struct lbuf *next;
	size_t valid;                /* bytes CUPTI filled */
	size_t dropped;              /* records CUPTI dropped for its context/stream */
	int encoding;                /* encode() has it (under `lock`) */
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;   /* encoder: work came */
static pthread_cond_t drain_cv = PTHREAD_COND_INITIALIZER;  /* stop: queue empty */
static struct lbuf *free_list, *done_head, *done_tail;
static int n_free, enc_busy, enc_quit, enc_running, zeroed;
static struct lbuf *enc_cur;         /* the buffer the encoder took (under pool_mu) */
static pthread_t enc_thread;

static uint8_t *lb_data(struct lbuf *b)
{
	return (uint8_t *)b + BUF_HDR;
}

static struct lbuf *lb_of(uint8_t *data)
{
	return (struct lbuf *)(data - BUF_HDR);
}

/* Zeroed, with every page faulted in: CUPTI's first writes into it cost
 * nothing more on the application's thread. */
static struct lbuf *lb_new(void)
{
	struct lbuf *b = aligned_alloc(BUF_HDR, BUF_HDR + BUF_SIZE);
	if (b)
		memset(b, 0, BUF_HDR + BUF_SIZE);
	return b;
}

/* Back to the pool, zeroed again (CUPTI relies on that when
 * ZEROED_OUT_ACTIVITY_BUFFER is set, and may have written past `valid`).
 * Runs on the encoder thread, off the application: zeroing a buffer takes
 * about a millisecond (docs/MEASUREMENTS.md, CUDA/CUPTI costs on the
 * GPU). */
static void lb_release(struct lbuf *b)
{
	if (zeroed)
		memset(lb_data(b), 0, BUF_SIZE);
	b->valid = b->dropped = 0;
	b->encoding = 0;
	pthread_mutex_lock(&pool_mu);
	int keep = n_free < POOL_KEEP;
	if (keep) {
		b->next = free_list;
		free_list = b;
		n_free++;
	}
	pthread_mutex_unlock(&pool_mu);
	if (!keep)
		free(b);
}

static void pool_fill(int n)
{
	for (int i = 0; i < n; i++) {
		struct lbuf *b = lb_new();
		if (!b)
			break;
		pthread_mutex_lock(&pool_mu);
		b->next = free_list;
		free_list = b;
		n_free++;
		pthread_mutex_unlock(&pool_mu);
	}
}

static void pool_free(void)
{
	pthread_mutex_lock(&pool_mu);
	struct lbuf *b = free_list;
	free_list = NULL;
	n_free = 0;
	pthread_mutex_unlock(&pool_mu);
	while (b) {
		struct lbuf *n = b->next;
		free(b);
		b = n;
	}
}

static void encode(struct lbuf *b)
{
	CUpti_Activity *r = NULL;
	pthread_mutex_lock(&lock);
	b->encoding = 1;
	while (b->valid && cu.cuptiActivityGetNextRecord(lb_data(b), b->valid, &r) == CUPTI_SUCCESS)
		put_record(r);
	if (b->dropped)
		put_lost(b->dropped);
	pthread_mutex_unlock(&lock);
}

static void *encoder(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool_mu);
	for (;;) {
		while (!done_head && !enc_quit)
			pthread_cond_wait(&done_cv, &pool_mu);
		struct lbuf *b = done_head;
		if (!b)
			break; /* quit, and nothing left */
		done_head = b->next;
		if (!done_head)
			done_tail = NULL;
		enc_busy = 1;
		enc_cur = b;
		pthread_mutex_unlock(&pool_mu);
		encode(b);
		pthread_mutex_lock(&pool_mu);
		enc_cur = NULL;
		pthread_mutex_unlock(&pool_mu);
		lb_release(b);
		pthread_mutex_lock(&pool_mu);
		enc_busy = 0;
		if (!done_head)
			pthread_cond_broadcast(&drain_cv);
	}
	pthread_mutex_unlock(&pool_mu);
	return NULL;
}

static int encoder_start(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	enc_quit = 0;
	int rc = pthread_create(&enc_thread, NULL, encoder, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	enc_running = rc == 0;
	return -rc;
}

/* Wait until every queued buffer is written (bounded), then end the thread. */
static void encoder_stop(void)
{
	if (!enc_running)
		return;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += DRAIN_MS / 1000;
	pthread_mutex_lock(&pool_mu);
	while ((done_head || enc_busy) && !pthread_cond_timedwait(&drain_cv, &pool_mu, &dl))
		;
	enc_quit = 1;
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&pool_mu);
	pthread_join(enc_thread, NULL);
	enc_running = 0;
}

/* ------------------------------------------------------------ CUPTI callbacks */

/* On the application's thread: a list pop, a fresh buffer only when the
 * pool ran dry. */
static void buf_requested_body(uint8_t **buf, size_t *size, size_t *max_records)
{
	pthread_mutex_lock(&pool_mu);
	struct lbuf *b = free_list;
	if (b) {
		free_list = b->next;
		n_free--;
	}
	pthread_mutex_unlock(&pool_mu);
	if (!b)
		b = lb_new();
	*buf = b ? lb_data(b) : NULL;
	*size = b ? BUF_SIZE : 0;
	*max_records = 0;
}

/* Queue the buffer for the encoder; encode here only when it is not
 * running (after stop, a late flush). */
static void buf_completed_body(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
			       size_t valid)
{
	(void)size;
	if (!buf)
		return;
	struct lbuf *b = lb_of(buf);
	b->valid = valid;
	b->dropped = 0;
	b->encoding = 0;
	b->next = NULL;
	size_t dropped = 0;
	if (cu.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
		b->dropped = dropped;
	pthread_mutex_lock(&pool_mu);
	int queued = enc_running && !enc_quit;
	if (queued) {
		if (done_tail)
			done_tail->next = b;
		else
			done_head = b;
		done_tail = b;
		pthread_cond_signal(&done_cv);
	}
	pthread_mutex_unlock(&pool_mu);
	if (!queued) {
		encode(b);
		lb_release(b);
	}
}

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	CB_ENTER();
	buf_requested_body(buf, size, max_records);
	CB_LEAVE();
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				   size_t valid)
{
	CB_ENTER();
	buf_completed_body(ctx, stream, buf, size, valid);
	CB_LEAVE();
}

/* ------------------------------------------------------------ finalize */

/* Enabled only while detaching: the first runtime/driver API exit of any
 * thread finalizes CUPTI, the safe place the CUPTI manual names. */
static void api_callback_body(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	if (dom == CUPTI_CB_DOMAIN_RESOURCE) { /* a graph made while recording carries CUPTI's writes */
		if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED && atomic_load(&running))
			atomic_store(&graph_seen, 1);
		return;
	}
	if ((dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) ||
	    cb->callbackSite != CUPTI_API_EXIT || !atomic_load(&finalize_wanted))
		return;
	int one = 1;
	if (!atomic_compare_exchange_strong(&finalize_wanted, &one, 0))
		return;
	cu.cuptiFinalize();
	pthread_mutex_lock(&lock);
	atomic_store(&finalized, 1);
	pthread_cond_broadcast(&fin_cond);
	pthread_mutex_unlock(&lock);
}

static void CUPTIAPI api_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
				  const void *data)
{
	(void)ud;
	CB_ENTER();
	api_callback_body(dom, cbid, data);
	CB_LEAVE();
}

/* ------------------------------------------------------------ start / stop */

static int open_log(char *msg, size_t msgsz)
{
	char cmd[64], err[256];
	snprintf(cmd, sizeof(cmd), "pid=%u", (unsigned)getpid());
	struct evlog_header h = {
		.host = evlog_s(cfg.host), .producer = evlog_s("inject"),
		.cmdline = evlog_s(cmd),
		.options = evlog_s(cfg.launch ? "cupti launch" : "cupti attach"),
		.producer_pid = (uint32_t)getpid(),
	};
	memcpy(h.session, cfg.session, sizeof(h.session));
	int rc;
	stats.file[0] = 0;
	if (cfg.launch) {
		/* The user's own command, started by the collector: it names and
		 * publishes its log in $LLMT_CUPTI_DIR itself (inject.h). */
		struct timespec rt;
		struct tm tm;
		char stamp[32], path[1400];
		clock_gettime(CLOCK_REALTIME, &rt);
		gmtime_r(&rt.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
		snprintf(stats.file, sizeof(stats.file), "llmtracker-cupti.%.64s.%u.%s.%09ld.evlog",
			 cfg.host, cfg.pid, stamp, rt.tv_nsec);
		snprintf(path, sizeof(path), "%s/%s", cfg.dir[0] ? cfg.dir : ".", stats.file);
		rc = evlog_writer_open(&wr, path, &h, NULL, err, sizeof(err));
	} else {
		/* Attach: only the file the collector made for us (no directory,
		 * no path); it publishes it. Our own copy: entry.c closes its. */
		int fd = cfg.cupti_fd >= 0 ? fcntl(cfg.cupti_fd, F_DUPFD_CLOEXEC, 0) : -1;
		if (fd < 0)
			snprintf(err, sizeof(err), "no log file came from the collector");
		rc = fd < 0 ? -1 : evlog_writer_open_fd(&wr, fd, "the collector's log file", &h, NULL,
							 err, sizeof(err));
	}
	if (rc) {
		stats.file[0] = 0;
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: cannot create its log: %s", err);
		return -EIO;
	}
	return 0;
}

/* What is recorded (start keys, inject.h), from the cheapest to the most
 * costly on a launch-bound loop:
 *   runtime=0            kernels, copies, sets only (the collector's default)
 *   runtime=1            + every runtime call but the noisy ones, syncs,
 *                        overhead (--cuda-api-records true)
 *   runtime=1 driver=1   + every driver call (LLMT_CUPTI_START, diagnosis)
 * Even runtime=0 costs steps/s there: CUPTI's own work per launch, which no
 * recording choice of ours (nor CUPTI's buffer attributes) removes; our
 * CLOCK_MONOTONIC timestamp callback is not the cost (CUPTI's own clock cost
 * the same). Figures: docs/MEASUREMENTS.md, CUDA/CUPTI costs on the GPU.
 * Runtime records give each kernel its launch (thread, time, call
 * site) through the correlation id; kernels cuBLAS launches through
 * cuLaunchKernel are paired only with driver=1. Any interception of the
 * API costs as much as the whole RUNTIME kind, records or not: per-call
 * selection with or without the kind, and launches by CUPTI's callback API
 * (docs/MEASUREMENTS.md, same topic); the converter pairs kernels
 * with the -t cuda uprobes' launch calls instead (converter/pairing/launchpair.c). runtime=0 also leaves out synchronization and overhead
 * records: nothing is traced on the application's calls but the launches
 * CUPTI must see for kernels. */
static int kind_wanted(CUpti_ActivityKind k)
{
	switch (k) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		return cfg.runtime == 1;
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return cfg.runtime == 1 && cfg.driver;
	default:
		return 1;
	}
}

static int enable_kinds(void)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kind_wanted(kinds[i])) {
			kind_switch[i][0] = mono_ns();
			kind_on[i] = cu.cuptiActivityEnable(kinds[i]) == CUPTI_SUCCESS;
			kind_switch[i][1] = mono_ns();
		}
	if (cfg.runtime == 1 && cu.cuptiActivityEnableRuntimeApi)
		for (size_t i = 0; i < sizeof(noisy_runtime) / sizeof(noisy_runtime[0]); i++)
			cu.cuptiActivityEnableRuntimeApi(noisy_runtime[i], 0);
	return kind_on[1] ? 0 : -1; /* kernels are the point */
}

static void disable_kinds(void)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kind_on[i])
			cu.cuptiActivityDisable(kinds[i]);
	memset(kind_on, 0, sizeof(kind_on));
}

static void close_log(void)
{
	pthread_mutex_lock(&lock);
	if (wr && evlog_writer_close(wr))
		stats.file[0] = 0;
	wr = NULL;
	pthread_mutex_unlock(&lock);
}

/* We hand CUPTI zeroed buffers (the pool), so it need not clear each one
 * on the application's thread when it takes it. */
static void set_attributes(void)
{
	uint8_t one = 1;
	size_t sz = sizeof(one);
	zeroed = cu.cuptiActivitySetAttribute &&
		 cu.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz,
					      &one) == CUPTI_SUCCESS;
}

static int subscribe(char *msg, size_t msgsz)
{
	CUptiResult r = cu.cuptiSubscribe(&sub, (CUpti_CallbackFunc)api_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: another CUPTI client is "
			 "active in this process (PyTorch profiler, Nsight, a CUDA debugger); "
			 "the process is untouched");
		return -EBUSY;
	}
	if (r != CUPTI_SUCCESS) {
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: cuptiSubscribe: %s", cupti_err(r));
		return -EIO;
	}
	subscribed = 1;
	return 0;
}

static int wait_finalized(int ms);
static int flush_settled(void);

/* A session after one that kept CUPTI (keep_cupti), or whose finalize was
 * still waiting for an API call: go on with the subscription and the
 * callbacks CUPTI already holds. 1 if it is reused, 0 to subscribe anew. */
static int reuse_subscription(void)
{
	int one = 1;
	if (atomic_compare_exchange_strong(&finalize_wanted, &one, 0)) {
		/* no API call came since the last stop: that finalize is off */
		cu.cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		cu.cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API);
	} else if (atomic_load(&finalized) || (subscribed && !kept && wait_finalized(3000))) {
		subscribed = 0; /* CUPTI let go of everything: start as new */
		atomic_store(&finalized, 0);
	}
	return subscribed;
}

int li_cupti_start(const struct li_config *c, char *msg, size_t msgsz)
{
	if (atomic_load(&running)) {
		snprintf(msg, msgsz, "err already running");
		return -EBUSY;
	}
	if (!flush_settled()) {
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: the last recording's final "
			 "flush has not ended");
		return -EBUSY;
	}
	cfg = *c;
	memset(&stats, 0, sizeof(stats));
	/* from here: a kept CUPTI may deliver the last recording's work as soon
	 * as this one's log is open */
	atomic_store_explicit(&rec_since, mono_ns(), memory_order_relaxed);
	int rc = resolve(msg, msgsz);
	int reuse = rc ? 0 : reuse_subscription();
	if (rc || (!reuse && (rc = subscribe(msg, msgsz))))
		return rc;
	if ((rc = open_log(msg, msgsz))) {
		if (!reuse) {
			cu.cuptiUnsubscribe(sub);
			subscribed = 0;
		}
		return rc;
	}
	CUptiResult r = CUPTI_SUCCESS;
	if (!reuse && cu.cuptiSetThreadIdType)
		cu.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if (!reuse &&
	    ((r = cu.cuptiActivityRegisterTimestampCallback(ts_callback)) != CUPTI_SUCCESS ||
	     (r = cu.cuptiActivityRegisterCallbacks(buf_requested, buf_completed)) != CUPTI_SUCCESS)) {
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: CUPTI set-up: %s", cupti_err(r));
		evlog_writer_abort(wr);
		wr = NULL;
		cu.cuptiUnsubscribe(sub);
		subscribed = 0;
		return -EIO;
	}
	if (cu.cuptiEnableCallback)
		cu.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED);
	pthread_mutex_lock(&lock);
	replay_devices();
	if (!cfg.in_init)
		query_devices();
	pthread_mutex_unlock(&lock);
	set_attributes();
	pool_fill(POOL_PRE);
	encoder_start(); /* if it cannot start, buffers are encoded where they complete */
	uint64_t kinds_t0 = mono_ns();
	if (enable_kinds()) {
		snprintf(msg, msgsz, "err CUDA kernel profiling cannot start: CUPTI refused kernel activity");
		disable_kinds();
		evlog_writer_abort(wr);
		wr = NULL;
		atomic_store(&running, 1);  /* let stop() finalize: CUPTI holds our callbacks */
		return -EIO;
	}
	put_recording_switches(kinds_t0, mono_ns());
	atomic_store(&running, 1);
	snprintf(msg, msgsz, "ok file=%s", stats.file);
	return 0;
}

void li_cupti_tick(void)
{
	pthread_mutex_lock(&lock);
	if (wr)
		evlog_writer_tick(wr);
	pthread_mutex_unlock(&lock);
}

int li_cupti_running(void)
{
	return atomic_load(&running);
}

/* CLOCK_REALTIME, ms from now: a deadline for pthread_cond_timedwait. */
static struct timespec realtime_in(uint64_t ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += (time_t)(ms / 1000);
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	return dl;
}

/* Wait for an API exit to run cuptiFinalize. */
static int wait_finalized(int ms)
{
	struct timespec dl = realtime_in(ms > 0 ? (uint64_t)ms : 0);
	pthread_mutex_lock(&lock);
	while (!atomic_load(&finalized))
		if (pthread_cond_timedwait(&fin_cond, &lock, &dl))
			break;
	pthread_mutex_unlock(&lock);
	return atomic_load(&finalized);
}

/* No call of CUPTI's in our code for a while (a thread that had loaded our
 * callback's address just before finalize may enter a moment later): then
 * the library may be unmapped. */
static int callbacks_quiet(int ms)
{
	const struct timespec tick = { 0, 1000000 }, grace = { 0, 200000000 };
	uint64_t deadline = mono_ns() + (uint64_t)ms * 1000000ull;
	do {
		if (!atomic_load(&in_callback)) {
			nanosleep(&grace, NULL);
			if (!atomic_load(&in_callback))
				return 1;
		}
		nanosleep(&tick, NULL);
	} while (mono_ns() < deadline);
	return 0;
}

/* Detaching CUPTI (cuptiFinalize) from a process that ran a CUDA graph
 * while kernels were recorded kills it: at the graph's next replay the GPU
 * writes a timestamp through memory CUPTI freed (Xid 31, MMU fault from the
 * front end, VIRT_WRITE), whatever the recording mode, whether or not the
 * device was drained first or finalize ran at a runtime API exit only
 * (tests/gpu/graph_stress.sh: every cycle died in each of those
 * variants; docs/MEASUREMENTS.md, CUDA graphs and detach). So CUPTI stays subscribed, every kind
 * off, with this library loaded for its callbacks; a later session in the
 * same process reuses it (the injector finds it by its soname). */
static int keep_cupti(void)
{
	if (cfg.teardown == LI_TEARDOWN_ALWAYS)
		return 0;
	kept = atomic_load(&graph_seen) ? LI_KEPT_GRAPH : cfg.teardown == LI_TEARDOWN_NEVER ? LI_KEPT_ASKED : LI_KEPT_NO;
	return kept != LI_KEPT_NO;
}

/* The stop's switch-off and final flush: recording off, CUPTI's buffers
 * handed over, the encoder's queue written. */
static void flush_all(void)
{
	uint64_t off0 = mono_ns();
	disable_kinds();
	put_recording_off(off0, mono_ns());
	cu.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	encoder_stop(); /* every record of the session seen: graph_seen is final */
}

/*
 * A stop with a deadline runs flush_all on a thread of its own and answers
 * by the deadline whatever CUPTI does: CUPTI's flush waits for the device
 * and can take seconds. A flush that has not ended by then leaves the log
 * as it stands (closed: what came is published) and CUPTI attached,
 * recording nothing (LI_KEPT_CUT); what it still held is dropped, never
 * written after the answer. Until that flush ends no recording starts.
 */
enum { FLUSH_IDLE, FLUSH_RUNNING, FLUSH_ENDED };
static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flush_cv = PTHREAD_COND_INITIALIZER;
static int flush_state;
static pthread_t flush_thread;

static void *flusher(void *arg)
{
	(void)arg;
	flush_all();
	pthread_mutex_lock(&flush_mu);
	flush_state = FLUSH_ENDED;
	pthread_cond_broadcast(&flush_cv);
	pthread_mutex_unlock(&flush_mu);
	return NULL;
}

/* 1 when no stop's flush runs (one that ended is joined). */
static int flush_settled(void)
{
	pthread_mutex_lock(&flush_mu);
	int st = flush_state;
	if (st == FLUSH_ENDED)
		flush_state = FLUSH_IDLE;
	pthread_mutex_unlock(&flush_mu);
	if (st == FLUSH_ENDED)
		pthread_join(flush_thread, NULL);
	return st != FLUSH_RUNNING;
}

/* flush_all, given up at end_ns (CLOCK_MONOTONIC; 0: no deadline, here).
 * 1 when it ended. */
static int flush_until(uint64_t end_ns)
{
	sigset_t all, old;
	if (!end_ns) {
		flush_all();
		return 1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&flush_mu);
	flush_state = FLUSH_RUNNING;
	int rc = pthread_create(&flush_thread, NULL, flusher, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		flush_state = FLUSH_IDLE;
		pthread_mutex_unlock(&flush_mu);
		flush_all();
		return 1;
	}
	/* (the condition's clock is CLOCK_REALTIME: pthread_cond_clockwait is
	 * newer than the glibc of many targets) */
	struct timespec dl = realtime_in(end_ns > mono_ns() ? (end_ns - mono_ns()) / 1000000ull : 0);
	while (flush_state == FLUSH_RUNNING && !pthread_cond_timedwait(&flush_cv, &flush_mu, &dl))
		;
	int ended = flush_state != FLUSH_RUNNING;
	pthread_mutex_unlock(&flush_mu);
	if (ended)
		flush_settled();
	return ended;
}

static uint64_t count_records(struct lbuf *b)
{
	CUpti_Activity *r = NULL;
	uint64_t n = 0;
	while (b->valid && cu.cuptiActivityGetNextRecord(lb_data(b), b->valid, &r) == CUPTI_SUCCESS)
		n++;
	return n + b->dropped;
}

/* Under `lock` (nothing is being encoded): the records that came but will
 * not be written, the encoder's queue taken off (its buffers back to the
 * pool) and the buffer it took but has not begun. */
static uint64_t unwritten(void)
{
	uint64_t n = 0;
	pthread_mutex_lock(&pool_mu);
	struct lbuf *q = done_head;
	done_head = done_tail = NULL;
	if (enc_cur && !enc_cur->encoding)
		n += count_records(enc_cur);
	pthread_mutex_unlock(&pool_mu);
	while (q) {
		struct lbuf *next = q->next;
		n += count_records(q);
		lb_release(q);
		q = next;
	}
	return n;
}

/* The flush did not end in time: the log closes as it stands, with what
 * came but was not written counted as lost there (EV_LOST) and in the
 * figures; what CUPTI still holds is not known. */
static void cut_log(struct li_stats *st)
{
	pthread_mutex_lock(&lock);
	uint64_t lost = unwritten();
	if (lost)
		put_lost(lost);
	if (wr && evlog_writer_close(wr))
		stats.file[0] = 0;
	wr = NULL;
	kept = LI_KEPT_CUT;
	stats.kept = kept;
	stats.cut = 1;
	*st = stats;
	pthread_mutex_unlock(&lock);
}

static uint64_t left_ms(uint64_t end_ns, uint64_t spare_ms)
{
	uint64_t now = mono_ns(), spare = spare_ms * 1000000ull;
	return end_ns > now + spare ? (end_ns - now - spare) / 1000000ull : 0;
}

#define QUIET_MS 250 /* callbacks_quiet's grace, and a margin */

int li_cupti_stop(struct li_stats *st, int finalize, int ms)
{
	int was = 1;
	if (!atomic_compare_exchange_strong(&running, &was, 0)) {
		*st = stats;
		return (!subscribed || atomic_load(&finalized)) && flush_settled() && callbacks_quiet(2000);
	}
	uint64_t end = ms > 0 ? mono_ns() + (uint64_t)ms * 1000000ull : 0;
	if (!flush_until(end ? end - QUIET_MS * 1000000ull : 0)) {
		cut_log(st);
		return 0;
	}
	int done = 0;
	if (finalize && !keep_cupti()) {
		int fin_ms = cfg.finalize_ms > 0 ? cfg.finalize_ms : 3000;
		if (end && (uint64_t)fin_ms > left_ms(end, QUIET_MS))
			fin_ms = (int)left_ms(end, QUIET_MS);
		atomic_store(&finalize_wanted, 1);
		cu.cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		cu.cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
		done = wait_finalized(fin_ms);
	}
	/* If no API call came, the callback stays armed: the next call the
	 * process makes finalizes CUPTI, and this library stays loaded for it. */
	stats.finalized = done;
	stats.kept = kept;
	close_log();
	pool_free();
	*st = stats;
	return done && callbacks_quiet(end ? (int)left_ms(end, 0) : 2000);
}
