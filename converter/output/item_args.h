/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The arguments of a timeline item, as every trace writer shows them (the
 * JSON's "args", Perfetto's debug annotations): which ones each type of
 * event has is its EVARGS_ line in evview.h; those made here are the
 * item_<name>_args those lines name. A writer includes this file after
 * defining, each returning 0 or -1 (and inlined where it counts):
 *
 *   ARGS_CTX                                its context type
 *   args_u64(t, key, v)  args_i64(t, key, v)  args_dbl(t, key, v)
 *   args_str(t, key, s, n)                  a string of n bytes
 *   args_dim3(t, key, const uint32_t v[3])  a CUDA grid or block
 *   args_py(t, file, n, line)               a Python call's source location
 *   args_props(t, device)                   EV_GPU_DEVICE of a device, or NULL
 */
#ifndef LLMT_CONV_ITEM_ARGS_H
#define LLMT_CONV_ITEM_ARGS_H

#include <stdio.h>
#include <string.h>
#include "converter/sink.h"
#include "converter/output/evview.h"
#include "converter/pairing/cudacorr.h"
#include "eventlog/eventlog.h"

/* Syscalls whose first argument is a file descriptor and third a size. */
static int item_fd_syscall(const char *n, int *has_size)
{
	static const char *const sized[] = { "read", "write", "pread64", "pwrite64", "recvfrom",
					     "sendto", NULL };
	static const char *const fd[] = { "readv", "writev", "close", "fsync", "fdatasync", "ioctl",
					  "fstat", "lseek", "recvmsg", "sendmsg", "epoll_wait",
					  "epoll_pwait", "getdents64", "sendfile", NULL };

	/* One system call item in a few: compare the first byte before the rest. */
	for (int i = 0; sized[i]; i++)
		if (n[0] == sized[i][0] && !strcmp(n, sized[i]))
			return *has_size = 1;
	*has_size = 0;
	for (int i = 0; fd[i]; i++)
		if (n[0] == fd[i][0] && !strcmp(n, fd[i]))
			return 1;
	return 0;
}

static int item_kernel_args(ARGS_CTX *t, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;
	const struct evlog_event *p = args_props(t, e->u.gpu_kernel.device);
	uint64_t blocks = (uint64_t)e->u.gpu_kernel.grid[0] * e->u.gpu_kernel.grid[1] *
			  e->u.gpu_kernel.grid[2];

	if (args_u64(t, "device", e->u.gpu_kernel.device) ||
	    args_u64(t, "context", e->u.gpu_kernel.context) ||
	    args_u64(t, "stream", e->u.gpu_kernel.stream) ||
	    args_u64(t, "correlation", e->u.gpu_kernel.correlation_id) ||
	    args_u64(t, "registers per thread", e->u.gpu_kernel.registers) ||
	    args_u64(t, "shared memory",
		     (uint64_t)e->u.gpu_kernel.static_smem + e->u.gpu_kernel.dynamic_smem) ||
	    args_dim3(t, "grid", e->u.gpu_kernel.grid) || args_dim3(t, "block", e->u.gpu_kernel.block))
		return -1;
	if (p && p->u.gpu_device.sm_count &&
	    args_dbl(t, "blocks per SM", (double)blocks / p->u.gpu_device.sm_count))
		return -1;
	if (e->u.gpu_kernel.graph_id && args_u64(t, "graph id", e->u.gpu_kernel.graph_id))
		return -1;
	return 0;
}

/* A library call's decoded arguments, as text (cv_call_args). */
static int item_call_args(ARGS_CTX *t, const struct conv_item *it)
{
	char buf[CV_CALL_ARGS_MAX];
	size_t n = cv_call_args(it->ev, buf, sizeof(buf));

	return n && args_str(t, "args", buf, n);
}

/* A synchronization's kind, by its name (Kineto's). */
static int item_sync_kind_args(ARGS_CTX *t, const struct conv_item *it)
{
	return args_str(t, "cuda_sync_kind", it->name, strlen(it->name));
}

