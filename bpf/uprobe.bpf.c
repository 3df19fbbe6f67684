// SPDX-License-Identifier: Apache-2.0
/*
 * uprobe: entry and return of probed library calls (CUDA runtime/driver,
 * NCCL, cuBLAS ...). The entry saves the start time and the integer
 * arguments on a per-thread stack; the return pops the matching frame and
 * emits one struct lt_rec_ucall. Nothing is copied from the target's memory
 * except, when the probe asks for them, a few stack-passed arguments: the
 * decoding of pointers happens in user space, so a call costs little more
 * than the two breakpoints.
 *
 * A raw tracepoint on sys_exit reports executable file mappings of targets
 * (dlopen), so libraries loaded later (libnccl, libcublas) are probed too.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "uprobe.h"

char LICENSE[] SEC("license") = "GPL";

/* Wake the reader only once this much is waiting: a wakeup per call would
 * cost more than the call. Set by the collector from the buffer size. */
const volatile __u64 wakeup_bytes = 1 << 20;

struct lt_uframe {
	__u64 ts;
	__u64 cookie;
	__u64 args[LT_UCALL_ARGS];
};

struct lt_ustack {
	__u32 depth;
	__u32 pad;
	struct lt_uframe f[LT_UCALL_MAX_DEPTH];
};

/* Per-thread call stack; freed by the kernel when the thread exits, so a
 * thread that dies inside a probed call leaves nothing behind. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lt_ustack);
} lt_ustack_map SEC(".maps");

#if defined(__TARGET_ARCH_x86)
#define LT_STACK_ARGS_OFF 8   /* return address sits at sp */
#define LT_NR_MMAP 9
#define LT_PARM6(x) ((x)->r9)  /* libbpf 1.1 stops at PARM5 */
#else
#define LT_STACK_ARGS_OFF 0
#define LT_NR_MMAP 222
#define LT_PARM6(x) (((struct user_pt_regs *)(x))->regs[5])
#endif

static __always_inline int lt_entry(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lt_ustack *st;
	struct lt_uframe *f;
	__u64 cookie;
	__u32 d;

	if (!lt_is_target(pid_tgid >> 32))
		return 0;
	st = bpf_task_storage_get(&lt_ustack_map, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st)
		return 0;
	d = st->depth;
	st->depth = d + 1;
	if (d >= LT_UCALL_MAX_DEPTH)
		return 0;
	f = &st->f[d];
	cookie = bpf_get_attach_cookie(ctx);
	f->cookie = cookie;
	f->args[0] = PT_REGS_PARM1(ctx);
	f->args[1] = PT_REGS_PARM2(ctx);
	f->args[2] = PT_REGS_PARM3(ctx);
	f->args[3] = PT_REGS_PARM4(ctx);
	f->args[4] = PT_REGS_PARM5(ctx);
	f->args[5] = LT_PARM6(ctx);
	if (cookie & (LT_UCOOKIE_CFG | 0x7f)) {
		/* One fixed-size copy: cheaper to verify than a variable one. */
		const void *src = cookie & LT_UCOOKIE_CFG ? (const void *)f->args[0]
			: (const void *)(PT_REGS_SP(ctx) + LT_STACK_ARGS_OFF);

		if (bpf_probe_read_user(&f->args[LT_UCALL_REG_ARGS],
					LT_UCALL_STACK_ARGS * 8, src))
			__builtin_memset(&f->args[LT_UCALL_REG_ARGS], 0,
					 LT_UCALL_STACK_ARGS * 8);
	}
	f->ts = bpf_ktime_get_ns(); /* last: keep our own cost out of the call */
	return 0;
}

