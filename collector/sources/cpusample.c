// SPDX-License-Identifier: Apache-2.0
/*
 * cpusample: `-t cpu`. One software cpu-clock perf event per CPU in
 * frequency mode (--freq, default 99 Hz; hardware counters are not needed)
 * runs cpusample.bpf.c, which keeps only the targets' threads and copies
 * their kernel and frame-pointer user stacks into the ring buffer, with the
 * user registers and a slice of the user stack (--cpu-stack-bytes) that
 * unwind.c turns into the user frames from the binaries' CFI. Each record
 * becomes an EV_CPU_SAMPLE; every distinct (pid, address) is noted with the
 * symbolizer, which captures the process's mappings while it is alive, and
 * finish() writes one EV_SYMBOL per noted address.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "collector/session/session.h"
#include "common/grow.h"
#include "common/hmap.h"
#include "cpu_perf.h"
#include "collector/target/symbolize.h"
#include "collector/target/unwind.h"
#include "bpf/cpusample.h"
#include "bpf/cpusample.skel.h"

struct cpu_state {
	struct cpusample_bpf *skel;
	struct lt_cpu_perf perf;   /* the per-CPU sampling events */
	struct lt_sym *sym;
	struct lt_unwind *unwind;  /* NULL: frame pointers only */
	int finished;              /* symbols written: later addresses go out at once */
	uint64_t samples, symbols, note_errors;
	uint64_t leaf_only;        /* samples the CFI gave nothing for: their pc only */
	uint64_t record_bytes;     /* ring-buffer bytes of all samples */
	struct py_name *py;        /* Python frames' names, in the order named */
	size_t n_py, cap_py;
	struct lt_hmap py_ix;      /* (pid, tagged address) -> py index */
	uint64_t py_merged;        /* samples with Python frames merged in */
};

/* A Python frame in a merged stack stands as its code object's address with
 * bit 62 set (no user or kernel address has it) and 15 bits of its
 * co_qualname pointer above bit 47 (user addresses end there), so a code
 * object made later at a freed one's address gets an address, and a name,
 * of its own; its EV_SYMBOL names the function, module "[python]". */
#define LT_CPU_PY_TAG (1ull << 62)
#define LT_CPU_ADDR_BITS 47
#define LT_CPU_PY_NAMES_MAX (1u << 20)   /* code objects named, all processes */

struct py_name {
	int pid;
	int emitted;
	uint64_t addr;             /* tagged */
	char *name;
};

/* libdwfl sessions kept at once (a process each, least recently used out). */
#define LT_CPU_UNWIND_PROCS 64

static uint64_t cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Symbol tables are read at the end from files opened while the targets
 * ran: allow as many open files as the hard limit does. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int cpu_start(struct lt_session *s, void **state)
{
	struct cpu_state *st = calloc(1, sizeof(*st));
	int err;

	*state = st;
	if (!st)
		return lt_session_errorf(s, "cpu: out of memory");
	if (lt_cpu_perf_init(s, &st->perf, "cpu"))
		return -1;
	if (lt_sym_new(&st->sym, NULL))
		return lt_session_errorf(s, "cpu: out of memory");
	if (s->opt.cpu_stack_bytes &&
	    lt_unwind_new(&st->unwind, st->sym, LT_CPU_UNWIND_PROCS))
		return lt_session_errorf(s, "cpu: out of memory");
	st->skel = cpusample_bpf__open();
	if (!st->skel)
		return lt_session_errorf(s, "cannot open the cpu sampling BPF object: %s",
					 strerror(errno));
	if (lt_session_share_maps(s, st->skel->obj))
		return -1;
	st->skel->rodata->lt_stack_bytes = s->opt.cpu_stack_bytes;
	bpf_map__set_max_entries(st->skel->maps.cpu_scratch, (unsigned)st->perf.n_cpus);
	err = cpusample_bpf__load(st->skel);
	if (err)
		return lt_session_errorf(s, "cannot load the cpu sampling BPF program: %s",
					 strerror(-err));
	raise_nofile();
	return lt_cpu_perf_attach(s, &st->perf, st->skel->progs.lt_cpu_sample,
				  s->opt.freq_hz ? s->opt.freq_hz : 99, "cpu");
}

