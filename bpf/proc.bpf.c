// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * Process lifecycle of the targets: forks (following children into the
 * `targets` map, so wrappers such as torchrun or a shell are profiled
 * through their workers), threads, exec, renames and exits. BTF-enabled
 * tracepoints only: they need no tracefs and no kprobes.
 */
#include "vmlinux.h"
/* BPF_PROG() declares a ctx parameter that typed programs do not use. */
#pragma clang diagnostic ignored "-Wunused-parameter"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "proc.h"

/* Set by the collector before load (--no-children clears it). */
const volatile bool follow_children = true;

static __always_inline void copy_comm(char *dst, const char *src)
{
	bpf_probe_read_kernel_str(dst, LT_COMM_LEN, src);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(lt_proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	__u32 ctid = BPF_CORE_READ(child, pid);
	struct lt_rec_fork *r;

	if (!lt_is_target(ptgid))
		return 0;
	if (ctgid != ptgid) {
		__u8 one = 1;

		if (!follow_children)
			return 0;
		/* Before the child runs its first instruction: nothing missed. */
		bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
	}
	r = lt_reserve(sizeof(*r), LT_REC_FORK, EVSRC_PROC,
		       ((__u64)ptgid << 32) | BPF_CORE_READ(parent, pid), bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->child_pid = ctgid;
	r->child_tid = ctid;
	r->child_ns_tid = lt_task_ns_tid(child);
	copy_comm(r->comm, child->comm);
	/* A new process: wake the collector now, other sources attach
	 * per-process probes to it, the sooner the fewer calls they miss. */
	bpf_ringbuf_submit(r, ctgid != ptgid ? BPF_RB_FORCE_WAKEUP : 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(lt_proc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct lt_rec_exec *r;

	if (!lt_is_target(tgid))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_EXEC, EVSRC_PROC,
		       ((__u64)tgid << 32) | BPF_CORE_READ(p, pid), bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->old_tid = old_pid;
	copy_comm(r->comm, p->comm);
	bpf_probe_read_kernel_str(r->filename, sizeof(r->filename), BPF_CORE_READ(bprm, filename));
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP); /* new image: probes to place */
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(lt_proc_exit, struct task_struct *p)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u64 ts = bpf_ktime_get_ns();
	__s64 code = BPF_CORE_READ(p, exit_code);
	struct lt_rec_exit *r;

	if (!lt_is_target(tgid))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_EXIT, EVSRC_PROC, id, ts);
	if (r) {
		r->code = code;
		bpf_ringbuf_submit(r, 0);
	}
	/* signal->live reaches 0 when the last thread of the group exits. */
	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	bpf_map_delete_elem(&targets, &tgid);
	r = lt_reserve(sizeof(*r), LT_REC_PROC_EXIT, EVSRC_PROC, ((__u64)tgid << 32) | tgid, ts);
	if (r) {
		r->code = code;
		bpf_ringbuf_submit(r, 0);
	}
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(lt_proc_rename, struct task_struct *task, const char *comm)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct lt_rec_comm *r;

	if (!lt_is_target(tgid))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_COMM, EVSRC_PROC,
		       ((__u64)tgid << 32) | BPF_CORE_READ(task, pid), bpf_ktime_get_ns());
	if (!r)
		return 0;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), comm);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
