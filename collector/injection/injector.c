// SPDX-License-Identifier: Apache-2.0
/*
 * injector: ptrace-based loading and unloading of a library in a running
 * process. See injector.h for the method; this file is x86-64 only.
 */
#include "collector/session/clock.h"
#include "injector.h"
#include "inject_gate.h"
#include "inject_latch.h"
#include "collector/target/tfile.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __x86_64__
int lt_inj_load(struct lt_inj *inj, int pid, const char *lib_path, char *err, size_t errsz)
{
	(void)inj; (void)lib_path;
	snprintf(err, errsz, "attaching to pid %d: the injector supports x86-64 only", pid);
	return -ENOSYS;
}
int lt_inj_load_busy(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
		     const struct lt_inj_latch *latch, char *err, size_t errsz)
{
	(void)latch; (void)flags;
	return lt_inj_load(inj, pid, lib_path, err, errsz);
}
int lt_inj_load_held(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
		     const struct lt_inj_latch *latch, const struct lt_inj_hold *hold,
		     char *err, size_t errsz)
{
	(void)latch; (void)hold; (void)flags;
	return lt_inj_load(inj, pid, lib_path, err, errsz);
}
int lt_inj_call_held(struct lt_inj *inj, const char *sym, uint64_t *ret, char *err, size_t errsz)
{
	(void)inj; (void)sym; (void)ret;
	snprintf(err, errsz, "the injector supports x86-64 only");
	return -ENOSYS;
}
int lt_inj_unload(struct lt_inj *inj, char *err, size_t errsz)
{
	(void)inj;
	snprintf(err, errsz, "the injector supports x86-64 only");
	return -ENOSYS;
}
#else

#ifndef MFD_EXEC
#define MFD_EXEC 0x10U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x2U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_GET_SEALS 1034
#define F_SEAL_SEAL 0x1
#define F_SEAL_SHRINK 0x2
#define F_SEAL_GROW 0x4
#define F_SEAL_WRITE 0x8
#endif
#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif
#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

#define XSTATE_MAX (64 * 1024)
#define MAX_DEFERRED 16
#define SCRATCH_SIZE 4096

/* The target's C library entry points the injector calls. */
struct libc_fns {
	uint64_t dlopen, dlsym, dlclose, dlerror;
	uint64_t syscall;               /* syscall(), for a `syscall` instruction */
	uint64_t sigret;                /* __restore_rt: `mov $15,%rax; syscall`, or 0 */
	uint64_t errno_loc;             /* __errno_location(), or 0 */
};

/* One seized thread and everything needed to put it back as it was. */
struct inj_thread {
	int pid, tid;
	struct user_regs_struct regs;   /* as stopped */
	void *fp;                       /* xstate (or FP regs) as stopped */
	size_t fp_len;
	int fp_note;                    /* NT_X86_XSTATE or NT_PRFPREG */
	uint64_t sys_insn;              /* a `syscall` instruction: the one it sleeps
					 * in, or libc's (a thread stopped at a latch) */
	int deferred[MAX_DEFERRED];     /* signals held back during syscall injection */
	int n_deferred;
	bool gone;                      /* the thread or process exited */
	const char *latched_at;         /* the function entry it was stopped at, or NULL */
	/* Calls that fail open (see "calls that put the thread back"). */
	struct user_regs_struct resume; /* where it goes on: restart fix-up applied */
	uint64_t sigmask;               /* its blocked signals, for the frame */
	uint64_t syscall_fn;            /* libc's syscall() */
	uint64_t sigret;                /* libc's `mov $15,%rax; syscall` (__restore_rt) */
	uint64_t code;                  /* our page holding the call trampoline, or 0 */
	bool abandoned;                 /* let go mid-call: it puts itself back */
	uint64_t errno_at;              /* its errno (0: not known), put back at the end: */
	uint32_t errno_was;             /* a call of ours that fails (or dlopen) sets it */
};

static void compute_resume(struct inj_thread *t);

static int fail(char *err, size_t errsz, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errsz, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return rc;
}


/* The inode of the mapping of `pid` that holds `addr` (0: none). The
 * library is loaded from a memfd of its own, so after an exec no mapping of
 * that inode holds its address: it went with the old image. */
struct ino_at {
	uint64_t addr;
	unsigned long ino;
};

static int map_holds(const struct lt_tf_map *m, void *ctx)
{
	struct ino_at *a = ctx;
	if (a->addr < m->start || a->addr >= m->end)
		return 0;
	a->ino = (unsigned long)m->id.ino;
	return 1;
}

static unsigned long map_ino(int pid, uint64_t addr)
{
	struct ino_at a = { addr, 0 };
	lt_tf_maps_each(LT_TF_PROC, pid, map_holds, &a);
	return a.ino;
}

int lt_inj_present(const struct lt_inj *inj)
{
	return inj->loaded && inj->lib_ino && map_ino(inj->pid, inj->fini) == inj->lib_ino;
}

/* Alive and not a zombie: a killed target may linger unreaped. */
static bool pid_alive(int pid)
{
	return lt_tf_proc_running(pid);
}

/* After a failed step: is the process on its way out (killed while we
 * worked on it)? A SIGKILLed process stays "alive" for a moment while its
 * threads exit; give it that moment, so the error names the real cause. */
static bool pid_exiting(int pid)
{
	for (int i = 0; i < 50; i++) {
		if (!pid_alive(pid))
			return true;
		usleep(2000);
	}
	return false;
}

/* ------------------------------------------------------------ waiting */

/* Wait for the next stop of t->tid, up to timeout_ms. Returns the wait
 * status, -ETIMEDOUT, or -ESRCH if the thread is gone. */
static int wait_stop(struct inj_thread *t, int timeout_ms)
{
	uint64_t end = lt_mono_ms() + (uint64_t)timeout_ms;
	useconds_t nap = 50;
	for (;;) {
		int st = 0;
		pid_t r = waitpid(t->tid, &st, __WALL | __WNOTHREAD | WNOHANG);
		if (r == t->tid) {
			if (WIFEXITED(st) || WIFSIGNALED(st)) {
				t->gone = true;
				return -ESRCH;
			}
			return st;
		}
		if (r < 0 && errno != EINTR) {
			t->gone = true;
			return -ESRCH;
		}
		if (!pid_alive(t->tid)) {
			t->gone = true;
			return -ESRCH;
		}
		if (lt_mono_ms() >= end)
			return -ETIMEDOUT;
		usleep(nap);
		if (nap < 2000)
			nap *= 2;
	}
}

static bool is_event_stop(int st)
{
	return WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP;
}

/* ------------------------------------------------------------ registers */

static int get_regs(struct inj_thread *t, struct user_regs_struct *r)
{
	struct iovec iov = { r, sizeof(*r) };
	return ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_PRSTATUS, &iov) ? -errno : 0;
}

static int set_regs(struct inj_thread *t, const struct user_regs_struct *r)
{
	struct iovec iov = { (void *)r, sizeof(*r) };
	return ptrace(PTRACE_SETREGSET, t->tid, (void *)NT_PRSTATUS, &iov) ? -errno : 0;
}

static int save_fp(struct inj_thread *t)
{
	t->fp = malloc(XSTATE_MAX);
	if (!t->fp)
		return -ENOMEM;
	struct iovec iov = { t->fp, XSTATE_MAX };
	t->fp_note = NT_X86_XSTATE;
	if (ptrace(PTRACE_GETREGSET, t->tid, (void *)(long)t->fp_note, &iov)) {
		iov.iov_len = XSTATE_MAX;
		t->fp_note = NT_PRFPREG;
		if (ptrace(PTRACE_GETREGSET, t->tid, (void *)(long)t->fp_note, &iov))
			return -errno;
	}
	t->fp_len = iov.iov_len;
	return 0;
}

