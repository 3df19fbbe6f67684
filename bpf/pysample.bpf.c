// SPDX-License-Identifier: Apache-2.0
/*
 * pysample: on every tick of the software cpu-clock perf event, walk the
 * Python frame chain of the interrupted target thread (CPython 3.11/3.12)
 * and send the code objects of its frames, leaf first. No interpreter
 * support (USDT, perf trampolines) is needed: only the addresses of the
 * interpreter's structures, which the collector puts in pys_procs per
 * process.
 *
 *   _PyRuntime.interpreters.head -> interp -> threads.head -> tstate
 *   (next ...) until tstate->native_thread_id == the thread's tid in its own
 *   pid namespace (what gettid() returned to CPython: in a container, not
 *   the node's tid that bpf_get_current_pid_tgid() gives);
 *   tstate->cframe->current_frame -> frame -> previous ...
 *
 * The thread's tstate is cached per tid (checked against native_thread_id
 * on every use, so a reused address is noticed); threads that have none
 * (native worker threads) are remembered for 100 ms so that their samples
 * cost one map lookup. Strings are not copied here: a code object lives as
 * long as its function, so user space reads its names once.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "common.bpf.h"
#include "pysample.h"

char LICENSE[] SEC("license") = "GPL";

/* enum evlog_source EVSRC_PYSAMPLE (the BPF side does not include eventlog.h). */
#define LT_EVSRC_PYSAMPLE 7
#define PYS_NO_TSTATE_RECHECK_NS 100000000ull
#define PYS_ASK_INTERVAL_NS 200000000ull

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct lt_pys_proc);
} pys_procs SEC(".maps");

struct pys_thread {
	__u64 tstate;     /* 0: none found at `checked` */
	__u64 checked;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pys_thread);
} pys_threads SEC(".maps");

/* Targets without an entry in pys_procs, and when they were last reported. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} pys_asked SEC(".maps");

static __always_inline __u64 rd(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* A target we know nothing about yet (a launcher that exec'd Python, a
 * libpython mapped after the exec): ask user space to look, now and then. */
static __always_inline int ask(__u32 pid, __u64 pid_tgid, __u64 now)
{
	struct lt_rec_py_sample *r;
	__u64 *last = bpf_map_lookup_elem(&pys_asked, &pid);

	if (last && now - *last < PYS_ASK_INTERVAL_NS)
		return 0;
	bpf_map_update_elem(&pys_asked, &pid, &now, BPF_ANY);
	r = lt_reserve(sizeof(*r), LT_REC_PY_SAMPLE, LT_EVSRC_PYSAMPLE, pid_tgid, now);
	if (!r)
		return 0;
	r->n = 0;
	r->flags = LT_PYS_F_UNKNOWN;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* The record is built here, then copied to the ring buffer: holding a
 * ring-buffer reservation across the walk's loops costs the verifier
 * more than the copy costs at run time. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_rec_py_sample);
} pys_scratch SEC(".maps");

struct find_ctx {
	struct lt_pys_proc p;
	__u64 interp, ts, found;
	__u32 tid;
};

/* One step through every interpreter's thread list (bpf_loop callback). */
static long find_step(__u32 i, struct find_ctx *c)
{
	(void)i;
	if (!c->ts) {
		c->interp = c->interp ? rd(c->interp + c->p.is_next) : 0;
		if (!c->interp)
			return 1;
		c->ts = rd(c->interp + c->p.is_threads_head);
		return 0;
	}
	if (rd(c->ts + c->p.ts_native_tid) == c->tid) {
		c->found = c->ts;
		return 1;
	}
	c->ts = rd(c->ts + c->p.ts_next);
	return 0;
}

/* The tstate of `tid`, or 0. *started: whether the interpreter is up at
 * all (it is not just after exec). */
static __always_inline __u64 find_tstate(const struct lt_pys_proc *p, __u32 tid, int *started)
{
	struct find_ctx c = { .p = *p, .tid = tid };

	c.interp = rd(p->runtime + p->rt_interp_head);
	c.ts = c.interp ? rd(c.interp + p->is_threads_head) : 0;
	*started = c.ts != 0;
	if (c.ts)
		bpf_loop(LT_PYS_THREADS, find_step, &c, 0);
	return c.found;
}

/* `tid` (the node's) keys the cache; `ns_tid` is what native_thread_id holds. */
static __always_inline __u64 thread_state(const struct lt_pys_proc *p, __u32 tid, __u32 ns_tid,
					  __u64 now)
{
	struct pys_thread *c = bpf_map_lookup_elem(&pys_threads, &tid);
	struct pys_thread n = { 0, now };
	int started;

	if (c && c->tstate && rd(c->tstate + p->ts_native_tid) == ns_tid)
		return c->tstate;
	if (c && !c->tstate && now - c->checked < PYS_NO_TSTATE_RECHECK_NS)
		return 0;
	n.tstate = find_tstate(p, ns_tid, &started);
	if (!started)
		return 0; /* nothing to remember before the interpreter is up */
	bpf_map_update_elem(&pys_threads, &tid, &n, BPF_ANY);
	return n.tstate;
}

struct walk_ctx {
	struct lt_pys_proc p;
	__u64 frame;
	__u32 n, flags;
};

/* One frame of the chain, leaf first (bpf_loop callback). */
static long walk_step(__u32 i, struct walk_ctx *c)
{
	__u32 zero = 0;
	struct lt_rec_py_sample *r = bpf_map_lookup_elem(&pys_scratch, &zero);
	__u64 code;

	(void)i;
	if (!r || !c->frame)
		return 1;
	code = rd(c->frame + c->p.fr_code);
	if (c->p.owner_cstack != 0xffff) {
		__u8 owner = 0;

		bpf_probe_read_user(&owner, 1, (const void *)(c->frame + c->p.fr_owner));
		if (owner == c->p.owner_cstack)
			code = 0; /* a shim between C and Python: no function */
	}
	if (code) {
		if (c->n >= LT_PYS_FRAMES) {
			c->flags |= LT_PYS_F_TRUNCATED;
			return 1;
		}
		r->codes[c->n & (LT_PYS_FRAMES - 1)] = code;
		c->n++;
	}
	c->frame = rd(c->frame + c->p.fr_previous);
	return 0;
}

static __always_inline void count_lost(void)
{
	__u32 k = LT_EVSRC_PYSAMPLE;
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
	struct lt_pys_proc *p;
	__u64 now, ts, size;

	(void)ctx;
	if (!lt_is_target(pid))
		return 0;
	now = bpf_ktime_get_ns();
	p = bpf_map_lookup_elem(&pys_procs, &pid);
	if (!p)
		return ask(pid, pid_tgid, now);
	if (!p->runtime)
		return 0; /* looked at: not a Python we can read */
	ts = thread_state(p, tid, lt_task_ns_tid((struct task_struct *)bpf_get_current_task()), now);
	w.frame = ts ? rd(rd(ts + p->ts_cframe) + p->cf_current_frame) : 0;
	if (!w.frame)
		return 0; /* no Python on this thread right now */
	w.p = *p;
	bpf_loop(LT_PYS_FRAMES + 8, walk_step, &w, 0); /* + shim frames */
	r = bpf_map_lookup_elem(&pys_scratch, &zero);
	if (!r || !w.n)
		return 0;
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
