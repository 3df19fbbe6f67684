/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trace JSON writer (Perfetto, chrome://tracing), following Kineto's
 * conventions (CONTRACT §4): categories, M naming events, ac2g flows, ts/dur in
 * µs relative to the top-level baseTimeNanoseconds, deviceProperties.
 */
#ifndef LLMT_CONV_TRACE_JSON_H
#define LLMT_CONV_TRACE_JSON_H

#include <stddef.h>
#include "converter/sink.h"

struct fold_model;
/* Its bytes per item, for the size budget (fold.h). */
extern const struct fold_model trace_json_model;

/* One file for every host (distinct pids per host): path ends in .json or
 * .json.gz. Replaces an existing file only when overwrite. */
struct conv_sink *trace_json_new_file(const char *path, int overwrite, char *err, size_t errsz);

/* One "<host>.trace.json.gz" per host in <logdir>/plugins/profile/<run>/. */
struct conv_sink *trace_json_new_logdir(const char *logdir, const char *run, int overwrite,
					char *err, size_t errsz);

struct trace_json_stats {
	uint64_t events, flows, bytes_json, bytes_file;
};
void trace_json_stats(const struct conv_sink *s, struct trace_json_stats *st);
void trace_json_free(struct conv_sink *s);

#endif
