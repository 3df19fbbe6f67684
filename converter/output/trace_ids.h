/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pids and tids the trace writers (JSON, Perfetto) give their tracks,
 * so both outputs of one profile name each track alike: processes and
 * threads as logged, GPUs as Kineto numbers them (pid = the device), a
 * "Steps" track in the driving process, hosts apart in one file.
 */
#ifndef LLMT_CONV_TRACE_IDS_H
#define LLMT_CONV_TRACE_IDS_H

#include <stddef.h>
#include <stdint.h>
#include "converter/sink.h"

#define TRACE_HOST_PID_STRIDE 10000000u   /* > pid_max (4194304): hosts never share pids */
#define TRACE_GPU_PID_CLASH_BASE 4200000u /* GPU pid when a process has the device's number */
/* Steps get a track of their own in the driving process, above every
 * Linux tid (PID_MAX_LIMIT is 2^22). */
#define TRACE_STEPS_TID 4300000u
#define TRACE_GPU_SORT_BASE 5000000u      /* as Kineto: GPUs sort after processes */

/* Where host m's pids start in a file: apart when one file holds several. */
static inline uint64_t trace_pid_base(const struct conv_host_meta *m, int one_file)
{
	return one_file && m->n_hosts > 1 ? (uint64_t)m->host_index * TRACE_HOST_PID_STRIDE : 0;
}

/* A GPU's pid (before the host's base): its number, unless a process has it. */
uint32_t trace_gpu_pid(const struct conv_host_meta *m, uint32_t device);
/* EV_GPU_DEVICE of a device, or NULL. */
const struct evlog_event *trace_gpu_props(const struct conv_host_meta *m, uint32_t device);
/* Is the item one of the steps, shown on the Steps track? */
static inline int trace_on_steps(const struct conv_item *it)
{
	return it->track == CONV_TRACK_THREAD && it->step && !__builtin_strcmp(it->category, "step");
}

/* Display names, as both writers show them. */
void trace_process_name(const struct conv_host_meta *m, const struct conv_process *p,
			int with_host, char *buf, size_t n);
void trace_gpu_name(const struct conv_gpu *g, char *buf, size_t n);

#endif