/* The thread as it goes on: where it was, its interrupted system call
 * restarted (compute_resume), FP state as it was. */
static int restore_all(struct inj_thread *t)
{
	int rc = set_regs(t, &t->resume);
	if (t->fp && t->fp_len) {
		struct iovec iov = { t->fp, t->fp_len };
		if (ptrace(PTRACE_SETREGSET, t->tid, (void *)(long)t->fp_note, &iov) && !rc)
			rc = -errno;
	}
	return rc;
}

/* ------------------------------------------------------------ memory */

static int peek(struct inj_thread *t, uint64_t addr, uint64_t *val)
{
	errno = 0;
	long v = ptrace(PTRACE_PEEKDATA, t->tid, (void *)addr, NULL);
	if (errno)
		return -errno;
	*val = (uint64_t)v;
	return 0;
}

static int poke_bytes(struct inj_thread *t, uint64_t addr, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	for (size_t off = 0; off < len; off += 8) {
		uint64_t word = 0;
		size_t n = len - off < 8 ? len - off : 8;
		if (n < 8 && peek(t, addr + off, &word))
			return -errno;
		memcpy(&word, p + off, n);
		if (ptrace(PTRACE_POKEDATA, t->tid, (void *)(addr + off), (void *)word))
			return -errno;
	}
	return 0;
}

static int peek_string(struct inj_thread *t, uint64_t addr, char *buf, size_t len)
{
	size_t off = 0;
	while (off + 1 < len) {
		uint64_t w;
		if (peek(t, addr + off, &w))
			break;
		for (int i = 0; i < 8 && off + 1 < len; i++, off++) {
			buf[off] = (char)(w >> (8 * i));
			if (!buf[off])
				return 0;
		}
	}
	buf[off < len ? off : len - 1] = 0;
	return 0;
}

/* ------------------------------------------------------------ seizing */

/* Threads asleep in one of these are safe to borrow: they hold no lock of
 * the loader or the allocator, and the call restarts transparently. */
static bool restartable_sleep(long nr)
{
	switch (nr) {
	case SYS_futex: case SYS_nanosleep: case SYS_clock_nanosleep:
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_read: case SYS_wait4: case SYS_recvfrom: case SYS_recvmsg:
	case SYS_accept: case SYS_accept4: case SYS_pause: case SYS_rt_sigsuspend:
	case SYS_rt_sigtimedwait: case SYS_restart_syscall:
		return true;
	default:
		return false;
	}
}

/* The system call a thread sleeps in (from /proc), or -1. */
static long thread_syscall(int pid, int tid)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (buf[0] < '0' || buf[0] > '9')
		return -1; /* "running" or "-1 ..." (blocked outside a syscall) */
	return strtol(buf, NULL, 10);
}

static int list_tids(int pid, int *tids, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < max) {
		int tid = atoi(de->d_name);
		if (tid > 0)
			tids[n++] = tid;
	}
	closedir(d);
	return n;
}

/* Resume a seized thread we decided not to use and let it go. */
static void release(struct inj_thread *t)
{
	if (!t->gone)
		ptrace(PTRACE_DETACH, t->tid, NULL, NULL);
}

/* Seize `tid` and stop it; keep it only if it stopped inside a system call
 * at a `syscall` instruction. Returns 0 (kept), 1 (not at a syscall: let
 * go), or negative errno. */
static int try_seize(struct inj_thread *t, int pid, int tid)
{
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL))
		return -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL)) {
		int e = errno;
		release(t);
		return -e;
	}
	for (;;) {
		int st = wait_stop(t, 2000);
		if (st == -ETIMEDOUT) {
			release(t);
			return 1;
		}
		if (st < 0)
			return st;
		if (is_event_stop(st))
			break;
		/* A signal arrived first: hand it on, the interrupt stop follows. */
		int sig = WIFSTOPPED(st) ? WSTOPSIG(st) : 0;
		if (ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig))
			return -errno;
	}
	if (get_regs(t, &t->regs)) {
		release(t);
		return -ESRCH;
	}
	uint64_t word;
	long nr = (long)t->regs.orig_rax;
	/* One that sleeps with a signal mask of the call's own (sigsuspend,
	 * ppoll/pselect with a mask) keeps its own mask where /proc cannot
	 * show it: the frame that puts it back could not hold it. */
	bool own_mask = nr == SYS_rt_sigsuspend || (nr == SYS_ppoll && t->regs.r10) ||
			(nr == SYS_pselect6 && t->regs.r9);
	if (nr < 0 || !restartable_sleep(nr) || own_mask || peek(t, t->regs.rip - 2, &word) ||
	    (word & 0xffff) != 0x050f) {
		release(t);
		return 1;
	}
	t->sys_insn = t->regs.rip - 2;
	compute_resume(t);
	int rc = save_fp(t);
	if (rc) {
		release(t);
		return rc;
	}
	return 0;
}

/* A `syscall` instruction in the target's libc, for a thread that is not
 * in one: the first 0f 05 of libc's syscall() (any such two bytes execute
 * as `syscall` when jumped to; only that one instruction is stepped). */
