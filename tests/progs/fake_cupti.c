// SPDX-License-Identifier: Apache-2.0
/*
 * A stand-in for libcupti.so.13 on machines without a GPU, for testing the
 * inject library's buffer handling (pool, encoder thread, flush, finalize):
 * the CUPTI calls it makes, with CUPTI's documented behaviour for them.
 * Built as a shared object (soname libcupti.so.13) and loaded by
 * fake_cuda_app. Enabling CONCURRENT_KERNEL starts a thread that writes
 * kernel records (numbered by correlation id) into buffers taken from the
 * client's request callback, at FAKE_CUPTI_RATE records/s (default 200000),
 * and hands each full buffer to the completion callback; disabling stops it;
 * cuptiActivityFlushAll hands over the partial one. API callbacks come from
 * fake_cupti_api_call(), which the app calls as its "CUDA calls": an enter
 * and an exit callback (~20 us apart, one correlation id and one
 * correlationData slot per call, as CUPTI gives them) when the runtime
 * domain or cudaLaunchKernel's callback id is enabled; inside it a driver
 * cuLaunchKernel callback pair (the runtime's own driver call) when that id
 * is enabled. fake_cupti_driver_launch() is a direct driver launch, as
 * cuBLAS makes them.
 * It checks what CUPTI relies on: a buffer given with ZEROED_OUT set is all
 * zero, and is 8-byte aligned.
 * FAKE_CUPTI_SYNC=N: after every Nth kernel, a SYNCHRONIZATION record (a
 * stream synchronize with that kernel's correlation id) and an OVERHEAD
 * record (a buffer flush charged to the process's main thread), each only
 * while the client has its kind enabled.
 * FAKE_CUPTI_MEMORY=N: after every Nth kernel, while the client has MEMORY2
 * enabled, a memory record (CUpti_ActivityMemory4, that kernel's
 * correlation id, 500 ns after its start) of step i = kernel / N, by i % 8:
 * 1, 5: device memory allocated (i * 4096 bytes at 0x7f0000000000 + i MiB);
 * 2, 6: that allocation freed; 3, 7: pinned host memory allocated (i * 8192
 * bytes at 0x7e0000000000 + i * 64 KiB), never freed; 0: a stream-ordered
 * allocation from a local pool (65536 bytes at 0x7c0000000000 + i * 64 KiB,
 * stream 7, pool at 0x7c0000000000), never freed; 4: device memory freed
 * that was allocated before (1 GiB at 0x7d0000000000 + i).
 * FAKE_CUPTI_GRAPH=1: the kernels are a CUDA graph's nodes (graphId 1), and
 * cuptiFinalize after any of them kills the process as the GPU does (an MMU
 * fault at the graph's next replay, through memory CUPTI freed).
 * fake_cupti_work() is the work of one real CUDA call the app made (a kernel
 * launch, copy, set or graph launch of libcudart, which fails without a
 * driver but is probed all the same): records as CUPTI gives them, one
 * correlation id per call, the RUNTIME kind's API record (the call's
 * bounds, on its thread) when that kind is on, and its kernels, copy or set
 * on the stream's queue: each starts when the stream's previous one ended
 * (FAKE_CUPTI_WORK_NS long, default 20000, and half that longer for each
 * step of stream id % 4: streams drift apart), so work runs well after its
 * launch as on a busy GPU, in another order across streams than launched. A graph launch is 3
 * kernels with graph id 1 and a memset node, sharing its correlation id. FAKE_CUPTI_NOCORR=1:
 * kernels, copies and sets carry no correlation id (graphs' kernels keep it).
 * FAKE_CUPTI_DROP_GRAPH=N: the replay of the N-th graph launch is not
 * recorded (its records lost).
 * FAKE_CUPTI_DROP=N: the work of the N-th call is not recorded (a record
 * CUPTI lost). FAKE_CUPTI_UNTIMED=N: the records of the N-th call and every
 * later one carry start and end 0 (CUPTI could not time them: the work in
 * flight as recording stopped). FAKE_CUPTI_HOLD=1: enabling MEMCPY waits (up to 60 s,
 * fake_cupti_holding() true meanwhile) until fake_cupti_release_hold()
 * before turning the kind on, as a slow cuptiActivityEnable would: calls
 * the app makes meanwhile are probed, their kernels recorded, their copies
 * and sets not.
 * FAKE_CUPTI_HOLD_AT=register: the hold is in cuptiActivityRegisterCallbacks
 * instead, before any kind is switched on: calls made meanwhile end before
 * recording's switch begins. FAKE_CUPTI_HOLD_AT=flush (without
 * FAKE_CUPTI_HOLD): cuptiActivityFlushAll holds, after recording stopped.
 * FAKE_CUPTI_GRAPH_KEEP=1 (CUPTI kept attached from an earlier window, and
 * a replayed graph's instrumentation with it): a graph launch made while
 * kernels are not recorded is held as queued work, and when the kernel kind
 * is switched on the held replays run from then, in order, their kernel
 * nodes recorded with their launch's correlation id, but the first node of
 * the first (the replay in flight at the switch); their memset nodes run
 * before the MEMSET kind is on. fake_cupti_late() says how many records
 * that made. FAKE_CUPTI_STALE=N: as the kernel kind goes on, N kernel
 * nodes of a replay that started 5 s before are delivered first (an earlier
 * recording's replay, in flight at its stop), their ends stamped now.
 * FAKE_CUPTI_FIRST_NS=N: the first work on each stream runs N ns (a busy
 * GPU as recording starts: the work of the calls behind it starts after
 * the next calls of their kind). fake_cupti_recorded() says how many records the thread's last
 * fake_cupti_work() made.
 * FAKE_CUPTI_TEARDOWN=1: at its load it registers an exit handler, as the
 * CUDA driver does; once that handler has run (CUDA torn down), any CUPTI
 * call kills the process, as it did launched jobs on the H200.
 */
