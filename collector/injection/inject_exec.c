// SPDX-License-Identifier: Apache-2.0
/*
 * inject_exec: hold an exec'd interpreter until its code is mapped. See
 * inject_exec.h; x86-64 and Linux ptrace only.
 */
#include "collector/session/clock.h"
#include "collector/target/elfsym.h"
#include "inject_exec.h"
#include "collector/target/tfile.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif
#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO 0x420e
#endif
#define XC_SYSCALL_INFO_ENTRY 1
#define XC_OPTS (PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD)
#define XC_STOP_MS 2000         /* an interrupt's way to its stop */
#define XC_MAX_CANDIDATES 8     /* files named like the object looked into */
#define XC_NEXT_EXEC_MS 1000    /* an image that runs no interpreter (env, a shell):
				 * how long its own exec of one is waited for */

/* The kernel's struct ptrace_syscall_info, as far as we read it. */
struct xc_sysinfo {
	uint8_t op;
	uint8_t pad[3];
	uint32_t arch;
	uint64_t ip, sp;
	union {
		struct { uint64_t nr, args[6]; } entry;
		struct { int64_t rval; uint8_t is_error; } exit;
	};
};

/* A mapped file named like the object: where its `sym` lies, once read. */
struct xc_cand {
	char path[256];
	uint64_t start;          /* its mapping at file offset 0 */
	uint64_t addr;           /* sym's address; 0: none there */
};

struct xc_run {
	struct lt_xc *x;
	const char *object, *sym;
	struct xc_cand cand[XC_MAX_CANDIDATES];
	int n_cand;
	uint64_t last_nr;        /* the last system call entered */
	uint64_t other_until;    /* an image without the interpreter: its exec awaited until then */
	char *err;
	size_t errsz;
};

static int xc_fail(char *err, size_t errsz, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int xc_fail(char *err, size_t errsz, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return rc;
}

/* One wait status of the main thread, within `end` (ms). 1 with *st, 0 on
 * timeout, -ESRCH when it cannot be waited for. */
static int xc_wait(int tid, int *st, uint64_t end)
{
	long nap = 10;
	for (;;) {
		pid_t r = waitpid(tid, st, __WALL | __WNOTHREAD | WNOHANG);
		if (r == tid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -ESRCH;
		if (lt_mono_ms() >= end)
			return 0;
		struct timespec ts = { 0, nap * 1000 };
		nanosleep(&ts, NULL);
		nap = nap < 1000 ? nap * 2 : 1000;
	}
}

int lt_xc_seize(struct lt_xc *x, int pid, bool before_exec, char *err, size_t errsz)
{
	*x = (struct lt_xc){ .pid = pid, .before_exec = before_exec };
	if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)(long)XC_OPTS))
		return xc_fail(err, errsz, errno == EPERM ? -EPERM : -ESRCH, "process %d: cannot hold it "
			       "at its start: %s", pid, strerror(errno));
	x->traced = true;
	if (before_exec)
		return 0; /* it reports its stop (group stop) and its exec to us */
	uint64_t end = lt_mono_ms() + XC_STOP_MS;
	int st = 0;
	if (ptrace(PTRACE_INTERRUPT, pid, NULL, NULL))
		goto gone;
	/* Signals that come first are delivered; the interrupt stop follows. */
	while (xc_wait(pid, &st, end) == 1 && WIFSTOPPED(st)) {
		int s = WSTOPSIG(st);
		if ((st >> 16) == PTRACE_EVENT_STOP && (s == SIGSTOP || s == SIGTSTP || s == SIGTTIN || s == SIGTTOU)) {
			lt_xc_release(x); /* stopped by someone: left so, not held */
			return xc_fail(err, errsz, -EAGAIN, "process %d is stopped (signal %d)", pid, s);
		}
		if ((st >> 16) == PTRACE_EVENT_STOP)
			return 0;
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)((st >> 16) ? 0 : WSTOPSIG(st))))
			break;
	}
gone:
	lt_xc_release(x);
	return xc_fail(err, errsz, -ESRCH, "process %d exited before it could be held", pid);
}

void lt_xc_release(struct lt_xc *x)
{
	if (x->traced)
		ptrace(PTRACE_DETACH, x->pid, NULL, NULL); /* ESRCH: detached already, or running */
	x->traced = false;
}

