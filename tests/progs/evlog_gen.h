/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deterministic event generators for the event log tests, crash test and
 * benchmark. Event i depends only on (seed, i), so a reader can regenerate
 * exactly what a writer wrote and compare field by field.
 *
 *   evgen_all():   every event type in turn, every field random (full value
 *                  ranges), odd strings (empty, 64 KiB, invalid UTF-8,
 *                  embedded NULs) mixed with repeated ones.
 *   evgen_mixed(): a realistic stream: syscalls, CPU samples from a pool of
 *                  repeated stacks, Python enter/exit, GPU kernels, library
 *                  calls, a few others; monotonic timestamps.
 */
#ifndef LLMT_TESTS_EVLOG_GEN_H
#define LLMT_TESTS_EVLOG_GEN_H

#include "eventlog/eventlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVGEN_BIG (64u << 10)
#define EVGEN_NSTR 4

struct evgen {
	uint64_t seed, rng;
	int allow_big;                    /* evgen_all may emit 64 KiB strings */
	char str[EVGEN_NSTR][EVGEN_BIG + 64];
	uint64_t ips[EVLOG_MAX_FRAMES];
	struct evlog_str frames[EVLOG_MAX_FRAMES];
	char fbuf[EVLOG_MAX_FRAMES][96];
	uint64_t ts;                      /* evgen_mixed clock */
};

static inline uint64_t evgen_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t evgen_next(struct evgen *g)
{
	g->rng += 0x9e3779b97f4a7c15ull;
	return evgen_mix(g->rng);
}

static inline uint64_t evgen_below(struct evgen *g, uint64_t n)
{
	return n ? evgen_next(g) % n : 0;
}

static inline struct evgen *evgen_new(uint64_t seed, int allow_big)
{
	struct evgen *g = calloc(1, sizeof(*g));
	if (g) {
		g->seed = seed;
		g->allow_big = allow_big;
		g->ts = 1000000000ull;
	}
	return g;
}

static const char *const evgen_words[] = {
	"train_step", "forward", "backward", "optimizer.step", "DataLoader.__next__",
	"/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "libcudart.so.12",
	"cudaLaunchKernel", "ncclAllReduce", "void gemm_kernel<float, 128>(float*, int)",
	"python3.11", "worker-0", "GPU-5d3f", "NVIDIA H100", "step", "", "main",
	"/home/user/train.py", "cublasSgemm_v2", "attention",
};
#define EVGEN_NWORDS (sizeof(evgen_words) / sizeof(evgen_words[0]))

/* A string for slot `slot`: mostly repeated words, sometimes odd bytes. */
static inline struct evlog_str evgen_str(struct evgen *g, int slot)
{
	char *b = g->str[slot];
	uint64_t k = evgen_below(g, 16);
	if (k < 9)
		return evlog_s(evgen_words[evgen_below(g, EVGEN_NWORDS)]);
	if (k == 9)
		return (struct evlog_str){ .ptr = "", .len = 0 };
	if (k == 10 || k == 11) { /* random bytes: invalid UTF-8, NULs */
		uint32_t n = 1 + (uint32_t)evgen_below(g, 60);
		for (uint32_t i = 0; i < n; i++)
			b[i] = (char)evgen_next(g);
		return (struct evlog_str){ .ptr = b, .len = n };
	}
	if (k == 12) { /* embedded NULs */
		memcpy(b, "a\0b\0\0c", 6);
		return (struct evlog_str){ .ptr = b, .len = 6 };
	}
	if (k == 13) { /* invalid UTF-8: lone continuation, overlong, surrogate */
		memcpy(b, "\x80\xc0\xaf\xed\xa0\x80\xff", 7);
		return (struct evlog_str){ .ptr = b, .len = 7 };
	}
	if (k == 14 && g->allow_big && evgen_below(g, 8) == 0) {
		for (uint32_t i = 0; i < EVGEN_BIG; i++)
			b[i] = (char)('a' + i % 26);
		b[100] = 0;
		return (struct evlog_str){ .ptr = b, .len = EVGEN_BIG };
	}
	int n = snprintf(b, 64, "name_%llu", (unsigned long long)evgen_below(g, 1000));
	return (struct evlog_str){ .ptr = b, .len = (uint32_t)n };
}

/* A value of random magnitude: small, medium, or any 64-bit pattern. */
static inline uint64_t evgen_val(struct evgen *g)
{
	switch (evgen_below(g, 4)) {
	case 0: return evgen_below(g, 128);
	case 1: return evgen_below(g, 1u << 20);
	case 2: return evgen_next(g) >> evgen_below(g, 64);
	default: return evgen_next(g);
	}
}

