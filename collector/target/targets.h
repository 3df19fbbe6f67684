/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Target processes as /proc shows them: existence checks, the initial
 * snapshot of names (so the timeline has names for threads that started
 * before profiling), descendants of the given PIDs, and which targets are
 * still alive.
 */
#ifndef LLMT_TARGETS_H
#define LLMT_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/session/session.h"

/* Does `pid` name a live (not zombie) process? */
bool lt_proc_alive(int pid);

/* Read /proc/<pid>/comm, cmdline (NULs as spaces), exe into buffers
 * (empty strings where unreadable). Returns 0 if the process existed. */
int lt_proc_read_comm(int pid, int tid, char *buf, size_t sz);
int lt_proc_read_cmdline(int pid, char *buf, size_t sz);
int lt_proc_read_exe(int pid, char *buf, size_t sz);
int lt_proc_read_ppid(int pid);
/* When the process started (clock ticks since boot, /proc/PID/stat field 22;
 * kept across exec): tells a reused pid from the same process. 0 if gone. */
uint64_t lt_proc_read_start(int pid);
/* The process (thread group) a thread id belongs to; 0 if gone. */
int lt_proc_read_tgid(int pid);
/* Thread `tid` of `pid`: its id in its own pid namespace (the last field
 * of NSpid); 0 if gone or unreadable. */
uint32_t lt_proc_read_ns_tid(int pid, int tid);

/* Write EV_PROCESS for `pid` (is_exec as given) at time ts. */
int lt_targets_emit_process(struct lt_session *s, uint64_t ts, int pid, int tid, int ppid,
			    const char *comm, bool is_exec);

/* Write the EVLOG_MARK_NS_TID marker of thread (pid, tid) when its id in
 * its own pid namespace, ns_tid, is another (0: unknown, nothing written). */
int lt_targets_emit_ns_tid(struct lt_session *s, uint64_t ts, int pid, int tid, uint32_t ns_tid);

/* Write EV_PROCESS plus one EV_THREAD (and its ns_tid marker) per existing
 * thread of `pid`. */
int lt_targets_snapshot(struct lt_session *s, int pid);

/* Fill out[] with live descendants of the pids in roots[] (not the roots).
 * Returns how many (at most max). */
int lt_targets_descendants(const int *roots, int n_roots, int *out, int max);

/* Drop targets from the shared map whose process is gone (exited before
 * we could see it exit). Returns the number of targets still alive. */
int lt_targets_sweep(struct lt_session *s);

/* CLOCK_MONOTONIC now, in ns. */
uint64_t lt_now_ns(void);

#endif
