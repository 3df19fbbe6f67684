/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Records that BPF programs put in the shared ring buffer, read by the
 * collector. Included by BPF code (after vmlinux.h) and by user space.
 * Every record starts with struct lt_rec_hdr; `kind` says which struct
 * follows. Each concern's own record structs live in its X.h (syscall.h,
 * cpusample.h, uprobe.h ...), next to its X.bpf.c.
 */
#ifndef LLMT_BPF_COMMON_H
#define LLMT_BPF_COMMON_H

#ifndef __VMLINUX_H__
/* The kernel's own __u64 ..., as libbpf's headers use them: typedefs of our
 * own would conflict with theirs in any file including both. */
#include <stdint.h>
#include <linux/types.h>
#endif
#include "eventlog/evlog_sources.h" /* enum evlog_source */

/* Record kinds. The range a kind falls in names its source. */
enum lt_rec_kind {
	/* proc.bpf.c: 1..15 */
	LT_REC_FORK = 1,        /* struct lt_rec_fork: new process or thread */
	LT_REC_EXEC = 2,        /* struct lt_rec_exec */
	LT_REC_EXIT = 3,        /* struct lt_rec_exit: a thread exited (process if tid == pid) */
	LT_REC_COMM = 4,        /* struct lt_rec_comm: thread renamed */
	/* syscall.bpf.c: 16..31 */
	LT_REC_SYSCALL = 16,
	/* cpusample.bpf.c: 32..47 */
	LT_REC_CPU_SAMPLE = 32,
	/* uprobe.bpf.c: 48..63 */
	LT_REC_UCALL = 48,
	/* python.bpf.c: 64..79 */
	LT_REC_PY_ENTER = 64,
	LT_REC_PY_EXIT = 65,
	/* pysample.bpf.c: 80..95 */
	LT_REC_PY_SAMPLE = 80,
	LT_REC_KIND_MAX = 127,
};

/* Indexes into the shared `lost` per-CPU array: enum evlog_source values. */
#define LT_LOST_SLOTS (EVSRC_MAX + 1)

#define LT_COMM_LEN 16

struct lt_rec_hdr {
	__u32 kind;
	__u32 pid;   /* tgid */
	__u32 tid;
	__u32 cpu;
	__u64 ts;    /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
};

struct lt_rec_fork {
	struct lt_rec_hdr h;     /* pid/tid: the parent */
	__u32 child_pid, child_tid;
	char comm[LT_COMM_LEN];
	__u32 child_ns_tid;      /* child_tid in its own pid namespace */
};

struct lt_rec_exec {
	struct lt_rec_hdr h;
	__u32 old_tid;
	char comm[LT_COMM_LEN];
	char filename[256];
};

struct lt_rec_exit {
	struct lt_rec_hdr h;
	__s64 code;              /* exit_code as the kernel holds it (status << 8 | signal) */
};

struct lt_rec_comm {
	struct lt_rec_hdr h;
	char comm[LT_COMM_LEN];
};

#endif