/* Capture the new target's mappings now: it may exit before the end. */
static int cpu_add_target(struct lt_session *s, void *state, int pid)
{
	struct cpu_state *st = state;
	int r = lt_sym_add_pid(st->sym, pid);

	if (r == -ENOMEM)
		return lt_session_errorf(s, "cpu: out of memory reading the maps of %d", pid);
	return 0; /* a pid already gone is not an error */
}

static int emit_symbol(void *arg, int pid, uint64_t addr, const struct lt_sym_info *in)
{
	struct lt_session *s = arg;
	struct evlog_event ev = { .type = EV_SYMBOL, .ts = cpu_now_ns(), .pid = (uint32_t)pid };

	ev.u.symbol.addr = addr;
	ev.u.symbol.name = evlog_s(in->name);
	ev.u.symbol.module = evlog_s(in->module);
	ev.u.symbol.offset = in->offset;
	return lt_session_emit(s, &ev) < 0 ? -EIO : 0;
}

/* After finish() the symbol table is out: a new address gets its symbol now. */
static void note_frame(struct lt_session *s, struct cpu_state *st, int pid, uint32_t exec_id,
		       uint64_t ip, int is_ret)
{
	struct lt_sym_info in;
	int r = lt_sym_note(st->sym, pid, exec_id, ip, is_ret);

	if (r < 0) {
		st->note_errors++;
		return;
	}
	if (r == 1 && st->finished && !lt_sym_resolve(st->sym, pid, ip, &in) &&
	    !emit_symbol(s, pid, ip, &in))
		st->symbols++;
}

/* ------------------------------------------- Python frames, merged in */

static int py_emit(struct lt_session *s, struct py_name *e)
{
	struct lt_sym_info in = { .name = e->name, .module = "[python]", .offset = 0 };

	e->emitted = 1;
	return emit_symbol(s, e->pid, e->addr, &in);
}

static uint64_t py_addr(uint64_t code, uint64_t qual)
{
	uint64_t q = (qual >> 3) * 0x9e3779b97f4a7c15ull >> 49; /* 15 bits */

	return LT_CPU_PY_TAG | q << LT_CPU_ADDR_BITS | (code & ((1ull << LT_CPU_ADDR_BITS) - 1));
}

/* Name the code object (once per process); 0, or -1 when it has none. */
static int py_note(struct lt_session *s, struct cpu_state *st, int pid, uint64_t code, uint64_t qual)
{
	uint64_t addr = py_addr(code, qual);
	struct lt_hmap_pos p = lt_hmap_probe(&st->py_ix, lt_hash_pair((uint32_t)pid, addr));
	struct py_name *e;
	const char *name;
	uint32_t i;

	while (lt_hmap_next(&st->py_ix, &p, &i))
		if (st->py[i].addr == addr && st->py[i].pid == pid)
			return 0;
	if (st->n_py >= LT_CPU_PY_NAMES_MAX ||
	    lt_grow((void **)&st->py, &st->cap_py, st->n_py + 1, sizeof(*st->py), 1024))
		return -1;
	name = s->py_code_name(s->py_code_arg, pid, code, qual);
	e = &st->py[st->n_py];
	*e = (struct py_name){ .pid = pid, .addr = addr, .name = name ? strdup(name) : NULL };
	if (!e->name || lt_hmap_add(&st->py_ix, &p, (uint32_t)st->n_py)) {
		free(e->name);
		return -1;
	}
	st->n_py++;
	if (st->finished && !py_emit(s, e))
		st->symbols++;
	return 0;
}

static int is_eval_loop(struct cpu_state *st, int pid, uint64_t ip)
{
	struct lt_sym_info in;

	return !lt_sym_resolve(st->sym, pid, ip, &in) && !strcmp(in.name, "_PyEval_EvalFrameDefault");
}

/* py-spy --native style: the interpreter's eval-loop frames in the native
 * stack u[0..nu) (leaf first) become the Python frames their calls were
 * running, each call's from the leaf up to the frame it started with; an
 * innermost call on its way in or out runs none and stays as it is.
 * Calls and eval-loop frames are paired from the root when the unwinding
 * reached it (an eval-loop frame not named so, cold code of a stripped
 * interpreter, then leaves Python frames over at the leaf end), else from
 * the leaf (calls left over stay outermost). Returns the new count (at
 * most room). */
