/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pyoffsets: find the CPython interpreter of a process and the layout of
 * its structures, for sampled Python stacks (-t pysample).
 *
 * The interpreter is the executable or a mapped libpython that defines
 * _PyRuntime; its version comes from the Py_Version symbol (3.11+), else
 * from its file name. Layouts are a table per minor version (x86-64):
 * CPython has no stable layout for these structures, so a version outside
 * the table is refused with the reason.
 */
#ifndef LLMT_PYOFFSETS_H
#define LLMT_PYOFFSETS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/pysample.h"

/* What user space reads from code and string objects. */
struct lt_pyoff_obj {
	uint16_t ob_type;
	uint16_t co_firstlineno, co_filename, co_name, co_qualname;
	uint16_t str_length, str_state;     /* PyASCIIObject */
	uint16_t str_ascii_data;            /* sizeof(PyASCIIObject) */
	uint16_t str_compact_data;          /* sizeof(PyCompactUnicodeObject) */
};

struct lt_pyinterp {
	char path[4096];          /* as the process sees it */
	int major, minor, micro;
	uint64_t bias;            /* load address - ELF address */
	uint64_t runtime;         /* _PyRuntime in the process */
	uint64_t code_type;       /* PyCode_Type in the process, 0 if unknown */
	struct lt_pys_proc bpf;   /* what the BPF walk needs (runtime set) */
	struct lt_pyoff_obj obj;
	dev_t dev;                /* the interpreter file */
	ino_t ino;
};

/* Layout of version major.minor. 0, or -ENOTSUP. */
int lt_pyoff_layout(int major, int minor, struct lt_pys_proc *bpf, struct lt_pyoff_obj *obj);

/* Find pid's interpreter. Returns 0 and fills `out`; -ENOENT when the
 * process maps no CPython (not Python, or not yet: a launcher that has not
 * exec'd, a libpython not mapped yet); -ENOTSUP when its version or layout
 * is not supported; -ESRCH when it is gone. `why` says which, in words. */
int lt_pyoff_detect(int pid, struct lt_pyinterp *out, char *why, size_t whysz);

/* A cheap fingerprint of pid's mappings (ranges, files, exe identity), to avoid
 * looking again at a process whose mappings have not changed. */
uint64_t lt_pyoff_maps_key(int pid);

#endif
