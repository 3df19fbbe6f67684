/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uprobe: records of probed library calls (uprobe.bpf.c -> cudaprobe.c).
 *
 * Every probed function gets one entry program and one return program,
 * both attached with a BPF cookie that names the probe and says how many
 * stack-passed arguments to copy:
 *   cookie = probe_id << 8 | n_stack_args   (n_stack_args <= LT_UCALL_STACK_ARGS)
 * with LT_UCOOKIE_CFG set in the low byte, the argument slots after the
 * registers hold the first bytes the first argument points to instead (a
 * launch's config struct: cudaLaunchKernelExC, cuLaunchKernelEx).
 * The entry pushes a frame on a per-thread stack (task storage); the
 * return pops the matching frame and emits one complete call, so calls
 * nested on a thread (runtime -> driver) pair correctly.
 */
#ifndef LLMT_BPF_UPROBE_H
#define LLMT_BPF_UPROBE_H

#include "common.h"

#define LT_UCALL_REG_ARGS 6       /* integer arguments passed in registers */
#define LT_UCALL_STACK_ARGS 6     /* at most this many stack arguments */
#define LT_UCALL_ARGS (LT_UCALL_REG_ARGS + LT_UCALL_STACK_ARGS)
#define LT_UCALL_MAX_DEPTH 8      /* deeper calls are counted, not recorded */

#define LT_UCOOKIE(probe_id, nstack) (((__u64)(probe_id) << 8) | ((nstack) & 0xff))
#define LT_UCOOKIE_ID(c) ((__u32)((c) >> 8))
#define LT_UCOOKIE_NSTACK(c) ((__u32)((c) & 0x7f))
#define LT_UCOOKIE_CFG 0x80       /* copy *arg0, not the stack (see above) */

/* Kind 49: a target mapped an executable file (dlopen): rescan its maps. */
#define LT_REC_UMAP 49

struct lt_rec_ucall {
	struct lt_rec_hdr h;      /* ts = entry time */
	__u32 probe_id;
	__u32 depth;              /* 0 = outermost probed call on this thread */
	__u64 dur;
	__u64 ret;                /* raw return register */
	__u64 args[LT_UCALL_ARGS];/* registers 0..5, then stack arguments */
};

struct lt_rec_umap {
	struct lt_rec_hdr h;
	__u64 addr;               /* start of the new mapping */
	__u64 ino;                /* the file mapped: inode number, */
	__u32 kdev;               /* and its file system's kernel dev_t (MAJOR << 20 | MINOR); 0: unknown */
	__u32 pad;
};

#endif
