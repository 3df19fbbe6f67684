// SPDX-License-Identifier: Apache-2.0
/*
 * inject_latch: stop a busy thread at a lock-free function entry. See
 * inject_latch.h for the method and why it is safe; x86-64 only.
 */
#include "collector/session/clock.h"
#include "inject_latch.h"
#include "collector/target/elfsym.h"
#include "collector/target/tfile.h"
#include "cgroup_join.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __x86_64__
int lt_latch_thread_from(int pid, int adopt, const struct lt_inj_latch *spec, int *tid, const char **where,
			 char *err, size_t errsz)
{
	(void)adopt; (void)spec; (void)tid; (void)where;
	snprintf(err, errsz, "process %d: stopping a busy thread is supported on x86-64 only", pid);
	return -ENOSYS;
}
#else

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

#define LATCH_MAX_SITES 8
#define LATCH_MAX_THREADS 4096
#define LATCH_STOP_MS 2000      /* one thread's way to its interrupt stop */
#define LATCH_ROUND_MAX_MS 50   /* longest run between two looks */
#define LATCH_GUARD_SLACK_MS 5000 /* past wait_ms, a collector still mid-latch is stopped: ended */
#define LATCH_OPTS (PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC)

static const uint8_t latch_jmp_self[2] = { 0xeb, 0xfe }; /* jmp . */

struct latch_site {
	uint64_t addr;
	uint8_t orig[2];
	const char *name;
};

struct latch_thr {
	int tid;
	bool stopped, gone;
};

struct latch {
	int pid;
	int adopt;                  /* a thread traced and stopped already (0: none) */
	struct latch_site site[LATCH_MAX_SITES];
	int n_sites;
	struct latch_thr *thr;
	int n_thr;
	int mem_fd;                 /* /proc/PID/mem: the address space as seized */
	int guard_pid, guard_fd;    /* the guardian and our end of its socket */
	bool patched, execd, group_stop;
	char *err;
	size_t errsz;
};

static int latch_fail(struct latch *l, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int latch_fail(struct latch *l, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->err, l->errsz, fmt, ap);
	va_end(ap);
	return rc;
}


static void latch_nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ sites */

/* A first instruction of at least two bytes, so that `jmp .` covers one
 * instruction only and no thread can be between its two bytes (a prefix,
 * a two-byte opcode, or an opcode with a ModRM byte). A 1-byte `push` is
 * refused: a thread (or a signal frame) could stand right after it. */
static bool latch_patchable(const uint8_t b[2])
{
	static const uint8_t modrm_ops[] = { 0x01, 0x03, 0x09, 0x0b, 0x29, 0x2b, 0x31, 0x33, 0x39,
					     0x3b, 0x81, 0x83, 0x85, 0x89, 0x8b, 0x8d, 0xc7, 0xe9, 0xeb };
	if ((b[0] & 0xf0) == 0x40 || b[0] == 0x0f || b[0] == 0x66 || (b[0] == 0xf3 && b[1] == 0x0f))
		return true;
	return memchr(modrm_ops, b[0], sizeof(modrm_ops)) != NULL;
}

static bool latch_object_match(const char *path, const char *object)
{
	const char *base = strrchr(path, '/');
	return base && strstr(base + 1, object);
}

/* The spec's functions in one mapped object (its mapping at offset 0). */
static void latch_sites_in(struct latch *l, const struct lt_inj_latch *spec, const struct lt_tf_map *m,
			   int root_fd)
{
	char why[256];
	struct lt_elf *e = NULL;
	uint64_t va0;
	int fd = lt_tf_open_mapped(LT_TF_PROC, l->pid, root_fd, m, why, sizeof(why));

	if (fd < 0)
		return;
	if (lt_elf_open_fd(fd, m->path, &e, why, sizeof(why)) || lt_elf_offset_to_vaddr(e, 0, &va0)) {
		lt_elf_free(e);
		close(fd);
		return;
	}
	for (const char *const *s = spec->syms; *s && l->n_sites < LATCH_MAX_SITES; s++)
		for (size_t i = 0; i < e->n_syms; i++) {
			if (!e->syms[i].exported || strcmp(e->syms[i].name, *s))
				continue;
			l->site[l->n_sites].addr = m->start - (va0 & ~0xfffULL) + e->syms[i].vaddr;
			l->site[l->n_sites++].name = *s; /* the spec's string: static */
			break;
		}
	lt_elf_free(e);
	close(fd);
}