#include <cupti.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

static atomic_int torn_down; /* FAKE_CUPTI_TEARDOWN: CUDA's exit handler has run */

static void teardown(void)
{
	atomic_store(&torn_down, 1);
}

__attribute__((constructor)) static void teardown_at_exit(void)
{
	if (getenv("FAKE_CUPTI_TEARDOWN"))
		atexit(teardown);
}

/* A CUPTI call after the driver's teardown: the crash it was on the GPU. */
static void alive_or_die(const char *fn)
{
	static const char m[] = "fake CUPTI: called after CUDA's teardown at exit: SIGSEGV\n";
	(void)fn;
	if (!atomic_load(&torn_down))
		return;
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(139);
	abort();
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static CUpti_CallbackFunc sub_cb;
static void *sub_ud;
static int subscribed, domain_on[8];
static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc done_cb;
static CUpti_TimestampCallbackFunc ts_cb;
static uint8_t zeroed_attr;
static pthread_t gen;
static atomic_int gen_run;
static int gen_started;
static uint8_t *cur;                 /* buffer being filled */
static size_t cur_size, cur_valid;
static atomic_ullong generated, buffers, unzeroed, misaligned, finalized;
static atomic_int launch_cb_on;                 /* cuptiEnableCallback(cudaLaunchKernel) */
static atomic_int drv_cb_on;                    /* cuptiEnableCallback(cuLaunchKernel) */
static atomic_ullong corr_ids, launch_cbs;      /* calls made; exits delivered by cbid */
static atomic_ullong drv_cbs;                   /* direct driver launches delivered */
static int graph_nodes;                         /* FAKE_CUPTI_GRAPH: records carry graphId 1 */
static atomic_int kind_on[CUPTI_ACTIVITY_KIND_COUNT < 64 ? CUPTI_ACTIVITY_KIND_COUNT : 64];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Caller holds mu. */
static void take_buffer(void)
{
	size_t max = 0;
	req_cb(&cur, &cur_size, &max);
	cur_valid = 0;
	if (!cur)
		return;
	buffers++;
	if ((uintptr_t)cur % 8)
		misaligned++;
	if (zeroed_attr && !all_zero(cur, cur_size))
		unzeroed++;
}

static void hand_over(void)
{
	uint8_t *b = cur;
	size_t size = cur_size, valid = cur_valid;
	cur = NULL;
	cur_valid = 0;
	if (b)
		done_cb(NULL, 0, b, size, valid);
}

/* Room for one record (every record takes a kernel record's size, the
 * stride cuptiActivityGetNextRecord walks), zeroed; NULL when the client
 * gave no buffer. Caller holds mu. */
static void *next_slot(void)
{
	if (!cur)
		take_buffer();
	if (cur && cur_valid + sizeof(CUpti_ActivityKernel10) > cur_size) {
		hand_over();
		take_buffer();
	}
	if (!cur)
		return NULL;
	void *slot = cur + cur_valid;
	memset(slot, 0, sizeof(CUpti_ActivityKernel10));
	cur_valid += sizeof(CUpti_ActivityKernel10);
	return slot;
}

static uint64_t sync_every;              /* FAKE_CUPTI_SYNC */
static uint64_t memory_every;            /* FAKE_CUPTI_MEMORY */

/* Memory step i (FAKE_CUPTI_MEMORY, see the top). Caller holds mu. */
static void put_memory(uint64_t i, uint64_t corr, uint64_t start)
{
	_Static_assert(sizeof(CUpti_ActivityMemory4) <= sizeof(CUpti_ActivityKernel10),
		       "a memory record fits a slot");
	CUpti_ActivityMemory4 m;
	void *slot;
	uint64_t k = i % 8;

	if (!atomic_load(&kind_on[CUPTI_ACTIVITY_KIND_MEMORY2]) || !(slot = next_slot()))
		return;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	m.correlationId = (uint32_t)corr;
	m.timestamp = start + 500;
	m.processId = (uint32_t)getpid();
	m.deviceId = 0;
	m.contextId = 1;
	m.streamId = CUPTI_INVALID_STREAM_ID;
	m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	if (k == 1 || k == 5 || k == 2 || k == 6) {
		uint64_t a = k == 2 || k == 6 ? i - 1 : i;
		m.address = 0x7f0000000000ull + (a << 20);
		m.bytes = a * 4096;
		if (k == 2 || k == 6)
			m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
	} else if (k == 3 || k == 7) {
		m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
		m.address = 0x7e0000000000ull + (i << 16);
		m.bytes = i * 8192;
	} else if (k == 0) {
		m.address = 0x7c0000000000ull + (i << 16);
		m.bytes = 65536;
		m.streamId = 7;
		m.isAsync = 1;
		m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
		m.memoryPoolConfig.address = 0x7c0000000000ull;
	} else {
		m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
		m.address = 0x7d0000000000ull + i;
		m.bytes = 1ull << 30;
	}
	memcpy(slot, &m, sizeof(m));
}

/* Records a kernel's launch waited on and what CUPTI spent meanwhile
 * (FAKE_CUPTI_SYNC). Caller holds mu. */
static void put_sync_overhead(uint64_t corr, uint64_t start)
{
	_Static_assert(sizeof(CUpti_ActivitySynchronization2) <= sizeof(CUpti_ActivityKernel10) &&
		       sizeof(CUpti_ActivityOverhead3) <= sizeof(CUpti_ActivityKernel10),
		       "the records fit a slot");
	void *slot;
	if (atomic_load(&kind_on[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION]) && (slot = next_slot())) {
		CUpti_ActivitySynchronization2 y;
		memset(&y, 0, sizeof(y));
		y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
		y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
		y.start = start + 1000;
		y.end = y.start + 5000;
		y.correlationId = (uint32_t)corr;
		y.contextId = 1;
		y.streamId = 7;
		y.cudaEventId = UINT32_MAX;
		memcpy(slot, &y, sizeof(y));
	}
	if (atomic_load(&kind_on[CUPTI_ACTIVITY_KIND_OVERHEAD]) && (slot = next_slot())) {
		CUpti_ActivityOverhead3 o;
		memset(&o, 0, sizeof(o));
		o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
		o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
		o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
		o.objectId.pt.processId = (uint32_t)getpid();
		o.objectId.pt.threadId = (uint32_t)getpid();
		o.start = start;
		o.end = start + 700;
		memcpy(slot, &o, sizeof(o));
	}
}

static void put_kernel(uint64_t corr)
{
	CUpti_ActivityKernel10 k;
	void *slot = next_slot();
	if (!slot)
		return;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = ts_cb ? ts_cb() : now_ns();
	k.end = k.start + 1000;
	k.correlationId = (uint32_t)corr;
	k.streamId = 7;
	k.gridX = k.gridY = k.gridZ = 1;
	k.blockX = 128;
	k.blockY = k.blockZ = 1;
	k.name = "fake_kernel";
	k.graphId = graph_nodes ? 1 : 0;
	memcpy(slot, &k, sizeof(k));
	generated++;
	if (sync_every && corr % sync_every == 0)
		put_sync_overhead(corr, k.start);
	if (memory_every && corr % memory_every == 0)
		put_memory(corr / memory_every, corr, k.start);
}

/* CUPTI's DEVICE record comes once per context: here once per process, at
 * the first enable of the kind. Caller holds mu. */
static void put_device_once(void)
{
	static int done;
	CUpti_ActivityDevice5 d;
	_Static_assert(sizeof(d) <= sizeof(CUpti_ActivityKernel10), "a device record fits a slot");
	void *slot = done ? NULL : next_slot();
	if (!slot)
		return;
	memset(&d, 0, sizeof(d));
	d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
	d.id = 0;
	d.name = "Fake GPU";
	d.numMultiprocessors = 132;
	d.coreClockRate = 1980000;
	d.globalMemorySize = 1ull << 37;
	d.computeCapabilityMajor = 9;
	memcpy(slot, &d, sizeof(d));
	done = 1;
}

static void *generator(void *arg)
{
	(void)arg;
	const char *r = getenv("FAKE_CUPTI_RATE");
	uint64_t rate = r ? strtoull(r, NULL, 10) : 200000, corr = 0;
	uint64_t t0 = now_ns();
	while (atomic_load(&gen_run)) {
		uint64_t due = (now_ns() - t0) * rate / 1000000000ull;
		pthread_mutex_lock(&mu);
		while (corr < due && atomic_load(&gen_run))
			put_kernel(++corr);
		pthread_mutex_unlock(&mu);
		usleep(1000);
	}
	return NULL;
}

API CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = r == CUPTI_SUCCESS ? "success" : "fake CUPTI error";
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud)
{
	alive_or_die("cuptiSubscribe");
	pthread_mutex_lock(&mu);
	int busy = subscribed;
	if (!busy) {
		subscribed = 1;
		sub_cb = cb;
		sub_ud = ud;
		memset(domain_on, 0, sizeof(domain_on));
	}
	pthread_mutex_unlock(&mu);
	*h = (CUpti_SubscriberHandle)&sub_cb;
	return busy ? CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED : CUPTI_SUCCESS;
}

