/* SPDX-License-Identifier: Apache-2.0 */
/* Launch links from the uprobes' launch calls (see launchpair.h). */
#include "converter/pairing/launchpair.h"
#include "common/grow.h"
#include "converter/conv_int.h"
#include "converter/pairing/dedup.h"

#include <stdlib.h>
#include <string.h>

/* GPU clocks are put on the host's by CUPTI: a launch's work may appear to
 * start a little before the call's entry. A kernel starts microseconds
 * after its launch at the soonest, so this much is taken as clock error. */
#define LP_START_SLACK_NS 20000ULL
/* Calls, GPU records and API records noted at most (~50 bytes each). */
#define LP_MAX_RECS (16u << 20)
/* Distinct names kept for the misses' tally; later ones count as "other". */
#define LP_NAMES_MAX 8192

enum lp_kind { LP_KERNEL = 1, LP_COPY, LP_SET, LP_GRAPH };

/* What a call's signature holds, in the order calls are paired: kernels
 * named with their dims, copies and sets first (most launches); then the
 * driver's launches, whose kernel handle has no symbol (dims and shared
 * memory only); then launches with their dims behind a pointer
 * (cudaLaunchKernelExC: name only); graphs last. */
enum lp_stage { LP_FULL = 1, LP_DIMS, LP_NAME, LP_GRAPHS };

/* Millions of calls and GPU records are held at once: each names its
 * thread or GPU stream by an index into a table of them (lp->thrs,
 * lp->strms) rather than by its ids. */
struct lp_thr {
	uint32_t host, pid, tid;
	uint32_t at, n_at, cur;  /* its paired calls in lp->call_at: first, count, pass 2's cursor */
};

struct lp_strm {
	uint32_t host, pid, device, stream;
	uint32_t at, n_at, cur;  /* its paired work in lp->gpu_at */
};


struct lp_call {
	uint64_t ts, end;     /* host clock */
	uint64_t sig;         /* signature hash, without the stream */
	uint64_t stream;      /* the call's stream handle */
	uint64_t corr;        /* given in pass 2 */
	uint32_t thr;         /* lp->thrs */
	int32_t gpu;          /* first GPU record paired, -1 */
	uint8_t kind, stage, in_window, nested;
	uint8_t late;         /* made after recording stopped: no work recorded */
};

struct lp_gpu {
	uint64_t start;
	uint64_t sig;         /* name and dims (kernels); bytes */
	uint64_t sig_dims;    /* kernels: dims and dynamic shared memory */
	uint64_t sig_name;    /* kernels: name alone */
	uint64_t corr;        /* CUPTI's; 0 if none */
	uint32_t strm, graph; /* lp->strms; CUPTI's graph id */
	uint32_t name;        /* kernel name, "memcpy", "memset": lp->names */
	int32_t call;         /* paired call, -1 */
	uint32_t folded;      /* a graph replay's: its other kernels, held in this one */
	uint8_t kind, cupti_linked;
};

struct lp_api {
	uint64_t ts, end, corr;
	uint32_t thr;         /* lp->thrs */
	uint32_t name;        /* the call's: lp->names */
};

/* Why work was not linked as CUPTI links it (the misses' tally). */
enum lp_miss { LP_MISS_UNPROBED = 1, LP_MISS_UNPAIRED, LP_MISS_OTHER_CALL, LP_MISS_WORK };

struct lp_on {
	uint64_t t0, t1;      /* recording switched on (off: LP_OFF) between t0 and t1 */
	uint32_t host, pid;
	uint8_t kind;         /* of work (lp_kind), 0: every kind */
};

/* Sort entries: (key, time, index). Also where pass 2 finds a pair: a call
 * on its thread (key: lp->thrs index, index: the call's), work on its
 * stream (lp->strms, the work's); pass 2 reads each thread's and stream's
 * records in time order, so a cursor per track finds each at once (3-4x
 * less memory than hash maps of the pairs). */
struct lp_ent {
	uint64_t key, t;
	uint32_t i;
};

static int cmp_ent(const void *a, const void *b)
{
	const struct lp_ent *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

struct cv_lp {
	struct lp_thr *thrs;
	struct lp_strm *strms;
	size_t n_thrs, cap_thrs, n_strms, cap_strms;
	struct cv_map thr_ix;    /* (host, pid), tid -> thrs index + 1 */
	struct cv_map strm_ix;   /* (host, pid), (device, stream) -> strms index + 1 */
	struct lp_call *calls;
	struct lp_gpu *gpus;
	struct lp_api *apis;
	struct lp_on *ons;
	size_t n_calls, cap_calls, n_gpus, cap_gpus, n_apis, cap_apis, n_ons, cap_ons;
	struct lp_ent *call_at, *gpu_at;
	size_t n_call_at, cap_call_at, n_gpu_at, cap_gpu_at;
	struct cv_strtab names;  /* kernel and API call names, at most LP_NAMES_MAX */
	struct cv_map misses;    /* (enum lp_miss, name) -> count */
	struct cv_map replay_ix; /* (host, pid), correlation id -> gpus index + 1 of a graph replay */
	struct cv_lp_stats st;
	int solved;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 33);
}

static struct cv_lp *lp_of(struct cv_core *c)
{
	if (!c->lp)
		c->lp = calloc(1, sizeof(*c->lp));
	return c->lp;
}

/* The index of a thread or stream in its table, added when new (-1: out of memory). */
static int64_t thr_ix(struct cv_lp *lp, uint32_t host, uint32_t pid, uint32_t tid)
{
	int is_new;
	uint64_t *v = cv_map_put(&lp->thr_ix, (uint64_t)host << 32 | pid, tid, &is_new);

	if (!v || (is_new && lt_grow((void **)&lp->thrs, &lp->cap_thrs, lp->n_thrs + 1,
				     sizeof(*lp->thrs), 64)))
		return -1;
	if (is_new) {
		lp->thrs[lp->n_thrs++] = (struct lp_thr){ .host = host, .pid = pid, .tid = tid };
		*v = lp->n_thrs;
	}
	return (int64_t)*v - 1;
}

static int64_t strm_ix(struct cv_lp *lp, uint32_t host, uint32_t pid, uint32_t device,
		       uint32_t stream)
{
	int is_new;
	uint64_t *v = cv_map_put(&lp->strm_ix, (uint64_t)host << 32 | pid,
				 (uint64_t)device << 32 | stream, &is_new);

	if (!v || (is_new && lt_grow((void **)&lp->strms, &lp->cap_strms, lp->n_strms + 1,
				     sizeof(*lp->strms), 64)))
		return -1;
	if (is_new) {
		lp->strms[lp->n_strms++] =
			(struct lp_strm){ .host = host, .pid = pid, .device = device, .stream = stream };
		*v = lp->n_strms;
	}
	return (int64_t)*v - 1;
}

#define THR(lp, k) (&(lp)->thrs[(k)->thr])
#define STRM(lp, g) (&(lp)->strms[(g)->strm])

/* Calls, GPU records and API records noted reach LP_MAX_RECS: the next is
 * counted, not noted. */
static int at_bound(struct cv_lp *lp)
{
	if (lp->n_calls + lp->n_gpus + lp->n_apis < LP_MAX_RECS)
		return 0;
	lp->st.capped++;
	return 1;
}

/* The index of a name in lp->names (a name past the bound: "(other)"). */
static uint32_t name_ix(struct cv_lp *lp, struct evlog_str s)
{
	int64_t i;

	if (lp->names.n >= LP_NAMES_MAX) {
		s = evlog_s("(other)");
		i = cv_strtab_intern(&lp->names, s.ptr, s.len);
		return i < 0 ? 0 : (uint32_t)i;
	}
	i = cv_strtab_intern(&lp->names, s.ptr ? s.ptr : "", s.ptr ? s.len : 0);
	return i < 0 ? 0 : (uint32_t)i;
}

