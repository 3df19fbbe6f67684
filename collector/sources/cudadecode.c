// SPDX-License-Identifier: Apache-2.0
/*
 * cudadecode: a table of the calls worth decoding, with the positions of
 * their interesting arguments (see cudadecode.h). Positions count integer
 * arguments as the x86-64/arm64 calling conventions pass them: 0-5 in
 * registers, 6+ on the stack. A dim3 passed by value takes two registers
 * (x|y<<32, then z); a struct bigger than 16 bytes (ncclUniqueId) goes to
 * memory and takes none.
 */
#include "cudadecode.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum dkind {
	DK_COPY = 1, DK_SET, DK_ALLOC, DK_FREE, DK_LAUNCH, DK_CULAUNCH,
	DK_LAUNCHEX,   /* (config *, func, ...): cudaLaunchConfig_t, read by the probe */
	DK_CULAUNCHEX, /* (config *, CUfunction, ...): CUlaunchConfig, read by the probe */
	DK_GRAPH,      /* a graph launch */
	DK_NCCL, DK_NCCL_INIT, DK_GEMM, DK_SYNC,
};

/* Argument positions are stored +1 so that 0 (the default) means absent. */
#define A(i) ((i) + 1)

struct lt_decoder {
	const char *name;
	uint8_t kind;
	int8_t fixed_kind;   /* cudaMemcpyKind + 1 when the call implies it */
	uint8_t unit;        /* memset element size */
	uint8_t bytes, ckind, stream, width, height, value, ptr;
	uint8_t count, dtype, op, root, peer, comm, func, event, nranks, rank;
	uint8_t m, n, k, ta, tb;
};

#define HTOD A(1)
#define DTOH A(2)
#define DTOD A(3)
#define DEFK A(4)

