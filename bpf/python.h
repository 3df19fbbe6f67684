/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Python function tracing records (python.bpf.c -> collector/sources/python.c).
 * CPython built with dtrace/SystemTap support fires the USDT probes
 * python:function__entry and python:function__return with the arguments
 * (filename, funcname, lineno); we copy the two strings, bounded, into the
 * record and let the event log intern them.
 */
#ifndef LLMT_BPF_PYTHON_H
#define LLMT_BPF_PYTHON_H

#include "common.h"

/* Bytes kept of each string (NUL included); longer names are cut. */
#define LT_PY_STR 96

/* A target exec'd: its interpreter may have changed, so the collector
 * looks for USDT probes again. Record: bare struct lt_rec_hdr. */
#define LT_REC_PY_EXEC 66

struct lt_rec_py_enter {
	struct lt_rec_hdr h;
	__u32 line;
	__u32 pad;
	char func[LT_PY_STR];
	char file[LT_PY_STR];
};

struct lt_rec_py_exit {
	struct lt_rec_hdr h;
	char func[LT_PY_STR];
};

#endif
