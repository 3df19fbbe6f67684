/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpusample: the ring-buffer record of the CPU stack sampler
 * (cpusample.bpf.c -> collector/sources/cpusample.c). Include after common.h.
 */
#ifndef LLMT_BPF_CPUSAMPLE_H
#define LLMT_BPF_CPUSAMPLE_H

#include "common.h"
#include "pysample.h"

/* Frame slots per stack. 127 is the kernel's default perf_event_max_stack. */
#define LT_CPU_KFRAMES 64
#define LT_CPU_UFRAMES 127

/* User registers sent with a stack copy: the x86-64 DWARF registers 0..16
 * (rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip), as the unwinder numbers them. */
#define LT_CPU_NREGS 17
#define LT_CPU_REG_SP 7
#define LT_CPU_REG_IP 16

/* The most user-stack bytes one sample copies (--cpu-stack-bytes); a power
 * of two, so the BPF side can bound offsets with a mask. */
#define LT_CPU_STACK_MAX 65536u
#define LT_CPU_PAGE 4096u

/* kind LT_REC_CPU_SAMPLE. ips[0..kstack_bytes/8) are kernel frames and
 * ips[LT_CPU_KFRAMES .. LT_CPU_KFRAMES + ustack_bytes/8) user frames found
 * through frame pointers (only when no stack was copied), each leaf first.
 * A negative size is bpf_get_stack()'s error (no frames). When
 * stack_bytes > 0, regs holds the
 * interrupted user registers, and stack_bytes bytes of the user stack from
 * regs[LT_CPU_REG_SP] up follow the struct (the record's size is
 * sizeof(struct) + stack_bytes), for unwinding with the binaries' CFI. */
struct lt_rec_cpu_sample {
	struct lt_rec_hdr h;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u32 exec_id;    /* task->self_exec_id: changes on exec (maps are stale) */
	__u32 stack_bytes;
	__u64 ips[LT_CPU_KFRAMES + LT_CPU_UFRAMES];
	__u64 regs[LT_CPU_NREGS];
	/* The thread's Python frames in the same tick (-t pysample gives the
	 * layouts), leaf first: py_codes[0..py_n), bit i of py_entry set when
	 * frame i is the first its eval-loop call ran. */
	__u32 py_n, py_flags;     /* py_flags: LT_PYS_F_* */
	__u64 py_entry;
	__u64 py_codes[LT_PYS_FRAMES];
	__u64 py_quals[LT_PYS_FRAMES];   /* each code object's co_qualname pointer */
};

#endif