static const struct lt_decoder decoders[] = {
	/* CUDA runtime: copies and sets */
	{ "cudaMemcpy", DK_COPY, .bytes = A(2), .ckind = A(3) },
	{ "cudaMemcpyAsync", DK_COPY, .bytes = A(2), .ckind = A(3), .stream = A(4) },
	{ "cudaMemcpy2D", DK_COPY, .width = A(4), .height = A(5), .ckind = A(6) },
	{ "cudaMemcpy2DAsync", DK_COPY, .width = A(4), .height = A(5), .ckind = A(6), .stream = A(7) },
	{ "cudaMemcpyPeer", DK_COPY, .bytes = A(4), .fixed_kind = A(10) },
	{ "cudaMemcpyPeerAsync", DK_COPY, .bytes = A(4), .fixed_kind = A(10), .stream = A(5) },
	{ "cudaMemcpyToSymbol", DK_COPY, .bytes = A(2), .ckind = A(4) },
	{ "cudaMemcpyToSymbolAsync", DK_COPY, .bytes = A(2), .ckind = A(4), .stream = A(5) },
	{ "cudaMemcpyFromSymbol", DK_COPY, .bytes = A(2), .ckind = A(4) },
	{ "cudaMemcpyFromSymbolAsync", DK_COPY, .bytes = A(2), .ckind = A(4), .stream = A(5) },
	{ "cudaMemset", DK_SET, .unit = 1, .ptr = A(0), .value = A(1), .bytes = A(2) },
	{ "cudaMemsetAsync", DK_SET, .unit = 1, .ptr = A(0), .value = A(1), .bytes = A(2), .stream = A(3) },
	/* CUDA runtime: memory */
	{ "cudaMalloc", DK_ALLOC, .bytes = A(1) },
	{ "cudaMallocHost", DK_ALLOC, .bytes = A(1) },
	{ "cudaHostAlloc", DK_ALLOC, .bytes = A(1) },
	{ "cudaMallocManaged", DK_ALLOC, .bytes = A(1) },
	{ "cudaMallocAsync", DK_ALLOC, .bytes = A(1), .stream = A(2) },
	{ "cudaMallocFromPoolAsync", DK_ALLOC, .bytes = A(1), .stream = A(3) },
	{ "cudaFree", DK_FREE, .ptr = A(0) },
	{ "cudaFreeHost", DK_FREE, .ptr = A(0) },
	{ "cudaFreeAsync", DK_FREE, .ptr = A(0), .stream = A(1) },
	/* CUDA runtime: launches, streams, events, graphs */
	{ "cudaLaunchKernel", DK_LAUNCH, .func = A(0), .stream = A(7) },
	{ "cudaLaunchCooperativeKernel", DK_LAUNCH, .func = A(0), .stream = A(7) },
	{ "cudaLaunchKernelExC", DK_LAUNCHEX, .func = A(1) },
	{ "cudaStreamSynchronize", DK_SYNC, .stream = A(0) },
	{ "cudaStreamWaitEvent", DK_SYNC, .stream = A(0), .event = A(1) },
	{ "cudaStreamQuery", DK_SYNC, .stream = A(0) },
	{ "cudaEventRecord", DK_SYNC, .event = A(0), .stream = A(1) },
	{ "cudaEventRecordWithFlags", DK_SYNC, .event = A(0), .stream = A(1) },
	{ "cudaEventSynchronize", DK_SYNC, .event = A(0) },
	{ "cudaEventQuery", DK_SYNC, .event = A(0) },
	{ "cudaGraphLaunch", DK_GRAPH, .ptr = A(0), .stream = A(1) },
	/* CUDA driver */
	{ "cuMemcpy", DK_COPY, .bytes = A(2), .fixed_kind = DEFK },
	{ "cuMemcpyAsync", DK_COPY, .bytes = A(2), .fixed_kind = DEFK, .stream = A(3) },
	{ "cuMemcpyHtoD", DK_COPY, .bytes = A(2), .fixed_kind = HTOD },
	{ "cuMemcpyDtoH", DK_COPY, .bytes = A(2), .fixed_kind = DTOH },
	{ "cuMemcpyDtoD", DK_COPY, .bytes = A(2), .fixed_kind = DTOD },
	{ "cuMemcpyHtoDAsync", DK_COPY, .bytes = A(2), .fixed_kind = HTOD, .stream = A(3) },
	{ "cuMemcpyDtoHAsync", DK_COPY, .bytes = A(2), .fixed_kind = DTOH, .stream = A(3) },
	{ "cuMemcpyDtoDAsync", DK_COPY, .bytes = A(2), .fixed_kind = DTOD, .stream = A(3) },
	{ "cuMemcpyPeer", DK_COPY, .bytes = A(4), .fixed_kind = A(10) },
	{ "cuMemcpyPeerAsync", DK_COPY, .bytes = A(4), .fixed_kind = A(10), .stream = A(5) },
	{ "cuMemsetD8", DK_SET, .unit = 1, .ptr = A(0), .value = A(1), .bytes = A(2) },
	{ "cuMemsetD16", DK_SET, .unit = 2, .ptr = A(0), .value = A(1), .bytes = A(2) },
	{ "cuMemsetD32", DK_SET, .unit = 4, .ptr = A(0), .value = A(1), .bytes = A(2) },
	{ "cuMemsetD8Async", DK_SET, .unit = 1, .ptr = A(0), .value = A(1), .bytes = A(2), .stream = A(3) },
	{ "cuMemsetD16Async", DK_SET, .unit = 2, .ptr = A(0), .value = A(1), .bytes = A(2), .stream = A(3) },
	{ "cuMemsetD32Async", DK_SET, .unit = 4, .ptr = A(0), .value = A(1), .bytes = A(2), .stream = A(3) },
	{ "cuMemAlloc", DK_ALLOC, .bytes = A(1) },
	{ "cuMemAllocHost", DK_ALLOC, .bytes = A(1) },
	{ "cuMemHostAlloc", DK_ALLOC, .bytes = A(1) },
	{ "cuMemAllocManaged", DK_ALLOC, .bytes = A(1) },
	{ "cuMemAllocAsync", DK_ALLOC, .bytes = A(1), .stream = A(2) },
	{ "cuMemFree", DK_FREE, .ptr = A(0) },
	{ "cuMemFreeHost", DK_FREE, .ptr = A(0) },
	{ "cuMemFreeAsync", DK_FREE, .ptr = A(0), .stream = A(1) },
	{ "cuLaunchKernel", DK_CULAUNCH, .func = A(0), .stream = A(8) },
	{ "cuLaunchCooperativeKernel", DK_CULAUNCH, .func = A(0), .stream = A(8) },
	{ "cuLaunchKernelEx", DK_CULAUNCHEX, .func = A(1) },
	{ "cuStreamSynchronize", DK_SYNC, .stream = A(0) },
	{ "cuStreamWaitEvent", DK_SYNC, .stream = A(0), .event = A(1) },
	{ "cuEventRecord", DK_SYNC, .event = A(0), .stream = A(1) },
	{ "cuEventRecordWithFlags", DK_SYNC, .event = A(0), .stream = A(1) },
	{ "cuEventSynchronize", DK_SYNC, .event = A(0) },
	{ "cuGraphLaunch", DK_GRAPH, .ptr = A(0), .stream = A(1) },
	/* NCCL */
	{ "ncclAllReduce", DK_NCCL, .count = A(2), .dtype = A(3), .op = A(4), .comm = A(5), .stream = A(6) },
	{ "ncclBroadcast", DK_NCCL, .count = A(2), .dtype = A(3), .root = A(4), .comm = A(5), .stream = A(6) },
	{ "ncclBcast", DK_NCCL, .count = A(1), .dtype = A(2), .root = A(3), .comm = A(4), .stream = A(5) },
	{ "ncclReduce", DK_NCCL, .count = A(2), .dtype = A(3), .op = A(4), .root = A(5), .comm = A(6), .stream = A(7) },
	{ "ncclAllGather", DK_NCCL, .count = A(2), .dtype = A(3), .comm = A(4), .stream = A(5) },
	{ "ncclReduceScatter", DK_NCCL, .count = A(2), .dtype = A(3), .op = A(4), .comm = A(5), .stream = A(6) },
	{ "ncclAlltoAll", DK_NCCL, .count = A(2), .dtype = A(3), .comm = A(4), .stream = A(5) },
	{ "ncclSend", DK_NCCL, .count = A(1), .dtype = A(2), .peer = A(3), .comm = A(4), .stream = A(5) },
	{ "ncclRecv", DK_NCCL, .count = A(1), .dtype = A(2), .peer = A(3), .comm = A(4), .stream = A(5) },
	{ "ncclCommInitRank", DK_NCCL_INIT, .nranks = A(1), .rank = A(2) },
	{ "ncclCommInitRankConfig", DK_NCCL_INIT, .nranks = A(1), .rank = A(2) },
	{ "ncclCommDestroy", DK_NCCL, .comm = A(0) },
	{ "ncclCommAbort", DK_NCCL, .comm = A(0) },
	{ "ncclCommFinalize", DK_NCCL, .comm = A(0) },
	/* cuBLAS: (handle, transa, transb, m, n, k, ...) */
	{ "cublasSgemm", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasDgemm", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasHgemm", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasCgemm", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasZgemm", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasGemmEx", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasSgemmEx", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasSgemmStridedBatched", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasDgemmStridedBatched", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasHgemmStridedBatched", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasGemmStridedBatchedEx", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasGemmBatchedEx", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
	{ "cublasSgemmBatched", DK_GEMM, .ta = A(1), .tb = A(2), .m = A(3), .n = A(4), .k = A(5) },
};

/* "cudaMemcpy_ptds", "cuMemcpyHtoD_v2", "cuMemcpyHtoDAsync_v2_ptsz", and
 * the NCCL profiling aliases "pncclAllReduce" name the same calls. */
static size_t base_len(const char *s)
{
	static const char *const sfx[] = { "_ptds", "_ptsz", "_v2", "_v3", "_64" };
	size_t n = strlen(s), i;
	bool again = true;

	while (again) {
		again = false;
		for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
			size_t k = strlen(sfx[i]);

			if (n > k && !memcmp(s + n - k, sfx[i], k)) {
				n -= k;
				again = true;
			}
		}
	}
	return n;
}