#define R32() ((uint32_t)evgen_val(g))
#define R8() ((uint8_t)evgen_val(g))
#define R64() evgen_val(g)

static inline void evgen_stack(struct evgen *g, struct evlog_stack *s, int pool)
{
	uint64_t id = pool ? evgen_below(g, (uint64_t)pool) : evgen_next(g);
	uint64_t save = g->rng;
	g->rng = evgen_mix(id ^ 0x5555); /* stack content depends only on id */
	s->n_kernel = (uint32_t)evgen_below(g, 8);
	s->n_user = (uint32_t)evgen_below(g, pool ? 30 : EVLOG_MAX_FRAMES - 8);
	for (uint32_t i = 0; i < s->n_kernel; i++)
		g->ips[i] = 0xffffffff81000000ull + evgen_below(g, 1u << 24);
	for (uint32_t i = 0; i < s->n_user; i++)
		g->ips[s->n_kernel + i] = (i % 3 ? 0x7f0000000000ull : 0x400000ull) +
					  evgen_below(g, 1u << 22);
	s->ips = g->ips;
	g->rng = save;
}

static inline void evgen_pystack(struct evgen *g, struct evlog_pystack *s, int odd)
{
	uint64_t id = evgen_below(g, 40);
	uint64_t save = g->rng;
	g->rng = evgen_mix(id ^ 0xaaaa);
	s->n = (uint32_t)evgen_below(g, odd ? 64 : 24);
	for (uint32_t i = 0; i < s->n; i++) {
		int n = snprintf(g->fbuf[i], sizeof(g->fbuf[i]), "%s (t.py:%u)",
				 evgen_words[evgen_below(g, EVGEN_NWORDS)],
				 (unsigned)evgen_below(g, 400));
		if (n >= (int)sizeof(g->fbuf[i]))
			n = (int)sizeof(g->fbuf[i]) - 1; /* truncated */
		g->frames[i] = (struct evlog_str){ .ptr = g->fbuf[i], .len = (uint32_t)n };
	}
	g->rng = save;
	if (odd && s->n && evgen_below(g, 4) == 0)
		g->frames[evgen_below(g, s->n)] = evgen_str(g, 3);
	s->frames = g->frames;
}

/* A type without a case of its own in evgen_fields: each field at random
 * by its kind (eventlog/evlog_schema.h), strings in slots 0, 1, 2, 0, ... */
#define EVGEN_K_U8(m, f) e->u.m.f = R8();
#define EVGEN_K_U32(m, f) e->u.m.f = R32();
#define EVGEN_K_U64(m, f) e->u.m.f = R64();
#define EVGEN_K_X64(m, f) e->u.m.f = R64();
#define EVGEN_K_SRC(m, f) e->u.m.f = R32();
#define EVGEN_K_I64(m, f) e->u.m.f = (int64_t)R64();
#define EVGEN_K_CORR(m, f) e->u.m.f = R64();
#define EVGEN_K_STR(m, f) e->u.m.f = evgen_str(g, slot++ % 3);
#define EVGEN_K_STACK(m, f) evgen_stack(g, &e->u.m.f, 20);
#define EVGEN_K_PYSTACK(m, f) evgen_pystack(g, &e->u.m.f, 1);
#define EVGEN_K_U32X3(m, f) \
	for (int i = 0; i < 3; i++) \
		e->u.m.f[i] = R32();