API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
	alive_or_die("cuptiUnsubscribe");
	(void)h;
	pthread_mutex_lock(&mu);
	subscribed = 0;
	sub_cb = NULL;
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableDomain(uint32_t en, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
	alive_or_die("cuptiEnableDomain");
	(void)h;
	if ((unsigned)d >= 8)
		return CUPTI_ERROR_INVALID_PARAMETER;
	domain_on[d] = (int)en;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle h, CUpti_CallbackDomain d,
				    CUpti_CallbackId cbid)
{
	alive_or_die("cuptiEnableCallback");
	(void)h;
	if (d != CUPTI_CB_DOMAIN_RUNTIME_API && d != CUPTI_CB_DOMAIN_DRIVER_API)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
		atomic_store(&launch_cb_on, (int)en);
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
		atomic_store(&drv_cb_on, (int)en);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
		*name = "cudaLaunchKernel_v7000";
	else if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020)
		*name = "cudaMemcpyAsync_v3020";
	else if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020)
		*name = "cudaMemsetAsync_v3020";
	else if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000)
		*name = "cudaGraphLaunch_v10000";
	else if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
		*name = "cuLaunchKernel";
	else
		return CUPTI_ERROR_INVALID_PARAMETER;
	return CUPTI_SUCCESS;
}