const struct lt_decoder *lt_cuda_decoder(const char *symbol)
{
	size_t i, n;

	if (!strncmp(symbol, "pnccl", 5))
		symbol++;
	n = base_len(symbol);
	for (i = 0; i < sizeof(decoders) / sizeof(decoders[0]); i++)
		if (strlen(decoders[i].name) == n && !memcmp(decoders[i].name, symbol, n))
			return &decoders[i];
	return NULL;
}

int lt_cuda_decoder_cfg(const struct lt_decoder *d)
{
	return d->kind == DK_LAUNCHEX || d->kind == DK_CULAUNCHEX;
}

int lt_cuda_decoder_layer(const struct lt_decoder *d, int *is_set)
{
	*is_set = d->kind == DK_SET;
	if (*is_set)
		return !strncmp(d->name, "cuda", 4) ? LT_LAYER_RUNTIME : LT_LAYER_DRIVER;
	return d->kind == DK_LAUNCH || d->kind == DK_LAUNCHEX ? LT_LAYER_RUNTIME
	     : d->kind == DK_CULAUNCH || d->kind == DK_CULAUNCHEX ? LT_LAYER_DRIVER : 0;
}

int lt_cuda_decoder_queues_work(const struct lt_decoder *d)
{
	switch (d->kind) {
	case DK_COPY:
	case DK_SET:
	case DK_LAUNCH:
	case DK_CULAUNCH:
	case DK_LAUNCHEX:
	case DK_CULAUNCHEX:
	case DK_GRAPH:
		return 1;
	default:
		return 0;
	}
}

