/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every collector source, one line each. The session's list of sources, the
 * -t names and bits, and the capabilities kubectl-prof grants its pod are
 * all expanded from LT_SOURCES. deploy/kubectl-prof includes this header
 * alone: it needs nothing else here (the evsrc column is expanded only by
 * the collector, which has eventlog.h).
 *
 * S(id, ID, bit, t, evsrc, caps):
 *   id     its `const struct lt_source lt_source_<id>` (collector/sources/),
 *          its row in the summary, and its -t name where t is 1
 *   ID     its bit's name: LT_T_<ID>
 *   bit    0 for proc (always on), else a bit of its own; -t lists the
 *          names in bit order
 *   t      1: chosen by -t <id> and by -t all; 0: never by -t (proc always
 *          runs; gpu runs with --enable-cuda-kernel true)
 *   evsrc  the enum evlog_source its lost events are counted under
 *   caps   what it needs in a container with every other capability
 *          dropped (docs/MEASUREMENTS.md, containers, capabilities and
 *          seccomp; docs/THREAT_MODEL.md says what each allows)
 *
 * The rows are in start order, which is also the order each source is
 * given a target. proc first: it follows children and names threads for
 * everyone else. cuda before python and gpu: the injected library may
 * start CUPTI on python's start (one start for both features), and a
 * kernel is linked to its launch only if the launch probes were on before
 * it was recorded.
 */
#ifndef LLMT_SOURCES_H
#define LLMT_SOURCES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define LT_SOURCES(S)                                                                    \
	S(proc,     PROC,     0,       0, EVSRC_PROC,     LT_CAP_BASE)                    \
	S(syscall,  SYSCALL,  1u << 2, 1, EVSRC_SYSCALL,  LT_CAP_BASE)                    \
	S(cpu,      CPU,      1u << 3, 1, EVSRC_CPU,      LT_CAP_BASE | LT_CAP(SYSLOG))   \
	S(cuda,     CUDA,     1u << 1, 1, EVSRC_CUDA_LIB, LT_CAP_BASE)                    \
	S(python,   PYTHON,   1u << 0, 1, EVSRC_PYTHON,   LT_CAP_BASE | LT_CAP(SYS_ADMIN)) \
	S(pysample, PYSAMPLE, 1u << 4, 1, EVSRC_PYSAMPLE, LT_CAP_BASE)                    \
	S(gpu,      GPU,      1u << 5, 0, EVSRC_CUPTI,    LT_CAP_BASE)

/* Capabilities, as Kubernetes names them (no CAP_ prefix), in the order
 * the pod lists them. Every source needs LT_CAP_BASE: BPF + PERFMON for
 * the maps and programs (proc's included, so every run), SYS_PTRACE for
 * the target's /proc/PID/{maps,exe,root}, generateCommand and the
 * collector's own check. cpu adds SYSLOG for kernel frames
 * (/proc/kallsyms hides addresses without it); python adds SYS_ADMIN
 * because libbpf creates USDT uprobes with perf_event_open, which the
 * kernel refuses with EACCES without it (the injected hook, for
 * interpreters without USDT, needs only SYS_PTRACE). */
#define LT_CAPS(C) C(BPF) C(PERFMON) C(SYS_PTRACE) C(SYSLOG) C(SYS_ADMIN)
#define LT_CAP_ENUM_(name) LT_CAP_SHIFT_##name,
enum lt_cap_shift { LT_CAPS(LT_CAP_ENUM_) };
#undef LT_CAP_ENUM_
#define LT_CAP(name) (1u << LT_CAP_SHIFT_##name)
#define LT_CAP_BASE (LT_CAP(BPF) | LT_CAP(PERFMON) | LT_CAP(SYS_PTRACE))

/* Source type bits for -t (struct lt_options.types). In-process only: the
 * log records the -t names, never these values. */
#define LT_T_ENUM_(id, ID, bit, t, evsrc, caps) LT_T_##ID = (bit),
enum lt_type_bit { LT_SOURCES(LT_T_ENUM_) };
#undef LT_T_ENUM_

/* Every type -t names: what -t all asks for. */
#define LT_T_ALL_(id, ID, bit, t, evsrc, caps) | ((t) ? (bit) : 0u)
#define LT_T_ALL (0u LT_SOURCES(LT_T_ALL_))

/* No two sources share a bit. */
#define LT_T_SUM_(id, ID, bit, t, evsrc, caps) + (bit)
#define LT_T_OR_(id, ID, bit, t, evsrc, caps) | (bit)
_Static_assert((0u LT_SOURCES(LT_T_SUM_)) == (0u LT_SOURCES(LT_T_OR_)),
	       "LT_SOURCES: each source has a bit of its own");
#undef LT_T_SUM_
#undef LT_T_OR_

/* The -t names, with their bits. */
#define LT_T_NAME_(id, ID, bit, t, evsrc, caps) { (t) ? #id : NULL, (bit) },
static const struct { const char *name; unsigned bit; } lt_t_names[] = { LT_SOURCES(LT_T_NAME_) };
#undef LT_T_NAME_
#define LT_N_SOURCES (sizeof(lt_t_names) / sizeof(lt_t_names[0]))

/* The bit -t name stands for, or 0 where it names no source. */
static inline unsigned lt_t_bit(const char *name)
{
	for (size_t i = 0; i < LT_N_SOURCES; i++)
		if (lt_t_names[i].name && !strcmp(name, lt_t_names[i].name))
			return lt_t_names[i].bit;
	return 0;
}

/* The names of the bits in types, in bit order, sep between them, into buf. */
static inline const char *lt_t_list(unsigned types, const char *sep, char *buf, size_t sz)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned bit = 1; bit && n < sz; bit <<= 1)
		for (size_t i = 0; i < LT_N_SOURCES && n < sz; i++)
			if (lt_t_names[i].name && lt_t_names[i].bit == bit && (types & bit))
				n += (size_t)snprintf(buf + n, sz - n, "%s%s", n ? sep : "",
						      lt_t_names[i].name);
	return buf;
}

#endif