#define LT_CPU_MERGED (LT_CPU_UFRAMES + LT_PYS_FRAMES)

static uint32_t merge_python(struct lt_session *s, struct cpu_state *st,
			     const struct lt_rec_cpu_sample *r, uint64_t *u, uint32_t nu,
			     int complete, uint32_t room)
{
	uint32_t n = r->py_n < LT_PYS_FRAMES ? r->py_n : LT_PYS_FRAMES;
	uint32_t start[LT_PYS_FRAMES + 2], evals[LT_CPU_UFRAMES], ne = 0, ng = 0;
	int32_t group_of[LT_CPU_UFRAMES];     /* per u[i]: its call's group, or -1 */
	uint64_t out[LT_CPU_MERGED];
	uint32_t i, k = 0, g0, e0, pairs;
	int pid = (int)r->h.pid;

	if (!n || !s->py_code_name)
		return nu;
	for (i = 0; i < n; i++)
		if (py_note(s, st, pid, r->py_codes[i], r->py_quals[i]))
			return nu; /* a frame without a name: the native stack alone */
	/* The calls, leaf first: group j is frames start[j] .. start[j+1]-1. */
	if (r->py_flags & LT_PYS_F_LEAF_SHIM)
		start[ng++] = 0;              /* the innermost call runs none */
	start[ng++] = 0;
	for (i = 0; i + 1 < n; i++)
		if ((r->py_entry >> i) & 1)
			start[ng++] = i + 1;
	start[ng] = n;
	for (i = 0; i < nu; i++) {
		group_of[i] = -1;
		if (is_eval_loop(st, pid, u[i]))
			evals[ne++] = i;
	}
	pairs = ne < ng ? ne : ng;
	e0 = complete ? ne - pairs : 0;       /* first eval-loop frame paired */
	g0 = complete ? ng - pairs : 0;       /* and its call */
	for (i = 0; i < pairs; i++)
		group_of[evals[e0 + i]] = (int32_t)(g0 + i);
	if (complete) /* calls of eval-loop frames not found: at the leaf end */
		for (uint32_t g = 0; g < g0; g++)
			for (uint32_t f = start[g]; f < start[g + 1] && k < LT_CPU_MERGED; f++)
				out[k++] = py_addr(r->py_codes[f], r->py_quals[f]);
	for (i = 0; i < nu && k < LT_CPU_MERGED; i++) {
		int32_t g = group_of[i];

		if (g < 0 || start[g] == start[g + 1]) {
			out[k++] = u[i];
			continue;
		}
		for (uint32_t f = start[g]; f < start[g + 1] && k < LT_CPU_MERGED; f++)
			out[k++] = py_addr(r->py_codes[f], r->py_quals[f]);
	}
	if (!complete) /* calls beyond where the unwinding stopped: outermost */
		for (uint32_t f = start[pairs]; f < n && k < LT_CPU_MERGED; f++)
			out[k++] = py_addr(r->py_codes[f], r->py_quals[f]);
	k = k < room ? k : room;
	memcpy(u, out, k * sizeof(*u));
	st->py_merged++;
	return k;
}

static uint32_t frames(int32_t bytes, uint32_t max)
{
	uint32_t n = bytes > 0 ? (uint32_t)bytes / 8 : 0;

	return n < max ? n : max;
}

/* Frame-pointer unwinding through code built without frame pointers
 * (most Python interpreters) reads saved registers or data as return
 * addresses: bytes of text, small integers. No user code lives at or above
 * the canonical-address hole (x86-64: 0x0000800000000000) or in the first
 * page, so the stack ends at the first such frame; what follows it was
 * found through the same broken chain and is dropped too. */
#define LT_CPU_USER_MIN 4096ull
#define LT_CPU_USER_END 0x0000800000000000ull

static uint32_t user_frames_kept(const uint64_t *ips, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (ips[i] < LT_CPU_USER_MIN || ips[i] >= LT_CPU_USER_END)
			return i;
	return n;
}

