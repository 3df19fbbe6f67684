/* SPDX-License-Identifier: Apache-2.0 */
/* The summary's steps: per process its step table and time breakdown, and
 * across ranks the stragglers (step_stats.c). */
#ifndef LLMT_CONV_STEP_STATS_H
#define LLMT_CONV_STEP_STATS_H

#include <stdio.h>
#include "converter/sink.h"

struct step_stats;
struct json_object;

struct step_stats *step_stats_new(void);
void step_stats_free(struct step_stats *s);
/* Start a host: its processes with steps get a table each. -1: out of memory. */
int step_stats_begin(struct step_stats *s, const struct conv_host_meta *m);
/* Every item of the host, in the sink order (steps before what they hold
 * on the driving thread, threads before GPU streams). -1: out of memory. */
int step_stats_item(struct step_stats *s, const struct conv_item *it);
/* The host is done. */
void step_stats_end(struct step_stats *s);
/* The host's steps, as text. */
void step_stats_print(const struct step_stats *s, FILE *out, int top);
/* After the last host: the ranks and the stragglers, as text. */
void step_stats_print_job(const struct step_stats *s, FILE *out);
/* The same (and every process's steps) into a JSON object: "ranks",
 * "stragglers", "verdict" (docs/CONTRACT.md). -1: out of memory. */
int step_stats_json(const struct step_stats *s, struct json_object *root);

#endif
