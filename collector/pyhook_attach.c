// SPDX-License-Identifier: Apache-2.0
/*
 * pyhook_attach: get libllmtracker-inject.so into Python targets for
 * function tracing, and out again. See pyhook_attach.h; the library side is
 * collector/inject/pyhook.c, the protocol collector/inject/inject.h.
 */
#include "clock.h"
#include "pyhook_attach.h"
#include "launch.h"
#include "nodename.h"
#include "injector.h"
#include "inject_latch.h"
#include "inject_ctl.h"
#include "inject_log.h"
#include "../eventlog/eventlog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PYH_MAX 256
#define PYH_REPLY_MS 10000
#define PYH_LATER_MS 30000   /* how long a starting process may take to become injectable */
#define PYH_LATER_WAIT_MS 5000

/*
 * Where a busy interpreter (no thread asleep in a system call) is stopped
 * to load the hook: entries of CPython functions, in the order of how often
 * a CPU-bound script calls them (docs/MEASUREMENTS.md: the allocator's on
 * every few Python calls on 3.11-3.13, where Python-to-Python calls no
 * longer enter _PyEval_EvalFrameDefault; that one on every call on 3.9 and
 * 3.10). At their entry a thread runs interpreter code, holds the GIL and
 * no lock of the C library: libc never calls into CPython while it holds
 * one (the only ways in are the program's own callbacks, e.g. ctypes under
 * dl_iterate_phdr, or extension constructors, which run under the loader's
 * lock, a recursive one that the injected dlopen may take again).
 */
static const char *const pyh_latch_syms[] = {
	"PyObject_Malloc", "PyObject_Free", "PyMem_Malloc", "PyMem_Free", "_PyEval_EvalFrameDefault",
	"PyObject_GetAttr", "_PyObject_MakeTpCall", "PyObject_Vectorcall", NULL,
};
static const struct lt_inj_latch pyh_latch = { "python", pyh_latch_syms, 1000, 0 };

/*
 * A process that has just exec'd its interpreter: stopped (frozen first, so
 * the entry cannot be missed while we look) at Py_RunMain, which `python`
 * enters once, initialized, holding the GIL, before the program's first
 * instruction. The hook is installed there, on that thread, so no call of
 * the program is missed. An embedding program that never calls it waits
 * PYH_START_WAIT_MS, then gets the hook as any other process.
 */
#define PYH_START_WAIT_MS 3000
static const char *const pyh_start_syms[] = { "Py_RunMain", NULL };
static const struct lt_inj_latch pyh_latch_start = { "python", pyh_start_syms, PYH_START_WAIT_MS, 1 };

struct pyh_target {
	int pid;
	struct lt_inj inj;
	struct lt_ilog log;             /* the one file its library may write */
	int started;
};

struct pyh_later {
	struct lt_pyhook *ph;
	int pid;
	int fresh;                      /* just exec'd: try the start latch first */
	void (*log)(char, const char *);
	void (*unseen)(int, const char *);
	pthread_t th;
};

struct lt_pyhook {
	char lib[PATH_MAX];
	char dir[PATH_MAX];
	int dirfd;                      /* dir, ours alone: targets get one file each */
	char host[256];
	char session[EVLOG_SESSION_HEX]; /* hex, "" for none: into every log's header */
	pthread_mutex_t mu;             /* t[], n: deferred attaches add targets */
	struct pyh_target t[PYH_MAX];
	int n;
	struct pyh_later later[PYH_MAX];
	int n_later;
	atomic_int stopping;
	atomic_int later_ok;
	uint64_t events;                /* py_enter + py_exit the stopped hooks reported */
};

static int pyh_find_lib(char *out)
{
	static const char *const rel[] = { "../lib/libllmtracker-inject.so", "libllmtracker-inject.so",
					    "../lib/llmtracker/libllmtracker-inject.so" };
	char exe[PATH_MAX], p[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", exe, rel[i]);
		if (realpath(p, out))
			return 0;
	}
	return -ENOENT;
}

