/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probe_cost: what one probed call costs the thread that makes it (the
 * entry and return traps and the programs' run), measured on this machine
 * at start, so a summary can say what each probed function cost the target.
 */
#ifndef LLMT_PROBE_COST_H
#define LLMT_PROBE_COST_H

#include <stdbool.h>

struct bpf_program;

/* Nanoseconds per call of a function of our own under an entry probe
 * (`entry`) and a return probe (`ret`): as uprobe_multi links if `multi`
 * (programs loaded for them), else perf-event uprobes. The collector is no
 * target, so the programs take their early exit: a lower bound, short of
 * a target's by the record it writes. 0 if it could not be measured. */
double lt_probe_cost_ns(struct bpf_program *entry, struct bpf_program *ret, bool multi);

#endif