struct latch_scan {
	struct latch *l;
	const struct lt_inj_latch *spec;
	int root_fd;
};

/* The first object the spec names that holds its sites ends the scan. */
static int latch_scan_map(const struct lt_tf_map *m, void *ctx)
{
	struct latch_scan *c = ctx;

	if (m->pgoff == 0 && !m->deleted && latch_object_match(m->path, c->spec->object))
		latch_sites_in(c->l, c->spec, m, c->root_fd);
	return c->l->n_sites > 0;
}

static int latch_find_sites(struct latch *l, const struct lt_inj_latch *spec)
{
	struct latch_scan c = { l, spec, lt_tf_root_open(LT_TF_PROC, l->pid) };

	lt_tf_maps_each(LT_TF_PROC, l->pid, latch_scan_map, &c);
	if (c.root_fd >= 0)
		close(c.root_fd);
	return l->n_sites ? 0 : -ENOENT;
}

/* With every thread stopped: keep the sites whose first instruction may be
 * patched and on which no thread stands. */
static void latch_check_sites(struct latch *l, const uint64_t *rips, int n_rips)
{
	int keep = 0;
	for (int i = 0; i < l->n_sites; i++) {
		struct latch_site *s = &l->site[i];
		bool ok = pread(l->mem_fd, s->orig, 2, (off_t)s->addr) == 2 && latch_patchable(s->orig);
		for (int j = 0; ok && j < n_rips; j++)
			ok = rips[j] != s->addr + 1;
		if (ok)
			l->site[keep++] = *s;
	}
	l->n_sites = keep;
}

/* Put the original bytes back where ours still are, through fd (the
 * address space the patch went into). Async-signal-safe: the guardian. */
static void latch_unpatch_fd(int mem_fd, const struct latch_site *site, int n)
{
	for (int i = 0; i < n; i++) {
		uint8_t cur[2];
		if (pread(mem_fd, cur, 2, (off_t)site[i].addr) == 2 && !memcmp(cur, latch_jmp_self, 2))
			(void)!pwrite(mem_fd, site[i].orig, 2, (off_t)site[i].addr);
	}
}

/* ------------------------------------------------------------ threads */

static struct latch_thr *latch_thr(struct latch *l, int tid)
{
	for (int i = 0; i < l->n_thr; i++)
		if (l->thr[i].tid == tid)
			return &l->thr[i];
	return NULL;
}

/* A forked child (traced from birth): its copy of the text carries the
 * patch; restore it before the child runs, then let it go. A vfork child
 * shares our address space: the parent's restore covers it. */
static void latch_on_fork(struct latch *l, int parent, bool vfork)
{
	unsigned long child = 0;
	char path[64];
	if (ptrace(PTRACE_GETEVENTMSG, parent, NULL, &child) || !child)
		return;
	uint64_t end = lt_mono_ms() + LATCH_STOP_MS;
	int st = 0;
	pid_t r;
	while ((r = waitpid((pid_t)child, &st, __WALL | __WNOTHREAD | WNOHANG)) == 0 && lt_mono_ms() < end)
		latch_nap_us(200);
	if (r != (pid_t)child || !WIFSTOPPED(st))
		return;
	snprintf(path, sizeof(path), "/proc/%lu/mem", child);
	int fd = vfork ? -1 : open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		latch_unpatch_fd(fd, l->site, l->n_sites);
		close(fd);
	}
	ptrace(PTRACE_DETACH, (pid_t)child, NULL, NULL);
}

/* One wait status of a seized thread that is not the stop we wait for:
 * pass signals on, handle fork and exec events. Returns true when the
 * thread is now stopped for us (an interrupt or group stop). */
