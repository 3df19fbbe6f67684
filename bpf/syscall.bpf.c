// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
/*
 * Every system call of every target thread: entry time, duration, return
 * value and the first three arguments. sys_enter stores the call in a
 * per-thread storage; sys_exit completes it into one ring-buffer record.
 * BTF raw tracepoints: no tracefs, no kprobes, no per-call string copies.
 * A call in flight is marked by a non-zero ts in the thread's storage.
 * The tracepoints put every thread of the machine on the slow syscall
 * path; fentry on x64_sys_call would avoid it, but the kernels met refuse
 * BPF trampolines.
 */
#include "vmlinux.h"
/* BPF_PROG() declares a ctx parameter that typed programs do not use. */
#pragma clang diagnostic ignored "-Wunused-parameter"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "proc.h"
#include "syscall.h"

/* Set by the collector before load: this architecture's numbers of the
 * calls that never return, and how full the ring buffer may get before the
 * reader is woken (waking it per record would cost more than the record). */
const volatile __s64 nr_exit = -1;
/* uretprobe(2): the kernel's own return path for our uretprobes (x86-64,
 * Linux 6.11+). It is the profiler's doing, not the target's: never record it. */
const volatile __s64 nr_uretprobe = -1;
const volatile __s64 nr_exit_group = -1;
const volatile __u64 wakeup_bytes = 1 << 20;

/* The call in flight, per thread. Task storage, not a hash keyed by tid:
 * no hash update/delete per call, and it is freed with the thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lt_sys_pending);
} lt_sys_pending SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 src = EVSRC_SYSCALL;
	__u64 *n = bpf_map_lookup_elem(&lost, &src);

	if (n)
		*n += 1;
}

static __always_inline void submit(void *r)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(r, flags);
}

static __always_inline void emit(__u64 id, const struct lt_sys_pending *p, __u64 dur,
				 __s64 ret, __u32 flags)
{
	struct lt_rec_syscall *r;

	r = lt_reserve(sizeof(*r), LT_REC_SYSCALL, EVSRC_SYSCALL, id, p->ts);
	if (!r)
		return;
	r->dur = dur;
	r->ret = ret;
	r->arg0 = p->arg0;
	r->arg1 = p->arg1;
	r->arg2 = p->arg2;
	r->nr = p->nr;
	r->flags = flags;
	submit(r);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lt_sys_enter, struct pt_regs *regs, long id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct lt_sys_pending *p, now;

	if (!lt_is_target(tgid) || id == nr_uretprobe)
		return 0;
	if (id == nr_exit || id == nr_exit_group) {
		/* No sys_exit will come: record it now. */
		now.ts = bpf_ktime_get_ns();
		now.nr = id;
		now.tgid = tgid;
		now.arg0 = PT_REGS_PARM1(regs);
		now.arg1 = PT_REGS_PARM2(regs);
		now.arg2 = PT_REGS_PARM3(regs);
		emit(pid_tgid, &now, 0, 0, LT_SYS_NORETURN);
		return 0;
	}
	p = bpf_task_storage_get(&lt_sys_pending, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p) {
		count_lost();
		return 0;
	}
	/* Direct loads from the BTF-typed regs: no helper call per argument. */
	p->arg0 = PT_REGS_PARM1(regs);
	p->arg1 = PT_REGS_PARM2(regs);
	p->arg2 = PT_REGS_PARM3(regs);
	p->nr = id;
	p->tgid = tgid;
	p->ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(lt_sys_exit, struct pt_regs *regs, long ret)
{
	struct lt_sys_pending *p;
	__u64 ts;

	p = bpf_task_storage_get(&lt_sys_pending, bpf_get_current_task_btf(), 0, 0);
	if (!p || !p->ts)
		return 0;
	ts = bpf_ktime_get_ns();
	emit(bpf_get_current_pid_tgid(), p, ts - p->ts, ret, 0);
	p->ts = 0;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