/* ------------------------------------------------------------ classifying */

static const struct {
	const char *name;
	uint8_t kind;
} calls_known[] = {
	{ "cudaLaunchKernel", LP_KERNEL }, { "cudaLaunchCooperativeKernel", LP_KERNEL },
	{ "cudaLaunchKernelExC", LP_KERNEL }, { "cuLaunchKernel", LP_KERNEL },
	{ "cuLaunchKernelEx", LP_KERNEL }, { "cuLaunchCooperativeKernel", LP_KERNEL },
	{ "cudaMemcpy", LP_COPY }, { "cudaMemcpyAsync", LP_COPY },
	{ "cudaMemcpyPeer", LP_COPY }, { "cudaMemcpyPeerAsync", LP_COPY },
	{ "cudaMemcpy2D", LP_COPY }, { "cudaMemcpy2DAsync", LP_COPY },
	{ "cudaMemcpyToSymbol", LP_COPY }, { "cudaMemcpyToSymbolAsync", LP_COPY },
	{ "cudaMemcpyFromSymbol", LP_COPY }, { "cudaMemcpyFromSymbolAsync", LP_COPY },
	{ "cuMemcpy", LP_COPY }, { "cuMemcpyAsync", LP_COPY }, { "cuMemcpyHtoD", LP_COPY },
	{ "cuMemcpyDtoH", LP_COPY }, { "cuMemcpyDtoD", LP_COPY }, { "cuMemcpyHtoDAsync", LP_COPY },
	{ "cuMemcpyDtoHAsync", LP_COPY }, { "cuMemcpyDtoDAsync", LP_COPY },
	{ "cuMemcpyPeer", LP_COPY }, { "cuMemcpyPeerAsync", LP_COPY },
	{ "cudaMemset", LP_SET }, { "cudaMemsetAsync", LP_SET },
	{ "cuMemsetD8", LP_SET }, { "cuMemsetD16", LP_SET }, { "cuMemsetD32", LP_SET },
	{ "cuMemsetD8Async", LP_SET }, { "cuMemsetD16Async", LP_SET }, { "cuMemsetD32Async", LP_SET },
	{ "cudaGraphLaunch", LP_GRAPH }, { "cuGraphLaunch", LP_GRAPH },
};

static uint8_t call_kind(struct evlog_str name)
{
	/* every one starts "cu": most library calls are out at once */
	if (!name.ptr || name.len < 8 || name.ptr[0] != 'c' || name.ptr[1] != 'u')
		return 0;
	for (size_t i = 0; i < sizeof(calls_known) / sizeof(calls_known[0]); i++)
		if (cv_dedup_same_func(name.ptr, name.len, calls_known[i].name,
				       strlen(calls_known[i].name)))
			return calls_known[i].kind;
	return 0;
}

/* A kernel's name as both sides give it: demangled, cut as the collector cuts it. */
static uint64_t name_hash(struct cv_core *c, const char *s, size_t len)
{
	const char *d = cv_demangle(c, s, len);

	if (d) {
		s = d;
		len = strlen(d);
	}
	return lt_hash_bytes(s, len < EVLOG_CALL_KERNEL_MAX ? len : EVLOG_CALL_KERNEL_MAX);
}

static uint64_t dims_sig(uint64_t h, const uint32_t g[3], const uint32_t b[3])
{
	for (int i = 0; i < 3; i++)
		h = mix(mix(h, g[i]), b[i]);
	return h;
}

static uint64_t dims_smem_sig(const uint32_t g[3], const uint32_t b[3], uint64_t smem)
{
	return mix(dims_sig(LP_DIMS, g, b), smem);
}

/* A kernel launch: its name where its host stub had a symbol, its dims
 * where known (a driver launch names a handle; cudaLaunchKernelExC's dims
 * may be unread). Sets the call's stage and signature. */
static void kernel_call_sig(struct cv_core *c, const struct evlog_event *e, struct lp_call *k)
{
	const typeof(e->u.lib_call) *lc = &e->u.lib_call;
	int named = lc->kernel.len > 0, dims = lc->grid[0] && lc->block[0];
	uint64_t nh = named ? name_hash(c, lc->kernel.ptr, lc->kernel.len) : 0;

	if (named && dims) {
		k->stage = LP_FULL;
		k->sig = dims_sig(mix(LP_KERNEL, nh), lc->grid, lc->block);
	} else if (dims) {
		k->stage = LP_DIMS;
		k->sig = dims_smem_sig(lc->grid, lc->block, lc->dynamic_smem);
	} else if (named) {
		k->stage = LP_NAME;
		k->sig = mix(LP_NAME, nh);
	}
}

static uint64_t work_sig(uint8_t kind, uint64_t bytes)
{
	return mix(kind, bytes);
}

/* ------------------------------------------------------------------ pass 1 */

static uint64_t stream_key(uint32_t host, uint32_t pid, uint32_t dev, uint32_t stream)
{
	return mix(mix(mix(host, pid), dev), stream) | 1;
}

static int note_call(struct cv_core *c, struct cv_lp *lp, uint32_t host, uint64_t ts,
		     const struct evlog_event *e, uint8_t kind)
{
	struct lp_call k = { .ts = ts, .end = ts + e->u.lib_call.dur, .gpu = -1, .kind = kind,
			     .stream = e->u.lib_call.stream };

	if (kind == LP_KERNEL) {
		kernel_call_sig(c, e, &k);
		if (!k.stage)
			return 0; /* nothing to pair it by */
		lp->st.unnamed += k.stage == LP_DIMS;
	} else if (kind == LP_GRAPH) {
		k.stage = LP_GRAPHS;
	} else {
		if (!e->u.lib_call.bytes)
			return 0; /* none known, or none to move: no work queued */
		k.stage = LP_FULL;
		k.sig = work_sig(kind, e->u.lib_call.bytes);
	}
	if (at_bound(lp))
		return 0;
	int64_t t = thr_ix(lp, host, e->pid, e->tid ? e->tid : e->pid);

	if (t < 0 || lt_grow((void **)&lp->calls, &lp->cap_calls, lp->n_calls + 1, sizeof(k), 1024))
		return -1;
	k.thr = (uint32_t)t;
	lp->calls[lp->n_calls++] = k;
	lp->st.calls++;
	return 0;
}

/* A graph replay is paired as one (its first kernel: run_round), and its
 * kernels carry their launch's correlation id, which links them all in
 * pass 2: the replay is held as one record, its earliest start, its other
 * kernels counted in it (the GPT loop replays ~860 kernels a step,
 * 2.6 M in 8 s). 1: folded into the replay's record (kept by note_gpu). */
static int is_replay(const struct evlog_event *e)
{
	return e->type == EV_GPU_KERNEL && e->u.gpu_kernel.graph_id && e->u.gpu_kernel.correlation_id;
}

static int fold_replay(struct cv_lp *lp, uint32_t host, uint64_t ts, const struct evlog_event *e)
{
	const uint64_t *v = is_replay(e) ? cv_map_get(&lp->replay_ix, (uint64_t)host << 32 | e->pid,
						       e->u.gpu_kernel.correlation_id) : NULL;

	if (!v)
		return 0;
	struct lp_gpu *g = &lp->gpus[*v - 1];

	if (!g->folded++)
		g->name = name_ix(lp, evlog_s("(graph replays' kernels)"));
	if (ts < g->start)
		g->start = ts;
	return 1;
}