/* --cupti-dir, else the directory of -o. */
static void pyh_pick_dir(const char *log_dir, const char *output, char *dir, size_t sz)
{
	if (log_dir && *log_dir) {
		snprintf(dir, sz, "%s", log_dir);
		return;
	}
	snprintf(dir, sz, "%s", output && *output ? output : "./x");
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = 0;
	else if (slash)
		*slash = 0;
	else
		snprintf(dir, sz, ".");
}

struct lt_pyhook *lt_pyh_new(const char *log_dir, const char *output, const uint8_t *session,
			     char *err, size_t errsz)
{
	char dir[PATH_MAX];
	struct lt_pyhook *ph = calloc(1, sizeof(*ph));
	if (!ph) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	if (pyh_find_lib(ph->lib)) {
		snprintf(err, errsz, "the inject library libllmtracker-inject.so was not found beside the "
			 "collector (lib/libllmtracker-inject.so); install it there");
		free(ph);
		return NULL;
	}
	pyh_pick_dir(log_dir, output, dir, sizeof(dir));
	mkdir(dir, 0755);
	if (!realpath(dir, ph->dir) || (ph->dirfd = lt_ilog_dir(ph->dir)) < 0) {
		snprintf(err, errsz, "log directory %s: %s", dir, strerror(errno));
		free(ph);
		return NULL;
	}
	lt_node_name(ph->host, sizeof(ph->host));
	for (char *p = ph->host; *p; p++)
		if (*p == ' ' || *p == '/')
			*p = '_';
	if (session && evlog_session_set(session))
		evlog_session_hex(session, ph->session);
	pthread_mutex_init(&ph->mu, NULL);
	return ph;
}

const char *lt_pyh_dir(const struct lt_pyhook *ph)
{
	return ph ? ph->dir : NULL;
}

int lt_pyh_has(struct lt_pyhook *ph, int pid)
{
	int found = 0;
	if (!ph)
		return 0;
	pthread_mutex_lock(&ph->mu);
	for (int i = 0; i < ph->n; i++)
		found |= ph->t[i].pid == pid && ph->t[i].started;
	pthread_mutex_unlock(&ph->mu);
	return found;
}

/* ------------------------------------------------------------ protocol */

/* "start ..." with the one file the library may write (inject_log.h): no
 * directory, no path of ours. */
static int pyh_send_start(struct lt_pyhook *ph, struct pyh_target *t, int wait_ms, int hold,
			  char *err, size_t errsz)
{
	char msg[600];
	int fd = lt_ilog_create(&t->log, ph->dirfd, "llmtracker-python", ph->host, t->pid, err, errsz);
	if (fd < 0)
		return fd;
	snprintf(msg, sizeof(msg), "start pid=%d host=%s session=%s cuda=0 python=1 py_wait_ms=%d%s",
		 t->pid, ph->host, ph->session[0] ? ph->session : "-", wait_ms, hold ? " py_hold=1" : "");
	int rc = lt_ictl_send(t->inj.sock, msg, &fd, 1);
	close(fd);
	if (rc)
		snprintf(err, errsz, "the injected library took no start message: %s", strerror(-rc));
	return rc;
}

/* The library is done with its log ("stopped", or gone): publish it; one
 * line through log or into note when something is wrong. */
static void pyh_publish(struct lt_pyhook *ph, struct pyh_target *t, int done,
			void (*log)(char, const char *))
{
	char err[600], line[800 + PATH_MAX];
	int rc = done ? lt_ilog_publish(&t->log, ph->dirfd, err, sizeof(err)) : -EBUSY;
	if (rc == -EBUSY)
		snprintf(line, sizeof(line), "python: pid %d: its log stays as %s/%s (the hook "
			 "library may still write it)", t->pid, ph->dir, t->log.partial);
	else if (rc < 0)
		snprintf(line, sizeof(line), "python: pid %d: %s", t->pid, err);
	if (rc < 0 && log)
		log('W', line);
}

