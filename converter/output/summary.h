/* SPDX-License-Identifier: Apache-2.0 */
/* The summary sink: top-N tables per source, plain text, one section per
 * host, then the job's ranks and stragglers; or all as one JSON object. */
#ifndef LLMT_CONV_SUMMARY_H
#define LLMT_CONV_SUMMARY_H

#include <stdio.h>
#include "converter/sink.h"

/* json: one JSON object (docs/CONTRACT.md) instead of the tables. */
struct conv_sink *summary_new(FILE *out, int top_n, int json);
void summary_free(struct conv_sink *s);

#endif
