/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Maps every llmtracker BPF object declares. The collector creates each of
 * them once and hands the same fd to every object (bpf_map__reuse_fd) before
 * loading, so all sources share one target set, one ring buffer and one
 * lost-event table. Include after vmlinux.h and bpf_helpers.h.
 */
#ifndef LLMT_COMMON_BPF_H
#define LLMT_COMMON_BPF_H

#include <bpf/bpf_core_read.h>
#include "common.h"

/* tgids being profiled. proc.bpf.c adds children when following them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); /* resized by the collector */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LT_LOST_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline int lt_is_target(__u32 tgid)
{
	return bpf_map_lookup_elem(&targets, &tgid) != NULL;
}

/* A thread's id in its innermost pid namespace (NSpid's last field; what
 * gettid() returns in a container): task->thread_pid->numbers[level].nr.
 * 0 if it cannot be read. */
static __always_inline __u32 lt_task_ns_tid(struct task_struct *t)
{
	struct pid *tp = BPF_CORE_READ(t, thread_pid);
	unsigned int level = BPF_CORE_READ(tp, level);
	int nr = 0;

	if (!tp || level > 32) /* MAX_PID_NS_LEVEL */
		return 0;
	bpf_probe_read_kernel(&nr, sizeof(nr), &tp->numbers[level].nr);
	return (__u32)nr;
}

/* Reserve a record in the ring buffer and fill its header; count a loss
 * against `source` (enum evlog_source) when the buffer is full. */
static __always_inline void *lt_reserve(__u32 size, __u32 kind, __u32 source,
					__u64 pid_tgid, __u64 ts)
{
	struct lt_rec_hdr *h = bpf_ringbuf_reserve(&events, size, 0);
	if (!h) {
		__u64 *n = bpf_map_lookup_elem(&lost, &source);
		if (n)
			*n += 1;
		return NULL;
	}
	h->kind = kind;
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->cpu = bpf_get_smp_processor_id();
	h->ts = ts;
	return h;
}

#endif
