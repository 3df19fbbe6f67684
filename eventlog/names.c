// SPDX-License-Identifier: Apache-2.0
/* Names of event types, sources and error codes (stable: used in dumps). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"

#define NAME(N, num, m, track, dur, corr) [EV_##N] = #m,
static const char *const type_names[EV_TYPE_MAX + 1] = { EVLOG_TYPES(NAME) };
#undef NAME

/* A trait field's offset in struct evlog_event, or 0 for _. */
#define OFF_dur(m) offsetof(struct evlog_event, u.m.dur)
#define OFF_correlation_id(m) offsetof(struct evlog_event, u.m.correlation_id)
#define OFF__(m) 0
#define TRAITS(N, num, m, track, dur, corr) \
	[EV_##N] = { EVLOG_TRACK_##track, OFF_##dur(m), OFF_##corr(m) },
const struct evlog_traits evlog_traits[EV_TYPE_MAX + 1] = { EVLOG_TYPES(TRAITS) };
#undef TRAITS

static const char *const source_names[EVSRC_MAX + 1] = {
	[EVSRC_OTHER] = "other",
	[EVSRC_SYSCALL] = "syscall",
	[EVSRC_CPU] = "cpu",
	[EVSRC_PYTHON] = "python",
	[EVSRC_CUDA_LIB] = "cuda_lib",
	[EVSRC_CUPTI] = "cupti",
	[EVSRC_PROC] = "proc",
	[EVSRC_PYSAMPLE] = "pysample",
};

const char *evlog_type_name(uint32_t type)
{
	return type <= EV_TYPE_MAX ? type_names[type] : NULL;
}

const char *evlog_source_name(uint32_t source)
{
	return source <= EVSRC_MAX ? source_names[source] : "unknown";
}

const char *evlog_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case EVLOG_OK: return "success";
	case EVLOG_EIO: return "I/O error";
	case EVLOG_ENOMEM: return "out of memory";
	case EVLOG_EMAGIC: return "not an event log";
	case EVLOG_EVERSION: return "unsupported event log version";
	case EVLOG_EHEADER: return "corrupt event log header";
	case EVLOG_EINVAL: return "invalid argument";
	case EVLOG_EEXIST: return "output already exists";
	case EVLOG_END: return "end of log";
	default: return "unknown error";
	}
}

int evf_msg(char *msg, size_t msgsz, int code, const char *fmt, ...)
{
	if (msg && msgsz) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(msg, msgsz, fmt, ap);
		va_end(ap);
	}
	return -code;
}