unsigned lt_cuda_decoder_nstack(const struct lt_decoder *d)
{
	const uint8_t *f = &d->bytes, *end = &d->tb;
	unsigned top = 0;

	if (d->kind == DK_LAUNCH || d->kind == DK_CULAUNCH)
		top = d->kind == DK_LAUNCH ? A(7) : A(8);
	if (lt_cuda_decoder_cfg(d))
		top = A(LT_DECODE_ARGS - 1);
	for (; f <= end; f++)
		if (*f > top)
			top = *f;
	return top > A(5) ? top - A(5) : 0;
}

/* ------------------------------------------------------------ names */

/* cudaMemcpyKind (and the table's PtoP, 10) as CUPTI's kind: cudaMemcpyDefault
 * (4) and values out of range are unknown, 0. */
static uint8_t copy_kind(uint64_t kind)
{
	static const uint8_t k[] = { EVLOG_COPY_HTOH, EVLOG_COPY_HTOD, EVLOG_COPY_DTOH,
				     EVLOG_COPY_DTOD, EVLOG_COPY_UNKNOWN, [10] = EVLOG_COPY_PTOP };

	return kind < sizeof(k) / sizeof(k[0]) ? k[kind] : EVLOG_COPY_UNKNOWN;
}

static const struct { const char *name; unsigned size; } nccl_types[] = {
	{ "int8", 1 }, { "uint8", 1 }, { "int32", 4 }, { "uint32", 4 },
	{ "int64", 8 }, { "uint64", 8 }, { "float16", 2 }, { "float32", 4 },
	{ "float64", 8 }, { "bfloat16", 2 }, { "float8e4m3", 1 }, { "float8e5m2", 1 },
};

const char *lt_nccl_dtype_name(uint64_t dt)
{
	return dt < sizeof(nccl_types) / sizeof(nccl_types[0]) ? nccl_types[dt].name : NULL;
}

unsigned lt_nccl_dtype_size(uint64_t dt)
{
	return dt < sizeof(nccl_types) / sizeof(nccl_types[0]) ? nccl_types[dt].size : 0;
}

const char *lt_nccl_op_name(uint64_t op)
{
	static const char *const n[] = { "sum", "prod", "max", "min", "avg" };

	if ((uint32_t)op < sizeof(n) / sizeof(n[0]))
		return n[(uint32_t)op];
	return "custom"; /* ncclRedOpCreatePreMulSum */
}

static const char *blas_op_name(uint64_t op)
{
	static const char *const n[] = { "N", "T", "C", "CONJG" };

	return (uint32_t)op < 4 ? n[(uint32_t)op] : "?";
}

/* ------------------------------------------------------------ decoding */