/* The user frames from the stack copy and the binaries' CFI, into ips;
 * 0 when the record has no copy or nothing unwound; *complete as
 * lt_unwind_sample says. The leaf is noted first so that an exec or a new
 * mapping refreshes the maps the unwinder uses. */
static uint32_t cfi_frames(struct cpu_state *st, const struct lt_rec_cpu_sample *r, size_t size,
			   uint64_t *ips, int *complete)
{
	const uint64_t *regs = (const uint64_t *)r->regs;
	const uint8_t *stack = (const uint8_t *)(r + 1);
	int pid = (int)r->h.pid;
	uint64_t gen;
	uint32_t n;

	*complete = 0;
	if (!st->unwind || !r->stack_bytes || r->stack_bytes > size - sizeof(*r))
		return 0;
	if (lt_sym_note(st->sym, pid, r->exec_id, regs[LT_CPU_REG_IP], 0) < 0)
		return 0;
	gen = lt_sym_generation(st->sym, pid);
	n = lt_unwind_sample(st->unwind, pid, regs, stack, r->stack_bytes, ips, LT_CPU_UFRAMES,
			     complete);
	/* Stopped in code the maps did not hold yet (libc mapped after the
	 * exec, a dlopen)? Noting that frame re-reads them: then once more. */
	if (n && lt_sym_note(st->sym, pid, r->exec_id, ips[n - 1], n > 1) >= 0 &&
	    lt_sym_generation(st->sym, pid) != gen)
		n = lt_unwind_sample(st->unwind, pid, regs, stack, r->stack_bytes, ips,
				     LT_CPU_UFRAMES, complete);
	return n;
}

static int cpu_handle(struct lt_session *s, void *state, const struct lt_rec_hdr *h, size_t size)
{
	const struct lt_rec_cpu_sample *r = (const void *)h;
	struct cpu_state *st = state;
	uint64_t ips[LT_CPU_KFRAMES + LT_CPU_UFRAMES + LT_PYS_FRAMES];
	struct evlog_event ev = { .type = EV_CPU_SAMPLE };
	uint32_t nk, nu, i;
	int complete;

	if (!st || h->kind != LT_REC_CPU_SAMPLE || size < sizeof(*r))
		return 0; /* !st: a record drained after stop() */
	st->record_bytes += size;
	nk = frames(r->kstack_bytes, LT_CPU_KFRAMES);
	memcpy(ips, r->ips, nk * 8);
	nu = cfi_frames(st, r, size, ips + nk, &complete);
	if (!nu && r->stack_bytes) {
		/* BPF walked no frame pointers when it copied the stack: the
		 * sampled pc at least. */
		st->leaf_only++;
		ips[nk] = r->regs[LT_CPU_REG_IP];
		nu = 1;
	} else if (!nu) {
		nu = frames(r->ustack_bytes, LT_CPU_UFRAMES);
		memcpy(ips + nk, r->ips + LT_CPU_KFRAMES, nu * 8);
		nu = user_frames_kept(ips + nk, nu);
	}
	for (i = 0; i < nk; i++)
		note_frame(s, st, 0, 0, ips[i], i > 0);
	for (i = 0; i < nu; i++)
		note_frame(s, st, (int)h->pid, r->exec_id, ips[nk + i], i > 0);
	nu = merge_python(s, st, r, ips + nk, nu, complete, LT_CPU_UFRAMES + LT_PYS_FRAMES);
	ev.ts = h->ts;
	ev.pid = h->pid;
	ev.tid = h->tid;
	ev.u.cpu_sample.cpu = h->cpu;
	ev.u.cpu_sample.stack.n_kernel = nk;
	ev.u.cpu_sample.stack.n_user = nu;
	ev.u.cpu_sample.stack.ips = ips;
	st->samples++;
	return lt_session_emit(s, &ev);
}

/* Stop sampling, then write the symbol of every sampled address. */
static void cpu_detach(struct cpu_state *st)
{
	lt_cpu_perf_detach(&st->perf);
}

