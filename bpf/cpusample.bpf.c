// SPDX-License-Identifier: Apache-2.0
/*
 * cpusample: sample the stacks of the targets' threads on every tick of the
 * software cpu-clock perf event (one event per CPU, opened by the collector
 * in frequency mode). Kernel and user stacks are copied straight into the
 * ring-buffer record; symbolization happens in user space.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "cpusample.h"

char LICENSE[] SEC("license") = "GPL";

/* enum evlog_source EVSRC_CPU (the BPF side does not include eventlog.h). */
#define LT_EVSRC_CPU 2

SEC("perf_event")
int lt_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lt_rec_cpu_sample *r;
	struct task_struct *task;

	if (!lt_is_target(pid_tgid >> 32))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_CPU_SAMPLE, LT_EVSRC_CPU, pid_tgid,
		       bpf_ktime_get_ns());
	if (!r)
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	r->exec_id = BPF_CORE_READ(task, self_exec_id);
	r->pad = 0;
	r->kstack_bytes = bpf_get_stack(ctx, r->ips, LT_CPU_KFRAMES * 8, 0);
	r->ustack_bytes = bpf_get_stack(ctx, &r->ips[LT_CPU_KFRAMES],
					LT_CPU_UFRAMES * 8, BPF_F_USER_STACK);
	bpf_ringbuf_submit(r, 0);
	return 0;
}