static int find_sys_insn(struct inj_thread *t, uint64_t syscall_fn)
{
	for (uint64_t off = 0; syscall_fn && off < 64; off += 8) {
		uint64_t w, next;
		if (peek(t, syscall_fn + off, &w) || peek(t, syscall_fn + off + 8, &next))
			return -EFAULT;
		for (int i = 0; i < 8; i++) {
			uint8_t b0 = (uint8_t)(w >> (8 * i)), b1 = (uint8_t)(i < 7 ? w >> (8 * (i + 1)) : next);
			if (b0 == 0x0f && b1 == 0x05) {
				t->sys_insn = syscall_fn + off + (uint64_t)i;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* A busy process: stop a thread at a function entry (inject_latch.h) and
 * take it over as it stands there. */
static int seize_latched(struct inj_thread *t, int pid, const struct lt_inj_latch *latch, int adopt,
			 uint64_t syscall_fn, char *err, size_t errsz)
{
	const char *where = NULL;
	int tid = 0, rc = lt_latch_thread_from(pid, adopt, latch, &tid, &where, err, errsz);
	if (rc)
		return rc;
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	t->latched_at = where;
	if (!(rc = get_regs(t, &t->regs)))
		compute_resume(t);
	if (rc || (rc = save_fp(t)) ||
	    (syscall_fn && (rc = find_sys_insn(t, syscall_fn)))) {
		release(t);
		free(t->fp);
		t->fp = NULL;
		return fail(err, errsz, rc == -ESRCH ? rc : -EIO, "process %d: taking over thread %d at "
			    "%s failed: %s", pid, tid, where, strerror(-rc));
	}
	return 0;
}

/* Stop one thread of `pid` at a system call boundary; a busy process
 * (none asleep) at a latch, when the caller named one. */
static int seize_one(struct inj_thread *t, int pid, const struct lt_inj_latch *latch, int adopt,
		     uint64_t syscall_fn, char *err, size_t errsz)
{
	int tids[512];
	char why_latch[512] = "";
	uint64_t end = lt_mono_ms() + 3000;
	if (latch && latch->freeze_first) /* a starting process: that entry only */
		return seize_latched(t, pid, latch, adopt, syscall_fn, err, errsz);
	while (lt_mono_ms() < end) {
		int n = list_tids(pid, tids, 512);
		if (n < 0)
			return fail(err, errsz, -ESRCH, "process %d not found (exited?)", pid);
		for (int i = 0; i < n; i++) {
			long nr = thread_syscall(pid, tids[i]);
			if (nr < 0 || !restartable_sleep(nr))
				continue;
			int rc = try_seize(t, pid, tids[i]);
			if (rc == 0)
				return 0;
			free(t->fp);
			t->fp = NULL;
			if (rc == -EPERM && pid_exiting(pid)) /* the kernel refuses a dying task */
				return fail(err, errsz, -ESRCH, "process %d exited during injection", pid);
			if (rc == -EPERM)
				return fail(err, errsz, rc, "cannot ptrace process %d: %s (need root or "
					    "CAP_SYS_PTRACE; another tracer or a debugger attached?)",
					    pid, strerror(-rc));
			if (!pid_alive(pid))
				return fail(err, errsz, -ESRCH, "process %d exited during injection", pid);
		}
		if (latch && !why_latch[0]) {
			int rc = seize_latched(t, pid, latch, 0, syscall_fn, why_latch, sizeof(why_latch));
			if (rc == 0)
				return 0;
			if (rc != -EAGAIN && rc != -ENOENT)
				return fail(err, errsz, rc, "%s", why_latch);
		}
		usleep(2000);
	}
	if (!pid_alive(pid))
		return fail(err, errsz, -ESRCH, "process %d exited during injection", pid);
	if (why_latch[0])
		return fail(err, errsz, -EAGAIN, "process %d: no thread was found asleep in a system call "
			    "within 3 s, and no busy thread could be stopped: %s", pid, why_latch);
	return fail(err, errsz, -EAGAIN, "process %d: no thread was found asleep in a system call "
		    "within 3 s (all threads busy?); try again later", pid);
}

/* Put the thread back exactly as it was, re-raise held signals, detach. */
static int unseize(struct inj_thread *t)
{
	int rc = 0;
	if (!t->gone && !t->abandoned) {
		rc = restore_all(t);
		ptrace(PTRACE_DETACH, t->tid, NULL, NULL);
	}
	for (int i = 0; !t->gone && i < t->n_deferred; i++)
		syscall(SYS_tgkill, t->pid, t->tid, t->deferred[i]);
	free(t->fp);
	t->fp = NULL;
	return rc;
}

/* ------------------------------------------------------------ remote work */

static int fail_open_call(struct inj_thread *t, uint64_t fn, const uint64_t a[6], uint64_t ret, long want_nr,
			  int timeout_ms, uint64_t *out);
#define CALL_SYSCALL_MS 5000

/* Run one system call in the target at its own `syscall` instruction.
 * Returns 0 with *ret set, or negative errno (thread gone, ...). */
static int remote_syscall(struct inj_thread *t, long nr, uint64_t a0, uint64_t a1,
			  uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, int64_t *ret)
{
	if (t->abandoned)
		return -ESRCH;
	if (t->sigret) { /* through libc's syscall(); its 7th argument is the frame's uc_flags, 0 */
		uint64_t a[6] = { (uint64_t)nr, a0, a1, a2, a3, a4 }, out = 0;
		if (a5)
			return -EINVAL;
		/* back through our trampoline once it is there (see tramp_code) */
		int rc = fail_open_call(t, t->syscall_fn, a, t->code ? t->code : t->sigret, nr, CALL_SYSCALL_MS,
					&out);
		*ret = (int64_t)out;
		return rc;
	}
	struct user_regs_struct r = t->regs;
	r.rip = t->sys_insn;
	r.rax = (uint64_t)nr;
	r.orig_rax = (uint64_t)-1; /* no restart fix-up on the way out of this stop */
	r.rdi = a0; r.rsi = a1; r.rdx = a2; r.r10 = a3; r.r8 = a4; r.r9 = a5;
	int rc = set_regs(t, &r);
	if (rc)
		return rc;
	if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL))
		return -errno;
	for (;;) {
		int st = wait_stop(t, 5000);
		if (st < 0)
			return st;
		if (!WIFSTOPPED(st))
			return -ESRCH;
		int sig = WSTOPSIG(st);
		if (sig == SIGTRAP && !is_event_stop(st))
			break;
		/* Hold other signals back until the thread is restored. */
		if (!is_event_stop(st) && t->n_deferred < MAX_DEFERRED)
			t->deferred[t->n_deferred++] = sig;
		if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL))
			return -errno;
	}
	if ((rc = get_regs(t, &r)))
		return rc;
	*ret = (int64_t)r.rax;
	return 0;
}

/* Call fn(a0, a1, a2) in the target on the borrowed thread's stack with a
 * zero return address; the return traps as SIGSEGV at 0. */
static int remote_call(struct inj_thread *t, uint64_t fn, uint64_t a0, uint64_t a1,
		       uint64_t a2, uint64_t *ret, char *err, size_t errsz)
{
	if (t->abandoned)
		return fail(err, errsz, -ETIMEDOUT, "process %d: its thread was let go mid-call", t->pid);
	if (t->code) {
		uint64_t a[6] = { a0, a1, a2, 0, 0, 0 };
		int rc = fail_open_call(t, fn, a, t->code, -1, LT_INJ_CALL_TIMEOUT_MS, ret);
		if (rc == -ETIMEDOUT)
			return fail(err, errsz, rc, "process %d: a call into the target did not return within "
				    "%d ms; its thread was let go and goes on as it was once the call ends",
				    t->pid, LT_INJ_CALL_TIMEOUT_MS);
		if (rc == -EFAULT)
			return fail(err, errsz, rc, "process %d: a fault inside the injected call; registers "
				    "restored", t->pid);
		if (rc)
			return fail(err, errsz, rc == -ESRCH ? rc : rc, "process %d exited during injection (%s)",
				    t->pid, strerror(-rc));
		return 0;
	}
	struct user_regs_struct r = t->regs;
	uint64_t sp = ((t->regs.rsp - 512) & ~0xfULL) - 8; /* below the red zone */
	uint64_t zero = 0;
	int rc = poke_bytes(t, sp, &zero, 8);
	if (rc)
		return fail(err, errsz, rc, "writing the target's stack: %s", strerror(-rc));
	r.rsp = sp;
	r.rip = fn;
	r.rdi = a0; r.rsi = a1; r.rdx = a2;
	r.rax = 0;
	r.orig_rax = (uint64_t)-1;
	if ((rc = set_regs(t, &r)) || ptrace(PTRACE_CONT, t->tid, NULL, NULL))
		return fail(err, errsz, rc ? rc : -errno, "process %d exited during injection", t->pid);
	for (;;) {
		int st = wait_stop(t, LT_INJ_CALL_TIMEOUT_MS);
		if (st == -ETIMEDOUT)
			return fail(err, errsz, st, "process %d: a call into the target did not return "
				    "within %d ms", t->pid, LT_INJ_CALL_TIMEOUT_MS);
		if (st < 0 || !WIFSTOPPED(st))
			return fail(err, errsz, -ESRCH, "process %d exited during injection", t->pid);
		int sig = WSTOPSIG(st);
		if (is_event_stop(st)) {
			ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			continue;
		}
		if (sig == SIGSEGV) {
			if ((rc = get_regs(t, &r)))
				return fail(err, errsz, rc, "process %d exited during injection", t->pid);
			if (r.rip == 0) {
				*ret = r.rax;
				return 0;
			}
			return fail(err, errsz, -EFAULT, "process %d: fault at 0x%llx inside the injected "
				    "call; registers restored", t->pid, (unsigned long long)r.rip);
		}
		/* Not ours: deliver it now, the app's handler runs on top of our frame. */
		if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)sig))
			return fail(err, errsz, -errno, "process %d exited during injection", t->pid);
	}
}

/* ------------------------------------------------------------ calls that put the thread back */

/*
 * A call into the target runs on the borrowed thread with a signal frame
 * written below it, holding the thread as it must go on (registers with the
 * restart of its interrupted system call applied, FP state, signal mask).
 * The call returns into rt_sigreturn (through our trampoline, which keeps
 * the result in the frame, or libc's own __restore_rt for system calls),
 * and the kernel puts the thread back from that frame. While the collector
 * lives it catches that rt_sigreturn at its entry (PTRACE_SYSCALL) and
 * skips it; if the collector dies, or gives a call up at its timeout, no
 * one catches it and the thread goes on with its own work: nothing depends
 * on the collector being alive, and nothing returns to address 0.
 */