/* Does the executable run `sym` from a file named like *object*: exporting
 * it, or needing such a library? */
static int xc_image_wants(int pid, const char *object, const char *sym)
{
	char why[256];
	struct lt_elf *e = NULL;
	int fd = lt_tf_open_link(LT_TF_PROC, pid, "exe", why, sizeof(why)), yes = 0;
	if (fd < 0)
		return 0;
	if (!lt_elf_open_fd(fd, "exe", &e, why, sizeof(why))) {
		for (size_t i = 0; i < e->n_syms && !yes; i++)
			yes = e->syms[i].exported && !strcmp(e->syms[i].name, sym);
		for (size_t i = 0; i < e->n_needed && !yes; i++)
			yes = strstr(e->needed[i], object) != NULL;
	}
	lt_elf_free(e);
	close(fd);
	return yes;
}

static const char *xc_base(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* A file named like the object mapped at offset 0: where sym lies in it
 * (read once per file). */
static struct xc_cand *xc_candidate(struct xc_run *r, int root_fd, const struct lt_tf_map *m)
{
	for (int i = 0; i < r->n_cand; i++)
		if (!strcmp(r->cand[i].path, m->path))
			return &r->cand[i];
	if (r->n_cand >= XC_MAX_CANDIDATES || strlen(m->path) >= sizeof(r->cand[0].path))
		return NULL;
	struct xc_cand *c = &r->cand[r->n_cand++];
	char why[256];
	struct lt_elf *e = NULL;
	uint64_t va0;
	memcpy(c->path, m->path, strlen(m->path) + 1); /* fits: checked above */
	c->start = m->start;
	c->addr = 0;
	int fd = lt_tf_open_mapped(LT_TF_PROC, r->x->pid, root_fd, m, why, sizeof(why));
	if (fd >= 0 && !lt_elf_open_fd(fd, m->path, &e, why, sizeof(why)) && !lt_elf_offset_to_vaddr(e, 0, &va0))
		for (size_t i = 0; i < e->n_syms && !c->addr; i++)
			if (e->syms[i].exported && !strcmp(e->syms[i].name, r->sym))
				c->addr = m->start - (va0 & ~0xfffULL) + e->syms[i].vaddr;
	lt_elf_free(e);
	if (fd >= 0)
		close(fd);
	return c;
}

/* Is sym's code mapped executable from its file, and libc mapped? */
struct xc_scan {
	struct xc_run *r;
	int root_fd;
	int libc, code;
};

static int xc_scan_map(const struct lt_tf_map *m, void *ctx)
{
	struct xc_scan *c = ctx;
	struct xc_run *r = c->r;

	if (m->path[0] != '/' || m->deleted)
		return 0;
	const char *base = xc_base(m->path);
	if (m->perms[2] == 'x' && (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5)))
		c->libc = 1;
	if (!strstr(base, r->object))
		return 0;
	if (m->pgoff == 0)
		xc_candidate(r, c->root_fd, m);
	for (int i = 0; i < r->n_cand && m->perms[2] == 'x'; i++)
		if (r->cand[i].addr && !strcmp(r->cand[i].path, m->path) &&
		    r->cand[i].addr >= m->start && r->cand[i].addr < m->end)
			c->code = 1;
	return 0;
}

static int xc_ready(struct xc_run *r)
{
	struct xc_scan c = { r, lt_tf_root_open(LT_TF_PROC, r->x->pid), 0, 0 };

	lt_tf_maps_each(LT_TF_PROC, r->x->pid, xc_scan_map, &c);
	if (c.root_fd >= 0)
		close(c.root_fd);
	return c.libc && c.code;
}

/* One stop's meaning, and how to go on from it: 1 a system call's exit
 * that may have mapped something, 0 go on (with *sig to deliver), <0 end. */
