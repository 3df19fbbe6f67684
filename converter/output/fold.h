/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A size budget for a trace writer: a filter sink in front of it that, when
 * the trace would outgrow the budget, folds the shortest calls. From the
 * sizes the core measures before writing (sink.h: plan) it picks the
 * smallest duration threshold whose trace fits; then each run of calls
 * shorter than that on a thread, siblings under one parent (with all they
 * contain), becomes one item "N calls folded, X us" (category "folded",
 * struct conv_fold: the count, the time, the most frequent names) spanning
 * them. Only Python functions, system calls and library calls without a
 * flow fold; a call of FOLD_MAX_NS or longer never does. Items inside a run
 * that do not fold (samples, a launch) are kept and sent after its fold.
 */
#ifndef LLMT_CONV_FOLD_H
#define LLMT_CONV_FOLD_H

#include <stdio.h>
#include <stdint.h>
#include "converter/sink.h"

#define CONV_TRACE_BUDGET_DEFAULT 100000000ull /* bytes: --max-trace-mb 100 */
#define FOLD_MAX_NS 1000000ull                 /* calls of 1 ms or more never fold */

/* What an item costs in a writer's output, to plan a budget with; each
 * writer defines its own beside its code. */
struct fold_model {
	const char *what;      /* "trace JSON" */
	uint32_t budget_x;     /* times the --max-trace-mb budget it may take */
	uint32_t item;         /* bytes of an item, without its strings */
	uint32_t str_pct;      /* percent of its strings' bytes written with it (interned: few) */
	uint32_t flow;         /* bytes a flow adds */
	uint32_t fold;         /* bytes of a fold item */
	uint32_t track;        /* bytes naming a track */
};

/* A filter in front of inner (which it frees with inner_free), keeping the
 * writer's output under budget bytes as the model counts them. */
struct conv_sink *fold_new(struct conv_sink *inner, void (*inner_free)(struct conv_sink *),
			   uint64_t budget, const struct fold_model *model);
struct conv_sink *fold_inner(const struct conv_sink *s);
/* "; trace JSON: ..." when it folded anything (or could not fit the budget). */
void fold_report(const struct conv_sink *s, FILE *f);
uint64_t fold_folded(const struct conv_sink *s); /* calls folded */
void fold_free(struct conv_sink *s);

#endif