/* Take the library out again; a failure is logged, or put in `note`. */
static void pyh_unload(struct pyh_target *t, void (*log)(char, const char *), char *note, size_t notesz)
{
	char err[512], line[700];
	if (!t->inj.loaded) {
		if (t->inj.sock >= 0)
			close(t->inj.sock);
		t->inj.sock = -1;
		return;
	}
	int u = lt_inj_unload(&t->inj, err, sizeof(err));
	if (u == 0)
		snprintf(line, sizeof(line), "python: pid %d: the hook library stays loaded: the interpreter "
			 "could not be reached to remove its profile function (GIL held, or exiting)", t->pid);
	else if (u < 0 && u != -ESRCH)
		snprintf(line, sizeof(line), "python: pid %d: unloading the hook library: %s", t->pid, err);
	else
		return;
	if (log)
		log('W', line);
	if (note)
		snprintf(note, notesz, "%s", line);
}

/* A library that refused to start still runs its control thread until it
 * hears "stop"; it can be unloaded only once that thread has said its last
 * word ("stopped"), or the unload would find it running and leave it in. */
static void pyh_await_stopped(struct pyh_target *t)
{
	char reply[256];
	if (lt_ictl_send(t->inj.sock, "stop", NULL, 0) == 0)
		lt_ictl_await(t->inj.sock, "stopped", reply, sizeof(reply), PYH_REPLY_MS);
}

/* The start latch's thread is still stopped: start the library, then have
 * it install the profile function on that thread (llmt_pyhook_held). */
struct pyh_held {
	struct lt_pyhook *ph;
	struct pyh_target *t;
	char *reply;
	size_t replysz;
	int rc, installed;
	char err[512];
};

static void pyh_on_held(struct lt_inj *inj, void *arg)
{
	struct pyh_held *h = arg;
	uint64_t ret = 1;
	h->rc = pyh_send_start(h->ph, h->t, 0, 1, h->err, sizeof(h->err));
	if (!h->rc)
		h->rc = lt_ictl_recv(inj->sock, h->reply, h->replysz, PYH_REPLY_MS);
	if (h->rc > 0 && !strncmp(h->reply, "ok", 2) &&
	    !lt_inj_call_held(inj, "llmt_pyhook_held", &ret, h->err, sizeof(h->err)))
		h->installed = (int)ret == 0;
}

