/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_gate: may a process be injected now? A stopped process would
 * hold the injector (and its new library thread) until someone continues
 * it, a traced one belongs to its tracer, an exiting or zombie one cannot
 * run our calls. Such a process is refused up front, untouched, with one
 * line saying which.
 */
#ifndef LLMT_INJECT_GATE_H
#define LLMT_INJECT_GATE_H

#include <stddef.h>

/* 0 if `pid` can be injected; else -EAGAIN (stopped, traced), -ESRCH
 * (exiting, zombie, gone) and `why` ("process N is stopped (state T) ...").
 * Every thread is looked at (up to 4096); `ours` is a thread we trace
 * ourselves (0: none), whose own tracing stop does not count. */
int lt_inj_gate(int pid, int ours, char *why, size_t whysz);

#endif
