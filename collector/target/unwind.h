/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unwind: a sampled user stack from the binaries' call-frame information
 * (.eh_frame; .debug_frame where the object has it, or, for a stripped
 * object, its debug file's from debuginfod when DEBUGINFOD_URLS is set,
 * fetched in the background), for code built without frame pointers. BPF sends the interrupted user registers and a bounded
 * copy of the stack from the stack pointer up (bpf/cpusample.h); here
 * libdw's unwinder (libdwfl) runs over that copy, as `perf record
 * --call-graph dwarf` does at report time. Frames without CFI (JIT code)
 * fall back to the frame-pointer chain (libdw's x86-64 backend).
 *
 * The process's objects are the files symbolize.c opened when it became a
 * target (tfile.h: map_files or inside its root, regular files only), read
 * with libelf's ELF_C_READ (pread, no mapping a truncating target turns
 * into SIGBUS). One libdwfl session per process, rebuilt when its maps are
 * read again; at most max_procs kept (least recently used goes first).
 */
#ifndef LLMT_UNWIND_H
#define LLMT_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "symbolize.h"

struct lt_unwind;

/* sym: where the mappings and opened objects come from (not owned; it must
 * outlive u). */
int lt_unwind_new(struct lt_unwind **out, struct lt_sym *sym, unsigned max_procs);
void lt_unwind_free(struct lt_unwind *u);

/* Unwind one sample of pid: regs are the x86-64 DWARF registers 0..16
 * (LT_CPU_NREGS), stack the bytes copied from regs[7] (rsp) up. Writes at
 * most max addresses, leaf first (ips[0] the interrupted pc, the others
 * return addresses). Returns the count (0: nothing could be unwound, e.g.
 * the pid's maps are unknown); *complete: 1 when the outermost frame was
 * reached (its CFI ends the stack), 0 when the unwinding stopped short. */
unsigned lt_unwind_sample(struct lt_unwind *u, int pid, const uint64_t *regs,
			  const uint8_t *stack, size_t stack_len, uint64_t *ips, unsigned max,
			  int *complete);

struct lt_unwind_stats {
	uint64_t samples, frames;   /* unwound, frames found over all */
	uint64_t sessions;          /* libdwfl sessions built (a process, or its maps again) */
	uint64_t failed;            /* samples where no session could be built */
	uint64_t outermost;         /* samples unwound to a frame the CFI marks outermost */
};
void lt_unwind_stats(const struct lt_unwind *u, struct lt_unwind_stats *st);

#endif
