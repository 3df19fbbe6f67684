/* SPDX-License-Identifier: Apache-2.0 */
/*
 * syscall.bpf.c <-> collector/sources/syscall.c: one record per system call of a
 * target thread, sent when it returns (h.ts = entry time).
 */
#ifndef LLMT_BPF_SYSCALL_H
#define LLMT_BPF_SYSCALL_H

#include "common.h"

/* lt_rec_syscall.flags */
#define LT_SYS_NORETURN 1u   /* exit/exit_group: recorded at entry, dur 0 */

struct lt_rec_syscall {
	struct lt_rec_hdr h;
	__u64 dur;
	__s64 ret;
	__u64 arg0, arg1, arg2;  /* first three arguments (fd, buffer, size ...) */
	__u32 nr;
	__u32 flags;
};

/* A call in flight, per thread, in the `lt_sys_pending` map. */
struct lt_sys_pending {
	__u64 ts;
	__u64 arg0, arg1, arg2;
	__u32 nr;
	__u32 tgid;
};

#endif
