/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One software cpu-clock perf event per CPU, each running a BPF program:
 * what every sampling source (cpu, pysample) needs. No hardware counters
 * are assumed.
 */
#ifndef LLMT_CPU_PERF_H
#define LLMT_CPU_PERF_H

struct bpf_program;
struct bpf_link;
struct lt_session;

struct lt_cpu_perf {
	int n_cpus;
	int *pfd;                 /* perf event fd per CPU, -1 if none */
	struct bpf_link **links;  /* per CPU */
};

/* Allocate per-CPU slots. 0, or -1 with the session's error set. */
int lt_cpu_perf_init(struct lt_session *s, struct lt_cpu_perf *p, const char *who);

/* Open the events at `freq` Hz and attach `prog` on every online CPU.
 * 0 if at least one CPU samples, else -1 with the session's error set. */
int lt_cpu_perf_attach(struct lt_session *s, struct lt_cpu_perf *p, struct bpf_program *prog,
		       unsigned freq, const char *who);

/* Stop sampling (idempotent); lt_cpu_perf_free also frees the slots. */
void lt_cpu_perf_detach(struct lt_cpu_perf *p);
void lt_cpu_perf_free(struct lt_cpu_perf *p);

#endif