static int note_gpu(struct cv_lp *lp, struct cv_core *c, uint32_t host, uint64_t ts,
		    const struct evlog_event *e)
{
	struct lp_gpu g = { .start = ts, .call = -1 };
	uint32_t device, stream;

	if (fold_replay(lp, host, ts, e))
		return 0;
	switch (e->type) {
	case EV_GPU_KERNEL: {
		g.kind = LP_KERNEL;
		device = e->u.gpu_kernel.device;
		stream = e->u.gpu_kernel.stream;
		g.corr = e->u.gpu_kernel.correlation_id;
		g.graph = e->u.gpu_kernel.graph_id;
		uint64_t nh = name_hash(c, e->u.gpu_kernel.name.ptr ? e->u.gpu_kernel.name.ptr : "",
					e->u.gpu_kernel.name.len);

		g.sig = dims_sig(mix(LP_KERNEL, nh), e->u.gpu_kernel.grid, e->u.gpu_kernel.block);
		g.sig_dims = dims_smem_sig(e->u.gpu_kernel.grid, e->u.gpu_kernel.block,
					   e->u.gpu_kernel.dynamic_smem);
		g.sig_name = mix(LP_NAME, nh);
		g.name = name_ix(lp, e->u.gpu_kernel.name);
		break;
	}
	case EV_GPU_MEMCPY:
		g.name = name_ix(lp, evlog_s("memcpy"));
		g.kind = LP_COPY;
		device = e->u.gpu_memcpy.device;
		stream = e->u.gpu_memcpy.stream;
		g.corr = e->u.gpu_memcpy.correlation_id;
		g.sig = work_sig(LP_COPY, e->u.gpu_memcpy.bytes);
		break;
	default:
		g.name = name_ix(lp, evlog_s("memset"));
		g.kind = LP_SET;
		device = e->u.gpu_memset.device;
		stream = e->u.gpu_memset.stream;
		g.corr = e->u.gpu_memset.correlation_id;
		g.sig = work_sig(LP_SET, e->u.gpu_memset.bytes);
	}
	if (at_bound(lp))
		return 0;
	int64_t st = strm_ix(lp, host, e->pid, device, stream);

	if (st < 0 || lt_grow((void **)&lp->gpus, &lp->cap_gpus, lp->n_gpus + 1, sizeof(g), 1024))
		return -1;
	g.strm = (uint32_t)st;
	lp->gpus[lp->n_gpus++] = g;
	if (is_replay(e)) {
		uint64_t *v = cv_map_put(&lp->replay_ix, (uint64_t)host << 32 | e->pid,
					 e->u.gpu_kernel.correlation_id, NULL);

		if (!v)
			return -1;
		*v = lp->n_gpus;
	}
	return 0;
}

/* The kind of work a recording switch is about (enum evlog_cupti_work):
 * LP_ALL for the whole switch, 0 for one unknown here; LP_OFF: switched
 * off. */
#define LP_ALL 0xff
#define LP_OFF 0xfe
static uint8_t on_kind(uint64_t work)
{
	switch (work) {
	case EVLOG_CUPTI_ALL: return LP_ALL;
	case EVLOG_CUPTI_KERNEL: return LP_KERNEL;
	case EVLOG_CUPTI_MEMCPY: return LP_COPY;
	case EVLOG_CUPTI_MEMSET: return LP_SET;
	default: return 0;
	}
}

