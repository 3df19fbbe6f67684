/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pysample: sampled Python stacks (pysample.bpf.c -> collector/sources/pysample.c).
 * The BPF side walks CPython's frame chain of the sampled thread and sends
 * the code-object addresses, leaf first; user space turns each address into
 * "qualname (file:line)" once per process by reading the target's memory.
 * Include after common.h.
 */
#ifndef LLMT_BPF_PYSAMPLE_H
#define LLMT_BPF_PYSAMPLE_H

#include "common.h"

#define LT_PYS_FRAMES 64      /* Python frames kept per sample (leaf side) */
#define LT_PYS_THREADS 256    /* thread states looked at to find a thread's */

/* Where the interpreter's structures keep what the walk needs, per process
 * (collector/sources/pyoffsets.c fills it from the interpreter's version). */
struct lt_pys_proc {
	__u64 runtime;            /* address of _PyRuntime in the target */
	__u16 rt_interp_head;     /* _PyRuntime.interpreters.head */
	__u16 is_next;            /* PyInterpreterState.next */
	__u16 is_threads_head;    /* PyInterpreterState.threads.head */
	__u16 ts_next;            /* PyThreadState.next */
	__u16 ts_native_tid;      /* PyThreadState.native_thread_id */
	__u16 ts_cframe;          /* PyThreadState.cframe */
	__u16 cf_current_frame;   /* _PyCFrame.current_frame */
	__u16 fr_code;            /* _PyInterpreterFrame.f_code */
	__u16 fr_previous;        /* _PyInterpreterFrame.previous */
	__u16 fr_owner;           /* _PyInterpreterFrame.owner */
	__u16 owner_cstack;       /* owner value of C-stack shim frames; 0xffff: none */
	__u16 fr_is_entry;        /* _PyInterpreterFrame.is_entry (3.11); 0xffff: none */
	__u16 co_qualname;        /* PyCodeObject.co_qualname */
	__u16 pad[3];
};

/* pys_threads: a thread's PyThreadState, cached per tid. */
struct lt_pys_thread {
	__u64 tstate;             /* 0: none found at `checked` */
	__u64 checked;
};
#define LT_PYS_PROCS 4096     /* pys_procs entries */
#define LT_PYS_TIDS 16384     /* pys_threads entries */

/* Flags of a sample record. */
#define LT_PYS_F_TRUNCATED 1  /* more frames than LT_PYS_FRAMES */
#define LT_PYS_F_UNKNOWN 2    /* a target without a lt_pys_proc: detect it */
#define LT_PYS_F_LEAF_SHIM 4  /* the chain starts at a C-stack shim (3.12): the
			       * innermost eval-loop call runs no Python frame */

/* kind LT_REC_PY_SAMPLE. codes[0..n): code objects, leaf first. The record
 * ends after codes[n - 1]: only the frames found travel. */
struct lt_rec_py_sample {
	struct lt_rec_hdr h;
	__u32 n;
	__u32 flags;
	__u64 codes[LT_PYS_FRAMES];
};

#endif
