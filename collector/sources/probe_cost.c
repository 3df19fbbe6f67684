// SPDX-License-Identifier: Apache-2.0
#include "probe_cost.h"
#include "uprobe_multi.h"
#include "collector/target/tfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define PC_CALLS 10000       /* calls per timing: ~20 ms probed */
#define PC_ROUNDS 3          /* the fastest round counts (the machine may be busy) */

/* The probed function. It starts as most library functions do (a frame
 * push), because the first instruction decides the trap's cost: the kernel
 * emulates a push, but single-steps most others out of line, an order of
 * magnitude slower (docs/MEASUREMENTS.md, what each source costs the
 * target). */
int lt_probe_cost_target(int x);
#ifdef __x86_64__
__asm__(".text\n"
	".globl lt_probe_cost_target\n"
	".type lt_probe_cost_target, @function\n"
	"lt_probe_cost_target:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea 1(%rdi), %eax\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size lt_probe_cost_target, .-lt_probe_cost_target\n");
#else
__attribute__((noinline, used)) int lt_probe_cost_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fastest of PC_ROUNDS timings of PC_CALLS calls, in ns per call. */
static double time_calls(void)
{
	double best = 1e18;
	volatile int v = 0;
	for (int r = 0; r < PC_ROUNDS; r++) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < PC_CALLS; i++)
			v = lt_probe_cost_target(v);
		double ns = (double)(now_ns() - t0) / PC_CALLS;
		if (ns < best)
			best = ns;
	}
	return best;
}

/* Offset of the probed function in the file mapped at it (/proc/self/maps). */
static int map_offset(const struct lt_tf_map *m, void *off)
{
	uint64_t a = (uint64_t)(uintptr_t)lt_probe_cost_target;
	if (a < m->start || a >= m->end || m->perms[2] != 'x')
		return 0;
	*(uint64_t *)off = a - m->start + m->pgoff;
	return 1;
}

static int self_offset(uint64_t *off)
{
	return lt_tf_maps_each(LT_TF_PROC, getpid(), map_offset, off) > 0 ? 0 : -ENOENT;
}

static int multi_link(struct bpf_program *prog, uint64_t off, bool ret)
{
	uint64_t cookie = 0;
	return lt_uprobe_multi_link(bpf_program__fd(prog), "/proc/self/exe", &off, &cookie, 1, ret, getpid());
}

double lt_probe_cost_ns(struct bpf_program *entry, struct bpf_program *ret, bool multi)
{
	uint64_t off;
	if (!entry || !ret || self_offset(&off))
		return 0;
	double bare = time_calls(), probed = 0;
	if (multi) {
		int e = multi_link(entry, off, false), r = multi_link(ret, off, true);
		if (e >= 0 && r >= 0)
			probed = time_calls();
		if (e >= 0)
			close(e);
		if (r >= 0)
			close(r);
	} else {
		LIBBPF_OPTS(bpf_uprobe_opts, o);
		struct bpf_link *e = bpf_program__attach_uprobe_opts(entry, getpid(), "/proc/self/exe", off, &o);
		o.retprobe = true;
		struct bpf_link *r = bpf_program__attach_uprobe_opts(ret, getpid(), "/proc/self/exe", off, &o);
		if (e && r)
			probed = time_calls();
		bpf_link__destroy(e);
		bpf_link__destroy(r);
	}
	return probed > bare ? probed - bare : 0;
}