int cv_lp_note(struct cv_core *c, uint32_t host, const struct cv_log *l,
	       const struct evlog_event *e)
{
	struct cv_lp *lp;
	uint64_t ts = e->ts + (uint64_t)l->clock_off;
	uint8_t kind;

	switch (e->type) {
	case EV_LIB_CALL:
		if (!(kind = call_kind(e->u.lib_call.symbol)))
			return 0;
		return (lp = lp_of(c)) ? note_call(c, lp, host, ts, e, kind) : -1;
	case EV_GPU_API: /* every one: the misses name the call CUPTI saw */
		if (!e->u.gpu_api.correlation_id)
			return 0;
		if (!(lp = lp_of(c)))
			return -1;
		if (at_bound(lp))
			return 0;
		int64_t t = thr_ix(lp, host, e->pid, e->tid ? e->tid : e->pid);

		if (t < 0 ||
		    lt_grow((void **)&lp->apis, &lp->cap_apis, lp->n_apis + 1, sizeof(*lp->apis), 1024))
			return -1;
		lp->apis[lp->n_apis++] = (struct lp_api){ ts, ts + e->u.gpu_api.dur,
							  e->u.gpu_api.correlation_id, (uint32_t)t,
							  name_ix(lp, e->u.gpu_api.name) };
		return 0;
	case EV_GPU_KERNEL:
	case EV_GPU_MEMCPY:
	case EV_GPU_MEMSET:
		return (lp = lp_of(c)) ? note_gpu(lp, c, host, ts, e) : -1;
	case EV_MARKER:
		if (e->u.marker.kind == EVLOG_MARK_CUPTI_OFF)
			kind = LP_OFF;
		else if (e->u.marker.kind != EVLOG_MARK_CUPTI_ON)
			return 0;
		else if (!(kind = on_kind(e->u.marker.value)))
			return 1; /* work of a later version's: the whole switch stands */
		if (!(lp = lp_of(c)) ||
		    lt_grow((void **)&lp->ons, &lp->cap_ons, lp->n_ons + 1, sizeof(*lp->ons), 16))
			return -1;
		lp->ons[lp->n_ons++] = (struct lp_on){ ts, ts + e->u.marker.dur, host, e->pid,
						       (uint8_t)(kind == LP_ALL ? 0 : kind) };
		return 1;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ pairing */

static int cmp_call_thread(const void *a, const void *b, void *arg);

/* The calls' indexes, by thread then time (NULL: out of memory): sorted
 * once, read by mark_nested, check_against_cupti and order_check (pairing
 * changes the calls' fields, never their order). */
static uint32_t *calls_by_thread(const struct cv_lp *lp)
{
	uint32_t *by = malloc((lp->n_calls + 1) * sizeof(*by));

	if (!by)
		return NULL;
	for (size_t i = 0; i < lp->n_calls; i++)
		by[i] = (uint32_t)i;
	qsort_r(by, lp->n_calls, sizeof(*by), cmp_call_thread, (void *)lp);
	return by;
}

static int same_thread(const struct lp_call *p, const struct lp_call *k)
{
	return p && p->thr == k->thr;
}

/* A noted call inside another one on its thread is that call's own (the
 * runtime's driver call when both layers are probed): the outer one stands
 * for both. A driver launch inside a probed library call (cuBLAS's) stays. */
static void mark_nested(struct cv_lp *lp, const uint32_t *by)
{
	uint64_t outer_end = 0;

	for (size_t i = 0; i < lp->n_calls; i++) {
		struct lp_call *k = &lp->calls[by[i]];
		const struct lp_call *p = i ? &lp->calls[by[i - 1]] : NULL;
		int same = same_thread(p, k);

		if (same && k->ts < outer_end) {
			k->nested = 1;
			continue;
		}
		outer_end = k->end;
	}
}

/* When CUPTI recorded the work of a call of this kind in its process: t0
 * (calls that ended before: not recorded), t1 (calls that entered before:
 * maybe). The switch of the call's kind of work (a graph's: kernels) where
 * the log has it, else the whole switch. No marker: from the process's
 * first GPU record, every call before it uncertain. */
static void window_of(const struct cv_lp *lp, uint32_t host, uint32_t pid, uint8_t kind,
		      uint64_t first_gpu, uint64_t *t0, uint64_t *t1)
{
	int own = 0;

	if (kind == LP_GRAPH)
		kind = LP_KERNEL;
	*t0 = 0;
	*t1 = first_gpu;
	for (size_t i = 0; i < lp->n_ons; i++) {
		const struct lp_on *o = &lp->ons[i];

		if (o->host != host || o->pid != pid || (o->kind && o->kind != kind) ||
		    (own && !o->kind))
			continue;
		own = o->kind != 0;
		*t0 = o->t0;
		*t1 = o->t1;
	}
}

/* When recording stopped in that process (the end of its switch-off), or never. */
static uint64_t off_of(const struct cv_lp *lp, uint32_t host, uint32_t pid)
{
	uint64_t t = UINT64_MAX;

	for (size_t i = 0; i < lp->n_ons; i++)
		if (lp->ons[i].host == host && lp->ons[i].pid == pid && lp->ons[i].kind == LP_OFF)
			t = lp->ons[i].t1;
	return t;
}

/* Mark each call in or out of its process's recording window; uncertain
 * ones (made while recording was being switched on) in `maybe`. A call's
 * return code is not looked at: without a driver every call fails (the
 * stand-in tests), and a failed launch in a running job is a sticky error
 * that ends it. */
static int mark_windows(struct cv_lp *lp, uint8_t **maybe)
{
	struct cv_map first = { 0 };
	int rc = -1;

	if (!(*maybe = calloc(lp->n_calls + 1, 1)))
		return -1;
	for (size_t j = 0; j < lp->n_gpus; j++) {
		int is_new;
		const struct lp_strm *gs = STRM(lp, &lp->gpus[j]);
		uint64_t *v = cv_map_put(&first, gs->host, gs->pid, &is_new);

		if (!v)
			goto out;
		if (is_new || lp->gpus[j].start < *v)
			*v = lp->gpus[j].start;
	}
	for (size_t i = 0; i < lp->n_calls; i++) {
		struct lp_call *k = &lp->calls[i];
		const struct lp_thr *kt = THR(lp, k);
		const uint64_t *f = cv_map_get(&first, kt->host, kt->pid);
		uint64_t t0, t1;

		if (!f)
			continue; /* no GPU record in that process: nothing to pair */
		window_of(lp, kt->host, kt->pid, k->kind, *f, &t0, &t1);
		k->late = k->ts >= off_of(lp, kt->host, kt->pid);
		k->in_window = k->end >= t0 && !k->late;
		(*maybe)[i] = k->ts < t1;
	}
	rc = 0;
out:
	cv_map_free(&first);
	return rc;
}

/* CUPTI numbers calls as they are made, so along a thread a graph launch's
 * id lies between the ids of the paired work of the calls around it: lo
 * and hi per call (0: none known), set once the other stages are paired.
 * They keep a graph's replay from a call made after (or before) the one
 * that launched it: replays launched before recording began can still be
 * recorded (below, pair_early_graphs). */
struct lp_bounds {
	uint64_t *lo, *hi;
};

static int graph_bounds(const struct cv_lp *lp, const uint32_t *by, struct lp_bounds *b)
{
	uint64_t last = 0;

	b->lo = calloc(lp->n_calls + 1, sizeof(*b->lo));
	b->hi = calloc(lp->n_calls + 1, sizeof(*b->hi));
	if (!b->lo || !b->hi)
		return -1;
	for (size_t n = 0; n < 2 * lp->n_calls; n++) {
		int back = n >= lp->n_calls; /* a pass forward (lo), then one back (hi) */
		size_t i = back ? 2 * lp->n_calls - 1 - n : n;
		const struct lp_call *k = &lp->calls[by[i]];
		size_t prev = back ? i + 1 : i - 1;

		if (n == lp->n_calls || (n && !same_thread(&lp->calls[by[prev]], k)))
			last = 0;
		if (k->stage == LP_GRAPHS)
			(back ? b->hi : b->lo)[by[i]] = last;
		else if (k->gpu >= 0 && lp->gpus[k->gpu].corr)
			last = lp->gpus[k->gpu].corr;
	}
	return 0;
}

/* The call's id is known below corr: its work came before (unrecorded). */
static int bounds_older(const struct lp_bounds *b, uint32_t call, uint64_t corr)
{
	return b && b->hi[call] && corr && b->hi[call] < corr;
}

/* The call's id is known above corr: the work is an earlier call's. */
static int bounds_newer(const struct lp_bounds *b, uint32_t call, uint64_t corr)
{
	return b && b->lo[call] && corr && b->lo[call] > corr;
}

/* First in, first out per key: each GPU record (time order) takes the
 * oldest waiting call of its key that entered before it started. An
 * uncertain call (made while recording was being switched on) is passed
 * over when the next call of the key also came before the work: it queued
 * nothing that was recorded. */
static void fifo(struct cv_lp *lp, const struct lp_ent *ce, size_t nc, const struct lp_ent *ge,
		 size_t ng, const uint8_t *maybe, const struct lp_bounds *b)
{
	size_t ci = 0;

	for (size_t gi = 0; gi < ng; gi++) {
		struct lp_gpu *g = &lp->gpus[ge[gi].i];

		while (ci < nc && ce[ci].key < ge[gi].key)
			ci++;
		while (ci < nc && ce[ci].key == ge[gi].key &&
		       (lp->calls[ce[ci].i].gpu >= 0 || bounds_older(b, ce[ci].i, g->corr)))
			ci++;
		while (ci + 1 < nc && ce[ci].key == ge[gi].key && maybe[ce[ci].i] &&
		       ce[ci + 1].key == ce[ci].key && ce[ci + 1].t <= g->start + LP_START_SLACK_NS)
			ci++;
		if (ci < nc && ce[ci].key == ge[gi].key && ce[ci].t <= g->start + LP_START_SLACK_NS &&
		    !bounds_newer(b, ce[ci].i, g->corr)) {
			g->call = (int32_t)ce[ci].i;
			lp->calls[ce[ci].i].gpu = (int32_t)ge[gi].i;
			ci++;
		}
	}
}

/* Room for an entry per call and per GPU record; -1 when out of memory. */
static int entries_new(const struct cv_lp *lp, struct lp_ent **ce, struct lp_ent **ge)
{
	*ce = malloc((lp->n_calls + 1) * sizeof(**ce));
	*ge = malloc((lp->n_gpus + 1) * sizeof(**ge));
	if (*ce && *ge)
		return 0;
	free(*ce);
	free(*ge);
	return -1;
}

/* Sort a round's entries, pair them (fifo), free them. */
static int pair_entries(struct cv_lp *lp, struct lp_ent *ce, size_t nc, struct lp_ent *ge, size_t ng,
			const uint8_t *maybe, const struct lp_bounds *b)
{
	qsort(ce, nc, sizeof(*ce), cmp_ent);
	qsort(ge, ng, sizeof(*ge), cmp_ent);
	fifo(lp, ce, nc, ge, ng, maybe, b);
	free(ce);
	free(ge);
	return 0;
}

static uint64_t gpu_sig(const struct lp_gpu *g, int stage)
{
	return stage == LP_DIMS ? g->sig_dims : stage == LP_NAME ? g->sig_name
	     : stage == LP_GRAPHS ? 0 : g->sig;
}

/* Processes with kernels, copies or sets CUPTI gave no correlation id
 * ((host, pid) -> 1, graph nodes aside: theirs is the launch's). */
static int mark_id_less(const struct cv_lp *lp, struct cv_map *id_less)
{
	for (size_t j = 0; j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];

		if (!g->graph && !g->corr && !cv_map_put(id_less, STRM(lp, g)->host, STRM(lp, g)->pid, NULL))
			return -1;
	}
	return 0;
}

/* The order in which work takes its call in the rounds without streams
 * (those that teach the stream map). By start, a stream's queue reorders
 * the work of one signature across streams: the calls of a stream running
 * behind wait long, and, the oldest waiting, are taken by other streams'
 * work, so those pairs fall on other threads' calls, and two threads
 * making the same calls are mapped to each other's streams. CUPTI numbers
 * calls as they are made: where every record of the process carries its
 * id, the ids' order is the calls' order, which no queue changes. */
static uint64_t first_round_order(const struct cv_lp *lp, const struct lp_gpu *g,
				  const struct cv_map *id_less)
{
	const struct lp_strm *gs = STRM(lp, g);

	return g->corr && !cv_map_get(id_less, gs->host, gs->pid) ? g->corr : g->start;
}

/* Pair the calls of one stage. With smap, a call's stream handle (per
 * thread: a default stream is per thread or legacy) is replaced by the
 * CUPTI stream it was seen to feed in the first round, and work is keyed
 * by its stream too (and taken in start order, a stream's own). The first
 * stage is paired anew; later ones take the work left over. */
static int run_round(struct cv_lp *lp, const uint8_t *maybe, const struct cv_map *smap,
		     const struct cv_map *id_less, int stage)
{
	struct lp_ent *ce, *ge;
	size_t nc = 0, ng = 0;

	if (entries_new(lp, &ce, &ge))
		return -1;
	for (size_t i = 0; i < lp->n_calls; i++) {
		struct lp_call *k = &lp->calls[i];
		const struct lp_thr *kt = THR(lp, k);
		uint64_t key = mix(mix(kt->host, kt->pid), k->sig);

		if (k->stage != stage)
			continue; /* another round's */
		k->gpu = -1;
		if (!k->in_window || k->nested)
			continue;
		if (smap) {
			const uint64_t *s = cv_map_get(smap, k->thr, k->stream);

			if (!s)
				continue;
			key = mix(key, *s);
		}
		ce[nc++] = (struct lp_ent){ key, k->ts, (uint32_t)i };
	}
	for (size_t j = 0; j < lp->n_gpus; j++) {
		struct lp_gpu *g = &lp->gpus[j];
		const struct lp_strm *gs = STRM(lp, g);
		uint64_t key = mix(mix(gs->host, gs->pid), gpu_sig(g, stage));

		if (g->graph || (stage != LP_FULL && g->call >= 0))
			continue; /* a graph's, or paired in an earlier stage */
		g->call = -1;
		if (stage != LP_FULL && g->kind != LP_KERNEL)
			continue;
		if (smap)
			key = mix(key, stream_key(gs->host, gs->pid, gs->device, gs->stream));
		ge[ng++] = (struct lp_ent){ key, smap ? g->start : first_round_order(lp, g, id_less),
					    (uint32_t)j };
	}
	return pair_entries(lp, ce, nc, ge, ng, maybe, NULL);
}

/* One round of graph launches and replays (a replay is one record:
 * fold_replay), per CUPTI stream where the launch's stream handle is known
 * to feed one (smap), else per process; what an earlier round paired stays. */
static int graph_round(struct cv_lp *lp, const uint8_t *maybe, const struct cv_map *smap,
		       const struct lp_bounds *b)
{
	struct lp_ent *ce, *ge;
	size_t nc = 0, ng = 0;

	if (entries_new(lp, &ce, &ge))
		return -1;
	for (size_t i = 0; i < lp->n_calls; i++) {
		const struct lp_call *k = &lp->calls[i];
		const struct lp_thr *kt = THR(lp, k);
		uint64_t key = mix(mix(kt->host, kt->pid), k->sig);
		const uint64_t *s = smap ? cv_map_get(smap, k->thr, k->stream) : NULL;

		if (k->stage != LP_GRAPHS || !k->in_window || k->nested || k->gpu >= 0 || (smap && !s))
			continue;
		ce[nc++] = (struct lp_ent){ s ? mix(key, *s) : key, k->ts, (uint32_t)i };
	}
	for (size_t j = 0; j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];
		const struct lp_strm *gs = STRM(lp, g);
		uint64_t key = mix(mix(gs->host, gs->pid), 0);

		if (!g->graph || !g->corr || g->kind != LP_KERNEL || g->call >= 0)
			continue;
		if (smap)
			key = mix(key, stream_key(gs->host, gs->pid, gs->device, gs->stream));
		ge[ng++] = (struct lp_ent){ key, g->start, (uint32_t)j };
	}
	return pair_entries(lp, ce, nc, ge, ng, maybe, b);
}