static void hold_enable(int k);
static void run_held_graphs(void);

API CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc rq,
					       CUpti_BuffersCallbackCompleteFunc dn)
{
	hold_enable(-1);
	req_cb = rq;
	done_cb = dn;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	ts_cb = f;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *sz, void *v)
{
	if (a == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER && *sz == 1) {
		zeroed_attr = *(uint8_t *)v;
		return CUPTI_SUCCESS;
	}
	return CUPTI_ERROR_NOT_SUPPORTED;
}

static _Thread_local int last_records;
static atomic_int holding, hold_released;

/* FAKE_CUPTI_HOLD: keep the MEMCPY kind off (or, FAKE_CUPTI_HOLD_AT=register,
 * recording's setup) until the app lets it go (fake_cupti_release_hold),
 * up to 60 s. k: the kind being switched on, -1 the callbacks' registration. */
static void hold_enable(int k)
{
	const char *at = getenv("FAKE_CUPTI_HOLD_AT");
	int flush = at && !strcmp(at, "flush");
	int want = flush ? -2 : at && !strcmp(at, "register") ? -1 : CUPTI_ACTIVITY_KIND_MEMCPY;

	if (k != want || (!flush && !getenv("FAKE_CUPTI_HOLD")))
		return;
	atomic_store(&holding, 1);
	for (int i = 0; i < 60000 && !atomic_load(&hold_released); i++)
		usleep(1000);
	atomic_store(&holding, 0);
}

API CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	alive_or_die("cuptiActivityEnable");
	hold_enable((int)k);
	if ((unsigned)k < sizeof(kind_on) / sizeof(kind_on[0]))
		atomic_store(&kind_on[k], 1);
	if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && req_cb && done_cb)
		run_held_graphs();
	if (k == CUPTI_ACTIVITY_KIND_DEVICE && req_cb && done_cb) {
		pthread_mutex_lock(&mu);
		put_device_once();
		pthread_mutex_unlock(&mu);
		return CUPTI_SUCCESS;
	}
	if (k != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || gen_started)
		return CUPTI_SUCCESS;
	if (!req_cb || !done_cb)
		return CUPTI_ERROR_INVALID_OPERATION;
	graph_nodes = getenv("FAKE_CUPTI_GRAPH") != NULL;
	sync_every = getenv("FAKE_CUPTI_SYNC") ? strtoull(getenv("FAKE_CUPTI_SYNC"), NULL, 10) : 0;
	memory_every = getenv("FAKE_CUPTI_MEMORY") ? strtoull(getenv("FAKE_CUPTI_MEMORY"), NULL, 10) : 0;
	atomic_store(&gen_run, 1);
	gen_started = pthread_create(&gen, NULL, generator, NULL) == 0;
	return gen_started ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
}

API CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	alive_or_die("cuptiActivityDisable");
	if ((unsigned)k < sizeof(kind_on) / sizeof(kind_on[0]))
		atomic_store(&kind_on[k], 0);
	if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && gen_started) {
		atomic_store(&gen_run, 0);
		pthread_join(gen, NULL);
		gen_started = 0;
	}
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	alive_or_die("cuptiActivityFlushAll");
	(void)flag;
	hold_enable(-2);
	pthread_mutex_lock(&mu);
	hand_over();
	pthread_mutex_unlock(&mu);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	size_t off = *rec ? (size_t)((uint8_t *)*rec - buf) + sizeof(CUpti_ActivityKernel10) : 0;
	if (off + sizeof(CUpti_ActivityKernel10) > valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)(buf + off);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{
	alive_or_die("cuptiActivityGetNumDroppedRecords");
	(void)c;
	(void)s;
	*n = 0;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiFinalize(void)
{
	alive_or_die("cuptiFinalize");
	if (graph_nodes && generated) {
		static const char m[] = "fake CUPTI: finalized after a graph ran: the GPU faults\n";
		if (write(2, m, sizeof(m) - 1) < 0)
			_exit(134);
		abort();
	}
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityFlushAll(0);
	pthread_mutex_lock(&mu);
	req_cb = NULL;
	done_cb = NULL;
	subscribed = 0;
	sub_cb = NULL;
	memset(domain_on, 0, sizeof(domain_on));
	atomic_store(&launch_cb_on, 0);
	atomic_store(&drv_cb_on, 0);
	pthread_mutex_unlock(&mu);
	finalized++;
	return CUPTI_SUCCESS;
}

/* One API call: enter and exit callbacks (spin_ns apart, `inner` called
 * in between) when its domain or its callback id is on; 1 if delivered. */
static int api_call(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const char *name, int by_id,
		    uint64_t spin_ns, int (*inner)(void))
{
	pthread_mutex_lock(&mu);
	CUpti_CallbackFunc cb = domain_on[dom] || by_id ? sub_cb : NULL;
	void *ud = sub_ud;
	pthread_mutex_unlock(&mu);
	if (!cb)
		return 0;
	uint64_t slot = 0;
	int ret = 0;
	CUpti_CallbackData d;
	memset(&d, 0, sizeof(d));
	d.functionName = name;
	d.correlationId = (uint32_t)atomic_fetch_add(&corr_ids, 1) + 1;
	d.correlationData = &slot;
	d.functionReturnValue = &ret;
	d.callbackSite = CUPTI_API_ENTER;
	cb(ud, dom, cbid, &d);
	if (inner)
		inner();
	for (uint64_t t0 = now_ns(); now_ns() - t0 < spin_ns;)
		; /* the call's own work */
	d.callbackSite = CUPTI_API_EXIT;
	cb(ud, dom, cbid, &d);
	return 1;
}

static int driver_launch(void)
{
	return api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel",
			atomic_load(&drv_cb_on), 5000, NULL);
}

/* A direct driver launch, as cuBLAS makes them. */
API void fake_cupti_driver_launch(void)
{
	if (driver_launch())
		drv_cbs++;
}

/* The app's "CUDA call": a runtime launch, with its own driver call inside. */
API void fake_cupti_api_call(void)
{
	int by_id = atomic_load(&launch_cb_on);
	if (api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		     "cudaLaunchKernel", by_id, 20000, driver_launch) && by_id)
		launch_cbs++;
}

/* Work of one real CUDA call (see the top). kind: 0 kernel, 1 copy, 2 set,
 * 3 graph launch; dims: grid x, y, z, block x, y, z; enter/exit: the call's
 * CLOCK_MONOTONIC bounds, taken by the app around it. Returns the call's
 * correlation id. */
#define FAKE_STREAMS 64
static uint64_t stream_busy[FAKE_STREAMS];
static atomic_ullong work_records;

static int put_work(int rk, uint32_t c, int graph, const char *name, const unsigned dims[6],
		    unsigned long long bytes, unsigned stream, uint64_t start, uint64_t d);
static int hold_graph(uint32_t corr, const char *name, const unsigned dims[6], unsigned stream);

static uint64_t queue_on(unsigned stream, uint64_t after, uint64_t dur)
{
	uint64_t *busy = &stream_busy[stream % FAKE_STREAMS];
	uint64_t start = *busy > after ? *busy : after;
	*busy = start + dur;
	return start;
}

