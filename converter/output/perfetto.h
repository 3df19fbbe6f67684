/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Perfetto trace writer: Perfetto's own protobuf format (a Trace of
 * TracePackets, protos/perfetto/trace/ upstream), which ui.perfetto.dev and
 * trace_processor read directly, ~5x smaller than the trace JSON of the
 * same timeline (CONTRACT §4b).
 */
#ifndef LLMT_CONV_PERFETTO_H
#define LLMT_CONV_PERFETTO_H

#include <stddef.h>
#include <stdint.h>
#include "converter/sink.h"

struct fold_model;
/* Its bytes per item, for the size budget (fold.h). */
extern const struct fold_model perfetto_model;

/* One file for every host (distinct pids per host, as the trace JSON).
 * Replaces an existing file only when overwrite. */
struct conv_sink *perfetto_new_file(const char *path, int overwrite, char *err, size_t errsz);

struct perfetto_stats {
	uint64_t slices, instants, flows, packets, bytes;
	uint64_t reordered;   /* items earlier than their sequence's clock: moved to it */
};
void perfetto_stats(const struct conv_sink *s, struct perfetto_stats *st);
void perfetto_free(struct conv_sink *s);

#endif