/* Graph launches with their replays: per stream first (replays on streams
 * of their own complete in another order than launched: two threads
 * replaying graphs, paired by time alone, swapped 7 of 400 replays in the
 * stand-in test), then the rest per process, then replays launched before
 * the window (pair_early_graphs). */
static int pair_graphs(struct cv_lp *lp, const uint8_t *maybe, const struct cv_map *smap,
		       const struct lp_bounds *b)
{
	for (size_t i = 0; i < lp->n_calls; i++)
		if (lp->calls[i].stage == LP_GRAPHS)
			lp->calls[i].gpu = -1;
	for (size_t j = 0; j < lp->n_gpus; j++)
		if (lp->gpus[j].graph)
			lp->gpus[j].call = -1;
	return graph_round(lp, maybe, smap, b) || graph_round(lp, maybe, NULL, b);
}

/* The first kernel of each graph replay left unpaired that started before
 * its process's first paired replay (key: as run_round's for graphs). */
static struct lp_ent *early_replays(const struct cv_lp *lp, size_t *n)
{
	struct cv_map first = { 0 }; /* key -> first paired start */
	struct lp_ent *ge = malloc((lp->n_gpus + 1) * sizeof(*ge));
	uint64_t *v;

	*n = 0;
	for (size_t j = 0; ge && j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];
		uint64_t key = mix(mix(STRM(lp, g)->host, STRM(lp, g)->pid), 0);

		if (!g->graph || !g->corr || g->kind != LP_KERNEL || g->call < 0)
			continue;
		if (!(v = cv_map_put(&first, key, 0, NULL)))
			goto fail;
		if (!*v || g->start < *v)
			*v = g->start;
	}
	for (size_t j = 0; ge && j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];
		uint64_t key = mix(mix(STRM(lp, g)->host, STRM(lp, g)->pid), 0);
		const uint64_t *f = cv_map_get(&first, key, 0);

		/* a replay is one record (fold_replay) */
		if (!g->graph || !g->corr || g->kind != LP_KERNEL || g->call >= 0 || (f && g->start >= *f))
			continue;
		ge[(*n)++] = (struct lp_ent){ key, g->start, (uint32_t)j };
	}
	cv_map_free(&first);
	return ge;
fail:
	cv_map_free(&first);
	free(ge);
	return NULL;
}

/* Replays recorded although launched before recording began: with CUPTI
 * kept attached from an earlier window, a replayed graph keeps its
 * instrumentation, and its nodes that run once recording is on are
 * recorded (the replay in flight at the switch, in part, and those queued
 * behind it), under their launch's correlation id. Those are the last
 * graph launches before the window, matched from the last back, each
 * replay with a launch made before it started and within its bounds. */
static int pair_early_graphs(struct cv_lp *lp, const struct lp_bounds *b)
{
	size_t ng, nc = 0;
	struct lp_ent *ge = early_replays(lp, &ng);
	struct lp_ent *ce = ge && ng ? malloc((lp->n_calls + 1) * sizeof(*ce)) : NULL;

	if (!ge || !ng || !ce) {
		free(ge);
		return ge && !ng ? 0 : -1;
	}
	for (size_t i = 0; i < lp->n_calls; i++) {
		const struct lp_call *k = &lp->calls[i];
		const struct lp_thr *kt = THR(lp, k);

		if (k->stage == LP_GRAPHS && !k->in_window && !k->late && !k->nested && k->gpu < 0)
			ce[nc++] = (struct lp_ent){ mix(mix(kt->host, kt->pid), k->sig), k->ts, (uint32_t)i };
	}
	qsort(ce, nc, sizeof(*ce), cmp_ent);
	qsort(ge, ng, sizeof(*ge), cmp_ent);
	for (size_t gi = ng, ci = nc; gi && ci;) {
		struct lp_gpu *g = &lp->gpus[ge[gi - 1].i];
		const struct lp_ent *c = &ce[ci - 1];

		if (c->key > ge[gi - 1].key || bounds_newer(b, c->i, g->corr) ||
		    c->t > g->start + LP_START_SLACK_NS)
			ci--; /* another key's, or made after the replay's launch */
		else if (c->key < ge[gi - 1].key || bounds_older(b, c->i, g->corr))
			gi--; /* no launch of it left */
		else {
			g->call = (int32_t)c->i;
			lp->calls[c->i].gpu = (int32_t)ge[gi - 1].i;
			ci--, gi--;
		}
	}
	free(ce);
	free(ge);
	return 0;
}