API unsigned fake_cupti_work(int kind, const char *name, const unsigned dims[6], unsigned long long bytes,
			     unsigned stream, unsigned long long enter, unsigned long long exit_ns)
{
	static const CUpti_CallbackId cbids[] = {
		CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
		CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
	};
	const char *w = getenv("FAKE_CUPTI_WORK_NS");
	uint64_t dur = w ? strtoull(w, NULL, 10) : 20000;
	int nocorr = getenv("FAKE_CUPTI_NOCORR") != NULL;
	const char *drop = getenv("FAKE_CUPTI_DROP");
	const char *drop_graph = getenv("FAKE_CUPTI_DROP_GRAPH");
	const char *untimed = getenv("FAKE_CUPTI_UNTIMED");
	static uint64_t graphs;
	const char *f = getenv("FAKE_CUPTI_FIRST_NS");
	uint64_t first = f ? strtoull(f, NULL, 10) : 0;
	if (kind < 0 || kind > 3)
		return 0;
	last_records = 0;
	pthread_mutex_lock(&mu);
	uint32_t corr = (uint32_t)atomic_fetch_add(&corr_ids, 1) + 1;
	if (atomic_load(&kind_on[CUPTI_ACTIVITY_KIND_RUNTIME])) {
		CUpti_ActivityAPI a;
		void *slot = next_slot();
		memset(&a, 0, sizeof(a));
		a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		a.cbid = cbids[kind];
		a.start = enter;
		a.end = exit_ns;
		a.processId = (uint32_t)getpid();
		a.threadId = (uint32_t)gettid();
		a.correlationId = corr;
		if (slot)
			memcpy(slot, &a, sizeof(a));
	}
	/* a graph launch: 3 kernel nodes and a memset node, of its correlation id */
	int n = drop && strtoull(drop, NULL, 10) == corr ? 0 : kind == 3 ? 4 : 1;
	if (kind == 3 && ++graphs && drop_graph && strtoull(drop_graph, NULL, 10) == graphs)
		n = 0;
	if (kind == 3 && n && hold_graph(corr, name, dims, stream)) {
		pthread_mutex_unlock(&mu);
		return corr;
	}
	for (int i = 0; i < n; i++) {
		int rk = kind == 3 && i == 3 ? 2 : kind;
		if (!atomic_load(&kind_on[rk == 1 ? CUPTI_ACTIVITY_KIND_MEMCPY : rk == 2 ? CUPTI_ACTIVITY_KIND_MEMSET
										: CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]))
			break;
		uint64_t d = dur + (stream % 4) * dur / 2;
		if (first && !stream_busy[stream % FAKE_STREAMS])
			d = first;
		uint64_t start = queue_on(stream, (uint64_t)exit_ns + 2000, d);
		if (untimed && strtoull(untimed, NULL, 10) <= corr)
			start = d = 0; /* CUPTI: both 0, "timestamp information could not be collected" */
		if (!put_work(rk, nocorr && kind != 3 ? 0 : corr, kind == 3, name, dims, bytes, stream, start, d))
			break;
		last_records++;
	}
	pthread_mutex_unlock(&mu);
	return corr;
}

/* One record of work (rk: 0 kernel, 1 copy, 2 set); 0 when the client gave
 * no buffer. Caller holds mu. */
static int put_work(int rk, uint32_t c, int graph, const char *name, const unsigned dims[6],
		    unsigned long long bytes, unsigned stream, uint64_t start, uint64_t d)
{
	void *slot = next_slot();

	if (!slot)
		return 0;
	if (rk == 1) {
		CUpti_ActivityMemcpy6 m;
		memset(&m, 0, sizeof(m));
		m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
		m.bytes = bytes;
		m.start = start;
		m.end = start + d;
		m.streamId = stream;
		m.correlationId = c;
		memcpy(slot, &m, sizeof(m));
	} else if (rk == 2) {
		CUpti_ActivityMemset4 m;
		memset(&m, 0, sizeof(m));
		m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
		m.bytes = bytes;
		m.start = start;
		m.end = start + d;
		m.streamId = stream;
		m.correlationId = c;
		memcpy(slot, &m, sizeof(m));
	} else {
		CUpti_ActivityKernel10 k;
		memset(&k, 0, sizeof(k));
		k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k.start = start;
		k.end = start + d;
		k.correlationId = c;
		k.streamId = stream;
		k.gridX = dims[0];
		k.gridY = dims[1];
		k.gridZ = dims[2];
		k.blockX = dims[3];
		k.blockY = dims[4];
		k.blockZ = dims[5];
		k.name = name;
		k.graphId = graph ? 1 : 0;
		memcpy(slot, &k, sizeof(k));
	}
	work_records++;
	return 1;
}

