/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evview.h: how each event type shows in the outputs, one line per type
 * beside its schema (eventlog/evlog_schema.h). The core (core.c, describe),
 * the trace writers' arguments (item_args.h), the size planner (sizes.c),
 * the folding filter (fold.c), the trace JSON and Perfetto writers and the
 * XPlane writer expand these lines instead of each switching on the types
 * by hand. EVLOG_TYPES drives every expansion: a type without its lines
 * does not compile.
 *
 * EVVIEW_<member>(V) is V(member, category, name, flow, shape, fold, xline, xstats):
 *   category  its category (docs/CONTRACT.md §4): an expression, mostly a
 *             string literal
 *   name      its name: FIELD(s, fallback): the string s, fallback when
 *             empty; DEMANGLED(s, fallback): the same, demangled;
 *             MADE(bytes, x): the string expression x, about `bytes` long
 *             beyond the event's own strings (for the size budget)
 *   flow      NOFLOW; LAUNCH(merged): the launch end of a flow to the GPU
 *             work of its correlation id (merged: a uprobe call that stands
 *             for CUPTI's record too); GPU: that flow's end on the work
 *   shape     SLICE (its duration) or INSTANT
 *   fold      FOLD: a size budget may fold it into a run of short calls (on
 *             a thread, without a flow); NOFOLD
 *   xline     the work an XPlane stream line of it is named for: Compute,
 *             Memcpy, Memset; OTHER
 *   xstats    XS(fn): the XPlane writer's fn(x, es, p, it) adds its stats
 *             (converter/output/xplane.c); NOXS
 * Expressions are in terms of e (the event), it (the item) and buf, bufsz
 * (room for a made name or category), and of the core's helpers:
 * view_sample_name(c, r, e, it), view_marker_name(e, it, buf, bufsz) and
 * the log l and core c being described (core.c).
 *
 * EVARGS_<member>(A, m) lists the item's arguments in order, each
 * A(m, KIND, key, field):
 *   U64, I64   the field as an unsigned or a signed number
 *   I32        a u32 field as a signed one (0xffffffff: -1, none)
 *   U64NZ      the same, left out when 0
 *   STR        the string field; STRNE: left out when empty
 *   GBPS       the field (bytes) per ns of the item's duration, as GB/s;
 *              left out when it has none
 *   FN         item_<field>_args(t, it) writes them (converter/output/item_args.h)
 */
#ifndef LLMT_CONV_EVVIEW_H
#define LLMT_CONV_EVVIEW_H

#include <stdint.h>
#include "eventlog/eventlog.h"
#include "converter/cv_util.h"
#include "converter/sink.h"

/* Metadata: never an item (what an unknown type would show). */
#define EVVIEW_NONE(V, m) V(m, "other", MADE(16, "?"), NOFLOW, SLICE, NOFOLD, OTHER, NOXS)

#define EVVIEW_process(V) EVVIEW_NONE(V, process)
#define EVARGS_process(A, m)
#define EVVIEW_process_exit(V) EVVIEW_NONE(V, process_exit)
#define EVARGS_process_exit(A, m)
#define EVVIEW_thread(V) EVVIEW_NONE(V, thread)
#define EVARGS_thread(A, m)
#define EVVIEW_thread_exit(V) EVVIEW_NONE(V, thread_exit)
#define EVARGS_thread_exit(A, m)

#define EVVIEW_syscall(V) \
	V(syscall, "syscall", MADE(8, cv_syscall_name(l->syscall_table, e->u.syscall.nr, buf, bufsz)), \
	  NOFLOW, SLICE, FOLD, OTHER, XS(xs_syscall))
#define EVARGS_syscall(A, m) A(m, I64, "ret", ret) A(m, FN, "", syscall_fd)

#define EVVIEW_cpu_sample(V) \
	V(cpu_sample, "cpu_sample", MADE(0, view_sample_name(c, r, e, it)), NOFLOW, INSTANT, NOFOLD, \
	  OTHER, NOXS)
#define EVARGS_cpu_sample(A, m) A(m, U64, "cpu", cpu) A(m, FN, "", stack)

/* A Python call: its enter and exit become one item of type py_enter. */
#define EVVIEW_py_enter(V) \
	V(py_enter, "python_function", FIELD(e->u.py_enter.func, "<python>"), NOFLOW, SLICE, FOLD, \
	  OTHER, NOXS)
#define EVARGS_py_enter(A, m) A(m, FN, "", py)
#define EVVIEW_py_exit(V) EVVIEW_NONE(V, py_exit)
#define EVARGS_py_exit(A, m)

#define EVVIEW_py_sample(V) \
	V(py_sample, "python_sample", MADE(0, view_sample_name(c, r, e, it)), NOFLOW, INSTANT, NOFOLD, \
	  OTHER, NOXS)
#define EVARGS_py_sample(A, m) A(m, FN, "", stack)

#define EVVIEW_lib_call(V) \
	V(lib_call, cv_lib_category(e->u.lib_call.lib_class, e->u.lib_call.lib.ptr, buf, bufsz), \
	  DEMANGLED(e->u.lib_call.symbol, "<call>"), LAUNCH(em->merged), SLICE, FOLD, OTHER, \
	  XS(xs_lib_call))
#define EVARGS_lib_call(A, m) \
	A(m, STR, "library", lib) A(m, I64, "ret", ret) A(m, U64, "depth", depth) \
	A(m, U64NZ, "correlation", correlation_id) A(m, FN, "", call)

#define EVVIEW_gpu_kernel(V) \
	V(gpu_kernel, "kernel", DEMANGLED(e->u.gpu_kernel.name, "<kernel>"), GPU, SLICE, NOFOLD, \
	  Compute, XS(xs_kernel))
#define EVARGS_gpu_kernel(A, m) A(m, FN, "", kernel)

#define EVVIEW_gpu_memcpy(V) \
	V(gpu_memcpy, "gpu_memcpy", \
	  MADE(16, cv_memcpy_name(e->u.gpu_memcpy.copy_kind, e->u.gpu_memcpy.src_kind, \
				  e->u.gpu_memcpy.dst_kind, buf, bufsz)), \
	  GPU, SLICE, NOFOLD, Memcpy, XS(xs_memcpy))
#define EVARGS_gpu_memcpy(A, m) \
	A(m, U64, "device", device) A(m, U64, "context", context) A(m, U64, "stream", stream) \
	A(m, U64, "correlation", correlation_id) A(m, U64, "bytes", bytes) \
	A(m, GBPS, "memory bandwidth (GB/s)", bytes) A(m, U64, "kind", copy_kind)

#define EVVIEW_gpu_memset(V) \
	V(gpu_memset, "gpu_memset", MADE(16, "Memset (Device)"), GPU, SLICE, NOFOLD, Memset, \
	  XS(xs_memset))
#define EVARGS_gpu_memset(A, m) \
	A(m, U64, "device", device) A(m, U64, "context", context) A(m, U64, "stream", stream) \
	A(m, U64, "correlation", correlation_id) A(m, U64, "bytes", bytes) \
	A(m, GBPS, "memory bandwidth (GB/s)", bytes) A(m, U64, "value", value)

#define EVVIEW_gpu_api(V) \
	V(gpu_api, e->u.gpu_api.api_class == EVLIB_CUDA_DRIVER ? "cuda_driver" : "cuda_runtime", \
	  FIELD(e->u.gpu_api.name, "<cuda api>"), LAUNCH(1), SLICE, NOFOLD, OTHER, NOXS)
#define EVARGS_gpu_api(A, m) \
	A(m, U64, "cbid", cbid) A(m, U64, "correlation", correlation_id) A(m, I64, "ret", ret)

#define EVVIEW_gpu_device(V) EVVIEW_NONE(V, gpu_device)
#define EVARGS_gpu_device(A, m)
#define EVVIEW_lost(V) EVVIEW_NONE(V, lost)
#define EVARGS_lost(A, m)
#define EVVIEW_symbol(V) EVVIEW_NONE(V, symbol)
#define EVARGS_symbol(A, m)

/* Steps among the markers: "ProfilerStep#N" and a step number. */
#define EVVIEW_marker(V) \
	V(marker, "user_annotation", MADE(0, view_marker_name(e, it, buf, bufsz)), NOFLOW, SLICE, \
	  NOFOLD, OTHER, NOXS)
#define EVARGS_marker(A, m) A(m, FN, "", step) A(m, STRNE, "text", text) A(m, U64, "value", value)

#define EVVIEW_clock(V) EVVIEW_NONE(V, clock)
#define EVARGS_clock(A, m)

#define EVVIEW_gpu_sync(V) \
	V(gpu_sync, "cuda_sync", MADE(16, cv_sync_name(e->u.gpu_sync.kind)), NOFLOW, SLICE, NOFOLD, \
	  OTHER, XS(xs_sync))
/* As Kineto writes them: the kind's name, the stream (-1: none, a context
 * synchronization), the correlation id, the context, and the event waited on. */
#define EVARGS_gpu_sync(A, m) \
	A(m, FN, "", sync_kind) A(m, I32, "stream", stream) \
	A(m, U64, "correlation", correlation_id) A(m, U64, "context", context) \
	A(m, FN, "", sync_event)

#define EVVIEW_cupti_overhead(V) \
	V(cupti_overhead, "overhead", MADE(16, cv_overhead_name(e->u.cupti_overhead.kind)), NOFLOW, \
	  SLICE, NOFOLD, OTHER, XS(xs_overhead))
#define EVARGS_cupti_overhead(A, m)

#define EVVIEW_lib_log(V) EVVIEW_NONE(V, lib_log)
#define EVARGS_lib_log(A, m)
#define EVVIEW_segment(V) EVVIEW_NONE(V, segment)
#define EVARGS_segment(A, m)
#define EVVIEW_rank(V) EVVIEW_NONE(V, rank)
#define EVARGS_rank(A, m)

/* Named as xprof's memory profile reads them (converter/output/xplane.c, xs_memory). */
#define EVVIEW_gpu_memory(V) \
	V(gpu_memory, "gpu_memory", \
	  MADE(16, e->u.gpu_memory.op == CV_GPUMEM_ALLOCATION ? "MemoryAllocation" \
		   : e->u.gpu_memory.op == CV_GPUMEM_RELEASE ? "MemoryDeallocation" : "MemoryOperation"), \
	  NOFLOW, INSTANT, NOFOLD, OTHER, XS(xs_memory))
#define EVARGS_gpu_memory(A, m) \
	A(m, U64, "bytes", bytes) A(m, U64, "address", address) A(m, U64, "memory kind", memory_kind) \
	A(m, U64, "device", device) A(m, I32, "context", context) A(m, I32, "stream", stream) \
	A(m, U64NZ, "correlation", correlation_id) A(m, U64NZ, "pool", pool_address)

/* ------------------------------------------------------- the plain traits */

/* XPlane stream line kinds (bits: a line may show several). */
enum { CV_XLINE_Compute = 1, CV_XLINE_Memcpy = 2, CV_XLINE_Memset = 4, CV_XLINE_OTHER = 8 };
enum { CV_FLOW_NONE = 0, CV_FLOW_LAUNCH = 1, CV_FLOW_GPU = 2 };

struct cv_view {
	uint8_t instant;     /* an instant, not a slice */
	uint8_t fold;        /* a size budget may fold it */
	uint8_t flow;        /* CV_FLOW_* */
	uint8_t xline;       /* CV_XLINE_* */
	uint8_t made_bytes;  /* its made name's bytes, for the size budget */
};

#define CV_VIEW_SHAPE_SLICE 0
#define CV_VIEW_SHAPE_INSTANT 1
#define CV_VIEW_FOLD_FOLD 1
#define CV_VIEW_FOLD_NOFOLD 0
#define CV_VIEW_FLOW_NOFLOW CV_FLOW_NONE
#define CV_VIEW_FLOW_LAUNCH(merged) CV_FLOW_LAUNCH
#define CV_VIEW_FLOW_GPU CV_FLOW_GPU
#define CV_VIEW_BYTES_FIELD(s, fb) 0
#define CV_VIEW_BYTES_DEMANGLED(s, fb) 0
#define CV_VIEW_BYTES_MADE(bytes, x) bytes
#define CV_VIEW_TRAITS(m, cat, nm, flow, shape, fold, xline, xs) \
	{ CV_VIEW_SHAPE_##shape, CV_VIEW_FOLD_##fold, CV_VIEW_FLOW_##flow, CV_XLINE_##xline, \
	  CV_VIEW_BYTES_##nm }
#define CV_VIEW_ENTRY(N, num, m, track, dur, corr) [EV_##N] = EVVIEW_##m(CV_VIEW_TRAITS),
static const struct cv_view cv_views[EV_TYPE_MAX + 1] = { EVLOG_TYPES(CV_VIEW_ENTRY) };
#undef CV_VIEW_ENTRY

/* The view of a type; an unknown one's is metadata's (EVVIEW_NONE). */
static inline const struct cv_view *cv_view_of(uint32_t type)
{
	static const struct cv_view none = { .xline = CV_XLINE_OTHER, .made_bytes = 16 };

	return type <= EV_TYPE_MAX ? &cv_views[type] : &none;
}

/* The item has a flow (a launch or its GPU work, with a correlation id). */
static inline int cv_view_has_flow(const struct evlog_event *e)
{
	return cv_view_of(e->type)->flow != CV_FLOW_NONE && evlog_corr(e) != 0;
}

/* ------------------------------------------ gpu_memory's running totals */

/*
 * What both outputs show beside a gpu_memory item: the bytes its process
 * holds on the GPU after it, the GPU's own memory apart from host memory
 * (pageable, pinned): allocated since recording began and not freed since
 * (a free of memory allocated before changes nothing), and the most held so
 * far. A device track's items come in time order, one track after another:
 * the totals start again with each track.
 */
#define CV_GPUMEM_ALLOCATION 1           /* CUpti_ActivityMemoryOperationType */
#define CV_GPUMEM_RELEASE 2
#define CV_GPUMEM_LIVE_MAX (1u << 18)    /* addresses remembered per track */
enum { CV_GPUMEM_DEVICE = 0, CV_GPUMEM_HOST = 1 };

struct cv_gpumem {
	uint32_t pid, tid;                /* the track */
	uint64_t total[2], peak[2];       /* by CV_GPUMEM_DEVICE / _HOST */
	struct cv_map live;               /* (address, class) -> bytes + 1; 0: freed */
	int full;                         /* compacted, and still half full */
};

static inline int cv_gpumem_class(const struct evlog_event *e)
{
	uint8_t k = e->u.gpu_memory.memory_kind;

	return k == 1 || k == 2 ? CV_GPUMEM_HOST : CV_GPUMEM_DEVICE; /* pageable, pinned */
}

/* The addresses still allocated, the freed ones left out: the map full of
 * addresses that came and went. -1: out of memory. */
static inline int cv_gpumem_compact(struct cv_gpumem *g)
{
	struct cv_map keep = { 0 };

	for (size_t i = 0; i < g->live.n; i++) {
		const struct cv_map_ent *en = &g->live.ents[i];
		uint64_t *v;

		if (!en->val)
			continue;
		if (!(v = cv_map_put(&keep, en->a, en->b, NULL))) {
			cv_map_free(&keep);
			return -1;
		}
		*v = en->val;
	}
	cv_map_free(&g->live);
	g->live = keep;
	return 0;
}

/* Count the item in; its class's totals are then g->total[cls], g->peak[cls].
 * Exact while fewer than CV_GPUMEM_LIVE_MAX / 2 allocations are held at
 * once; past that, once CV_GPUMEM_LIVE_MAX addresses are remembered, a new
 * allocation is counted but not remembered (its free then changes nothing).
 * -1: out of memory. */
static inline int cv_gpumem_add(struct cv_gpumem *g, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;
	int cls = cv_gpumem_class(e);
	uint64_t *v, bytes = e->u.gpu_memory.bytes;

	if (g->pid != it->pid || g->tid != it->tid) {
		cv_map_free(&g->live);
		*g = (struct cv_gpumem){ .pid = it->pid, .tid = it->tid };
	}
	if (e->u.gpu_memory.op != CV_GPUMEM_ALLOCATION && e->u.gpu_memory.op != CV_GPUMEM_RELEASE)
		return 0; /* CUPTI's "invalid" operation */
	if (e->u.gpu_memory.op == CV_GPUMEM_RELEASE) {
		v = cv_map_get(&g->live, e->u.gpu_memory.address, (uint64_t)cls);
		if (v && *v) {
			g->total[cls] -= *v - 1;
			*v = 0;
		}
		return 0;
	}
	g->total[cls] += bytes;
	if (g->total[cls] > g->peak[cls])
		g->peak[cls] = g->total[cls];
	if (g->live.n >= CV_GPUMEM_LIVE_MAX &&
	    !cv_map_get(&g->live, e->u.gpu_memory.address, (uint64_t)cls)) {
		if (!g->full) {
			if (cv_gpumem_compact(g))
				return -1;
			g->full = g->live.n >= CV_GPUMEM_LIVE_MAX / 2;
		}
		if (g->live.n >= CV_GPUMEM_LIVE_MAX)
			return 0;
	}
	if (!(v = cv_map_put(&g->live, e->u.gpu_memory.address, (uint64_t)cls, NULL)))
		return -1;
	*v = bytes + 1;
	return 0;
}

static inline void cv_gpumem_free(struct cv_gpumem *g)
{
	cv_map_free(&g->live);
	*g = (struct cv_gpumem){ 0 };
}

#endif