/* (thread, stream handle) -> CUPTI stream key, by majority of round one's pairs. */
static int learn_streams(const struct cv_lp *lp, struct cv_map *smap)
{
	struct cv_map votes = { 0 };  /* (thread key ^ handle, stream key) -> count */
	struct cv_map best = { 0 };   /* (thread key, handle) -> count of the best */
	int rc = -1;

	for (size_t i = 0; i < lp->n_calls; i++) {
		const struct lp_call *k = &lp->calls[i];

		if (k->gpu < 0)
			continue;
		const struct lp_gpu *g = &lp->gpus[k->gpu];
		uint64_t tk = k->thr;
		const struct lp_strm *gs = STRM(lp, g);
		uint64_t sk = stream_key(gs->host, gs->pid, gs->device, gs->stream);
		uint64_t *v = cv_map_put(&votes, mix(tk, k->stream), sk, NULL);
		uint64_t *b = v ? cv_map_put(&best, tk, k->stream, NULL) : NULL;
		uint64_t *s = b ? cv_map_put(smap, tk, k->stream, NULL) : NULL;

		if (!s)
			goto out;
		if (++*v > *b) {
			*b = *v;
			*s = sk;
		}
	}
	rc = 0;
out:
	cv_map_free(&votes);
	cv_map_free(&best);
	return rc;
}

/* A graph's memset and memcpy nodes carry no graph id in our records, only
 * the graph launch's correlation id, which its kernels (with their graph
 * id) share: they are the graph's work, kept out of the pairing by
 * signature (a stream memset of the same size would take their place) and
 * linked to the launch by spread_graphs. */
static int mark_graph_nodes(struct cv_lp *lp)
{
	struct cv_map graph = { 0 };
	uint64_t *v;

	for (size_t j = 0; j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];
		if (!g->graph || !g->corr)
			continue;
		if (!(v = cv_map_put(&graph, mix(STRM(lp, g)->host, STRM(lp, g)->pid), g->corr, NULL))) {
			cv_map_free(&graph);
			return -1;
		}
		*v = g->graph;
	}
	for (size_t j = 0; j < lp->n_gpus && graph.n; j++) {
		struct lp_gpu *g = &lp->gpus[j];
		const uint64_t *k = !g->graph && g->corr && g->kind != LP_KERNEL
			? cv_map_get(&graph, mix(STRM(lp, g)->host, STRM(lp, g)->pid), g->corr) : NULL;
		if (k)
			g->graph = (uint32_t)*k;
	}
	cv_map_free(&graph);
	return 0;
}

/* A graph launch's other kernels and nodes follow its first kernel. */
static void spread_graphs(struct cv_lp *lp)
{
	struct cv_map first = { 0 };

	for (size_t j = 0; j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];
		uint64_t *v;

		if (g->graph && g->corr && g->call >= 0 &&
		    (v = cv_map_put(&first, mix(STRM(lp, g)->host, STRM(lp, g)->pid), g->corr, NULL)))
			*v = (uint64_t)g->call + 1;
	}
	for (size_t j = 0; j < lp->n_gpus; j++) {
		struct lp_gpu *g = &lp->gpus[j];
		const uint64_t *v = g->graph && g->corr && g->call < 0
			? cv_map_get(&first, mix(STRM(lp, g)->host, STRM(lp, g)->pid), g->corr) : NULL;

		if (v)
			g->call = (int32_t)(*v - 1);
	}
	cv_map_free(&first);
}

/* ------------------------------------------------------------- the results */

