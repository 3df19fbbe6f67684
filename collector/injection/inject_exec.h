/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_exec: hold a process that execs an interpreter from its exec on,
 * system call by system call, until the dynamic loader has mapped the
 * interpreter's code (and libc), so that the latch (inject_latch.h) can
 * patch the interpreter's start (Py_RunMain) before the program reaches
 * it. Without the hold, a collector thread that was not scheduled in time
 * found the program already past its start (a CPU-bound script under load:
 * 6 launches in 30 recorded nothing).
 *
 * The launched command is seized while it waits, stopped, before its
 * execve: from then on nothing is left to chance. A process that exec'd on
 * its own (a multiprocessing "spawn" worker) is seized as soon as its exec
 * is heard of.
 *
 * Safety: the process is only ever in ptrace stops of the calling thread
 * (PTRACE_SEIZE; no signal of ours, no stop of its own): if the collector
 * dies, the kernel lets it run on as if nothing happened. Every ptrace call
 * is made from the thread that seized it (the kernel's rule).
 */
#ifndef LLMT_INJECT_EXEC_H
#define LLMT_INJECT_EXEC_H

#include <stdbool.h>
#include <stddef.h>

struct lt_xc {
	int pid;                /* the process; its main thread (tid = pid) is traced */
	bool traced;
	bool before_exec;       /* seized before its execve: the exec is awaited */
};

/* Seize `pid`: before its execve (`before_exec`: it waits stopped, the
 * launched command), or now (it has just exec'd; stopped at once). 0, or
 * -errno with err set (nothing left traced). */
int lt_xc_seize(struct lt_xc *x, int pid, bool before_exec, char *err, size_t errsz);

/* Let it run, system call by system call, until the executable mapping of
 * the mapped file named like *object* that exports `sym` covers `sym`, and
 * libc is mapped: 0 with the main thread stopped at a system call's exit
 * (still traced: hand its tid to lt_inj_load_held's hold). Else released:
 * -ENOEXEC (the new image is no such program; seized before its exec, a
 * second exec of one is awaited for a second: env, a shell), -ESRCH (it exited),
 * -EAGAIN (stopped by a signal, as it would have been), -ETIMEDOUT. */
int lt_xc_run_to(struct lt_xc *x, const char *object, const char *sym, int timeout_ms, char *err,
		 size_t errsz);

/* Detach if still traced (the injector may have detached it already). */
void lt_xc_release(struct lt_xc *x);

#endif
