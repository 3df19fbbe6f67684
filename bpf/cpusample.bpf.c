// SPDX-License-Identifier: Apache-2.0
/*
 * cpusample: sample the stacks of the targets' threads on every tick of the
 * software cpu-clock perf event (one event per CPU, opened by the collector
 * in frequency mode). The kernel stack is copied into the record, and for
 * the user stack, with lt_stack_bytes > 0, the user registers and up to that
 * many bytes of the stack, so user space can unwind code built without frame
 * pointers from its CFI (.eh_frame), as `perf record --call-graph dwarf`
 * does; else (or when nothing could be copied) the frame-pointer chain.
 * Symbolization and unwinding happen in the collector, never here.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "cpusample.h"
#include "pywalk.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* User-stack bytes per sample (0: frame pointers only), set before load. */
const volatile __u32 lt_stack_bytes = 0;

/* The record is built here, then sent with its real size: the ring buffer
 * reserves only constant sizes. The slack lets the verifier see every
 * copy (an offset below LT_CPU_STACK_MAX, a length below it) fit. One
 * slot per CPU (the collector sets max_entries; a per-CPU map's values are
 * limited to 32 KiB): a perf-event program does not nest on its CPU. */
struct cpu_scratch {
	struct lt_rec_cpu_sample r;
	__u8 stack[2 * LT_CPU_STACK_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_scratch);
} cpu_scratch SEC(".maps");

#define LT_DWARF_REGS(r, p) do {						\
	r[0] = p->ax;  r[1] = p->dx;  r[2] = p->cx;  r[3] = p->bx;		\
	r[4] = p->si;  r[5] = p->di;  r[6] = p->bp;  r[7] = p->sp;		\
	r[8] = p->r8;  r[9] = p->r9;  r[10] = p->r10; r[11] = p->r11;		\
	r[12] = p->r12; r[13] = p->r13; r[14] = p->r14; r[15] = p->r15;	\
	r[16] = p->ip;								\
} while (0)

/* The interrupted user registers, as DWARF numbers them. They are those
 * the kernel saved at its entry from user mode, at the top of the task's
 * kernel stack: the timer interrupt's when the sample hit user code, the
 * system call's or fault's when it hit the kernel working for the thread. */
static __always_inline int user_regs(struct task_struct *task, __u64 *r)
{
	struct pt_regs kregs, *p = &kregs;

	if (bpf_probe_read_kernel(&kregs, sizeof(kregs), (void *)bpf_task_pt_regs(task)))
		return -1;
	LT_DWARF_REGS(r, p);
	return 0;
}

/* Copy `want` bytes of the stack from sp up; where the stack's mapping ends
 * sooner (the top of a thread's stack), copy page by page up to there. */
static __always_inline __u32 copy_stack(__u8 *dst, __u64 sp, __u32 want)
{
	__u32 off = 0;

	if (want > LT_CPU_STACK_MAX)
		want = LT_CPU_STACK_MAX;
	if (!bpf_probe_read_user(dst, want & (2 * LT_CPU_STACK_MAX - 1), (void *)sp))
		return want;
	for (__u32 i = 0; i <= LT_CPU_STACK_MAX / LT_CPU_PAGE; i++) {
		__u32 n = LT_CPU_PAGE - ((sp + off) & (LT_CPU_PAGE - 1));

		if (off >= want)
			break;
		if (n > want - off)
			n = want - off;
		/* Masks the verifier can follow (the compiler may not drop them):
		 * off < MAX, n < 2 pages. */
		asm volatile("%0 &= %1" : "+r"(n) : "i"(2 * LT_CPU_PAGE - 1));
		if (bpf_probe_read_user(dst + (off & (LT_CPU_STACK_MAX - 1)), n,
					(void *)(sp + off)))
			break;
		off += n;
	}
	return off;
}

/* The thread's Python frames in this very tick, when pysample told us how
 * to read its interpreter: user space merges them into the native stack. */
static __always_inline void python_frames(struct lt_rec_cpu_sample *r, __u64 pid_tgid)
{
	__u32 pid = pid_tgid >> 32, zero = 0;
	struct walk_ctx w = { .flags = 0 };
	struct pys_scratch *ps;
	struct lt_pys_proc *p;

	r->py_n = r->py_flags = 0;
	r->py_entry = 0;
	p = bpf_map_lookup_elem(&pys_procs, &pid);
	if (!p || !p->runtime || !py_walk(p, (__u32)pid_tgid, r->h.ts, &w))
		return;
	ps = bpf_map_lookup_elem(&pys_scratch, &zero);
	if (!ps)
		return;
	__builtin_memcpy(r->py_codes, ps->r.codes, sizeof(r->py_codes));
	__builtin_memcpy(r->py_quals, ps->quals, sizeof(r->py_quals));
	r->py_n = w.n;
	r->py_flags = w.flags;
	r->py_entry = w.entry;
}

SEC("perf_event")
int lt_cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lt_rec_cpu_sample *r;
	struct task_struct *task;
	struct cpu_scratch *sc;
	__u32 cpu = bpf_get_smp_processor_id(), size;

	if (!lt_is_target(pid_tgid >> 32))
		return 0;
	sc = bpf_map_lookup_elem(&cpu_scratch, &cpu);
	if (!sc)
		return 0;
	r = &sc->r;
	r->h.kind = LT_REC_CPU_SAMPLE;
	r->h.pid = pid_tgid >> 32;
	r->h.tid = (__u32)pid_tgid;
	r->h.cpu = cpu;
	r->h.ts = bpf_ktime_get_ns();
	task = bpf_get_current_task_btf();
	r->exec_id = BPF_CORE_READ(task, self_exec_id);
	r->stack_bytes = 0;
	r->kstack_bytes = bpf_get_stack(ctx, r->ips, LT_CPU_KFRAMES * 8, 0);
	r->ustack_bytes = 0;
	if (lt_stack_bytes && !user_regs(task, r->regs))
		r->stack_bytes = copy_stack(sc->stack, r->regs[LT_CPU_REG_SP], lt_stack_bytes);
	/* The frame-pointer walk only when there is no copy to unwind. */
	if (!r->stack_bytes)
		r->ustack_bytes = bpf_get_stack(ctx, &r->ips[LT_CPU_KFRAMES],
						LT_CPU_UFRAMES * 8, BPF_F_USER_STACK);
	python_frames(r, pid_tgid);
	size = sizeof(*r) + r->stack_bytes;
	if (size > sizeof(*sc))
		return 0;
	if (bpf_ringbuf_output(&events, sc, size, 0)) {
		__u32 src = EVSRC_CPU;
		__u64 *n = bpf_map_lookup_elem(&lost, &src);

		if (n)
			*n += 1;
	}
	return 0;
}
