/* SPDX-License-Identifier: Apache-2.0 */
/*
 * injector: load a shared library into a running process and unload it
 * again, leaving the process as it was.
 *
 * How (x86-64): one thread is seized (PTRACE_SEIZE + PTRACE_INTERRUPT) while
 * it sleeps in a system call; set-up runs as system calls made through the
 * target's libc syscall() (mmap of a scratch page, memfd_create, socketpair,
 * close); the library is written into the memfd from outside
 * (/proc/PID/fd/N) and loaded with the target's own dlopen() on
 * "/proc/self/fd/N". Every call runs above a signal frame that holds the
 * thread as it must go on and returns into rt_sigreturn (through a small
 * trampoline of ours that keeps the result in the frame, or libc's
 * __restore_rt): the collector catches that at its entry and skips it, and
 * if the collector dies or gives a call up at LT_INJ_CALL_TIMEOUT_MS, the
 * kernel puts the thread back from the frame by itself. Registers (general
 * and FP/xstate) are restored exactly, the interrupted system call restarts
 * as if nothing happened, and the thread is detached. Signals that arrive
 * meanwhile are passed on. Nothing is written into the target's filesystem.
 * (A libc without __restore_rt's bytes, or no XSAVE image, takes the older
 * way: system calls stepped at a `syscall` instruction, calls returning to
 * address 0.)
 *
 * A busy process (no thread asleep in a system call; lt_inj_load_busy) is
 * instead stopped at the entry of one of the caller's functions, patched for
 * milliseconds while every thread is stopped (inject_latch.h); the set-up
 * system calls then run at libc's syscall() instruction, and restoring the
 * registers resumes the original call.
 *
 * A copy of the library an earlier session left loaded on purpose (its
 * fini said no) is found by the library's soname (dlopen RTLD_NOLOAD) and
 * started again instead of loading a second copy.
 *
 * With LT_INJ_BY_PATH the library is loaded by its path instead (the
 * target's dynamic loader then gives the same copy to anyone else who
 * opens that path: CUDA, through CUDA_INJECTION64_PATH); the caller
 * vouches that the path names the same file in the target's root.
 *
 * The library must export
 *     int  llmt_inject_attach(int sock, uint64_t token);
 *                                          start; owns `sock` from then on
 *     int  llmt_inject_fini(uint64_t token);
 *                                          1 if it may be unloaded now; 0 also
 *                                          when `token` is not its last attach's
 *                                          (a new image's copy at the old address)
 * `sock` is one end of an AF_UNIX SOCK_SEQPACKET pair made in the target;
 * the injector keeps the other end (taken with pidfd_getfd), so the library
 * sees EOF when the collector goes away, whatever the cause.
 */
#ifndef LLMT_INJECTOR_H
#define LLMT_INJECTOR_H

#include <stddef.h>
#include <stdint.h>

struct lt_inj_latch;

struct lt_inj {
	int pid;
	int sock;              /* collector's end of the socket pair; -1 if none */
	uint64_t handle;       /* dlopen() handle in the target */
	uint64_t fini;         /* address of llmt_inject_fini in the target */
	uint64_t dlclose;      /* address of dlclose in the target */
	int loaded;
	unsigned long lib_ino; /* inode of the mapping holding fini (the memfd): after an
				* exec none holds it, and the unload calls nothing */
	int reused;            /* a copy left loaded by an earlier session (same soname) */
	uint64_t token;        /* given to llmt_inject_attach, asked back by llmt_inject_fini */
	const struct lt_inj_latch *latch; /* where a busy thread may be stopped, or NULL */
	const char *latched_at;          /* the load stopped a busy thread there (else NULL) */
	const struct lt_inj_hold *hold;  /* lt_inj_load_held only */
	void *held;                      /* the load in progress, while hold->fn runs */
};

/* Run while the thread the library was loaded from is still held, after
 * llmt_inject_attach: fn may call lt_inj_call_held. Its result is kept in
 * *rc; the load stands whatever it says (the library's thread runs). */
struct lt_inj_hold {
	void (*fn)(struct lt_inj *inj, void *arg);
	void *arg;
	int tid;               /* a thread of the process the caller traces and holds
				* stopped (inject_exec.h), for the latch to take as it
				* is; 0: none */
};

/* Load `lib_path` (a file here) into process `pid` and call its
 * llmt_inject_attach(). On success inj is filled in and 0 is returned; on
 * error a negative errno, the target as it was, and err says why. */
int lt_inj_load(struct lt_inj *inj, int pid, const char *lib_path, char *err, size_t errsz);

#define LT_INJ_BY_PATH 1u  /* flags: dlopen(lib_path) in the target, no memfd */

/* The same; a process with no thread asleep in a system call is stopped
 * at one of `latch`'s function entries instead (inject_latch.h), for the
 * load and again for the unload (`latch` must outlive inj). */
int lt_inj_load_busy(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
		     const struct lt_inj_latch *latch, char *err, size_t errsz);

/* Load from a thread stopped at one of `latch`'s entries only (no
 * sleeping thread), and run hold->fn before letting it go. */
int lt_inj_load_held(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
		     const struct lt_inj_latch *latch, const struct lt_inj_hold *hold,
		     char *err, size_t errsz);

/* From hold->fn: call the library's exported `sym(void)` on the held
 * thread; 0 with *ret, or negative errno. */
int lt_inj_call_held(struct lt_inj *inj, const char *sym, uint64_t *ret, char *err, size_t errsz);

/* Ask the library whether it may go (llmt_inject_fini) and dlclose() it if
 * so. Returns 1 unloaded, 0 left loaded on purpose (the library said no),
 * negative errno on error (err says why). Closes inj->sock. */
int lt_inj_unload(struct lt_inj *inj, char *err, size_t errsz);

/* Is the library loaded by inj still in its process's image (not gone
 * with an exec)? */
int lt_inj_present(const struct lt_inj *inj);

/* Timeout for one remote call (dlopen can take a while on a busy target);
 * past it the thread is let go, and goes on as it was once the call ends. */
#define LT_INJ_CALL_TIMEOUT_MS 10000

/* The name of the memfd the library is loaded from: the target's maps show
 * "/memfd:" LT_INJ_MEMFD_NAME " (deleted)", which the symbolizer reads as
 * the library it is (its frames named in CPU stacks). */
#define LT_INJ_MEMFD_NAME "llmtracker-inject"

#endif