static int pyh_attach(struct lt_pyhook *ph, int pid, int wait_ms, int at_start, char *msg, size_t msgsz)
{
	char err[512], reply[1024] = "";
	struct pyh_target t = { .pid = pid, .inj = { .sock = -1 } };
	struct pyh_held h = { .ph = ph, .t = &t, .reply = reply, .replysz = sizeof(reply) };
	const struct lt_inj_hold hold = { pyh_on_held, &h };
	if (!ph)
		return snprintf(msg, msgsz, "no hook set-up"), -EINVAL;
	int rc = at_start ? lt_inj_load_held(&t.inj, pid, ph->lib, &pyh_latch_start, &hold, err, sizeof(err))
			  : lt_inj_load_busy(&t.inj, pid, ph->lib, &pyh_latch, err, sizeof(err));
	t.inj.hold = NULL;
	t.inj.latch = &pyh_latch; /* the unload stops any busy thread */
	if (rc) {
		snprintf(msg, msgsz, "%s", err);
		return rc;
	}
	if (at_start) {
		rc = h.rc;
		snprintf(err, sizeof(err), "%s", h.err);
	} else if ((rc = pyh_send_start(ph, &t, wait_ms, 0, err, sizeof(err))) == 0) {
		rc = lt_ictl_recv(t.inj.sock, reply, sizeof(reply), PYH_REPLY_MS + wait_ms);
	}
	if (rc > 0 && !strncmp(reply, "ok", 2)) {
		t.started = 1;
		snprintf(msg, msgsz, "%s, log %s%s%s%s", lt_ictl_text(reply), t.log.name,
			 at_start && h.installed ? ", installed at Py_RunMain before the program's first "
			 "Python instruction" : t.inj.latched_at ? ", loaded from a busy thread stopped at " : "",
			 at_start && h.installed ? "" : t.inj.latched_at ? t.inj.latched_at : "",
			 at_start && !h.installed ? " (installed by the library later: not at Py_RunMain)" : "");
		pthread_mutex_lock(&ph->mu);
		if (ph->n < PYH_MAX)
			ph->t[ph->n++] = t;
		else
			t.started = 0;
		pthread_mutex_unlock(&ph->mu);
		if (t.started)
			return 0;
		snprintf(msg, msgsz, "too many hooked processes");
	} else if (rc > 0 && !strncmp(reply, "err", 3)) {
		snprintf(msg, msgsz, "%s", lt_ictl_text(reply));
		pyh_await_stopped(&t);
	} else if (rc < 0 && rc != -ETIMEDOUT) {
		snprintf(msg, msgsz, "%s", err);
		pyh_await_stopped(&t);
	} else {
		snprintf(msg, msgsz, "the injected library %s", rc == -ETIMEDOUT ? "did not answer" : "went away");
	}
	/* It started nothing: take it out again, and say so if it stays. */
	char note[700] = "";
	pyh_unload(&t, NULL, note, sizeof(note));
	lt_ilog_drop(&t.log, ph->dirfd);
	if (note[0]) {
		size_t n = strlen(msg);
		snprintf(msg + n, msgsz - n, " (%s)", note);
	}
	return -EIO;
}

int lt_pyh_attach(struct lt_pyhook *ph, int pid, int wait_ms, char *msg, size_t msgsz)
{
	return pyh_attach(ph, pid, wait_ms, 0, msg, msgsz);
}

/* ------------------------------------------------------------ later */

static int pyh_alive(int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", pid);
	return access(path, F_OK) == 0 && kill(pid, 0) == 0;
}

/* Has the dynamic loader of `pid` mapped libc (dlopen is there)? */
static int pyh_libc_mapped(int pid)
{
	char path[64], line[1024];
	int found = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libc.so") || strstr(line, "/libc-");
	if (f)
		fclose(f);
	return found;
}



/* A process that has just exec'd: inject as soon as it has libc and a
 * thread asleep in a system call (the injector borrows one), then let the
 * library wait for the interpreter to finish starting. */
static void *pyh_later_main(void *arg)
{
	struct pyh_later *l = arg;
	char msg[1024], line[1400 + PATH_MAX];
	uint64_t end = lt_mono_ms() + PYH_LATER_MS;
	int rc = -ETIMEDOUT, at_start = l->fresh;
	while (!atomic_load(&l->ph->stopping) && lt_mono_ms() < end && pyh_alive(l->pid)) {
		if (at_start && lt_launch_is_own_fork(l->pid)) { /* a launched command before its exec */
			usleep(500);
			continue;
		}
		if (!pyh_libc_mapped(l->pid)) {
			usleep(at_start ? 500 : 2000);
			continue;
		}
		rc = pyh_attach(l->ph, l->pid, PYH_LATER_WAIT_MS, at_start, msg, sizeof(msg));
		if (at_start && rc == -ENOENT) { /* the interpreter is not mapped yet */
			usleep(500);
			continue;
		}
		if (at_start && rc == -EAGAIN) { /* not at Py_RunMain: any thread, any time */
			at_start = 0;
			continue;
		}
		if (rc != -EAGAIN)
			break;
	}
	if (!rc) {
		atomic_fetch_add(&l->ph->later_ok, 1);
		snprintf(line, sizeof(line), "python: pid %d: tracing functions through the injected "
			 "profile hook: %s, in %s", l->pid, msg, l->ph->dir);
		l->log('I', line);
	} else if (pyh_alive(l->pid) && !atomic_load(&l->ph->stopping)) {
		snprintf(line, sizeof(line), "python: pid %d: cannot trace Python functions: the profile "
			 "hook could not go in: %s", l->pid, rc == -ETIMEDOUT ? "timed out" : msg);
		l->log('W', line);
		snprintf(line, sizeof(line), "the profile hook could not go in: %s",
			 rc == -ETIMEDOUT ? "timed out" : msg);
		l->unseen(l->pid, line);
	} else {
		l->unseen(l->pid, atomic_load(&l->ph->stopping) ? "the profile ended before the hook could go in"
								 : "it exited before the profile hook could go in");
	}
	return NULL;
}

