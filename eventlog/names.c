// SPDX-License-Identifier: Apache-2.0
/* Names of event types, sources and error codes (stable: used in dumps). */
#include <stdarg.h>
#include <stdio.h>
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"

static const char *const type_names[EV_TYPE_MAX + 1] = {
	[EV_PROCESS] = "process",
	[EV_PROCESS_EXIT] = "process_exit",
	[EV_THREAD] = "thread",
	[EV_THREAD_EXIT] = "thread_exit",
	[EV_SYSCALL] = "syscall",
	[EV_CPU_SAMPLE] = "cpu_sample",
	[EV_PY_ENTER] = "py_enter",
	[EV_PY_EXIT] = "py_exit",
	[EV_PY_SAMPLE] = "py_sample",
	[EV_LIB_CALL] = "lib_call",
	[EV_GPU_KERNEL] = "gpu_kernel",
	[EV_GPU_MEMCPY] = "gpu_memcpy",
	[EV_GPU_MEMSET] = "gpu_memset",
	[EV_GPU_API] = "gpu_api",
	[EV_GPU_DEVICE] = "gpu_device",
	[EV_LOST] = "lost",
	[EV_SYMBOL] = "symbol",
	[EV_MARKER] = "marker",
	[EV_CLOCK] = "clock",
};

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