struct k_sigcontext {                /* the kernel's x86-64 struct sigcontext */
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
};

struct k_ucontext {                  /* the kernel's struct ucontext */
	uint64_t uc_flags, uc_link;  /* uc_link: unused by rt_sigreturn; the call's result */
	uint64_t ss_sp;
	int32_t ss_flags, ss_pad;
	uint64_t ss_size;
	struct k_sigcontext mc;
	uint64_t sigmask;
};

struct k_syscall_info {              /* PTRACE_GET_SYSCALL_INFO */
	uint8_t op, pad[3];
	uint32_t arch;
	uint64_t ip, sp;
	union {
		struct { uint64_t nr, args[6]; } entry;
		struct { int64_t rval; uint8_t is_error; } exit;
	};
};

#define K_PTRACE_GET_SYSCALL_INFO 0x420e
#define K_SYSCALL_INFO_ENTRY 1
#define K_SYSCALL_INFO_EXIT 2
#define K_SS_INVALID 3               /* a sigaltstack mode the kernel refuses: the
				      * thread's alternate stack stays as it is */
#ifndef FP_XSTATE_MAGIC1
#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#endif
#define CODE_SIZE 4096

/* mov %rax,8(%rsp) (the result into uc_link); mov $15,%eax; syscall; and
 * again mov $15,%eax; syscall: where the thread stands once we skipped the
 * first rt_sigreturn, so that a collector dying before the next call
 * leaves it to an rt_sigreturn of the same frame, never to what follows */
static const uint8_t tramp_code[] = { 0x48, 0x89, 0x44, 0x24, 0x08, 0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05,
				      0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x0f, 0x0b };
#define TRAMP_SYSRET 12              /* the trampoline's ip after its syscall */
#define SIGRET_SYSRET 9              /* __restore_rt's */

static int sys_errno(int e) { return e ? -e : -EIO; }

/* Where the thread goes on: its interrupted system call restarted as the
 * kernel would (rip back over `syscall`, rax the number again). */
static void compute_resume(struct inj_thread *t)
{
	struct user_regs_struct r = t->regs;
	long nr = (long)r.orig_rax, ret = (long)r.rax;
	if (nr >= 0 && (ret == -512 || ret == -513 || ret == -514)) { /* ERESTARTSYS/NOINTR/NOHAND */
		r.rip -= 2;
		r.rax = (uint64_t)nr;
	} else if (nr >= 0 && ret == -516) {                          /* ERESTART_RESTARTBLOCK */
		r.rip -= 2;
		r.rax = SYS_restart_syscall;
	}
	r.orig_rax = (uint64_t)-1;
	t->resume = r;
}

static int read_sigmask(struct inj_thread *t)
{
	char path[64], buf[2048], *p;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", t->pid, t->tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	if (!(p = strstr(buf, "\nSigBlk:")))
		return -EIO;
	t->sigmask = strtoull(p + 8, NULL, 16);
	return 0;
}

/* The FP state as the frame holds it: ptrace's XSAVE image (its software
 * bytes hold XCR0 there) with the signal frame's software bytes and closing
 * magic, or the legacy 512 bytes. Its length in the frame, or 0. */
static size_t frame_fp_len(const struct inj_thread *t)
{
	if (!t->fp || t->fp_len < 512)
		return 0;
	if (t->fp_note != NT_X86_XSTATE)
		return 512;
	return t->fp_len >= 576 ? t->fp_len + 4 : 0;
}

/* The frame's FP bytes (frame_fp_len of them) from ptrace's image. */
static void frame_fp(const struct inj_thread *t, uint8_t *out, size_t fplen)
{
	if (fplen == 512) { /* legacy: no extended state announced */
		memcpy(out, t->fp, 512);
		memset(out + 464, 0, 48);
		return;
	}
	struct { uint32_t magic1, extended_size; uint64_t xfeatures; uint32_t xstate_size, pad[7]; } sw;
	uint32_t m2 = FP_XSTATE_MAGIC2;
	memset(&sw, 0, sizeof(sw));
	memcpy(out, t->fp, t->fp_len);
	memcpy(&sw.xfeatures, (const uint8_t *)t->fp + 464, 8); /* XCR0, as ptrace gives it */
	sw.magic1 = FP_XSTATE_MAGIC1;
	sw.xstate_size = (uint32_t)t->fp_len;
	sw.extended_size = (uint32_t)t->fp_len + 4;
	memcpy(out + 464, &sw, sizeof(sw));
	memcpy(out + t->fp_len, &m2, 4);
}

/* Write the target's memory through /proc/PID/mem (what the collector's
 * seccomp profile allows). Bytes written, or -errno. */
static ssize_t mem_write(const struct inj_thread *t, const void *buf, size_t len, uint64_t addr)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = pwrite(fd, buf, len, (off_t)addr);
	int e = errno;
	close(fd);
	return n < 0 ? -e : n;
}

/* Write [ret][ucontext][fp state] below the thread's red zone; *sp: where
 * the call's stack starts (its return address). */
static int write_frame(struct inj_thread *t, uint64_t ret, uint64_t *sp)
{
	size_t fplen = frame_fp_len(t);
	if (!fplen)
		return -ENOTSUP;
	uint64_t top = t->regs.rsp - 128 - 512;
	uint64_t fpa = (top - fplen) & ~63ULL, uc = (fpa - sizeof(struct k_ucontext)) & ~15ULL, s = uc - 8;
	size_t len = (size_t)(fpa + fplen - s);
	uint8_t *buf = calloc(1, len);
	if (!buf)
		return -ENOMEM;
	struct k_ucontext u = { .ss_flags = K_SS_INVALID, .sigmask = t->sigmask };
	const struct user_regs_struct *r = &t->resume;
	u.mc = (struct k_sigcontext){ r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15,
				      r->rdi, r->rsi, r->rbp, r->rbx, r->rdx, r->rax, r->rcx, r->rsp, r->rip,
				      r->eflags, (uint16_t)r->cs, (uint16_t)r->gs, (uint16_t)r->fs,
				      (uint16_t)r->ss, 0, 0, 0, 0, fpa, { 0 } };
	memcpy(buf, &ret, 8);
	memcpy(buf + 8, &u, sizeof(u));
	frame_fp(t, buf + (fpa - s), fplen);
	ssize_t w = mem_write(t, buf, len, s);
	free(buf);
	if (w != (ssize_t)len)
		return w < 0 ? (int)w : -EFAULT;
	*sp = s;
	return 0;
}

/* Give the thread up where it stands: it finishes the call on its own and
 * puts itself back through the frame. */
static void abandon(struct inj_thread *t)
{
	if (ptrace(PTRACE_DETACH, t->tid, NULL, NULL)) {
		ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
		for (int i = 0; i < 20 && ptrace(PTRACE_DETACH, t->tid, NULL, NULL); i++) {
			int st = wait_stop(t, 100);
			if (st == -ESRCH)
				return;
		}
	}
	t->abandoned = true;
}

/* Run fn(a[0..5]) on the thread, returning to `ret` (the trampoline, or
 * __restore_rt). want_nr >= 0: a system call made through libc's syscall();
 * *out is its raw result, seen at its exit. Else *out is what the
 * trampoline kept. 0, -ETIMEDOUT (given up: abandoned), -EFAULT (a fault
 * inside the call), -ESRCH. */