static bool latch_status(struct latch *l, struct latch_thr *t, int st)
{
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		t->gone = true;
		t->stopped = false;
		return false;
	}
	if (!WIFSTOPPED(st))
		return false;
	int event = st >> 16, sig = WSTOPSIG(st);
	if (event == PTRACE_EVENT_STOP) {
		if (sig != SIGTRAP)
			l->group_stop = true; /* SIGSTOP & co. arrived meanwhile */
		t->stopped = true;
		return true;
	}
	if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK)
		latch_on_fork(l, t->tid, event == PTRACE_EVENT_VFORK);
	if (event == PTRACE_EVENT_EXEC)
		l->execd = true;
	/* A signal for the program: deliver it now; events: go on. */
	ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)(event ? 0 : sig));
	return false;
}

/* Wait until t stops for us, up to LATCH_STOP_MS. */
static int latch_wait_stop(struct latch *l, struct latch_thr *t)
{
	uint64_t end = lt_mono_ms() + LATCH_STOP_MS;
	long nap = 20;
	while (!t->stopped && !t->gone) {
		int st = 0;
		pid_t r = waitpid(t->tid, &st, __WALL | __WNOTHREAD | WNOHANG);
		if (r == t->tid) {
			latch_status(l, t, st);
			continue;
		}
		if (r < 0 && errno != EINTR) {
			t->gone = true;
			break;
		}
		if (lt_mono_ms() >= end)
			return -ETIMEDOUT;
		latch_nap_us(nap);
		nap = nap < 1000 ? nap * 2 : 1000;
	}
	return 0;
}

static int latch_list(struct latch *l, int *tids, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", l->pid);
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return -ESRCH;
	for (struct dirent *de; (de = readdir(d)) && n < max;)
		if (atoi(de->d_name) > 0)
			tids[n++] = atoi(de->d_name);
	closedir(d);
	return n;
}

/* Seize the threads not seized yet; 1 if any was new. */
static int latch_seize_new(struct latch *l, int *tids)
{
	int n = latch_list(l, tids, LATCH_MAX_THREADS), added = 0;
	if (n < 0)
		return latch_fail(l, -ESRCH, "process %d exited during injection", l->pid);
	if (n >= LATCH_MAX_THREADS)
		return latch_fail(l, -E2BIG, "process %d has more than %d threads: not injected",
				  l->pid, LATCH_MAX_THREADS);
	for (int i = 0; i < n; i++) {
		if (latch_thr(l, tids[i]))
			continue;
		if (tids[i] == l->adopt) { /* ours and stopped: only our options change */
			if (ptrace(PTRACE_SETOPTIONS, tids[i], NULL, (void *)(long)LATCH_OPTS))
				return latch_fail(l, -ESRCH, "process %d exited during injection", l->pid);
			l->thr[l->n_thr++] = (struct latch_thr){ .tid = tids[i], .stopped = true };
			added = 1;
			continue;
		}
		if (l->n_thr >= LATCH_MAX_THREADS) /* threads come and go faster than we look */
			return latch_fail(l, -E2BIG, "process %d: more than %d threads seen: not injected",
					  l->pid, LATCH_MAX_THREADS);
		if (ptrace(PTRACE_SEIZE, tids[i], NULL, (void *)(long)LATCH_OPTS)) {
			if (errno == EPERM)
				return latch_fail(l, -EPERM, "cannot ptrace process %d: %s (need root or "
						  "CAP_SYS_PTRACE; another tracer attached?)", l->pid,
						  strerror(errno));
			continue; /* gone meanwhile */
		}
		l->thr[l->n_thr++] = (struct latch_thr){ .tid = tids[i] };
		added = 1;
	}
	return added;
}

/* Stop every thread, including threads started meanwhile: listed again
 * until a listing finds none new (a stopped thread starts none). */
