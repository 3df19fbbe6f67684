/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sources of events, for EV_LOST and summaries: S(NAME, number, name) makes
 * EVSRC_<NAME> = number, shown as name in dumps and summaries. Part of the
 * file format: never renumber. The numbers run from 0 without a gap (names.c
 * fails to build otherwise); BPF code includes this header too (nothing
 * else is here), for the slots of its shared `lost` table.
 */
#ifndef LLMT_EVLOG_SOURCES_H
#define LLMT_EVLOG_SOURCES_H

#define EVLOG_SOURCES(S)             \
	S(OTHER,    0, other)        \
	S(SYSCALL,  1, syscall)      \
	S(CPU,      2, cpu)          \
	S(PYTHON,   3, python)       \
	S(CUDA_LIB, 4, cuda_lib)     \
	S(CUPTI,    5, cupti)        \
	S(PROC,     6, proc)         \
	S(PYSAMPLE, 7, pysample)

#define EVSRC_ENUM_(N, num, name) EVSRC_##N = (num),
#define EVSRC_COUNT_(N, num, name) + 1
enum evlog_source {
	EVLOG_SOURCES(EVSRC_ENUM_)
	EVSRC_MAX = EVLOG_SOURCES(EVSRC_COUNT_) - 1,
};
#undef EVSRC_ENUM_
#undef EVSRC_COUNT_

#endif
