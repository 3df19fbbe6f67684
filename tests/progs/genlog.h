/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the log generators of the tests (tests/progs/ *_genlog.c) share: the
 * writer, put() (an event written, or the program ends saying why) and
 * ev() (a zeroed event of a type, time and thread of the process
 * GENLOG_PID, which the includer defines).
 */
#ifndef LLMT_TESTS_GENLOG_H
#define LLMT_TESTS_GENLOG_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventlog/eventlog.h"

#ifndef GENLOG_PID
#error "define GENLOG_PID, the process the events belong to, before genlog.h"
#endif

static struct evlog_writer *w;

static inline void put(const struct evlog_event *e)
{
	if (evlog_write(w, e) < 0) {
		fprintf(stderr, "%s: %s\n", program_invocation_short_name, evlog_writer_error(w));
		exit(1);
	}
}

static inline struct evlog_event ev(uint32_t type, uint64_t ts, uint32_t tid)
{
	struct evlog_event e;

	memset(&e, 0, sizeof(e));
	e.type = type;
	e.ts = ts;
	e.pid = GENLOG_PID;
	e.tid = tid;
	return e;
}

#endif