static int latch_stop_world(struct latch *l)
{
	int *tids = malloc(LATCH_MAX_THREADS * sizeof(*tids));
	int rc = tids ? 1 : -ENOMEM;
	while (rc == 1) {
		rc = latch_seize_new(l, tids);
		if (rc < 0)
			break;
		int again = rc;
		for (int i = 0; i < l->n_thr; i++)
			if (!l->thr[i].stopped && !l->thr[i].gone)
				ptrace(PTRACE_INTERRUPT, l->thr[i].tid, NULL, NULL);
		for (int i = 0; i < l->n_thr && rc >= 0; i++)
			if (latch_wait_stop(l, &l->thr[i]))
				rc = latch_fail(l, -ETIMEDOUT, "process %d: thread %d did not stop within "
						"%d ms", l->pid, l->thr[i].tid, LATCH_STOP_MS);
		if (rc >= 0)
			rc = again;
	}
	free(tids);
	if (rc == 0 && l->execd)
		rc = latch_fail(l, -EAGAIN, "process %d exec'd during injection; not injected", l->pid);
	if (rc == 0 && l->group_stop)
		rc = latch_fail(l, -EAGAIN, "process %d was stopped (SIGSTOP) during injection; "
				"not injected, left stopped", l->pid);
	return rc;
}

static void latch_resume_world(struct latch *l)
{
	for (int i = 0; i < l->n_thr; i++)
		if (l->thr[i].stopped && !l->thr[i].gone && !ptrace(PTRACE_CONT, l->thr[i].tid, NULL, NULL))
			l->thr[i].stopped = false;
}

/* The guardian ended (its end of our socket closed): nothing would put the
 * bytes back if we died too, so the latch is given up at once. */
static bool latch_guard_lost(const struct latch *l)
{
	struct pollfd pfd = { l->guard_fd, POLLIN, 0 };
	return l->guard_pid > 0 && poll(&pfd, 1, 0) > 0;
}

/* While the threads run: pass signals on at once, follow forks. -ECHILD
 * when the guardian is gone. */
static int latch_service(struct latch *l)
{
	for (int i = 0; i < l->n_thr; i++) {
		struct latch_thr *t = &l->thr[i];
		int st = 0;
		if (!t->gone && !t->stopped && waitpid(t->tid, &st, __WALL | __WNOTHREAD | WNOHANG) == t->tid &&
		    latch_status(l, t, st) && !ptrace(PTRACE_CONT, t->tid, NULL, NULL))
			t->stopped = false; /* a stale interrupt stop */
	}
	if (latch_guard_lost(l))
		return latch_fail(l, -ECHILD, "process %d: the injection's guardian ended (killed?) while "
				  "its text was patched: the bytes were put back at once, nothing injected",
				  l->pid);
	return 0;
}

/* Let every stopped thread but `keep` go (they are all stopped here). */
static void latch_release(struct latch *l, int keep)
{
	for (int i = 0; i < l->n_thr; i++)
		if (l->thr[i].tid != keep && !l->thr[i].gone)
			ptrace(PTRACE_DETACH, l->thr[i].tid, NULL, NULL);
}

/* ------------------------------------------------------------ guardian */

/* The guardian's tids of the target (raw getdents64: no malloc after a
 * fork of a threaded collector). */
static int latch_guard_list(int task_fd, int *tids, int max)
{
	char buf[4096];
	long got;
	int n = 0;
	lseek(task_fd, 0, SEEK_SET);
	while (n < max && (got = syscall(SYS_getdents64, task_fd, buf, sizeof(buf))) > 0)
		for (long off = 0; off < got && n < max;) {
			unsigned short reclen; /* struct linux_dirent64: d_reclen at 16, d_name at 19 */
			int tid = 0;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			for (const char *p = buf + off + 19; *p >= '0' && *p <= '9'; p++)
				tid = tid * 10 + (*p - '0');
			if (tid > 0)
				tids[n++] = tid;
			off += reclen;
		}
	return n;
}

/* Seize and stop what it can of the target: the dying collector may still
 * hold its threads for a moment (its files close before its tracees are
 * let go), so EPERM is tried again, up to a second. */