/* The detail text being written. */
struct out {
	char *buf;
	size_t n, len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (o->len >= o->n)
		return;
	va_start(ap, fmt);
	w = vsnprintf(o->buf + o->len, o->n - o->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->len = o->len + (size_t)w < o->n ? o->len + (size_t)w : o->n - 1;
}

#define ARG(f) (args[(f) - 1])
#define SEP (o->len ? " " : "")

typedef typeof(((struct evlog_event *)0)->u.lib_call) lib_call_t;

static void put_copy(struct out *o, lib_call_t *c, const struct lt_decoder *d, const uint64_t *args)
{
	c->copy_kind = copy_kind(d->fixed_kind ? (uint64_t)(d->fixed_kind - 1) : ARG(d->ckind));
	if (d->width) {
		c->bytes = ARG(d->width) * ARG(d->height);
		put(o, "width=%llu height=%llu", (unsigned long long)ARG(d->width),
		    (unsigned long long)ARG(d->height));
	} else {
		c->bytes = ARG(d->bytes);
	}
}

static void set_dims(uint32_t v[3], uint32_t x, uint32_t y, uint32_t z)
{
	v[0] = x;
	v[1] = y;
	v[2] = z;
}

static void put_launch(lib_call_t *c, const struct lt_decoder *d, const uint64_t *args,
		       const struct lt_decode_ctx *cx, struct lt_decode_buf *b)
{
	const char *k = cx && cx->resolve ? cx->resolve(cx->arg, ARG(d->func), b->kernel,
							sizeof(b->kernel)) : NULL;

	if (k && *k)
		c->kernel = evlog_s(k);
	else
		c->func = ARG(d->func);
	if (d->kind == DK_LAUNCH) { /* dim3 by value: x | y << 32, then z */
		set_dims(c->grid, (uint32_t)args[1], (uint32_t)(args[1] >> 32), (uint32_t)args[2]);
		set_dims(c->block, (uint32_t)args[3], (uint32_t)(args[3] >> 32), (uint32_t)args[4]);
		c->dynamic_smem = args[6];
	} else if (d->kind == DK_CULAUNCH) {
		set_dims(c->grid, (uint32_t)args[1], (uint32_t)args[2], (uint32_t)args[3]);
		set_dims(c->block, (uint32_t)args[4], (uint32_t)args[5], (uint32_t)args[6]);
		c->dynamic_smem = (uint32_t)args[7];
	} else if (lt_cuda_decoder_cfg(d) && (uint32_t)args[6]) {
		/* the config's first bytes: two dim3 (six u32), the dynamic
		 * shared memory (a size_t; the driver's an unsigned int and
		 * padding), the stream */
		set_dims(c->grid, (uint32_t)args[6], (uint32_t)(args[6] >> 32), (uint32_t)args[7]);
		set_dims(c->block, (uint32_t)(args[7] >> 32), (uint32_t)args[8],
			 (uint32_t)(args[8] >> 32));
		c->dynamic_smem = d->kind == DK_CULAUNCHEX ? (uint32_t)args[9] : args[9];
		c->stream = args[10];
	}
}

static void put_nccl(struct out *o, lib_call_t *c, const struct lt_decoder *d, const uint64_t *args)
{
	if (d->count) {
		uint64_t dt = ARG(d->dtype);
		const char *dn = lt_nccl_dtype_name(dt);

		c->bytes = ARG(d->count) * lt_nccl_dtype_size(dt);
		put(o, "count=%llu", (unsigned long long)ARG(d->count));
		if (dn)
			put(o, " datatype=%s", dn);
		else
			put(o, " datatype=%llu", (unsigned long long)dt);
	}
	if (d->op)
		put(o, " op=%s", lt_nccl_op_name(ARG(d->op)));
	if (d->root)
		put(o, " root=%d", (int)ARG(d->root));
	if (d->peer)
		put(o, " peer=%d", (int)ARG(d->peer));
	if (d->nranks)
		put(o, "nranks=%d rank=%d", (int)ARG(d->nranks), (int)ARG(d->rank));
	if (d->comm)
		put(o, "%scomm=0x%llx", SEP, (unsigned long long)ARG(d->comm));
}

static void put_common(struct out *o, lib_call_t *c, const struct lt_decoder *d, const uint64_t *args)
{
	if (d->kind == DK_SET) {
		c->bytes = ARG(d->bytes) * d->unit;
		put(o, "value=%d", (int)ARG(d->value));
	} else if (d->kind == DK_ALLOC) {
		c->bytes = ARG(d->bytes);
	}
	if (d->ptr && d->kind != DK_SET)
		put(o, "%sptr=0x%llx", SEP, (unsigned long long)ARG(d->ptr));
	if (d->event)
		put(o, "%sevent=0x%llx", SEP, (unsigned long long)ARG(d->event));
}

void lt_cuda_decode(const struct lt_decoder *d, const uint64_t *args,
		    const struct lt_decode_ctx *cx, struct evlog_event *ev,
		    struct lt_decode_buf *b)
{
	lib_call_t *c = &ev->u.lib_call;
	struct out o = { b->detail, sizeof(b->detail), 0 };

	b->detail[0] = 0;
	if (d->stream)
		c->stream = ARG(d->stream);
	switch (d->kind) {
	case DK_COPY:
		put_copy(&o, c, d, args);
		break;
	case DK_LAUNCH:
	case DK_CULAUNCH:
	case DK_LAUNCHEX:
	case DK_CULAUNCHEX:
		put_launch(c, d, args, cx, b);
		break;
	case DK_NCCL:
	case DK_NCCL_INIT:
		put_nccl(&o, c, d, args);
		break;
	case DK_GEMM:
		put(&o, "m=%d n=%d k=%d transa=%s transb=%s", (int)ARG(d->m), (int)ARG(d->n),
		    (int)ARG(d->k), blas_op_name(ARG(d->ta)), blas_op_name(ARG(d->tb)));
		break;
	default:
		put_common(&o, c, d, args);
	}
	c->detail = (struct evlog_str){ .ptr = b->detail, .len = (uint32_t)o.len };
}