int lt_pyh_ready(int pid)
{
	return pyh_libc_mapped(pid);
}

int lt_pyh_attach_later(struct lt_pyhook *ph, int pid, int fresh, void (*log)(char level, const char *msg),
			void (*unseen)(int pid, const char *why))
{
	if (!ph || ph->n_later >= PYH_MAX)
		return -E2BIG;
	struct pyh_later *l = &ph->later[ph->n_later];
	l->ph = ph;
	l->pid = pid;
	l->fresh = fresh;
	l->log = log;
	l->unseen = unseen;
	int rc = pthread_create(&l->th, NULL, pyh_later_main, l);
	if (rc)
		return -rc;
	ph->n_later++;
	return 0;
}

/* ------------------------------------------------------------ stop */

static void pyh_stop_one(struct lt_pyhook *ph, struct pyh_target *t, void (*log)(char, const char *))
{
	char reply[1024] = "", line[1200 + PATH_MAX];
	int rc = 0;
	if (t->inj.sock >= 0 && t->started) {
		lt_ictl_send(t->inj.sock, "stop", NULL, 0);
		rc = lt_ictl_await(t->inj.sock, "stopped", reply, sizeof(reply), PYH_REPLY_MS);
	}
	if (rc > 0) {
		snprintf(line, sizeof(line), "python: pid %d: hook %s, log %s/%s", t->pid, lt_ictl_text(reply),
			 ph->dir, t->log.name);
		ph->events += lt_ictl_field(reply, "py_enter") + lt_ictl_field(reply, "py_exit");
	}
	else
		snprintf(line, sizeof(line), "python: pid %d: the hook library %s", t->pid,
			 rc == -ETIMEDOUT ? "did not answer the stop request (GIL held?)"
					  : "is gone (process exited; its log was published at exit)");
	if (log)
		log(rc > 0 || rc == 0 ? 'I' : 'W', line);
	pyh_unload(t, log, NULL, 0);
	pyh_publish(ph, t, rc != -ETIMEDOUT || !pyh_alive(t->pid), log);
	t->started = 0;
}

int lt_pyh_stop(struct lt_pyhook *ph, void (*log)(char level, const char *msg))
{
	if (!ph)
		return 0;
	atomic_store(&ph->stopping, 1);
	for (int i = 0; i < ph->n_later; i++)
		pthread_join(ph->later[i].th, NULL);
	ph->n_later = 0;
	for (int i = 0; i < ph->n; i++)
		pyh_stop_one(ph, &ph->t[i], log);
	ph->n = 0;
	return atomic_exchange(&ph->later_ok, 0);
}

uint64_t lt_pyh_events(const struct lt_pyhook *ph)
{
	return ph ? ph->events : 0;
}

void lt_pyh_free(struct lt_pyhook *ph)
{
	if (!ph)
		return;
	lt_pyh_stop(ph, NULL);
	if (ph->dirfd >= 0)
		close(ph->dirfd);
	pthread_mutex_destroy(&ph->mu);
	free(ph);
}