/* DEBUGINFOD_URLS was set: what it brought, or why it could not. */
static void log_debuginfod(const struct lt_dbgd_stats *d)
{
	if (d->error) {
		LT_WARN("cpu: DEBUGINFOD_URLS is set but debuginfod cannot be used (%s): stripped "
			"objects without a local debug file keep addresses", d->error);
		return;
	}
	if (d->found + d->missed + d->timed_out)
		LT_INFO(0, "cpu: debuginfod: %llu debug files fetched, %llu not found, %llu timed "
			"out (%d s each), in %.1f ms", (unsigned long long)d->found,
			(unsigned long long)d->missed, (unsigned long long)d->timed_out,
			LT_DBGD_LOOKUP_S, (double)d->ns / 1e6);
	if (d->skipped)
		LT_WARN("cpu: debuginfod: %llu objects not looked up: the %d s allowed for lookups "
			"were spent", (unsigned long long)d->skipped, LT_DBGD_TOTAL_S);
}

static void cpu_quiesce(struct lt_session *s, void *state)
{
	(void)s;
	cpu_detach(state);
}

static int cpu_finish(struct lt_session *s, void *state)
{
	struct cpu_state *st = state;
	struct lt_sym_stats ss;
	uint64_t t0 = cpu_now_ns();
	int r;

	/* cpu_quiesce stopped the sampling */
	r = lt_sym_foreach(st->sym, emit_symbol, s);
	for (size_t k = 0; !r && k < st->n_py; k++)
		if (!st->py[k].emitted) {
			r = py_emit(s, &st->py[k]);
			st->symbols++;
		}
	st->finished = 1;
	lt_sym_stats(st->sym, &ss);
	st->symbols += ss.addrs;
	LT_INFO(1, "cpu: %llu samples; %llu addresses in %llu processes, %llu named, "
		"%llu objects, %llu symbols loaded, symbolized in %.1f ms",
		(unsigned long long)st->samples, (unsigned long long)ss.addrs,
		(unsigned long long)ss.procs, (unsigned long long)ss.resolved,
		(unsigned long long)ss.objects, (unsigned long long)ss.symbols,
		(double)(cpu_now_ns() - t0) / 1e6);
	if (st->py_merged)
		LT_INFO(1, "cpu: %llu samples with Python frames merged in, %zu code objects",
			(unsigned long long)st->py_merged, st->n_py);
	if (st->unwind) {
		struct lt_unwind_stats us;

		lt_unwind_stats(st->unwind, &us);
		LT_INFO(1, "cpu: %llu samples unwound from CFI, %.1f frames each, %.1f%% to the "
			"outermost frame; %llu sessions; %llu leaf only; %.0f ring-buffer bytes per sample",
			(unsigned long long)us.samples,
			us.samples ? (double)us.frames / (double)us.samples : 0.0,
			us.samples ? 100.0 * (double)us.outermost / (double)us.samples : 0.0,
			(unsigned long long)us.sessions, (unsigned long long)st->leaf_only,
			st->samples ? (double)st->record_bytes / (double)st->samples : 0.0);
	}
	if (ss.debuginfod)
		log_debuginfod(&ss.dbgd);
	if (ss.kernel_error)
		LT_WARN("cpu: kernel frames are kept as addresses: %s", ss.kernel_error);
	if (st->note_errors)
		LT_WARN("cpu: %llu frames could not be noted for symbolization (out of memory)",
			(unsigned long long)st->note_errors);
	if (r)
		return lt_session_errorf(s, "cpu: writing symbols failed");
	return 0;
}

static void cpu_stop(struct lt_session *s, void *state)
{
	struct cpu_state *st = state;

	(void)s;
	if (!st)
		return;
	cpu_detach(st);
	cpusample_bpf__destroy(st->skel);
	lt_unwind_free(st->unwind);
	lt_sym_free(st->sym);
	for (size_t k = 0; k < st->n_py; k++)
		free(st->py[k].name);
	free(st->py);
	lt_hmap_free(&st->py_ix);
	lt_cpu_perf_free(&st->perf);
	free(st);
}

const struct lt_source lt_source_cpu = {
	.kind_lo = LT_REC_CPU_SAMPLE,
	.kind_hi = LT_REC_CPU_SAMPLE + 15,
	.start = cpu_start,
	.add_target = cpu_add_target,
	.handle = cpu_handle,
	.quiesce = cpu_quiesce,
	.finish = cpu_finish,
	.stop = cpu_stop,
};