/* FAKE_CUPTI_GRAPH_KEEP: graph launches made while kernels were not
 * recorded, their replays queued (see the top). */
#define HELD_MAX 64
static struct held_graph {
	uint32_t corr;
	unsigned stream, dims[6];
	const char *name;
} held[HELD_MAX];
static int n_held;
static atomic_ullong late_records;

/* Hold a graph launch's replay for later; 0: record it now (or not at
 * all) as any work. Caller holds mu. */
static int hold_graph(uint32_t corr, const char *name, const unsigned dims[6], unsigned stream)
{
	if (!getenv("FAKE_CUPTI_GRAPH_KEEP") || atomic_load(&kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) ||
	    n_held == HELD_MAX)
		return 0;
	held[n_held].corr = corr;
	held[n_held].stream = stream;
	held[n_held].name = name;
	memcpy(held[n_held].dims, dims, sizeof(held[n_held].dims));
	n_held++;
	return 1;
}

/* The kernel kind is on: the held replays run from now, in order. */
static void run_held_graphs(void)
{
	const char *w = getenv("FAKE_CUPTI_WORK_NS");
	uint64_t dur = w ? strtoull(w, NULL, 10) : 20000, t = now_ns();
	const char *stale = getenv("FAKE_CUPTI_STALE");
	static const unsigned one[6] = { 1, 1, 1, 1, 1, 1 };

	pthread_mutex_lock(&mu);
	/* FAKE_CUPTI_STALE=N: first N nodes of a replay that started 5 s before this
	 * recording (an earlier one's, in flight at its stop), delivered now,
	 * their ends stamped in this one (as the H100 gave them). */
	for (uint64_t i = 0, n = stale ? strtoull(stale, NULL, 10) : 0; i < n && t > 6000000000ull; i++)
		put_work(0, 0x40000000u, 1, "earlier_replay_node", one, 0, 7, t - 5000000000ull + i * dur,
			 5000000000ull + dur);
	for (int g = 0; g < n_held; g++)
		for (int i = g ? 0 : 1; i < 3; i++) { /* 3 kernel nodes; the first's first ran */
			uint64_t start = queue_on(held[g].stream, t, dur);

			if (put_work(0, held[g].corr, 1, held[g].name, held[g].dims, 0, held[g].stream, start, dur))
				late_records++;
		}
	n_held = 0;
	pthread_mutex_unlock(&mu);
}

/* Is kernel recording on (the app waits for it before its calls)? */
API int fake_cupti_recording(void)
{
	return atomic_load(&kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
}

/* FAKE_CUPTI_HOLD: is enabling MEMCPY held (kernels on)? Let it go on. */
API int fake_cupti_holding(void)
{
	return atomic_load(&holding);
}

API void fake_cupti_release_hold(void)
{
	atomic_store(&hold_released, 1);
}

/* Records the calling thread's last fake_cupti_work() made (0: not recorded). */
API unsigned long long fake_cupti_late(void)
{
	return late_records;
}

API int fake_cupti_recorded(void)
{
	return last_records;
}

API void fake_cupti_stats(unsigned long long out[7])
{
	out[0] = generated;
	out[1] = buffers;
	out[2] = unzeroed;
	out[3] = misaligned;
	out[4] = finalized;
	out[5] = launch_cbs;
	out[6] = drv_cbs;
}
