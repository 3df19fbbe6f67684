/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The XPlane writer: a conv_sink producing "<host>.xplane.pb" for the
 * TensorBoard profile plugin (xprof), schema in schemas/xplane.proto.
 *
 * Planes per host: "/host:CPU" (one line per thread), "/device:GPU:<n>"
 * (id n, one line per stream "Stream #<id>(...)"), "Task Environment".
 * Events are encoded into the output as they arrive, line after line (the
 * sink contract's track order), so memory holds only metadata (names, line
 * headers), never the events.
 */
#ifndef LLMT_CONV_XPLANE_H
#define LLMT_CONV_XPLANE_H

#include <stddef.h>
#include <stdint.h>
#include "converter/sink.h"

/* One output file for one host at final_path (its directory must exist).
 * A second host is refused with an error. Published by finish(ok=1):
 * never replaces an existing file unless overwrite. NULL + err on error. */
struct conv_sink *xplane_sink_new(const char *final_path, int overwrite,
				  char *err, size_t errsz);

/* One file per host in the TensorBoard layout:
 * <logdir>/plugins/profile/<run>/<host>.xplane.pb (directories created).
 * run may be NULL: the first host's profile start time (tb_run_name). */
struct conv_sink *xplane_sink_new_logdir(const char *logdir, const char *run,
					 int overwrite, char *err, size_t errsz);

/* Free a sink (after finish, or instead of it: then outputs are discarded). */
void xplane_sink_free(struct conv_sink *s);

/* Figures of the last host written, for summaries and benchmarks. */
struct xplane_stats {
	uint64_t events;         /* events written */
	uint64_t lines;
	uint64_t repaired;       /* children cut to fit their parent */
	uint64_t dropped;        /* out-of-order events dropped */
	uint64_t bytes;          /* size of the .xplane.pb */
};
void xplane_sink_stats(const struct conv_sink *s, struct xplane_stats *st);

/* Occupancy estimate (percent) of a kernel from device limits, 0 if any
 * input is unknown. Exposed for tests. */
double xplane_occupancy_pct(uint32_t block_threads, uint32_t regs_per_thread,
			    uint32_t smem_per_block, uint32_t max_threads_per_sm,
			    uint32_t max_regs_per_sm, uint32_t max_smem_per_sm);

#endif
