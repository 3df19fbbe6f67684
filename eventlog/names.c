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
/* A stream track's fields are named device and stream, a device track's device. */
#define DEV_META(m) 0
#define DEV_THREAD(m) 0
#define DEV_STREAM(m) offsetof(struct evlog_event, u.m.device)
#define DEV_DEVICE(m) offsetof(struct evlog_event, u.m.device)
#define STREAM_META(m) 0
#define STREAM_THREAD(m) 0
#define STREAM_STREAM(m) offsetof(struct evlog_event, u.m.stream)
#define STREAM_DEVICE(m) 0
#define TRAITS(N, num, m, track, dur, corr) \
	[EV_##N] = { EVLOG_TRACK_##track, OFF_##dur(m), OFF_##corr(m), DEV_##track(m), \
		     STREAM_##track(m) },
const struct evlog_traits evlog_traits[EV_TYPE_MAX + 1] = { EVLOG_TYPES(TRAITS) };
#undef TRAITS

/* The trait fields have the widths evlog_dur() and the others read. */
#define SZ_dur(m) _Static_assert(sizeof(((struct evlog_event *)0)->u.m.dur) == 8, #m ".dur");
#define SZ_correlation_id(m) \
	_Static_assert(sizeof(((struct evlog_event *)0)->u.m.correlation_id) == 8, #m ".corr");
#define SZ__(m)
#define SZ_STREAM(m) _Static_assert(sizeof(((struct evlog_event *)0)->u.m.device) == 4 && \
				    sizeof(((struct evlog_event *)0)->u.m.stream) == 4, #m);
#define SZ_DEVICE(m) _Static_assert(sizeof(((struct evlog_event *)0)->u.m.device) == 4, #m);
#define SZ_THREAD(m)
#define SZ_META(m)
#define CHECK_SIZES(N, num, m, track, dur, corr) SZ_##dur(m) SZ_##corr(m) SZ_##track(m)
EVLOG_TYPES(CHECK_SIZES)
#undef CHECK_SIZES

/* A number past the count or given twice does not build: no gap either. */
#define SOURCE_NAME(N, num, name) [EVSRC_##N] = #name,
static const char *const source_names[EVSRC_MAX + 1] = { EVLOG_SOURCES(SOURCE_NAME) };
#undef SOURCE_NAME

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
	case EVLOG_ESEGMENT: return "a segment of the log is missing or altered";
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
