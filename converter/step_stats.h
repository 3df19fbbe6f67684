/* SPDX-License-Identifier: Apache-2.0 */
/* The summary's per-step table and step-time breakdown (step_stats.c). */
#ifndef LLMT_CONV_STEP_STATS_H
#define LLMT_CONV_STEP_STATS_H

#include <stdio.h>
#include "sink.h"

struct step_stats;

struct step_stats *step_stats_new(void);
void step_stats_free(struct step_stats *s);
/* Start a host: forget the last one's steps. */
void step_stats_begin(struct step_stats *s, const struct conv_host_meta *m);
/* Every item of the host, in the sink order (steps before what they hold
 * on the driving thread, threads before GPU streams). -1: out of memory. */
int step_stats_item(struct step_stats *s, const struct conv_item *it);
void step_stats_print(const struct step_stats *s, FILE *out, int top);

#endif