static int fail_open_call(struct inj_thread *t, uint64_t fn, const uint64_t a[6], uint64_t ret, long want_nr,
			  int timeout_ms, uint64_t *out)
{
	uint64_t sp = 0, back = ret + (ret == t->sigret ? SIGRET_SYSRET : TRAMP_SYSRET);
	struct user_regs_struct r = t->resume;
	long last_nr = -1;
	int rc = write_frame(t, ret, &sp);
	if (rc)
		return rc;
	r.rip = fn;
	r.rsp = sp;
	r.rdi = a[0]; r.rsi = a[1]; r.rdx = a[2]; r.rcx = a[3]; r.r8 = a[4]; r.r9 = a[5];
	r.rax = 0;
	r.orig_rax = (uint64_t)-1;
	if ((rc = set_regs(t, &r)) || ptrace(PTRACE_SYSCALL, t->tid, NULL, NULL))
		return rc ? rc : sys_errno(errno);
	uint64_t end = lt_mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		uint64_t now = lt_mono_ms();
		int st = wait_stop(t, now < end ? (int)(end - now) : 0), sig = 0;
		if (st == -ETIMEDOUT) {
			abandon(t);
			return -ETIMEDOUT;
		}
		if (st < 0 || !WIFSTOPPED(st))
			return -ESRCH;
		sig = WSTOPSIG(st);
		if (sig == (SIGTRAP | 0x80)) {
			struct k_syscall_info si;
			memset(&si, 0, sizeof(si));
			if (ptrace(K_PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof(si), &si) <= 0)
				return sys_errno(errno);
			if (si.op == K_SYSCALL_INFO_ENTRY && si.entry.nr == SYS_rt_sigreturn && si.ip == back)
				break;
			if (si.op == K_SYSCALL_INFO_ENTRY)
				last_nr = (long)si.entry.nr;
			else if (si.op == K_SYSCALL_INFO_EXIT && want_nr >= 0 && last_nr == want_nr)
				*out = (uint64_t)si.exit.rval;
			sig = 0;
		} else if (st >> 16) {
			sig = 0; /* an event stop (PTRACE_INTERRUPT, group stop) */
		} else if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
			return -EFAULT; /* inside our call: the thread is put back, not the signal */
		} else if (want_nr >= 0 && t->n_deferred < MAX_DEFERRED) {
			t->deferred[t->n_deferred++] = sig; /* after the set-up, as it would have come */
			sig = 0;
		}
		if (ptrace(PTRACE_SYSCALL, t->tid, NULL, (void *)(long)sig))
			return -ESRCH;
	}
	/* At rt_sigreturn's entry: skip it, stop again at its exit. */
	if ((rc = get_regs(t, &r)))
		return rc;
	r.orig_rax = (uint64_t)-1;
	if ((rc = set_regs(t, &r)) || ptrace(PTRACE_SYSCALL, t->tid, NULL, NULL))
		return rc ? rc : -ESRCH;
	for (;;) {
		int st = wait_stop(t, 2000);
		if (st < 0 || !WIFSTOPPED(st))
			return st == -ETIMEDOUT ? -EIO : -ESRCH;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80))
			break;
		int sig = (st >> 16) ? 0 : WSTOPSIG(st);
		if (sig && t->n_deferred < MAX_DEFERRED)
			t->deferred[t->n_deferred++] = sig;
		if (ptrace(PTRACE_SYSCALL, t->tid, NULL, NULL))
			return -ESRCH;
	}
	if (want_nr < 0 && peek(t, sp + 8 + offsetof(struct k_ucontext, uc_link), out))
		return -EFAULT;
	return 0;
}

/* The thread's errno as it was (its address from __errno_location, on the
 * thread itself): libc's syscall() sets it when a call of ours fails, and
 * dlopen may, where the program may look at it after its own call. */
static void save_errno(struct inj_thread *t, const struct libc_fns *fn)
{
	uint64_t at = 0, v = 0;
	char err[128];
	t->errno_at = 0;
	if (fn->errno_loc && !remote_call(t, fn->errno_loc, 0, 0, 0, &at, err, sizeof(err)) && at &&
	    !peek(t, at, &v)) {
		t->errno_at = at;
		t->errno_was = (uint32_t)v;
	}
}

/* Set up the thread for calls that fail open: where it goes on, its mask,
 * libc's syscall() and __restore_rt, a page for the trampoline. Without
 * them (another libc, no XSAVE layout) calls take the older way. Its errno
 * is noted (after the page's mmap, which leaves it alone unless it fails). */
static void begin_calls(struct inj_thread *t, const struct libc_fns *fn)
{
	t->syscall_fn = fn->syscall;
	t->sigret = fn->sigret;
	t->code = 0;
	t->errno_at = 0;
	if (!t->syscall_fn || !t->sigret || !frame_fp_len(t) || read_sigmask(t) ||
	    ptrace(PTRACE_SETOPTIONS, t->tid, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD)) {
		t->sigret = 0;
		save_errno(t, fn);
		return;
	}
	int64_t r = 0;
	if (remote_syscall(t, SYS_mmap, 0, CODE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
			   (uint64_t)-1, 0, &r) || (r < 0 && r > -4096))
		return;
	if (poke_bytes(t, (uint64_t)r, tramp_code, sizeof(tramp_code))) {
		remote_syscall(t, SYS_munmap, (uint64_t)r, CODE_SIZE, 0, 0, 0, 0, &r);
		return;
	}
	t->code = (uint64_t)r;
	save_errno(t, fn);
}

static void end_calls(struct inj_thread *t)
{
	int64_t r;
	uint64_t code = t->code;
	t->code = 0; /* its own unmapping returns through __restore_rt */
	if (code && !t->gone && !t->abandoned)
		remote_syscall(t, SYS_munmap, code, CODE_SIZE, 0, 0, 0, 0, &r);
	if (t->errno_at && !t->gone && !t->abandoned)
		poke_bytes(t, t->errno_at, &t->errno_was, sizeof(t->errno_was));
	t->errno_at = 0;
}

/* ------------------------------------------------------------ symbols */

/* Address of a dynamic symbol of the object mapped from `path_match` in
 * the target. */
static int elf_dynsym(int fd, const char *name, uint64_t *value, uint64_t *first_vaddr)
{
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	int rc = -ENOENT;
	size_t nph = 0;
	*first_vaddr = UINT64_MAX;
	if (e && !elf_getphdrnum(e, &nph)) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < *first_vaddr)
				*first_vaddr = ph.p_vaddr & ~0xfffULL;
		}
	}
	Elf_Scn *scn = NULL;
	while (e && rc == -ENOENT && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; d && i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
			if (nm && !strcmp(nm, name)) {
				*value = s.st_value;
				rc = 0;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	return rc;
}

#define SIGRET_SEG_MAX (64u << 20)  /* an executable segment scanned for it, at most */

/* The signal-return trampoline of the C library (glibc's and musl's
 * __restore_rt, `mov $15,%rax; syscall`), by its bytes in an executable
 * PT_LOAD: not exported, yet every signal handler returns through it. */
static int elf_find_sigreturn(int fd, uint64_t *vaddr)
{
	static const uint8_t pat[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t nph = 0;
	int rc = -ENOENT;
	for (size_t i = 0; e && rc && !elf_getphdrnum(e, &nph) && i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
		    ph.p_filesz > SIGRET_SEG_MAX)
			continue;
		uint8_t *buf = malloc(ph.p_filesz ? ph.p_filesz : 1);
		if (buf && pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset) == (ssize_t)ph.p_filesz) {
			const uint8_t *hit = memmem(buf, ph.p_filesz, pat, sizeof(pat));
			if (hit) {
				*vaddr = ph.p_vaddr + (uint64_t)(hit - buf);
				rc = 0;
			}
		}
		free(buf);
	}
	if (e)
		elf_end(e);
	return rc;
}

/* The library's DT_SONAME (from its bytes), or "" if it has none. */
static void elf_soname(const void *img, size_t len, char *out, size_t outsz)
{
	out[0] = 0;
	elf_version(EV_CURRENT);
	Elf *e = elf_memory((char *)img, len);
	Elf_Scn *scn = NULL;
	while (e && !out[0] && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *nm;
			if (gelf_getdyn(d, (int)i, &dyn) && dyn.d_tag == DT_SONAME &&
			    (nm = elf_strptr(e, sh.sh_link, dyn.d_un.d_val))) {
				snprintf(out, outsz, "%s", nm);
				break;
			}
		}
	}
	if (e)
		elf_end(e);
}

