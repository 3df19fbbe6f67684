/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pywalk: the walk of a thread's CPython frame chain, shared by
 * pysample.bpf.c (Python stacks on their own) and cpusample.bpf.c (the same
 * walk in the CPU sample's tick, to merge Python frames into native
 * stacks). pys_procs and pys_threads are one pair of maps for both objects
 * (the collector creates them and hands the same fds to each). Include
 * after common.bpf.h and pysample.h.
 *
 *   _PyRuntime.interpreters.head -> interp -> threads.head -> tstate
 *   (next ...) until tstate->native_thread_id == the thread's tid in its own
 *   pid namespace (what gettid() returned to CPython: in a container, not
 *   the node's tid that bpf_get_current_pid_tgid() gives);
 *   tstate->cframe->current_frame -> frame -> previous ...
 * Runs in the sampled thread's context (bpf_get_current_task).
 */
#ifndef LLMT_PYWALK_BPF_H
#define LLMT_PYWALK_BPF_H

#define PYS_NO_TSTATE_RECHECK_NS 100000000ull

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LT_PYS_PROCS);
	__type(key, __u32);
	__type(value, struct lt_pys_proc);
} pys_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LT_PYS_TIDS);
	__type(key, __u32);
	__type(value, struct lt_pys_thread);
} pys_threads SEC(".maps");

static __always_inline __u64 rd(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* The record is built here, then copied to the ring buffer: holding a
 * ring-buffer reservation across the walk's loops costs the verifier
 * more than the copy costs at run time. quals[i]: frame i's code object's
 * co_qualname pointer, which tells a code object from one made later at
 * the same address (the cpu sampler keys names by both). */
struct pys_scratch {
	struct lt_rec_py_sample r;
	__u64 quals[LT_PYS_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pys_scratch);
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
	struct lt_pys_thread *c = bpf_map_lookup_elem(&pys_threads, &tid);
	struct lt_pys_thread n = { 0, now };
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
	__u64 entry;      /* bit i: frame i is the first its eval-loop call ran */
	__u32 n, flags;
};

/* One frame of the chain, leaf first (bpf_loop callback). */
static long walk_step(__u32 i, struct walk_ctx *c)
{
	__u32 zero = 0;
	struct pys_scratch *sc = bpf_map_lookup_elem(&pys_scratch, &zero);
	__u64 code;

	(void)i;
	if (!sc || !c->frame)
		return 1;
	code = rd(c->frame + c->p.fr_code);
	if (c->p.owner_cstack != 0xffff) {
		__u8 owner = 0;

		bpf_probe_read_user(&owner, 1, (const void *)(c->frame + c->p.fr_owner));
		if (owner == c->p.owner_cstack) {
			/* a shim between C and Python: no function; the frame
			 * before it was the first of its eval-loop call (3.12) */
			code = 0;
			if (c->n)
				c->entry |= 1ull << ((c->n - 1) & 63);
			else
				c->flags |= LT_PYS_F_LEAF_SHIM;
		}
	}
	if (code) {
		if (c->n >= LT_PYS_FRAMES) {
			c->flags |= LT_PYS_F_TRUNCATED;
			return 1;
		}
		if (c->p.fr_is_entry != 0xffff) { /* 3.11: the frame says so */
			__u8 entry = 0;

			bpf_probe_read_user(&entry, 1, (const void *)(c->frame + c->p.fr_is_entry));
			if (entry)
				c->entry |= 1ull << (c->n & 63);
		}
		sc->r.codes[c->n & (LT_PYS_FRAMES - 1)] = code;
		sc->quals[c->n & (LT_PYS_FRAMES - 1)] = rd(code + c->p.co_qualname);
		c->n++;
	}
	c->frame = rd(c->frame + c->p.fr_previous);
	return 0;
}

/* Walk tid's Python frames, leaf first, into pys_scratch's codes and quals; w->n of
 * them (0: no Python on this thread now). */
static __always_inline __u32 py_walk(const struct lt_pys_proc *p, __u32 tid, __u64 now,
				     struct walk_ctx *w)
{
	__u64 ts = thread_state(p, tid, lt_task_ns_tid((struct task_struct *)bpf_get_current_task()), now);

	w->frame = ts ? rd(rd(ts + p->ts_cframe) + p->cf_current_frame) : 0;
	if (!w->frame)
		return 0;
	w->p = *p;
	bpf_loop(LT_PYS_FRAMES + 8, walk_step, w, 0); /* + shim frames */
	return w->n;
}

#endif