static int latch_guard_stop(int task_fd, int *held, int max)
{
	int tids[512], n_held = 0;
	for (int attempt = 0; attempt < 1000; attempt++) {
		int n = latch_guard_list(task_fd, tids, 512), busy = 0;
		for (int i = 0; i < n && n_held < max; i++) {
			bool have = false;
			for (int j = 0; j < n_held && !have; j++)
				have = held[j] == tids[i];
			if (have)
				continue;
			if (!ptrace(PTRACE_SEIZE, tids[i], NULL, NULL) && !ptrace(PTRACE_INTERRUPT, tids[i], NULL, NULL))
				held[n_held++] = tids[i];
			else if (errno == EPERM)
				busy = 1;
		}
		if (!busy)
			break;
		latch_nap_us(1000);
	}
	for (int i = 0; i < n_held; i++)
		for (int k = 0; k < 2000; k++) {
			int st = 0;
			pid_t r = waitpid(held[i], &st, __WALL | __WNOTHREAD | WNOHANG);
			if (r < 0 || (r > 0 && (!WIFSTOPPED(st) || (st >> 16) == PTRACE_EVENT_STOP)))
				break;
			if (r > 0) /* a signal for the program: pass it on */
				ptrace(PTRACE_CONT, held[i], NULL, (void *)(long)WSTOPSIG(st));
			else
				latch_nap_us(500);
		}
	return n_held;
}

/* Close every inherited fd but the three the guardian uses. */
static void latch_guard_fds(int a, int b, int c)
{
	int keep[3] = { a, b, c }, lo = 3;
	for (int i = 0; i < 3; i++) /* sort */
		for (int j = i + 1; j < 3; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i]; keep[i] = keep[j]; keep[j] = t;
			}
	for (int i = 0; i < 3; i++) {
		if (keep[i] > lo)
			syscall(SYS_close_range, (unsigned)lo, (unsigned)keep[i] - 1, 0);
		lo = keep[i] + 1;
	}
	syscall(SYS_close_range, (unsigned)lo, ~0U, 0);
}

/* Out of the collector's reach: a session and process group of its own
 * (a group SIGKILL, Ctrl-C or Ctrl-\ of the collector's group, a pod's
 * group kill do not reach it), a name of its own (`killall llmtracker`
 * does not) and every catchable signal ignored. */
static void latch_guard_detach(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };

	setsid();
	prctl(PR_SET_NAME, "llmt-guardian"); /* a kill of the collector by name misses it */
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD)
			sigaction(sig, &sa, NULL);
}

/* The collector's word, or its end. Past the deadline with neither, the
 * collector is stopped or frozen with threads spinning on its patch: it is
 * ended (the kernel then lets its tracees go) and its socket closes. */
static char latch_guard_wait(int rd, int collector, uint64_t deadline_ms)
{
	char c = 0;

	for (;;) {
		uint64_t now = lt_mono_ms();
		struct pollfd pfd = { rd, POLLIN, 0 };
		int left = now < deadline_ms ? (int)(deadline_ms - now) : 0;
		int r = poll(&pfd, 1, left);

		if (r > 0) {
			ssize_t got = read(rd, &c, 1);

			if (got == 1 || got == 0)
				return got ? c : 0;
			if (errno != EINTR)
				return 0;
		} else if (r == 0 && collector > 0) {
			kill(collector, SIGKILL);
			collector = 0; /* from now on: wait for its pipe to close */
			deadline_ms = UINT64_MAX;
		}
	}
}

/* The guardian's whole life, after fork: async-signal-safe calls only.
 * 'd' on the socket: the collector restored the bytes itself. EOF: it died
 * mid-way; stop the threads (the kernel let them run), put the bytes back
 * where they are still ours, let the threads go. The collector watches it
 * the same way: if the guardian ends first, the collector puts the bytes
 * back at once (latch_service). */
static void latch_guard_main(const struct latch *l, int rd, int ready, int task_fd, int collector,
			     uint64_t deadline_ms)
{
	int held[512];

	latch_guard_detach();
	(void)!write(ready, "r", 1);
	close(ready);
	latch_guard_fds(rd, task_fd, l->mem_fd);
	if (latch_guard_wait(rd, collector, deadline_ms) == 'd')
		_exit(0);
	int n = latch_guard_stop(task_fd, held, 512);
	latch_unpatch_fd(l->mem_fd, l->site, l->n_sites);
	for (int i = 0; i < n; i++)
		ptrace(PTRACE_DETACH, held[i], NULL, NULL);
	_exit(1);
}

/* The guardian is ready (out of our process group) before any byte is
 * patched: a kill between its fork and its setsid finds nothing to undo. */
