/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudadecode: turn the raw integer arguments of CUDA runtime/driver, NCCL
 * and cuBLAS calls into an EV_LIB_CALL's typed fields (kernel, grid, block,
 * stream, bytes, copy kind: eventlog/evlog_schema.h) and, for the rest, a
 * short detail text ("value=7", "count=1000 datatype=float32 op=sum").
 * Only argument values are used: nothing is read from the target's memory,
 * except that a launched kernel's host stub address is named through a
 * caller-supplied resolver.
 */
#ifndef LLMT_CUDADECODE_H
#define LLMT_CUDADECODE_H

#include <stddef.h>
#include <stdint.h>

#include "eventlog/eventlog.h"

struct lt_decode_ctx {
	/* Name the code at `addr` in the target (demangled), into buf; NULL
	 * if unknown. May be NULL. */
	const char *(*resolve)(void *arg, uint64_t addr, char *buf, size_t n);
	void *arg;
};

struct lt_decoder;

/* The decoder for `symbol` (suffixes _v2, _ptsz, _ptds ignored), or NULL. */
const struct lt_decoder *lt_cuda_decoder(const char *symbol);

/* Arguments a call's record holds: 6 in registers, then 6 from the stack
 * or, for a decoder with a config, the config's first 48 bytes. */
#define LT_DECODE_ARGS 12

/* How many stack-passed arguments the decoder needs (0..6). */
unsigned lt_cuda_decoder_nstack(const struct lt_decoder *d);

/* Does the call pass its launch config by pointer in its first argument
 * (cudaLaunchKernelExC, cuLaunchKernelEx)? Then the probe copies the
 * config's first bytes where the stack arguments would go. */
int lt_cuda_decoder_cfg(const struct lt_decoder *d);

/* Does the call queue work on the GPU (a launch, copy, set or graph
 * launch), the calls kernels, copies and sets are linked to? */
int lt_cuda_decoder_queues_work(const struct lt_decoder *d);

/* The layer of a call that queues a kernel or a memset, the two kinds of
 * work probed at one layer (cudaprobe.c, work_layer): LT_LAYER_RUNTIME
 * (cudaLaunchKernel...: its kernel named by the host stub; cudaMemset...),
 * LT_LAYER_DRIVER (cuLaunchKernel..., cuMemsetD...: reached by every
 * runtime, a library's own included), 0 for any other call. *is_set says
 * which of the two kinds it is. */
enum { LT_LAYER_RUNTIME = 1, LT_LAYER_DRIVER };
int lt_cuda_decoder_layer(const struct lt_decoder *d, int *is_set);

/* Where a decoded call's strings live (as long as its event). */
struct lt_decode_buf {
	char kernel[EVLOG_CALL_KERNEL_MAX + 1];
	char detail[256];
};

/* Decode one call into ev (an EV_LIB_CALL): its typed fields and detail,
 * the strings in b. args holds LT_DECODE_ARGS values (see above). */
void lt_cuda_decode(const struct lt_decoder *d, const uint64_t *args,
		    const struct lt_decode_ctx *cx, struct evlog_event *ev,
		    struct lt_decode_buf *b);

/* Names of enum values, or NULL when out of range. */
const char *lt_nccl_dtype_name(uint64_t dt);
unsigned lt_nccl_dtype_size(uint64_t dt);
const char *lt_nccl_op_name(uint64_t op);

#endif
