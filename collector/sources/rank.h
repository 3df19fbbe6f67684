/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A process's place in a distributed job, from the environment its image
 * started with (/proc/PID/environ): rank, local rank and world size as the
 * usual launchers set them (torchrun, Open MPI, MPICH/PMI, Slurm). Written
 * as EV_RANK when the collector begins to follow a process.
 */
#ifndef LLMT_RANK_H
#define LLMT_RANK_H

#include <stdint.h>

#include "collector/session/session.h"

/* Environment bytes read at most: keys past this are not seen. */
#define LT_RANK_ENV_MAX (1u << 20)

struct lt_rank {
	int64_t rank, local_rank, world_size; /* -1: not set */
	char source[24];                      /* the variable rank came from, or "" */
};

/* Read PROC/PID/environ (bounded): NUL-separated KEY=VALUE entries; a value
 * that is not a plain decimal number below 2^31 is ignored. 1 when any
 * field was found, 0 none, -errno unreadable. */
int lt_rank_read(const char *proc, int pid, struct lt_rank *r);

/* Write EV_RANK for pid at ts when its environment names a rank, in a
 * chunk of its own (a reader older than 1.6 skips only that chunk). */
void lt_rank_emit(struct lt_session *s, uint64_t ts, int pid);

#endif