struct target_lib {
	struct lt_tf_map map; /* its mapping at file offset 0 (path as in maps) */
};

static bool is_libc_name(const char *base)
{
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-2.", 7) ||
	       !strncmp(base, "ld-musl", 7) || !strncmp(base, "libc.musl", 9);
}

/* Find the target's C library in /proc/PID/maps. */
static int libc_map(const struct lt_tf_map *m, void *ctx)
{
	const char *b = strrchr(m->path, '/');

	if (m->pgoff != 0 || !b || !is_libc_name(b + 1))
		return 0;
	((struct target_lib *)ctx)->map = *m;
	return 1;
}

static int find_libc(int pid, struct target_lib *lib)
{
	int rc = lt_tf_maps_each(LT_TF_PROC, pid, libc_map, lib);

	return rc == 1 ? 0 : rc < 0 ? rc : -ENOENT;
}

/* The target's dlopen & co from the dynamic symbols of its own libc
 * (through its mapping or inside its root, tfile.h). */
static int resolve_libc_fd(int pid, const struct target_lib *lib, int fd, struct libc_fns *fn,
			   char *err, size_t errsz)
{
	static const char *const names[6][2] = {
		{ "dlopen", "__libc_dlopen_mode" }, { "dlsym", "__libc_dlsym" },
		{ "dlclose", "__libc_dlclose" }, { "dlerror", NULL }, { "syscall", NULL },
		{ "__errno_location", NULL },
	};
	uint64_t *out[6] = { &fn->dlopen, &fn->dlsym, &fn->dlclose, &fn->dlerror, &fn->syscall,
			     &fn->errno_loc };
	for (int i = 0; i < 6; i++) {
		uint64_t v = 0, first = 0;
		*out[i] = 0;
		for (int j = 0; j < 2 && names[i][j] && !*out[i]; j++)
			if (!elf_dynsym(fd, names[i][j], &v, &first))
				*out[i] = lib->map.start - first + v;
		if (!*out[i] && i < 3)
			return fail(err, errsz, -ENOENT, "process %d: %s has no %s (glibc older than 2.34 "
				    "without libdl loaded?)", pid, lib->map.path, names[i][0]);
	}
	uint64_t v, first = 0, dummy;
	fn->sigret = 0;
	if (!elf_dynsym(fd, "syscall", &dummy, &first) && !elf_find_sigreturn(fd, &v))
		fn->sigret = lib->map.start - first + v;
	return 0;
}

static int resolve_libc(int pid, struct libc_fns *fn, char *err, size_t errsz)
{
	struct target_lib *lib = malloc(sizeof(*lib)); /* a PATH_MAX path: not on the stack */
	char why[512];
	int rc = lib ? find_libc(pid, lib) : -ENOMEM, root_fd, fd;

	if (rc) {
		free(lib);
		return fail(err, errsz, rc, "process %d: no C library found in its maps (static binary?)", pid);
	}
	root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	fd = lt_tf_open_mapped(LT_TF_PROC, pid, root_fd, &lib->map, why, sizeof(why));
	if (root_fd >= 0)
		close(root_fd);
	if (fd < 0)
		rc = fail(err, errsz, fd, "process %d: cannot read its C library: %s", pid, why);
	else
		rc = resolve_libc_fd(pid, lib, fd, fn, err, errsz);
	if (fd >= 0)
		close(fd);
	free(lib);
	return rc;
}

/* ------------------------------------------------------------ loading */

static int read_file(const char *path, void **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || st.st_size <= 0) {
		close(fd);
		return -EINVAL;
	}
	*buf = malloc((size_t)st.st_size);
	size_t got = 0;
	while (*buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, (char *)*buf + got, (size_t)st.st_size - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (!*buf || got != (size_t)st.st_size) {
		free(*buf);
		*buf = NULL;
		return -EIO;
	}
	*len = got;
	return 0;
}

/* Fill the target's memfd from here, through our own copy of its fd
 * (pidfd_getfd: the target's open file, never reopened by path with our
 * rights), then seal it: from then on nobody, the target included, can
 * change the code it maps. A target that swapped the fd for another file,
 * or holds a writable shared mapping of it, is refused. */
