/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_latch: stop one thread of a busy process (no thread asleep in a
 * system call) at a point where it holds no lock of the C library, for the
 * injector (injector.h) to load a library from.
 *
 * The point is the entry of a function the program calls constantly and
 * that libc never calls while holding one of its locks: for CPython, its
 * allocator and evaluation entry points. With every thread stopped, the
 * first two bytes of each such function are replaced by `jmp .` (EB FE);
 * the threads run again, and the first one to call one of them spins there,
 * in user space, at the function's first instruction, with nothing of the
 * function done yet. Rounds that stop every thread (1, 2, 4 ... ms apart,
 * bounded by wait_ms) look for a thread whose instruction pointer is at a
 * patched entry; with every thread stopped the original bytes go back, so
 * no thread ever sees a half-written instruction, and every thread but the
 * one found is let go. That thread is left stopped at the entry, its
 * registers untouched: restoring them later resumes the original call.
 *
 * Why a spin and not int3: a trapped thread owns a SIGTRAP, which the kernel
 * delivers (killing the process) if the tracer dies before cancelling it,
 * and an int3 left in the text kills the next caller. A thread spinning on
 * `jmp .` owns nothing: if the collector dies, the kernel lets every traced
 * thread run again, and a guardian process (forked before the patch,
 * holding /proc/PID/mem of the target's address space as it was then)
 * notices the collector's end on a pipe, stops the threads, puts the bytes
 * back where they are still ours and lets the threads go: the spinners
 * resume the original call. The guardian shares nothing that ends the
 * collector: a session of its own, a name of its own, every catchable
 * signal ignored, the target's cgroups; and it ends a collector that is
 * still mid-latch wait_ms + 5 s on (stopped, frozen). The collector watches
 * the guardian the same way (its socket's end): a guardian killed alone
 * makes the collector put the bytes back at once and give the attempt up.
 * Only both killed within the same instant of the window (before either
 * sees the other's end) would leave a thread reaching the patch spinning;
 * it never crashes.
 *
 * A process that forks while patched: the child (traced from birth through
 * PTRACE_O_TRACEFORK) gets its copy of the bytes restored before it runs.
 * An exec replaces the patched image (nothing to restore: the writes go to
 * the old address space through the mem fd) and fails the attempt.
 */
#ifndef LLMT_INJECT_LATCH_H
#define LLMT_INJECT_LATCH_H

#include <stddef.h>

/* Where a busy process may be stopped. */
struct lt_inj_latch {
	const char *object;          /* substring of the mapped file's base name */
	const char *const *syms;     /* exported functions, NULL-terminated */
	int wait_ms;                 /* how long threads may run until one arrives */
	int freeze_first;            /* stop the threads before looking for the
				      * functions (a process still starting: the
				      * call may come soon); -ENOENT while the
				      * object is not mapped yet */
};

/* Stop one thread of `pid` at the entry of one of spec's functions. 0: *tid
 * is in a ptrace interrupt stop at that entry (ptrace options cleared), the
 * patches are gone and every other thread runs untraced; *where names the
 * function. Negative errno with one line in err otherwise: -EAGAIN (no
 * thread came by within wait_ms), -ENOENT (no such function to patch),
 * -ESRCH (exited), -EPERM (no ptrace rights), -ECHILD (the guardian
 * ended); the process as found. */
int lt_latch_thread(int pid, const struct lt_inj_latch *spec, int *tid, const char **where,
		    char *err, size_t errsz);

/* The same, with `adopt` a thread of pid the calling thread already traces
 * and holds stopped (inject_exec.h): taken as seized and stopped, never
 * seized again; let go like the others (0: none). */
int lt_latch_thread_from(int pid, int adopt, const struct lt_inj_latch *spec, int *tid, const char **where,
			 char *err, size_t errsz);

#endif
