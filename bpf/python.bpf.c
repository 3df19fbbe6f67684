// SPDX-License-Identifier: Apache-2.0
/*
 * Python function entry/return from CPython's USDT probes. The collector
 * attaches these programs per target process (pid-filtered uprobes), so
 * the interpreter's probe semaphore is raised only in processes we profile
 * and untouched processes keep CPython's fast path.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include "common.bpf.h"
#include "python.h"

/* BPF_USDT/BPF_PROG declare ctx and arguments we may not read. */
#pragma clang diagnostic ignored "-Wunused-parameter"

char LICENSE[] SEC("license") = "GPL";

/* The tgid of each target that exec'd, for the collector's exec catcher
 * (collector/sources/python.c): a ring of its own, heard by a thread that does
 * nothing else, so a new interpreter is held before its program starts
 * even while the main loop is busy. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} py_execs SEC(".maps");

SEC("usdt")
int BPF_USDT(py_entry, const char *file, const char *func, int line)
{
	__u64 ts = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct lt_rec_py_enter *r;

	if (!lt_is_target(id >> 32))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_PY_ENTER, EVSRC_PYTHON, id, ts);
	if (!r)
		return 0;
	r->line = line;
	r->pad = 0;
	if (bpf_probe_read_user_str(r->func, sizeof(r->func), func) < 0)
		r->func[0] = 0;
	if (bpf_probe_read_user_str(r->file, sizeof(r->file), file) < 0)
		r->file[0] = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

SEC("usdt")
int BPF_USDT(py_return, const char *file, const char *func, int line)
{
	__u64 ts = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct lt_rec_py_exit *r;

	if (!lt_is_target(id >> 32))
		return 0;
	r = lt_reserve(sizeof(*r), LT_REC_PY_EXIT, EVSRC_PYTHON, id, ts);
	if (!r)
		return 0;
	if (bpf_probe_read_user_str(r->func, sizeof(r->func), func) < 0)
		r->func[0] = 0;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* A target replaced its image: tell the exec catcher at once (the hook
 * goes in before the new interpreter reaches its program, milliseconds
 * away), and the source (probes to look for in the new image: a launcher
 * shell or wrapper exec'ing python). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(py_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct lt_rec_hdr *r;

	if (!lt_is_target(id >> 32))
		return 0;
	__u32 tgid = id >> 32;
	bpf_ringbuf_output(&py_execs, &tgid, sizeof(tgid), BPF_RB_FORCE_WAKEUP);
	r = lt_reserve(sizeof(*r), LT_REC_PY_EXEC, EVSRC_PYTHON, id, bpf_ktime_get_ns());
	if (r)
		bpf_ringbuf_submit(r, 0);
	return 0;
}

/* Attached with the `line` probe's semaphore as its reference counter, at a
 * function the interpreter runs once (Py_FinalizeEx): CPython 3.11 fires
 * function__entry only while that semaphore is raised, and a kernel-kept
 * counter drops back by itself when we detach or die. Does nothing. */
SEC("uprobe")
int py_hold(struct pt_regs *ctx)
{
	return 0;
}