static int fill_memfd(int pidfd, int fd, const void *buf, size_t len)
{
	int wfd = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (wfd < 0)
		return -errno;
	fcntl(wfd, F_SETFD, FD_CLOEXEC);
	struct stat sb;
	int rc = 0;
	/* Only a fresh memfd made with MFD_ALLOW_SEALING has no seal at all. */
	if (fstat(wfd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size != 0 || fcntl(wfd, F_GET_SEALS) != 0)
		rc = -EBADF;
	for (size_t done = 0; !rc && done < len;) {
		ssize_t n = pwrite(wfd, (const char *)buf + done, len - done, (off_t)done);
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else
			done += (size_t)n;
	}
	if (!rc && fcntl(wfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL))
		rc = -errno;
	if (!rc && (fstat(wfd, &sb) || (size_t)sb.st_size != len))
		rc = -EBADF;
	close(wfd);
	return rc;
}

/* State of one load, for unwinding on error. */
struct load_ctx {
	struct inj_thread t;
	struct libc_fns fn;
	uint64_t scratch;
	int memfd, sv[2];
	int pidfd;
	const char *by_path;            /* LT_INJ_BY_PATH: the path dlopen is given, else NULL */
};

static void undo_target_fds(struct load_ctx *c)
{
	int64_t r;
	if (c->t.gone || c->t.abandoned)
		return;
	if (c->memfd >= 0)
		remote_syscall(&c->t, SYS_close, (uint64_t)c->memfd, 0, 0, 0, 0, 0, &r);
	for (int i = 0; i < 2; i++)
		if (c->sv[i] >= 0)
			remote_syscall(&c->t, SYS_close, (uint64_t)c->sv[i], 0, 0, 0, 0, 0, &r);
	c->memfd = c->sv[0] = c->sv[1] = -1;
}

static int make_memfd(struct load_ctx *c, const void *lib, size_t len, char *err, size_t errsz)
{
	static const char name[] = LT_INJ_MEMFD_NAME;
	int64_t r;
	int rc = poke_bytes(&c->t, c->scratch, name, sizeof(name));
	if (rc)
		return fail(err, errsz, rc, "writing into process %d: %s", c->t.pid, strerror(-rc));
	const uint64_t fl = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	rc = remote_syscall(&c->t, SYS_memfd_create, c->scratch, fl | MFD_EXEC, 0, 0, 0, 0, &r);
	if (!rc && r == -EINVAL) /* kernels before 6.3 know no MFD_EXEC */
		rc = remote_syscall(&c->t, SYS_memfd_create, c->scratch, fl, 0, 0, 0, 0, &r);
	if (rc || r < 0)
		return fail(err, errsz, rc ? rc : (int)r, "process %d: memfd_create failed: %s",
			    c->t.pid, strerror(rc ? -rc : (int)-r));
	c->memfd = (int)r;
	rc = fill_memfd(c->pidfd, c->memfd, lib, len);
	if (rc == -EBADF || rc == -EBUSY)
		return fail(err, errsz, rc, "process %d: its memfd for the library was changed or is "
			    "mapped writable by the process itself; not injected", c->t.pid);
	if (rc)
		return fail(err, errsz, rc, "writing the library into process %d's memfd: %s",
			    c->t.pid, strerror(-rc));
	return 0;
}

/* socketpair in the target; take one end here with pidfd_getfd. */
static int make_channel(struct load_ctx *c, int *local, char *err, size_t errsz)
{
	int64_t r;
	int rc = remote_syscall(&c->t, SYS_socketpair, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				c->scratch + 256, 0, 0, &r);
	if (rc || r < 0)
		return fail(err, errsz, rc ? rc : (int)r, "process %d: socketpair failed", c->t.pid);
	uint64_t w;
	if ((rc = peek(&c->t, c->scratch + 256, &w)))
		return fail(err, errsz, rc, "reading process %d's memory", c->t.pid);
	c->sv[0] = (int)(w & 0xffffffff);
	c->sv[1] = (int)(w >> 32);
	*local = (int)syscall(SYS_pidfd_getfd, c->pidfd, c->sv[1], 0);
	if (*local < 0)
		return fail(err, errsz, -errno, "pidfd_getfd on process %d: %s", c->t.pid, strerror(errno));
	fcntl(*local, F_SETFD, FD_CLOEXEC);
	/* The numbers came back through the target's memory: make sure it is
	 * the kind of socket we asked for before anything is sent on it. */
	int type = 0, dom = 0;
	socklen_t sl = sizeof(type), dl = sizeof(dom);
	if (getsockopt(*local, SOL_SOCKET, SO_TYPE, &type, &sl) || type != SOCK_SEQPACKET ||
	    getsockopt(*local, SOL_SOCKET, SO_DOMAIN, &dom, &dl) || dom != AF_UNIX)
		return fail(err, errsz, -EBADF, "process %d: its control socket was changed; not "
			    "injected", c->t.pid);
	rc = remote_syscall(&c->t, SYS_close, (uint64_t)c->sv[1], 0, 0, 0, 0, 0, &r);
	c->sv[1] = -1;
	return rc;
}

static int remote_dlerror(struct load_ctx *c, char *buf, size_t len)
{
	uint64_t p = 0;
	char e2[16];
	buf[0] = 0;
	if (c->fn.dlerror && !remote_call(&c->t, c->fn.dlerror, 0, 0, 0, &p, e2, sizeof(e2)) && p)
		peek_string(&c->t, p, buf, len);
	return 0;
}

/* A copy of the library an earlier session left loaded (it keeps what
 * must outlive a session, e.g. CUPTI with a CUDA graph), found by its
 * soname with RTLD_NOLOAD: its handle, or 0. */
static int find_loaded(struct load_ctx *c, const char *soname, uint64_t *h, char *err, size_t errsz)
{
	*h = 0;
	if (!soname[0])
		return 0;
	int rc = poke_bytes(&c->t, c->scratch + 64, soname, strlen(soname) + 1);
	if (rc)
		return fail(err, errsz, rc, "writing into process %d: %s", c->t.pid, strerror(-rc));
	return remote_call(&c->t, c->fn.dlopen, c->scratch + 64, RTLD_NOW | RTLD_NOLOAD, 0, h, err, errsz);
}

/* dlopen the library by `path` in the target: the memfd it was written
 * into, or (LT_INJ_BY_PATH) its file. */
static int open_copy(struct load_ctx *c, const char *path, uint64_t *h, char *err, size_t errsz)
{
	if (strlen(path) + 1 > SCRATCH_SIZE - 1024)
		return fail(err, errsz, -ENAMETOOLONG, "the library's path is too long");
	int rc = poke_bytes(&c->t, c->scratch + 1024, path, strlen(path) + 1);
	if (rc)
		return fail(err, errsz, rc, "writing into process %d: %s", c->t.pid, strerror(-rc));
	if ((rc = remote_call(&c->t, c->fn.dlopen, c->scratch + 1024, RTLD_NOW | RTLD_LOCAL, 0, h, err, errsz)))
		return rc;
	if (!*h) {
		char why[400];
		remote_dlerror(c, why, sizeof(why));
		return fail(err, errsz, -ENOEXEC, "process %d: dlopen of the library failed: %s",
			    c->t.pid, why[0] ? why : "(no dlerror)");
	}
	return 0;
}

/* What this attach is known by to the library's fini: not 0 (a copy that
 * was never attached holds 0), unguessable by a new image at old addresses. */
static uint64_t attach_token(void)
{
	uint64_t t = 0;
	for (int i = 0; i < 8 && (getrandom(&t, sizeof(t), GRND_NONBLOCK) != sizeof(t) || !t); i++)
		;
	return t ? t : lt_mono_ns() | 1;
}

/* Find the entry points in the opened library and start it on the socket. */
static int start_library(struct load_ctx *c, struct lt_inj *inj, char *err, size_t errsz)
{
	static const char s_attach[] = "llmt_inject_attach", s_fini[] = "llmt_inject_fini";
	int rc = poke_bytes(&c->t, c->scratch + 512, s_attach, sizeof(s_attach));
	if (!rc)
		rc = poke_bytes(&c->t, c->scratch + 576, s_fini, sizeof(s_fini));
	if (rc)
		return fail(err, errsz, rc, "writing into process %d: %s", c->t.pid, strerror(-rc));
	uint64_t attach = 0, fini = 0, h = inj->handle;
	if ((rc = remote_call(&c->t, c->fn.dlsym, h, c->scratch + 512, 0, &attach, err, errsz)) ||
	    (rc = remote_call(&c->t, c->fn.dlsym, h, c->scratch + 576, 0, &fini, err, errsz)))
		return rc;
	if (!attach || !fini)
		return fail(err, errsz, -ENOENT, "the library lacks llmt_inject_attach/llmt_inject_fini");
	inj->fini = fini;
	inj->dlclose = c->fn.dlclose;
	uint64_t ret = 0;
	inj->token = attach_token();
	if ((rc = remote_call(&c->t, attach, (uint64_t)c->sv[0], inj->token, 0, &ret, err, errsz)))
		return rc;
	c->sv[0] = -1; /* the library owns it now, whatever it returned */
	if ((int)ret == -EBUSY)
		return fail(err, errsz, -EBUSY, "process %d: the library already runs in it, started by "
			    "another profile or inherited at a fork (one start per process)", c->t.pid);
	if ((int)ret != 0)
		return fail(err, errsz, -EIO, "process %d: the library refused to start (%d)",
			    c->t.pid, (int)ret);
	return 0;
}

static int load_steps(struct load_ctx *c, struct lt_inj *inj, const void *lib, size_t len,
		      char *err, size_t errsz)
{
	int64_t r;
	int rc = remote_syscall(&c->t, SYS_mmap, 0, SCRATCH_SIZE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0, &r);
	if (rc)
		return fail(err, errsz, rc, "process %d exited during injection", c->t.pid);
	if (r < 0 && r > -4096)
		return fail(err, errsz, (int)r, "process %d: mmap failed: %s", c->t.pid, strerror((int)-r));
	c->scratch = (uint64_t)r;
	c->pidfd = (int)syscall(SYS_pidfd_open, c->t.pid, 0);
	if (c->pidfd < 0)
		return fail(err, errsz, -errno, "pidfd_open(%d): %s", c->t.pid, strerror(errno));
	char soname[128];
	elf_soname(lib, len, soname, sizeof(soname));
	if ((rc = find_loaded(c, soname, &inj->handle, err, errsz)))
		return rc;
	if (!inj->handle && c->by_path) {
		if ((rc = open_copy(c, c->by_path, &inj->handle, err, errsz)))
			return rc;
	} else if (!inj->handle) {
		char path[64];
		if ((rc = make_memfd(c, lib, len, err, errsz)))
			return rc;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", c->memfd);
		if ((rc = open_copy(c, path, &inj->handle, err, errsz)))
			return rc;
		/* The library's mapping keeps the memfd alive; its fd is not needed. */
		remote_syscall(&c->t, SYS_close, (uint64_t)c->memfd, 0, 0, 0, 0, 0, &r);
		c->memfd = -1;
	} else {
		inj->reused = 1;
	}
	if ((rc = make_channel(c, &inj->sock, err, errsz)) || (rc = start_library(c, inj, err, errsz)))
		return rc;
	inj->loaded = 1;
	inj->lib_ino = map_ino(c->t.pid, inj->fini);
	if (inj->hold) {
		inj->held = c;
		inj->hold->fn(inj, inj->hold->arg);
		inj->held = NULL;
	}
	return 0;
}

int lt_inj_call_held(struct lt_inj *inj, const char *sym, uint64_t *ret, char *err, size_t errsz)
{
	struct load_ctx *c = inj->held;
	size_t n = strlen(sym) + 1;
	uint64_t fn = 0;
	int rc;
	if (!c || n > 128)
		return fail(err, errsz, -EINVAL, "no thread held, or a name too long");
	if ((rc = poke_bytes(&c->t, c->scratch + 640, sym, n)) ||
	    (rc = remote_call(&c->t, c->fn.dlsym, inj->handle, c->scratch + 640, 0, &fn, err, errsz)))
		return rc;
	if (!fn)
		return fail(err, errsz, -ENOENT, "the library lacks %s", sym);
	return remote_call(&c->t, fn, 0, 0, 0, ret, err, errsz);
}

static int lt_inj_load_with(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
			    const struct lt_inj_latch *latch, const struct lt_inj_hold *hold,
			    char *err, size_t errsz);

int lt_inj_load(struct lt_inj *inj, int pid, const char *lib_path, char *err, size_t errsz)
{
	return lt_inj_load_busy(inj, pid, lib_path, 0, NULL, err, errsz);
}

int lt_inj_load_held(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
		     const struct lt_inj_latch *latch, const struct lt_inj_hold *hold,
		     char *err, size_t errsz)
{
	return lt_inj_load_with(inj, pid, lib_path, flags, latch, hold, err, errsz);
}

int lt_inj_load_busy(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
		     const struct lt_inj_latch *latch, char *err, size_t errsz)
{
	return lt_inj_load_with(inj, pid, lib_path, flags, latch, NULL, err, errsz);
}

static int lt_inj_load_with(struct lt_inj *inj, int pid, const char *lib_path, unsigned flags,
			    const struct lt_inj_latch *latch, const struct lt_inj_hold *hold,
			    char *err, size_t errsz)
{
	memset(inj, 0, sizeof(*inj));
	inj->pid = pid;
	inj->latch = latch;
	inj->hold = hold;
	inj->sock = -1;
	char proc[32];
	snprintf(proc, sizeof(proc), "/proc/%d", pid);
	if (pid <= 0 || access(proc, F_OK))
		return fail(err, errsz, -ESRCH, "process %d not found", pid);
	int adopt = hold ? hold->tid : 0;
	int rc = lt_inj_gate(pid, adopt, err, errsz);
	if (rc)
		return rc;
	void *lib = NULL;
	size_t len = 0;
	rc = read_file(lib_path, &lib, &len);
	if (rc)
		return fail(err, errsz, rc, "cannot read the inject library %s: %s", lib_path, strerror(-rc));
	struct load_ctx c = { .memfd = -1, .sv = { -1, -1 }, .pidfd = -1,
			      .by_path = flags & LT_INJ_BY_PATH ? lib_path : NULL };
	rc = resolve_libc(pid, &c.fn, err, errsz);
	if (!rc)
		rc = seize_one(&c.t, pid, latch, adopt, c.fn.syscall, err, errsz);
	/* Again with a thread in hand: stopped or traced meanwhile? */
	bool gated = false;
	if (!rc && (rc = lt_inj_gate(pid, c.t.tid, err, errsz))) {
		gated = true;
		unseize(&c.t);
	}
	if (rc) {
		free(lib);
		if (!gated && rc != -EPERM && pid_exiting(pid))
			return fail(err, errsz, -ESRCH, "process %d exited during injection", pid);
		return rc;
	}
	inj->latched_at = c.t.latched_at;
	begin_calls(&c.t, &c.fn);
	rc = load_steps(&c, inj, lib, len, err, errsz);
	free(lib);
	if (rc && inj->handle && !c.t.gone && !c.t.abandoned) {
		/* Half loaded: take it out again (the library started nothing). */
		uint64_t ret;
		char e2[64];
		remote_call(&c.t, c.fn.dlclose, inj->handle, 0, 0, &ret, e2, sizeof(e2));
		inj->handle = 0;
	}
	undo_target_fds(&c);
	if (c.scratch && !c.t.gone && !c.t.abandoned) {
		int64_t r;
		remote_syscall(&c.t, SYS_munmap, c.scratch, SCRATCH_SIZE, 0, 0, 0, 0, &r);
	}
	end_calls(&c.t);
	bool gone = c.t.gone, abandoned = c.t.abandoned;
	int urc = unseize(&c.t);
	if (c.pidfd >= 0)
		close(c.pidfd);
	/* ESRCH from the last ptrace: killed between the call's end and its
	 * registers going back (a SIGKILL does not wait for us). */
	if (abandoned)
		; /* err says it: the thread finishes the call and goes on by itself */
	else if (gone || urc == -ESRCH || (rc && pid_exiting(pid)))
		rc = fail(err, errsz, -ESRCH, "process %d exited during injection", pid);
	else if (!rc && urc)
		rc = fail(err, errsz, urc, "process %d: restoring registers failed: %s", pid, strerror(-urc));
	if (rc && inj->sock >= 0) {
		close(inj->sock);
		inj->sock = -1;
	}
	if (rc)
		inj->loaded = 0;
	return rc;
}

int lt_inj_unload(struct lt_inj *inj, char *err, size_t errsz)
{
	if (inj->sock >= 0) {
		close(inj->sock);
		inj->sock = -1;
	}
	if (!inj->loaded)
		return 0;
	inj->loaded = 0;
	struct inj_thread t;
	struct libc_fns fn = { 0 };
	char why[256];
	if (resolve_libc(inj->pid, &fn, why, sizeof(why)))
		memset(&fn, 0, sizeof(fn)); /* calls take the older way */
	int rc = seize_one(&t, inj->pid, inj->latch, 0, 0, err, errsz);
	if (rc && rc != -EPERM && pid_exiting(inj->pid))
		return fail(err, errsz, -ESRCH, "process %d exited during unloading", inj->pid);
	if (rc)
		return rc;
	if (inj->lib_ino && map_ino(inj->pid, inj->fini) != inj->lib_ino) {
		/* It exec'd since the load: the addresses are the old image's,
		 * nothing may be called there. (Looked at with a thread held: an
		 * exec by another thread from here on ends that one, and the
		 * calls below fail.) */
		unseize(&t);
		return fail(err, errsz, -ESRCH, "process %d exec'd since the load: the library went "
			    "with its old image", inj->pid);
	}
	uint64_t ok = 0, ret = 0;
	begin_calls(&t, &fn);
	rc = remote_call(&t, inj->fini, inj->token, 0, 0, &ok, err, errsz);
	if (!rc && (int)ok == 1)
		rc = remote_call(&t, inj->dlclose, inj->handle, 0, 0, &ret, err, errsz);
	end_calls(&t);
	bool gone = t.gone;
	if (t.abandoned) {
		unseize(&t);
		return rc;
	}
	int urc = unseize(&t);
	if (gone || urc == -ESRCH || ((rc || (int)ok != 1) && pid_exiting(inj->pid)))
		return fail(err, errsz, -ESRCH, "process %d exited during unloading", inj->pid);
	if (!rc && urc)
		rc = fail(err, errsz, urc, "process %d: restoring registers failed", inj->pid);
	if (rc)
		return rc;
	if ((int)ok != 1)
		return 0;
	if ((int)ret != 0)
		return fail(err, errsz, -EIO, "process %d: dlclose of the library failed", inj->pid);
	return 1;
}

#endif /* __x86_64__ */
