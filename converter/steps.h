/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Steps found unaided: while pass 2 reads the logs, every completed Python
 * call, every CUDA library call and every GPU kernel is offered as a
 * candidate "series" (one per thread or stream and name, bounded memory);
 * after reading, each host's
 * series are judged and the best one becomes the steps, placed on the
 * thread that drives the loop. Step markers in the log win over detection.
 */
#ifndef LLMT_CONV_STEPS_H
#define LLMT_CONV_STEPS_H

#include <stdint.h>
#include "../eventlog/eventlog.h"

/* What the detector decided for one host (also handed to sinks). */
struct conv_steps {
	int from_markers;        /* the log's own step markers: nothing detected */
	uint32_t pid, tid;       /* the driving thread (detected steps only) */
	uint32_t track;          /* its track (a GPU stream's when on_stream) */
	int on_stream;           /* found from kernels alone: the steps lie on that stream */
	uint32_t device, stream; /* the stream, when on_stream */
	uint32_t n;              /* detected steps (0: none) */
	const uint64_t *start, *end; /* detected step bounds, n each, ascending */
	char evidence[320];      /* one line: what was used, or why no steps */
};

struct cv_steps;

struct cv_steps *cv_steps_new(uint32_t n_hosts);
void cv_steps_free(struct cv_steps *s);
/* One timeline record of pass 2 (start/dur on the host clock). Returns -1
 * only when out of memory. */
int cv_steps_feed(struct cv_steps *s, uint32_t host, uint32_t track, uint64_t start,
		  uint64_t dur, uint32_t depth, const struct evlog_event *e);
/* Judge every host's series; prof_ns: each host's profiled duration. */
int cv_steps_detect(struct cv_steps *s, const uint64_t *prof_ns);
/* The decision for a host (valid until cv_steps_free). */
const struct conv_steps *cv_steps_of(const struct cv_steps *s, uint32_t host);
/* Is this marker one of the job's own steps (`step`, `ProfilerStep#N`)? */
int cv_is_step_marker(const struct evlog_event *e);

#endif