static __always_inline void lt_emit(struct pt_regs *ctx, struct lt_uframe *f,
				    __u32 depth, __u64 pid_tgid, __u64 now)
{
	struct lt_rec_ucall *r;

	r = lt_reserve(sizeof(*r), LT_REC_UCALL, EVSRC_CUDA_LIB, pid_tgid, f->ts);
	if (!r)
		return;
	r->probe_id = LT_UCOOKIE_ID(f->cookie);
	r->depth = depth;
	r->dur = now - f->ts;
	r->ret = PT_REGS_RC(ctx);
	__builtin_memcpy(r->args, f->args, sizeof(r->args));
	bpf_ringbuf_submit(r, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
			   BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

static __always_inline int lt_return(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct lt_ustack *st;
	__u32 id, d;
	int i;

	if (!lt_is_target(pid_tgid >> 32))
		return 0;
	st = bpf_task_storage_get(&lt_ustack_map, bpf_get_current_task_btf(), 0, 0);
	if (!st || st->depth == 0)
		return 0;
	d = st->depth - 1;
	if (d >= LT_UCALL_MAX_DEPTH) { /* too deep to have been recorded */
		st->depth = d;
		return 0;
	}
	id = LT_UCOOKIE_ID(bpf_get_attach_cookie(ctx));
	/* The top frame normally matches; a frame whose return was never seen
	 * (longjmp, exception unwinding through C) is dropped on the way. */
	for (i = LT_UCALL_MAX_DEPTH - 1; i >= 0; i--) {
		if ((__u32)i > d)
			continue;
		if (LT_UCOOKIE_ID(st->f[i].cookie) != id)
			continue;
		st->depth = i;
		lt_emit(ctx, &st->f[i], i, pid_tgid, now);
		return 0;
	}
	return 0; /* a return without a recorded entry (attached mid-call) */
}

/*
 * Two attachments of the same bodies. The *_multi programs are loaded for
 * uprobe_multi links (one link per library and process: attaching and,
 * above all, detaching hundreds of functions costs one RCU grace period
 * instead of one per function). The others attach one perf event per
 * function: kprobes, and uprobes on kernels without uprobe_multi.
 */
SEC("uprobe")
int lt_uentry(struct pt_regs *ctx)
{
	return lt_entry(ctx);
}

SEC("uretprobe")
int lt_uret(struct pt_regs *ctx)
{
	return lt_return(ctx);
}

SEC("uprobe")
int lt_uentry_multi(struct pt_regs *ctx)
{
	return lt_entry(ctx);
}

SEC("uretprobe")
int lt_uret_multi(struct pt_regs *ctx)
{
	return lt_return(ctx);
}

/* Which file fd names in the current process: the mapping's identity, so
 * user space can tell a probed file mapped before its links were in, even
 * of a process gone by the time the record is read. */
static __always_inline void lt_umap_file(struct lt_rec_umap *r, long fd)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct file **fds = BPF_CORE_READ(t, files, fdt, fd);
	unsigned int max = BPF_CORE_READ(t, files, fdt, max_fds);
	struct file *f = NULL;

	r->ino = 0;
	r->kdev = 0;
	r->pad = 0;
	if (fd < 0 || (unsigned long)fd >= max ||
	    bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return;
	r->ino = BPF_CORE_READ(f, f_inode, i_ino);
	r->kdev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
}

/* A target mapped a file executable: user space rescans its libraries. */
SEC("raw_tp/sys_exit")
int lt_umap(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	long ret = (long)ctx->args[1];
	__u64 pid_tgid, prot;
	struct lt_rec_umap *r;
	long nr, fd;

	if (ret < 0 && ret > -4096)
		return 0;
#if defined(__TARGET_ARCH_x86)
	nr = BPF_CORE_READ(regs, orig_ax);
#else
	nr = BPF_CORE_READ(regs, syscallno);
#endif
	if (nr != LT_NR_MMAP)
		return 0;
	prot = PT_REGS_PARM3_CORE_SYSCALL(regs);
	fd = PT_REGS_PARM5_CORE_SYSCALL(regs);
	if (!(prot & 4 /* PROT_EXEC */) || (int)fd < 0)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!lt_is_target(pid_tgid >> 32))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_UMAP, EVSRC_CUDA_LIB, pid_tgid,
		       bpf_ktime_get_ns());
	if (!r)
		return 0;
	r->addr = ret;
	lt_umap_file(r, fd);
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP); /* probe the new library soon */
	return 0;
}
