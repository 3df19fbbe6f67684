/* SPDX-License-Identifier: Apache-2.0 */
/* The summary sink: top-N tables per source, plain text, one section per host. */
#ifndef LLMT_CONV_SUMMARY_H
#define LLMT_CONV_SUMMARY_H

#include <stdio.h>
#include "sink.h"

struct conv_sink *summary_new(FILE *out, int top_n);
void summary_free(struct conv_sink *s);

#endif