#define EVGEN_K_ARGS(m, f) \
	e->u.m.n##f = (uint32_t)evgen_below(g, EVLOG_MAX_ARGS + 1); \
	for (uint32_t i = 0; i < e->u.m.n##f; i++) \
		e->u.m.f[i] = R64();
#define EVGEN_FIELD(m, kind, f) EVGEN_K_##kind(m, f)
#define EVGEN_CASE(N, num, m, track, dur, corr) \
	case EV_##N: \
		EVLOG_FIELDS_##m(EVGEN_FIELD, m) break;

static inline void evgen_schema_fields(struct evgen *g, struct evlog_event *e)
{
	int slot = 0;

	(void)slot;
	switch (e->type) {
		EVLOG_TYPES(EVGEN_CASE)
	}
}

static inline void evgen_fields(struct evgen *g, struct evlog_event *e)
{
	typeof(e->u) *u = &e->u;
	switch (e->type) {
	case EV_PROCESS:
		u->process.ppid = R32(); u->process.name = evgen_str(g, 0);
		u->process.cmdline = evgen_str(g, 1); u->process.exe = evgen_str(g, 2);
		u->process.is_exec = R8();
		break;
	case EV_PROCESS_EXIT: u->process_exit.code = (int64_t)R64(); break;
	case EV_THREAD: u->thread.name = evgen_str(g, 0); u->thread.is_new = R8(); break;
	case EV_THREAD_EXIT: break;
	case EV_SYSCALL:
		u->syscall.nr = R32(); u->syscall.dur = R64(); u->syscall.ret = (int64_t)R64();
		u->syscall.arg0 = R64(); u->syscall.arg1 = R64(); u->syscall.arg2 = R64();
		break;
	case EV_CPU_SAMPLE:
		u->cpu_sample.cpu = R32();
		evgen_stack(g, &u->cpu_sample.stack, evgen_below(g, 2) ? 20 : 0);
		break;
	case EV_PY_ENTER:
		u->py_enter.func = evgen_str(g, 0); u->py_enter.file = evgen_str(g, 1);
		u->py_enter.line = R32();
		break;
	case EV_PY_EXIT: u->py_exit.func = evgen_str(g, 0); break;
	case EV_PY_SAMPLE: evgen_pystack(g, &u->py_sample.stack, 1); break;
	case EV_LIB_CALL:
		u->lib_call.lib_class = R8(); u->lib_call.lib = evgen_str(g, 0);
		u->lib_call.symbol = evgen_str(g, 1); u->lib_call.dur = R64();
		u->lib_call.ret = R64(); u->lib_call.depth = R32();
		u->lib_call.nargs = (uint32_t)evgen_below(g, EVLOG_MAX_ARGS + 1);
		for (uint32_t i = 0; i < u->lib_call.nargs; i++)
			u->lib_call.args[i] = R64();
		u->lib_call.detail = evgen_str(g, 2); u->lib_call.correlation_id = R64();
		break;
	case EV_GPU_KERNEL:
		u->gpu_kernel.dur = R64(); u->gpu_kernel.device = R32();
		u->gpu_kernel.context = R32(); u->gpu_kernel.stream = R32();
		u->gpu_kernel.correlation_id = R64(); u->gpu_kernel.name = evgen_str(g, 0);
		for (int i = 0; i < 3; i++) {
			u->gpu_kernel.grid[i] = R32();
			u->gpu_kernel.block[i] = R32();
		}
		u->gpu_kernel.registers = R32(); u->gpu_kernel.static_smem = R32();
		u->gpu_kernel.dynamic_smem = R32(); u->gpu_kernel.graph_id = R32();
		break;
	case EV_GPU_MEMCPY:
		u->gpu_memcpy.dur = R64(); u->gpu_memcpy.device = R32();
		u->gpu_memcpy.context = R32(); u->gpu_memcpy.stream = R32();
		u->gpu_memcpy.correlation_id = R64(); u->gpu_memcpy.bytes = R64();
		u->gpu_memcpy.copy_kind = R8(); u->gpu_memcpy.src_kind = R8();
		u->gpu_memcpy.dst_kind = R8();
		break;
	case EV_GPU_MEMSET:
		u->gpu_memset.dur = R64(); u->gpu_memset.device = R32();
		u->gpu_memset.context = R32(); u->gpu_memset.stream = R32();
		u->gpu_memset.correlation_id = R64(); u->gpu_memset.bytes = R64();
		u->gpu_memset.value = R32();
		break;
	case EV_GPU_API:
		u->gpu_api.dur = R64(); u->gpu_api.api_class = R8(); u->gpu_api.cbid = R32();
		u->gpu_api.correlation_id = R64(); u->gpu_api.ret = (int64_t)R64();
		u->gpu_api.name = evgen_str(g, 0);
		break;
	case EV_GPU_DEVICE:
		u->gpu_device.device = R32(); u->gpu_device.name = evgen_str(g, 0);
		u->gpu_device.uuid = evgen_str(g, 1); u->gpu_device.sm_count = R32();
		u->gpu_device.clock_khz = R32(); u->gpu_device.memory_bytes = R64();
		u->gpu_device.memory_bandwidth = R64(); u->gpu_device.cc_major = R32();
		u->gpu_device.cc_minor = R32(); u->gpu_device.max_threads_per_sm = R32();
		u->gpu_device.max_regs_per_sm = R32(); u->gpu_device.max_smem_per_sm = R32();
		break;
	case EV_LOST: u->lost.source = R32(); u->lost.count = R64(); break;
	case EV_SYMBOL:
		u->symbol.addr = R64(); u->symbol.name = evgen_str(g, 0);
		u->symbol.module = evgen_str(g, 1); u->symbol.offset = R64();
		break;
	case EV_MARKER:
		u->marker.name = evgen_str(g, 0); u->marker.text = evgen_str(g, 1);
		u->marker.dur = R64(); u->marker.value = R64(); u->marker.kind = R8();
		break;
	case EV_CLOCK: u->clock.realtime_ns = R64(); break;
	case EV_GPU_SYNC:
		u->gpu_sync.dur = R64(); u->gpu_sync.kind = R8(); u->gpu_sync.context = R32();
		u->gpu_sync.stream = R32(); u->gpu_sync.cuda_event = R32();
		u->gpu_sync.correlation_id = R64();
		break;
	case EV_CUPTI_OVERHEAD:
		u->cupti_overhead.dur = R64(); u->cupti_overhead.kind = R32();
		u->cupti_overhead.object_kind = R8();
		break;
	case EV_RANK:
		u->rank.rank = (int64_t)R64(); u->rank.local_rank = (int64_t)R64();
		u->rank.world_size = (int64_t)R64(); u->rank.source = evgen_str(g, 0);
		break;
	default:
		evgen_schema_fields(g, e);
		break;
	}
}

/* Every event type, in number order (evlog_schema.h). */
#define EVGEN_TYPE(N, num, m, track, dur, corr) EV_##N,
static const uint32_t evgen_types[] = { EVLOG_TYPES(EVGEN_TYPE) };
#undef EVGEN_TYPE
#define EVGEN_NTYPES (sizeof(evgen_types) / sizeof(evgen_types[0]))

/* Event i of the "every type, every value" stream of the first n types
 * (19: numbers 1-19). */
static inline void evgen_all_upto(struct evgen *g, uint64_t i, struct evlog_event *e,
				  uint32_t n)
{
	memset(e, 0, sizeof(*e));
	g->rng = evgen_mix(g->seed * 0x100000001b3ull + i);
	e->type = evgen_types[i % n];
	/* Timestamps mostly rise but may jump back or far (any u64). */
	e->ts = evgen_below(g, 8) ? 1000000ull * i + evgen_below(g, 1000) : evgen_next(g);
	e->pid = evgen_below(g, 4) ? 1000 + (uint32_t)evgen_below(g, 3) : R32();
	e->tid = evgen_below(g, 4) ? e->pid + (uint32_t)evgen_below(g, 2) : R32();
	evgen_fields(g, e);
}

/* Event i of the "every type, every value" stream. */
static inline void evgen_all(struct evgen *g, uint64_t i, struct evlog_event *e)
{
	evgen_all_upto(g, i, e, EVGEN_NTYPES);
}

/* Event i of a realistic stream (call in order: timestamps accumulate). */
static inline void evgen_mixed(struct evgen *g, uint64_t i, struct evlog_event *e)
{
	memset(e, 0, sizeof(*e));
	g->rng = evgen_mix(g->seed * 0x100000001b3ull + i);
	uint64_t k = evgen_below(g, 100);
	g->ts += 200 + evgen_below(g, 3000);
	e->ts = g->ts;
	e->pid = 4242;
	e->tid = 4242 + (uint32_t)evgen_below(g, 4) * (evgen_below(g, 4) == 0);
	if (k < 30) {
		static const uint32_t nrs[] = { 0, 1, 7, 202, 232, 16, 9, 11 };
		e->type = EV_SYSCALL;
		e->u.syscall.nr = nrs[evgen_below(g, 8)];
		e->u.syscall.dur = 500 + evgen_below(g, 20000);
		e->u.syscall.ret = (int64_t)evgen_below(g, 4096);
		e->u.syscall.arg0 = evgen_below(g, 64);
		e->u.syscall.arg1 = 0x7f1234560000ull + evgen_below(g, 16) * 4096;
		e->u.syscall.arg2 = 1ull << evgen_below(g, 20);
	} else if (k < 45) {
		e->type = EV_CPU_SAMPLE;
		e->u.cpu_sample.cpu = (uint32_t)evgen_below(g, 2);
		evgen_stack(g, &e->u.cpu_sample.stack, 50);
	} else if (k < 75) {
		uint64_t f = evgen_below(g, 12);
		e->type = k < 60 ? EV_PY_ENTER : EV_PY_EXIT;
		if (e->type == EV_PY_ENTER) {
			e->u.py_enter.func = evlog_s(evgen_words[f]);
			e->u.py_enter.file = evlog_s(evgen_words[5]);
			e->u.py_enter.line = 10 + (uint32_t)f * 7;
		} else {
			e->u.py_exit.func = evlog_s(evgen_words[f]);
		}
	} else if (k < 85) {
		e->type = EV_GPU_KERNEL;
		e->ts -= 100;
		e->u.gpu_kernel.dur = 5000 + evgen_below(g, 100000);
		e->u.gpu_kernel.stream = 7;
		e->u.gpu_kernel.correlation_id = i;
		e->u.gpu_kernel.name = evlog_s(evgen_words[evgen_below(g, 2) ? 9 : 19]);
		e->u.gpu_kernel.grid[0] = 1024; e->u.gpu_kernel.grid[1] = 1; e->u.gpu_kernel.grid[2] = 1;
		e->u.gpu_kernel.block[0] = 256; e->u.gpu_kernel.block[1] = 1; e->u.gpu_kernel.block[2] = 1;
		e->u.gpu_kernel.registers = 64;
		e->u.gpu_kernel.dynamic_smem = 49152;
	} else if (k < 95) {
		e->type = EV_LIB_CALL;
		e->u.lib_call.lib_class = EVLIB_CUDA_RUNTIME;
		e->u.lib_call.lib = evlog_s(evgen_words[6]);
		e->u.lib_call.symbol = evlog_s(evgen_words[evgen_below(g, 2) ? 7 : 18]);
		e->u.lib_call.dur = 2000 + evgen_below(g, 5000);
		e->u.lib_call.nargs = 2;
		e->u.lib_call.args[0] = 0x7f0000001000ull + evgen_below(g, 8) * 64;
		e->u.lib_call.args[1] = evgen_below(g, 4);
		e->u.lib_call.correlation_id = i;
	} else if (k < 98) {
		e->type = EV_GPU_MEMCPY;
		e->u.gpu_memcpy.dur = 10000 + evgen_below(g, 1000);
		e->u.gpu_memcpy.bytes = 1u << 20;
		e->u.gpu_memcpy.copy_kind = 1;
		e->u.gpu_memcpy.correlation_id = i;
	} else {
		e->type = EV_PY_SAMPLE;
		evgen_pystack(g, &e->u.py_sample.stack, 0);
	}
}

static inline int evgen_str_eq(struct evlog_str a, struct evlog_str b)
{
	return a.len == b.len && (!a.len || !memcmp(a.ptr, b.ptr, a.len));
}

/* Field-by-field equality. On mismatch returns 0 and names the field. */
static inline int evgen_equal(const struct evlog_event *a, const struct evlog_event *b,
			      char *why, size_t whysz)
{
#define EQ(f) do { if ((a->f) != (b->f)) { snprintf(why, whysz, "%s", #f); return 0; } } while (0)
#define EQS(f) do { if (!evgen_str_eq(a->f, b->f)) { snprintf(why, whysz, "%s", #f); return 0; } } while (0)
	EQ(type); EQ(ts); EQ(pid); EQ(tid);
#define EQ_U8(m, f) EQ(u.m.f);
#define EQ_U32(m, f) EQ(u.m.f);
#define EQ_U64(m, f) EQ(u.m.f);
#define EQ_X64(m, f) EQ(u.m.f);
#define EQ_SRC(m, f) EQ(u.m.f);
#define EQ_I64(m, f) EQ(u.m.f);
#define EQ_CORR(m, f) EQ(u.m.f);
#define EQ_STR(m, f) EQS(u.m.f);
#define EQ_U32X3(m, f) EQ(u.m.f[0]); EQ(u.m.f[1]); EQ(u.m.f[2]);
#define EQ_ARGS(m, f) EQ(u.m.n##f); \
	for (uint32_t i_ = 0; i_ < a->u.m.n##f && i_ < EVLOG_MAX_ARGS; i_++) EQ(u.m.f[i_]);
#define EQ_STACK(m, f) EQ(u.m.f.n_kernel); EQ(u.m.f.n_user); \
	for (uint32_t i_ = 0; i_ < a->u.m.f.n_kernel + a->u.m.f.n_user; i_++) EQ(u.m.f.ips[i_]);
#define EQ_PYSTACK(m, f) EQ(u.m.f.n); \
	for (uint32_t i_ = 0; i_ < a->u.m.f.n; i_++) EQS(u.m.f.frames[i_]);
#define EQ_FIELD(m, kind, f) EQ_##kind(m, f)
#define EQ_TYPE(N, num, m, track, dur, corr) case EV_##N: EVLOG_FIELDS_##m(EQ_FIELD, m) break;
	switch (a->type) {
	EVLOG_TYPES(EQ_TYPE)
	}
	return 1;
#undef EQ
#undef EQS
}


#undef R32
#undef R8
#undef R64

#endif /* LLMT_TESTS_EVLOG_GEN_H */
