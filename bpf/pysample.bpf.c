// SPDX-License-Identifier: Apache-2.0
/*
 * pysample: on every tick of the software cpu-clock perf event, walk the
 * Python frame chain of the interrupted target thread (CPython 3.11/3.12)
 * and send the code objects of its frames, leaf first. No interpreter
 * support (USDT, perf trampolines) is needed: only the addresses of the
 * interpreter's structures, which the collector puts in pys_procs per
 * process.
 *
 * The walk itself is pywalk.bpf.h's. The thread's tstate is cached per tid
 * (checked against native_thread_id on every use, so a reused address is
 * noticed); threads that have none (native worker threads) are remembered
 * for 100 ms so that their samples cost one map lookup. Strings are not copied here: a code object lives as
 * long as its function, so user space reads its names once.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "common.bpf.h"
#include "pysample.h"
#include "pywalk.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define PYS_ASK_INTERVAL_NS 200000000ull

/* Targets without an entry in pys_procs, and when they were last reported. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} pys_asked SEC(".maps");

/* A target we know nothing about yet (a launcher that exec'd Python, a
 * libpython mapped after the exec): ask user space to look, now and then. */
static __always_inline int ask(__u32 pid, __u64 pid_tgid, __u64 now)
{
	struct lt_rec_py_sample *r;
	__u64 *last = bpf_map_lookup_elem(&pys_asked, &pid);

	if (last && now - *last < PYS_ASK_INTERVAL_NS)
		return 0;
	bpf_map_update_elem(&pys_asked, &pid, &now, BPF_ANY);
	r = lt_reserve(sizeof(*r), LT_REC_PY_SAMPLE, EVSRC_PYSAMPLE, pid_tgid, now);
	if (!r)
		return 0;
	r->n = 0;
	r->flags = LT_PYS_F_UNKNOWN;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

static __always_inline void count_lost(void)
{
	__u32 k = EVSRC_PYSAMPLE;
	__u64 *n = bpf_map_lookup_elem(&lost, &k);

	if (n)
		*n += 1;
}

SEC("perf_event")
int lt_py_sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32, tid = (__u32)pid_tgid, zero = 0;
	struct walk_ctx w = { .flags = 0 };
	struct lt_rec_py_sample *r;
	struct pys_scratch *sc;
	struct lt_pys_proc *p;
	__u64 now, size;

	(void)ctx;
	if (!lt_is_target(pid))
		return 0;
	now = bpf_ktime_get_ns();
	p = bpf_map_lookup_elem(&pys_procs, &pid);
	if (!p)
		return ask(pid, pid_tgid, now);
	if (!p->runtime)
		return 0; /* looked at: not a Python we can read */
	if (!py_walk(p, tid, now, &w))
		return 0; /* no Python on this thread right now */
	sc = bpf_map_lookup_elem(&pys_scratch, &zero);
	if (!sc || !w.n)
		return 0;
	r = &sc->r;
	r->h.kind = LT_REC_PY_SAMPLE;
	r->h.pid = pid;
	r->h.tid = tid;
	r->h.cpu = bpf_get_smp_processor_id();
	r->h.ts = now;
	r->n = w.n;
	r->flags = w.flags;
	size = sizeof(*r) - sizeof(r->codes) + (__u64)(w.n & (2 * LT_PYS_FRAMES - 1)) * 8;
	if (size > sizeof(*r))
		size = sizeof(*r);
	if (bpf_ringbuf_output(&events, r, size, 0))
		count_lost();
	return 0;
}