/* The CUDA event a synchronization waited on, for those that wait on one. */
static int item_sync_event_args(ARGS_CTX *t, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;
	uint8_t k = e->u.gpu_sync.kind;

	return (k == 1 || k == 2) && e->u.gpu_sync.cuda_event != UINT32_MAX &&
	       args_u64(t, "wait_on_cuda_event_id", e->u.gpu_sync.cuda_event);
}

/* A system call on a file descriptor: the descriptor, and the size asked. */
static int item_syscall_fd_args(ARGS_CTX *t, const struct conv_item *it)
{
	int has_size;

	return item_fd_syscall(it->name, &has_size) &&
	       (args_u64(t, "fd", it->ev->u.syscall.arg0) ||
		(has_size && args_u64(t, "size", it->ev->u.syscall.arg2)));
}

static int item_py_args(ARGS_CTX *t, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;

	return args_py(t, e->u.py_enter.file.ptr, e->u.py_enter.file.len, e->u.py_enter.line);
}

static int item_stack_args(ARGS_CTX *t, const struct conv_item *it)
{
	return args_str(t, "stack", it->stack_folded, strlen(it->stack_folded));
}

static int item_step_args(ARGS_CTX *t, const struct conv_item *it)
{
	return it->step && args_u64(t, "step", it->step - 1);
}

/* A fold: how many calls, how long, and the most frequent names in it. */
static int item_fold_args(ARGS_CTX *t, const struct conv_fold *f)
{
	static const char *const keys[CONV_FOLD_TOP] = { "top 1", "top 2", "top 3", "top 4",
							 "top 5" };
	char buf[600];

	if (args_u64(t, "calls", f->calls) || args_u64(t, "top-level calls", f->top_calls) ||
	    args_dbl(t, "time of the top-level calls (us)", (double)f->busy_ns / 1e3))
		return -1;
	for (uint32_t i = 0; i < f->n_top && i < CONV_FOLD_TOP; i++) {
		int n = snprintf(buf, sizeof(buf), "%.500s: %llu calls, %.3f us", f->top[i].name,
				 (unsigned long long)f->top[i].calls, (double)f->top[i].ns / 1e3);

		if (args_str(t, keys[i], buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1))
			return -1;
	}
	return 0;
}

/* Each type's arguments, as its EVARGS_ line in evview.h lists them. */
#define ITEM_ARG_U64(m, k, f) || args_u64(t, k, e->u.m.f)
#define ITEM_ARG_I64(m, k, f) || args_i64(t, k, (int64_t)e->u.m.f)
#define ITEM_ARG_I32(m, k, f) || args_i64(t, k, (int32_t)e->u.m.f)
#define ITEM_ARG_U64NZ(m, k, f) || (e->u.m.f && args_u64(t, k, e->u.m.f))
#define ITEM_ARG_STR(m, k, f) || args_str(t, k, e->u.m.f.ptr, e->u.m.f.len)
#define ITEM_ARG_STRNE(m, k, f) || (e->u.m.f.len && args_str(t, k, e->u.m.f.ptr, e->u.m.f.len))
#define ITEM_ARG_GBPS(m, k, f) \
	|| (it->dur_ns && args_dbl(t, k, (double)e->u.m.f / (double)it->dur_ns))
#define ITEM_ARG_FN(m, k, f) || item_##f##_args(t, it)
#define ITEM_ARG(m, kind, k, f) ITEM_ARG_##kind(m, k, f)
#define ITEM_ARGS_CASE(N, num, m, track, dur, corr) \
	case EV_##N: \
		return 0 EVARGS_##m(ITEM_ARG, m);

static int item_args(ARGS_CTX *t, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;

	if (it->fold)
		return item_fold_args(t, it->fold);
	switch (e->type) {
		EVLOG_TYPES(ITEM_ARGS_CASE)
	default:
		return 0;
	}
}

#undef ITEM_ARGS_CASE
#undef ITEM_ARG

#endif