/* Threads in (host, pid, tid) order: -1, 0, 1. */
static int cmp_thr(const struct lp_thr *x, const struct lp_thr *y)
{
	if (x->host != y->host)
		return x->host < y->host ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_call_thread(const void *a, const void *b, void *arg)
{
	const struct cv_lp *lp = arg;
	const struct lp_call *x = &lp->calls[*(const uint32_t *)a], *y = &lp->calls[*(const uint32_t *)b];
	int t = x->thr == y->thr ? 0 : cmp_thr(THR(lp, x), THR(lp, y));

	if (t)
		return t;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The probed call of CUPTI's API record a: on a's thread, overlapping it
 * (CUPTI's record lies inside the call; outermost calls of a thread never
 * overlap each other). */
static int32_t call_holding(const struct cv_lp *lp, const uint32_t *by_thread, const struct lp_api *a)
{
	size_t lo = 0, hi = lp->n_calls;

	while (lo < hi) { /* first call of a later thread, or of a's starting after a ends */
		size_t mid = (lo + hi) / 2;
		const struct lp_call *k = &lp->calls[by_thread[mid]];
		int t = k->thr == a->thr ? 0 : cmp_thr(THR(lp, k), THR(lp, a));
		int before = t ? t < 0 : k->ts <= a->end;

		if (before)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* a call nested in another stands for nothing: its outer one */
	while (lo > 1 && lp->calls[by_thread[lo - 1]].nested)
		lo--;
	if (!lo)
		return -1;
	const struct lp_call *k = &lp->calls[by_thread[lo - 1]];

	if (k->nested || k->thr != a->thr || k->end < a->ts)
		return -1;
	return (int32_t)by_thread[lo - 1];
}

/* n records of one name missed for why. */
static int tally_miss(struct cv_lp *lp, enum lp_miss why, uint32_t name, uint64_t n)
{
	uint64_t *v = cv_map_put(&lp->misses, why, name, NULL);

	if (!v)
		return -1;
	*v += n;
	return 0;
}

/* Work CUPTI linked itself: compare with the uprobe pairing. Where the two
 * differ, tally why by name: CUPTI's call for work whose launch no probe
 * saw, the work's for a probed launch left unpaired or paired elsewhere. */
static int check_against_cupti(struct cv_core *c, struct cv_lp *lp, const uint32_t *by_thread)
{
	struct cv_map api_of = { 0 };
	int rc = -1;

	for (size_t i = 0; i < lp->n_apis; i++) {
		const struct lp_api *a = &lp->apis[i];
		uint64_t *v = cv_map_put(&api_of, mix(THR(lp, a)->host, THR(lp, a)->pid), a->corr, NULL);

		if (!v)
			goto out;
		/* the outermost call of an id: the runtime's, around its driver call */
		if (!*v || a->end - a->ts > lp->apis[*v - 1].end - lp->apis[*v - 1].ts)
			*v = i + 1;
	}
	for (size_t j = 0; j < lp->n_gpus; j++) {
		struct lp_gpu *g = &lp->gpus[j];
		const struct lp_strm *gs = STRM(lp, g);
		uint8_t f = cv_corr_flags(c, gs->host, gs->pid, g->corr);

		if (!(f & (CV_CORR_API | CV_CORR_LIB)))
			continue;
		g->cupti_linked = 1;
		const uint64_t *v = cv_map_get(&api_of, mix(gs->host, gs->pid), g->corr);
		const struct lp_api *a = v ? &lp->apis[*v - 1] : NULL;
		int32_t truth = a ? call_holding(lp, by_thread, a) : -1;
		uint64_t n = 1 + (uint64_t)g->folded;

		if (truth < 0 || !lp->calls[truth].in_window) {
			/* no probed call to compare with */
			if (a && truth < 0 && tally_miss(lp, LP_MISS_UNPROBED, a->name, n))
				goto out;
			continue;
		}
		lp->st.checked += n;
		lp->st.agree += g->call == truth ? n : 0;
		if (g->call != truth &&
		    tally_miss(lp, g->call < 0 ? LP_MISS_UNPAIRED : LP_MISS_OTHER_CALL, g->name, n))
			goto out;
	}
	rc = 0;
out:
	cv_map_free(&api_of);
	return rc;
}

/* The pair at time t among a track's n entries from a (the last of equal
 * times), NULL if none. *cur: where the track's last lookup ended; times
 * come in order, else the entries are searched. */
static const struct lp_ent *at_find(const struct lp_ent *a, uint32_t n, uint32_t *cur, uint64_t t)
{
	uint32_t i = *cur;

	if (i && a[i - 1].t >= t) { /* out of order: search */
		uint32_t lo = 0, hi = n;

		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (a[mid].t < t)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo;
	}
	while (i < n && a[i].t < t)
		i++;
	*cur = i;
	if (i >= n || a[i].t != t)
		return NULL;
	while (i + 1 < n && a[i + 1].t == t)
		i++;
	return &a[i];
}

/* Give each pair its correlation id and remember where pass 2 finds them. */
static int assign(struct cv_core *c, struct cv_lp *lp)
{
	uint64_t next = CV_LP_CORR_BASE;

	for (size_t j = 0; j < lp->n_gpus; j++) {
		struct lp_gpu *g = &lp->gpus[j];

		if (g->call < 0 || g->cupti_linked)
			continue;
		struct lp_call *k = &lp->calls[g->call];
		const struct lp_strm *gs = STRM(lp, g);

		/* the id of the call's first work (a graph's kernels share
		 * CUPTI's), a made-up one when CUPTI gave none */
		if (!k->corr)
			k->corr = g->corr ? g->corr : next++;
		if (lt_grow((void **)&lp->gpu_at, &lp->cap_gpu_at, lp->n_gpu_at + 1, sizeof(*lp->gpu_at), 1024) ||
		    lt_grow((void **)&lp->call_at, &lp->cap_call_at, lp->n_call_at + 1, sizeof(*lp->call_at), 1024))
			return -1;
		lp->gpu_at[lp->n_gpu_at++] = (struct lp_ent){ g->strm, g->start, (uint32_t)j };
		lp->call_at[lp->n_call_at++] = (struct lp_ent){ k->thr, k->ts, (uint32_t)g->call };
		if (cv_corr_mark(c, gs->host, gs->pid, k->corr, CV_CORR_LIB | CV_CORR_GPU))
			return -1;
	}
	if (!lp->n_call_at) /* every pair CUPTI's own */
		return 0;
	qsort(lp->call_at, lp->n_call_at, sizeof(*lp->call_at), cmp_ent);
	qsort(lp->gpu_at, lp->n_gpu_at, sizeof(*lp->gpu_at), cmp_ent);
	for (size_t i = lp->n_call_at; i--;) { /* each track's first entry and count */
		lp->thrs[lp->call_at[i].key].at = (uint32_t)i;
		lp->thrs[lp->call_at[i].key].n_at++;
	}
	for (size_t i = lp->n_gpu_at; i--;) {
		lp->strms[lp->gpu_at[i].key].at = (uint32_t)i;
		lp->strms[lp->gpu_at[i].key].n_at++;
	}
	return 0;
}

static int count(struct cv_lp *lp)
{
	for (size_t j = 0; j < lp->n_gpus; j++) {
		const struct lp_gpu *g = &lp->gpus[j];
		uint64_t n = 1 + (uint64_t)g->folded;

		lp->st.work += n;
		if (g->cupti_linked)
			lp->st.cupti_linked += n;
		else if (g->call >= 0)
			lp->st.linked += n;
		else if (g->graph && !g->corr)
			lp->st.graph_nocorr += n;
		else if (lp->st.no_call += n, tally_miss(lp, LP_MISS_WORK, g->name, n))
			return -1;
	}
	for (size_t i = 0; i < lp->n_calls; i++) {
		const struct lp_call *k = &lp->calls[i];

		if (k->late && !k->nested)
			lp->st.calls_late++;
		if (!k->in_window || k->nested)
			continue;
		if (k->gpu < 0)
			lp->st.calls_unpaired++;
	}
	return 0;
}

/* Without CUPTI's links to compare with, its correlation ids still tell
 * order: it numbers calls as they are made, so along one thread the ids of
 * the work its calls were given must rise. A fall is a pair shifted (work
 * lost, a call whose work went unrecorded). Counted, for the closing line. */
static void order_check(struct cv_lp *lp, const uint32_t *by)
{
	uint64_t last = 0;

	for (size_t i = 0; i < lp->n_calls; i++) {
		const struct lp_call *k = &lp->calls[by[i]];
		const struct lp_call *p = i ? &lp->calls[by[i - 1]] : NULL;

		if (!same_thread(p, k))
			last = 0;
		if (!k->corr || k->corr >= CV_LP_CORR_BASE)
			continue; /* unpaired, or an id of ours */
		lp->st.order_checked++;
		if (k->corr < last)
			lp->st.order_bad++;
		else
			last = k->corr;
	}
}

int cv_lp_solve(struct cv_core *c)
{
	struct cv_lp *lp = c->lp;
	struct cv_map smap = { 0 }, id_less = { 0 };
	uint8_t *maybe = NULL;
	uint32_t *by = NULL;
	struct lp_bounds bounds = { 0 };
	int rc = -1;

	if (!lp || !lp->n_calls || !lp->n_gpus)
		return 0;
	if (!(by = calls_by_thread(lp)))
		goto out;
	mark_nested(lp, by);
	if (mark_graph_nodes(lp))
		goto out;
	/* a first pass without streams teaches which CUPTI stream each
	 * thread's stream handle feeds (a thread may launch through the
	 * driver alone: its pairs by dims teach it then) */
	if (mark_windows(lp, &maybe) || mark_id_less(lp, &id_less) ||
	    run_round(lp, maybe, NULL, &id_less, LP_FULL) || run_round(lp, maybe, NULL, &id_less, LP_DIMS) ||
	    run_round(lp, maybe, NULL, &id_less, LP_NAME) || learn_streams(lp, &smap) ||
	    run_round(lp, maybe, &smap, NULL, LP_FULL) || run_round(lp, maybe, &smap, NULL, LP_DIMS) ||
	    run_round(lp, maybe, &smap, NULL, LP_NAME) ||
	    graph_bounds(lp, by, &bounds) || pair_graphs(lp, maybe, &smap, &bounds) ||
	    pair_early_graphs(lp, &bounds))
		goto out;
	spread_graphs(lp);
	if (check_against_cupti(c, lp, by) || assign(c, lp))
		goto out;
	order_check(lp, by);
	if (count(lp))
		goto out;
	lp->solved = 1;
	rc = 0;
out:
	if (rc)
		snprintf(c->err, sizeof(c->err), "out of memory pairing launches");
	free(maybe);
	free(by);
	free(bounds.lo);
	free(bounds.hi);
	cv_map_free(&smap);
	cv_map_free(&id_less);
	return rc;
}

/* ------------------------------------------------------------------ pass 2 */

/* A launch whose kernel has no name (a driver launch names a handle) takes
 * its paired kernel's, demangled, as a runtime launch names its own: copied
 * into buf (size n), cut as the collector cuts names. */
static void name_launch(struct cv_core *c, const struct cv_lp *lp, const struct lp_call *k,
			struct evlog_event *e, char *buf, size_t n)
{
	if (k->kind != LP_KERNEL || k->gpu < 0 || e->u.lib_call.kernel.len || !n)
		return;
	const char *mangled = cv_strtab_get(&lp->names, lp->gpus[k->gpu].name);
	const char *name = cv_demangle(c, mangled, strlen(mangled));
	size_t len = strlen(name ? name : mangled);

	if (!*mangled)
		return;
	len = len < EVLOG_CALL_KERNEL_MAX ? len : EVLOG_CALL_KERNEL_MAX;
	len = len < n - 1 ? len : n - 1;
	memcpy(buf, name ? name : mangled, len);
	buf[len] = 0;
	e->u.lib_call.kernel = (struct evlog_str){ .ptr = buf, .len = (uint32_t)len };
}

void cv_lp_apply(struct cv_core *c, uint32_t host, uint64_t start, struct evlog_event *e,
		 char *buf, size_t n)
{
	struct cv_lp *lp = c->lp;
	const struct lp_ent *at;
	const uint64_t *v;

	if (!lp || !lp->solved)
		return;
	switch (e->type) {
	case EV_LIB_CALL:
		if (e->u.lib_call.correlation_id ||
		    !(v = cv_map_get(&lp->thr_ix, (uint64_t)host << 32 | e->pid, e->tid ? e->tid : e->pid)))
			return;
		struct lp_thr *th = &lp->thrs[*v - 1];

		if (th->n_at && (at = at_find(lp->call_at + th->at, th->n_at, &th->cur, start))) {
			e->u.lib_call.correlation_id = lp->calls[at->i].corr;
			name_launch(c, lp, &lp->calls[at->i], e, buf, n);
		}
		return;
	case EV_GPU_KERNEL:
	case EV_GPU_MEMCPY:
	case EV_GPU_MEMSET:
		if (!(v = cv_map_get(&lp->strm_ix, (uint64_t)host << 32 | e->pid,
				     (uint64_t)evlog_device(e) << 32 | evlog_stream(e))))
			return;
		struct lp_strm *sm = &lp->strms[*v - 1];

		if (sm->n_at && (at = at_find(lp->gpu_at + sm->at, sm->n_at, &sm->cur, start)))
			evlog_set_corr(e, lp->calls[lp->gpus[at->i].call].corr); /* its call's */
		return;
	default:
		return;
	}
}

const struct cv_lp_stats *cv_lp_stats(const struct cv_core *c)
{
	static const struct cv_lp_stats none;

	return c->lp ? &c->lp->st : &none;
}

static void print_misses(struct cv_core *c, const struct cv_lp *lp, FILE *f);

void cv_lp_print(struct cv_core *c, FILE *f)
{
	const struct cv_lp_stats *s = cv_lp_stats(c);

	if (!s->calls || !s->work)
		return;
	fprintf(f, "launch links from uprobes: %llu of %llu kernels/copies/sets linked",
		(unsigned long long)s->linked, (unsigned long long)(s->work - s->cupti_linked));
	if (s->cupti_linked)
		fprintf(f, " (%llu more had CUPTI's)", (unsigned long long)s->cupti_linked);
	if (s->no_call)
		fprintf(f, "; %llu without a probed call of their signature before them "
			"(a layer or library not probed, or before the probes)",
			(unsigned long long)s->no_call);
	if (s->graph_nocorr)
		fprintf(f, "; %llu graph kernels without a correlation id",
			(unsigned long long)s->graph_nocorr);
	if (s->unnamed)
		fprintf(f, "; %llu kernel launches without a kernel name (driver launches, stubs "
			"without a symbol), paired by grid, block and shared memory",
			(unsigned long long)s->unnamed);
	if (s->calls_unpaired)
		fprintf(f, "; %llu calls with no recorded work (made as recording stopped, or their "
			"work lost)",
			(unsigned long long)s->calls_unpaired);
	if (s->calls_late)
		fprintf(f, "; %llu calls after recording stopped", (unsigned long long)s->calls_late);
	if (s->capped)
		fprintf(f, "; %llu records past the pairing's bound", (unsigned long long)s->capped);
	if (c->st.lost[EVSRC_CUPTI])
		fprintf(f, "; CUPTI lost %llu records: later pairs of their signatures may be one off",
			(unsigned long long)c->st.lost[EVSRC_CUPTI]);
	if (s->order_checked)
		fprintf(f, "; %llu of %llu links out of their thread's call order by CUPTI's ids",
			(unsigned long long)s->order_bad, (unsigned long long)s->order_checked);
	if (s->checked)
		fprintf(f, "; checked against CUPTI's links: %llu of %llu agree (%.2f%%)",
			(unsigned long long)s->agree, (unsigned long long)s->checked,
			100.0 * (double)s->agree / (double)s->checked);
	fputc('\n', f);
	print_misses(c, c->lp, f);
}

static int cmp_miss(const void *a, const void *b)
{
	const struct cv_map_ent *x = *(const struct cv_map_ent *const *)a;
	const struct cv_map_ent *y = *(const struct cv_map_ent *const *)b;

	if (x->val != y->val)
		return x->val > y->val ? -1 : 1;
	return x->b < y->b ? -1 : x->b > y->b;
}

/* "launch links missed, WHY: NAME N, ..." for each reason, the names that
 * missed most first (at most LP_MISSES_SHOWN): what to probe, or what the
 * pairing gets wrong. */
#define LP_MISSES_SHOWN 8
static void print_misses(struct cv_core *c, const struct cv_lp *lp, FILE *f)
{
	static const char *const why[] = {
		[LP_MISS_UNPROBED] = "CUPTI's launching call, not probed",
		[LP_MISS_UNPAIRED] = "probed launch left unpaired, by work",
		[LP_MISS_OTHER_CALL] = "paired with another call than CUPTI's, by work",
		[LP_MISS_WORK] = "no probed call of their signature, by work",
	};
	const struct cv_map_ent **ents = malloc((lp->misses.n + 1) * sizeof(*ents));

	if (!ents)
		return;
	for (int w = LP_MISS_UNPROBED; w <= LP_MISS_WORK; w++) {
		size_t n = 0;

		for (size_t i = 0; i < lp->misses.n; i++)
			if (lp->misses.ents[i].a == (uint64_t)w)
				ents[n++] = &lp->misses.ents[i];
		if (!n)
			continue;
		qsort(ents, n, sizeof(*ents), cmp_miss);
		fprintf(f, "launch links missed (%s):", why[w]);
		for (size_t i = 0; i < n && i < LP_MISSES_SHOWN; i++) {
			const char *name = cv_strtab_get(&lp->names, (uint32_t)ents[i]->b);
			const char *d = cv_demangle(c, name, strlen(name));

			fprintf(f, "%s %.80s %llu", i ? "," : "", d ? d : name,
				(unsigned long long)ents[i]->val);
		}
		if (n > LP_MISSES_SHOWN)
			fprintf(f, ", %zu more names", n - LP_MISSES_SHOWN);
		fputc('\n', f);
	}
	free(ents);
}

void cv_lp_free(struct cv_core *c)
{
	struct cv_lp *lp = c->lp;

	if (!lp)
		return;
	free(lp->thrs);
	free(lp->strms);
	cv_map_free(&lp->thr_ix);
	cv_map_free(&lp->strm_ix);
	free(lp->calls);
	free(lp->gpus);
	free(lp->apis);
	free(lp->ons);
	free(lp->call_at);
	free(lp->gpu_at);
	cv_map_free(&lp->misses);
	cv_map_free(&lp->replay_ix);
	cv_strtab_free(&lp->names);
	free(lp);
	c->lp = NULL;
}