static bool latch_guard_ready(int rd)
{
	char c = 0;
	struct pollfd pfd = { rd, POLLIN, 0 };

	while (poll(&pfd, 1, LATCH_STOP_MS) < 0 && errno == EINTR)
		;
	return read(rd, &c, 1) == 1 && c == 'r';
}

static int latch_guard_start(struct latch *l, int wait_ms)
{
	char path[64];
	int p[2], r[2] = { -1, -1 };
	uint64_t deadline = lt_mono_ms() + (uint64_t)wait_ms + LATCH_GUARD_SLACK_MS;
	pid_t self = getpid();
	snprintf(path, sizeof(path), "/proc/%d/task", l->pid);
	int task_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* (a socket: our word to a guardian that died raises no SIGPIPE) */
	if (task_fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) || pipe2(r, O_CLOEXEC)) {
		if (task_fd >= 0)
			close(task_fd);
		return latch_fail(l, -errno, "process %d: cannot set up the injection's guardian: %s",
				  l->pid, strerror(errno));
	}
	pid_t g = fork();
	if (g == 0) {
		close(p[1]);
		close(r[0]);
		latch_guard_main(l, p[0], r[1], task_fd, self, deadline);
	}
	close(p[0]);
	close(r[1]);
	close(task_fd);
	if (g < 0 || !latch_guard_ready(r[0])) {
		int e = g < 0 ? errno : EIO;

		close(r[0]);
		close(p[1]);
		if (g > 0)
			waitpid(g, NULL, __WNOTHREAD);
		return latch_fail(l, -e, "process %d: cannot start the injection's guardian: %s",
				  l->pid, strerror(e));
	}
	close(r[0]);
	lt_cg_join_like(g, l->pid); /* its fate is the target's, not the collector's cgroup's */
	l->guard_pid = g;
	l->guard_fd = p[1];
	return 0;
}

static void latch_guard_done(struct latch *l)
{
	if (l->guard_pid <= 0)
		return;
	(void)!send(l->guard_fd, "d", 1, MSG_NOSIGNAL);
	close(l->guard_fd);
	waitpid(l->guard_pid, NULL, __WNOTHREAD);
	l->guard_pid = 0;
}

/* ------------------------------------------------------------ rounds */

static void latch_unpatch(struct latch *l)
{
	if (l->patched)
		latch_unpatch_fd(l->mem_fd, l->site, l->n_sites);
	l->patched = false;
	latch_guard_done(l);
}

/* Every thread stopped: the first standing on a patched entry. */
static int latch_find_spinner(struct latch *l, const char **where)
{
	for (int i = 0; i < l->n_thr; i++) {
		struct user_regs_struct r;
		struct iovec iov = { &r, sizeof(r) };
		if (l->thr[i].gone || ptrace(PTRACE_GETREGSET, l->thr[i].tid, (void *)NT_PRSTATUS, &iov))
			continue;
		for (int s = 0; s < l->n_sites; s++)
			if (r.rip == l->site[s].addr) {
				*where = l->site[s].name;
				return l->thr[i].tid;
			}
	}
	return 0;
}

static int latch_patch(struct latch *l, int wait_ms)
{
	uint64_t *rips = calloc((size_t)l->n_thr + 1, sizeof(*rips));
	int n = 0;
	for (int i = 0; rips && i < l->n_thr; i++) {
		struct user_regs_struct r;
		struct iovec iov = { &r, sizeof(r) };
		if (!l->thr[i].gone && !ptrace(PTRACE_GETREGSET, l->thr[i].tid, (void *)NT_PRSTATUS, &iov))
			rips[n++] = r.rip;
	}
	latch_check_sites(l, rips, n);
	free(rips);
	if (!l->n_sites)
		return latch_fail(l, -ENOENT, "process %d: no function entry here can be patched safely",
				  l->pid);
	int rc = latch_guard_start(l, wait_ms);
	if (rc)
		return rc;
	l->patched = true; /* from the first byte on: unpatch checks what is there */
	for (int i = 0; i < l->n_sites; i++)
		if (pwrite(l->mem_fd, latch_jmp_self, 2, (off_t)l->site[i].addr) != 2)
			return latch_fail(l, -errno, "process %d: cannot write its text: %s", l->pid,
					  strerror(errno));
	return 0;
}