static int xc_stop(struct xc_run *r, int st, int *sig, bool *stepping)
{
	struct lt_xc *x = r->x;
	int event = st >> 16, s = WSTOPSIG(st);
	*sig = 0;
	if (event == PTRACE_EVENT_EXEC) {
		if (!xc_image_wants(x->pid, r->object, r->sym)) {
			if (!x->before_exec) /* a target's own exec of something else */
				return xc_fail(r->err, r->errsz, -ENOEXEC, "process %d exec'd a program that "
					       "runs no %s", x->pid, r->sym);
			/* the launched command: env, a shell, which may exec one */
			r->other_until = lt_mono_ms() + XC_NEXT_EXEC_MS;
			*stepping = false;
			return 0;
		}
		r->other_until = 0;
		*stepping = true;
		r->n_cand = 0;
		return 1; /* a static interpreter is mapped already */
	}
	if (event == PTRACE_EVENT_STOP) {
		if (s == SIGSTOP || s == SIGTSTP || s == SIGTTIN || s == SIGTTOU) {
			if (*stepping) /* stopped as it would have been: left so */
				return xc_fail(r->err, r->errsz, -EAGAIN, "process %d was stopped (signal %d) "
					       "while starting", x->pid, s);
			/* the launched command's own stop before its execve: until SIGCONT */
			return ptrace(PTRACE_LISTEN, x->pid, NULL, NULL) ? -ESRCH : 2;
		}
		return 0;
	}
	if (s == (SIGTRAP | 0x80)) {
		struct xc_sysinfo si;
		long n = ptrace(PTRACE_GET_SYSCALL_INFO, x->pid, (void *)sizeof(si), &si);
		if (n > 0 && si.op == XC_SYSCALL_INFO_ENTRY) {
			r->last_nr = si.entry.nr;
			return 0;
		}
		return r->last_nr == SYS_mmap || r->last_nr == SYS_mprotect;
	}
	*sig = s; /* a signal for the program: delivered as we go on */
	return 0;
}

int lt_xc_run_to(struct lt_xc *x, const char *object, const char *sym, int timeout_ms, char *err,
		 size_t errsz)
{
	struct xc_run r = { .x = x, .object = object, .sym = sym, .err = err, .errsz = errsz };
	uint64_t end = lt_mono_ms() + (uint64_t)timeout_ms;
	bool stepping = !x->before_exec, stopped = stepping; /* seized now: in its interrupt stop */
	int sig = 0, rc = 1;
	if (!x->traced)
		return xc_fail(err, errsz, -ESRCH, "process %d is not held", x->pid);
	if (stepping && !xc_image_wants(x->pid, object, sym))
		rc = xc_fail(err, errsz, -ENOEXEC, "process %d runs no %s", x->pid, sym);
	else if (stepping && xc_ready(&r))
		return 0;
	while (rc > 0) {
		if (rc != 2 && ptrace(stepping ? PTRACE_SYSCALL : PTRACE_CONT, x->pid, NULL, (void *)(long)sig)) {
			rc = -ESRCH;
			break;
		}
		stopped = false;
		int st = 0, w = xc_wait(x->pid, &st, r.other_until && r.other_until < end ? r.other_until : end);
		if (w == 0 && r.other_until) {
			rc = xc_fail(err, errsz, -ENOEXEC, "process %d exec'd a program that runs no %s", x->pid, sym);
			break;
		}
		if (w <= 0) {
			rc = w ? w : xc_fail(err, errsz, -ETIMEDOUT, "process %d: its %s was not mapped within %d ms",
					     x->pid, sym, timeout_ms);
			break;
		}
		if (!WIFSTOPPED(st)) {
			x->traced = false;
			return xc_fail(err, errsz, -ESRCH, "process %d exited while starting", x->pid);
		}
		stopped = true;
		rc = xc_stop(&r, st, &sig, &stepping);
		if (rc == 1 && stepping && xc_ready(&r))
			return 0;
		if (rc == 0)
			rc = 1;
	}
	if (rc == -ESRCH)
		xc_fail(err, errsz, -ESRCH, "process %d exited while starting", x->pid);
	if (!stopped && x->traced) { /* running (timed out): a stop of ours to detach from */
		int st = 0;
		ptrace(PTRACE_INTERRUPT, x->pid, NULL, NULL);
		xc_wait(x->pid, &st, lt_mono_ms() + XC_STOP_MS);
	}
	lt_xc_release(x); /* a group stop (-EAGAIN) stays as it was */
	return rc;
}
