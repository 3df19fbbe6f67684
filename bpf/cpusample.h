/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpusample: the ring-buffer record of the CPU stack sampler
 * (cpusample.bpf.c -> collector/cpusample.c). Include after common.h.
 */
#ifndef LLMT_BPF_CPUSAMPLE_H
#define LLMT_BPF_CPUSAMPLE_H

#include "common.h"

/* Frame slots per stack. 127 is the kernel's default perf_event_max_stack. */
#define LT_CPU_KFRAMES 64
#define LT_CPU_UFRAMES 127

/* kind LT_REC_CPU_SAMPLE. ips[0..kstack_bytes/8) are kernel frames and
 * ips[LT_CPU_KFRAMES .. LT_CPU_KFRAMES + ustack_bytes/8) user frames, each
 * leaf first. A negative size is bpf_get_stack()'s error (no frames). */
struct lt_rec_cpu_sample {
	struct lt_rec_hdr h;
	__s32 kstack_bytes;
	__s32 ustack_bytes;
	__u32 exec_id;    /* task->self_exec_id: changes on exec (maps are stale) */
	__u32 pad;
	__u64 ips[LT_CPU_KFRAMES + LT_CPU_UFRAMES];
};

#endif