/* Tests only: LLMT_TEST_LATCH_STALL_MS keeps the patch in that long before
 * the first look (up to 10 s), so that a test can kill the collector while
 * threads spin on it and watch the guardian restore the text. */
static long latch_test_stall_us(void)
{
	const char *v = getenv("LLMT_TEST_LATCH_STALL_MS");
	long ms = v ? atol(v) : 0;
	return ms > 0 && ms <= 10000 ? ms * 1000 : 0;
}

/* Run, look, until a thread spins on a patch or wait_ms is over. */
static int latch_rounds(struct latch *l, int wait_ms, int *tid, const char **where)
{
	uint64_t end = lt_mono_ms() + (uint64_t)wait_ms;
	long run_us = 1000 + latch_test_stall_us();
	for (;;) {
		int rc = 0;
		latch_resume_world(l);
		for (long slept = 0; slept < run_us && !rc; slept += 500) {
			latch_nap_us(500);
			rc = latch_service(l);
		}
		if (rc || (rc = latch_stop_world(l)))
			return rc;
		if ((*tid = latch_find_spinner(l, where)))
			return 0;
		if (lt_mono_ms() >= end)
			return latch_fail(l, -EAGAIN, "process %d: no thread called %s or the other patched "
					  "functions within %d ms (all threads idle, or in C code)", l->pid,
					  l->site[0].name, wait_ms);
		run_us = run_us * 2 < LATCH_ROUND_MAX_MS * 1000 ? run_us * 2 : LATCH_ROUND_MAX_MS * 1000;
	}
}

int lt_latch_thread_from(int pid, int adopt, const struct lt_inj_latch *spec, int *tid, const char **where,
			 char *err, size_t errsz)
{
	struct latch l = { .pid = pid, .adopt = adopt, .mem_fd = -1, .guard_fd = -1, .err = err, .errsz = errsz };
	char path[64];
	int rc;

	*tid = 0;
	*where = NULL;
	if (!spec->freeze_first && latch_find_sites(&l, spec))
		return latch_fail(&l, -ENOENT, "process %d: none of the functions to stop a busy thread "
				  "at (%s, ...) is exported by a mapped *%s* file", pid, spec->syms[0],
				  spec->object);
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	l.mem_fd = open(path, O_RDWR | O_CLOEXEC);
	l.thr = calloc(LATCH_MAX_THREADS, sizeof(*l.thr));
	if (l.mem_fd < 0 || !l.thr) {
		rc = latch_fail(&l, l.thr ? -errno : -ENOMEM, "process %d: cannot open its memory: %s", pid,
				strerror(errno));
		free(l.thr);
		if (l.mem_fd >= 0)
			close(l.mem_fd);
		return rc;
	}
	rc = latch_stop_world(&l);
	if (!rc && spec->freeze_first && latch_find_sites(&l, spec))
		rc = latch_fail(&l, -ENOENT, "process %d: %s is not mapped (yet)", pid, spec->syms[0]);
	if (!rc)
		rc = latch_patch(&l, spec->wait_ms + latch_test_stall_us() / 1000);
	if (!rc)
		rc = latch_rounds(&l, spec->wait_ms, tid, where);
	if (rc) { /* detach needs every thread stopped; keep the first reason */
		char first[512];
		snprintf(first, sizeof(first), "%s", err);
		latch_stop_world(&l);
		snprintf(err, errsz, "%s", first);
	}
	latch_unpatch(&l);
	if (!rc && ptrace(PTRACE_SETOPTIONS, *tid, NULL, NULL))
		rc = latch_fail(&l, -ESRCH, "process %d exited during injection", pid);
	latch_release(&l, rc ? 0 : *tid);
	if (rc)
		*tid = 0;
	close(l.mem_fd);
	free(l.thr);
	return rc;
}

#endif /* __x86_64__ */

int lt_latch_thread(int pid, const struct lt_inj_latch *spec, int *tid, const char **where,
		    char *err, size_t errsz)
{
	return lt_latch_thread_from(pid, 0, spec, tid, where, err, errsz);
}
