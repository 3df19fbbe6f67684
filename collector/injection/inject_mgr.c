// SPDX-License-Identifier: Apache-2.0
/*
 * inject_mgr: get libllmtracker-inject.so into targets and out again, one
 * copy per process for every feature, and talk to it over the socket
 * described in inject/inject.h. See inject_mgr.h.
 */
#include "collector/session/clock.h"
#include "inject_mgr.h"
#include "collector/session/launch.h"
#include "collector/session/nodename.h"
#include "injector.h"
#include "inject_exec.h"
#include "inject_latch.h"
#include "inject_ctl.h"
#include "inject_log.h"
#include "inject_pub.h"
#include "collector/session/store.h"
#include "collector/target/tfile.h"
#include "inject/inject.h"
#include "eventlog/eventlog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define IM_MAX 256
#define REPLY_MS 10000

/*
 * How long the stop waits for a library's "stopped", every target asked at
 * once and each on its own clock, so that the collector exits within 2 s of
 * -d whatever the targets do: the Python hook needs the GIL once to come
 * off, which a thread running Python lets go every few milliseconds (one in
 * a long C call never does: that target is left as it runs); CUDA's final
 * flush and finalize are told to answer STOP_SLACK_MS sooner ("stop ms="):
 * a flush still running then is given up (the log holds what came before),
 * a finalize still waiting for an API exit happens at the process's next
 * call (the library stays loaded for it).
 */
#define STOP_PY_MS 1000
#define STOP_CUDA_MS 1500
#define STOP_SLACK_MS 200

/* Messages a library may send unasked before its "stopped" (CUDA started
 * late): more, and it is not going to answer. */
#define STOP_MAX_OTHER 64
#define STOP_WAITING 1

/* A followed process waiting for CUDA: how long it may take to load it (a
 * training worker imports and reads data first), how often its maps are
 * looked at (backing off to the most), and how soon a library that found
 * no driver loaded yet (the maps showed it mid-load) is tried again. */
#define CUDA_LATER_MS (300 * 1000)
#define CUDA_POLL_MIN_MS 20
#define CUDA_POLL_MAX_MS 1000
#define CUDA_RETRY_MS 200
/* A process starting Python: how long it may take to become injectable,
 * and how long the library then waits for the interpreter to be up. */
#define PY_LATER_MS 30000
#define PY_LATER_WAIT_MS 5000

/* Index of a feature's log and reply: CUDA's first, as in the start. */
enum { F_CUDA, F_PY, F_N };
static const unsigned f_bit[F_N] = { LT_IM_CUDA, LT_IM_PYTHON };
static const char *const f_prefix[F_N] = { "llmtracker-cupti", "llmtracker-python" };

/*
 * Where a busy interpreter (no thread asleep in a system call) is stopped
 * to load the library: entries of CPython functions, in the order of how
 * often a CPU-bound script calls them (docs/MEASUREMENTS.md, injecting
 * into a busy interpreter: the allocator's on every few Python calls on 3.11-3.13, where Python-to-Python
 * calls no longer enter _PyEval_EvalFrameDefault; that one on every call on
 * 3.9 and 3.10). At their entry a thread runs interpreter code, holds the
 * GIL and no lock of the C library: libc never calls into CPython while it
 * holds one (the only ways in are the program's own callbacks, e.g. ctypes
 * under dl_iterate_phdr, or extension constructors, which run under the
 * loader's lock, a recursive one that the injected dlopen may take again).
 */
static const char *const py_latch_syms[] = {
	"PyObject_Malloc", "PyObject_Free", "PyMem_Malloc", "PyMem_Free", "_PyEval_EvalFrameDefault",
	"PyObject_GetAttr", "_PyObject_MakeTpCall", "PyObject_Vectorcall", NULL,
};
static const struct lt_inj_latch py_latch = { "python", py_latch_syms, 1000, 0 };

/*
 * A process that has just exec'd its interpreter: stopped (frozen first, so
 * the entry cannot be missed while we look) at Py_RunMain, which `python`
 * enters once, initialized, holding the GIL, before the program's first
 * instruction. The hook is installed there, on that thread, so no call of
 * the program is missed. An embedding program that never calls it waits
 * PY_START_WAIT_MS, then gets the hook as any other process.
 */
#define PY_START_WAIT_MS 3000
/* Held from its exec on (inject_exec.h): how long the loader may take to
 * map the interpreter. */
#define PY_MAP_WAIT_MS 5000
static const char *const py_start_syms[] = { "Py_RunMain", NULL };
static const struct lt_inj_latch py_latch_start = { "python", py_start_syms, PY_START_WAIT_MS, 1 };

struct im_target {
	int pid;
	unsigned asked;                 /* features in its start */
	unsigned on;                    /* features started (CUDA: or waiting for the driver) */
	int given;                      /* -p: CUDA that never came is said at the end */
	int launched;                   /* launch mode: the shared socket, no injection */
	int launch_copy;                /* launch mode: CUDA's copy is ours (loaded by its path) */
	int sock;
	struct lt_inj inj;
	struct lt_ilog log[F_N];        /* the files made for its library */
	int forked;                     /* a hooked process's fork, announced on the fork
					 * channel: its log comes in its memfd (fields below) */
	int fork_src, fork_dst;         /* that memfd, and our fd of its staging file */
	uint64_t fork_off;              /* what of the memfd is copied */
};

/* A log handed to the publisher, to be heard back. */
struct im_pub {
	int ticket;
	int pid;
	int f;                          /* F_CUDA, F_PY */
	struct lt_ilog *l;              /* its staging file; NULL: a launched process's own log */
	char name[192];                 /* ... that one's name */
	int staged;                     /* ... in lstage, published from there */
	uint64_t events;                /* what it holds, where known: lost if not published */
};
#define IM_PUBS LT_IPUB_MAX

/* One target's stop, heard with the others. */
struct im_stop {
	struct lt_im *im;
	struct im_target *t;
	uint64_t end;           /* its own deadline */
	int bound_ms;
	int rc;                 /* the "stopped" reply's length, 0 EOF, -ETIMEDOUT; STOP_WAITING */
	int others;             /* messages heard before "stopped" */
	int unloaded;           /* lt_inj_unload's result */
	int unload_ran;         /* lt_inj_unload was called (it answered "stopped") */
	int threaded;           /* from a thread of its own (joined) */
	pthread_t th;
	char reply[1024];
	char err[512];
};

/* One followed process waiting until it can take the library, on a thread
 * of its own. */
struct im_job {
	struct lt_im *im;
	int pid;
	int pidfd;                      /* holds the process: its pid names no other while we wait */
	int used;
	atomic_uint want;               /* features asked so far */
	atomic_int fresh;               /* just exec'd: the Python hook at Py_RunMain first */
	int now;                        /* given by -p: CUDA at once, not once it is loaded */
	atomic_int asks, py_asks;       /* requests so far, those for Python */
	atomic_int armed;               /* the launched command is held for its exec (or will not be) */
	atomic_int done;
	pthread_t th;
};

struct lt_im {
	struct lt_im_opts o;
	unsigned usable;                /* features that can be injected */
	char why_not[F_N][300];
	char lib[PATH_MAX];
	char dir[PATH_MAX];
	int dirfd;                      /* dir, ours alone: targets get one file each */
	char stage[PATH_MAX];           /* where the staging files are (inject_log.h) */
	int stagefd;
	int staged_apart;               /* stage is a directory of ours, not dir */
	char lstage[PATH_MAX];          /* a launched command's own (lt_ilog_stage_launch) */
	int lstagefd;                   /* ... or -1: its logs go to dir */
	struct lt_ipub *pub;            /* publishes the logs into dir */
	struct im_pub pubs[IM_PUBS];    /* the logs handed to it (under mu: the launch's
					 * stop hands some too) */
	int n_pubs;
	uint64_t store_by;              /* lt_im_stop's deadline for the store (lt_mono_ms) */
	char host[256];
	char session[EVLOG_SESSION_HEX]; /* hex, "" for none: into every log's header */
	int child_sock;                 /* launch mode: the child's end */
	char *env[8];
	char envbuf[8][PATH_MAX + 64];
	pthread_mutex_t mu;             /* t[], n, jobs[]: the jobs' threads add targets */
	struct im_target t[IM_MAX];
	int n;
	struct im_job jobs[IM_MAX];
	struct im_stop stops[IM_MAX];   /* lt_im_stop's, one per target */
	atomic_int stopping;
	int stopped;
	atomic_int py_later;
	int fork_sock[2];               /* the fork channel: ours (SO_PASSCRED), the libraries' */
	pthread_t fork_th;              /* hears it and copies the children's logs */
	int fork_th_on;
	atomic_int fork_stop;
	struct lt_im_totals tot;
	struct lt_im_so_far so_far;     /* lt_im_so_far's last reading */
};

static void im_log(const struct lt_im *im, unsigned feature, char level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void im_log(const struct lt_im *im, unsigned feature, char level, const char *fmt, ...)
{
	char buf[1400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (im->o.log)
		im->o.log(feature, level, buf);
	else
		fprintf(stderr, "%c llmtracker: %s\n", level, buf);
}

static void im_unseen(const struct lt_im *im, unsigned feature, int pid, const char *why)
{
	if (im->o.unseen)
		im->o.unseen(feature, pid, why);
}

static void im_published(const struct lt_im *im, unsigned feature, int pid, const char *name, uint64_t size,
			 const char *digest)
{
	if (im->o.published)
		im->o.published(feature, pid, name, size, digest);
}

static int fork_no_exec(int pid);
static void fork_channel_open(struct lt_im *im);
static int fork_inherits(struct lt_im *im, int pid);

/* ------------------------------------------------------------ set-up */

/* The driver's kernel side is what CUDA needs; no libcuda lookup here (the
 * collector may be static, and the target's libraries are its own). */
static int driver_present(void)
{
	return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

static int find_lib(char *out, const char *given)
{
	static const char *const rel[] = { "../lib/libllmtracker-inject.so", "libllmtracker-inject.so",
					    "../lib/llmtracker/libllmtracker-inject.so" };
	char exe[PATH_MAX], p[PATH_MAX + 64];
	if (given)
		return realpath(given, out) ? 0 : -errno;
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
static void pick_dir(const char *log_dir, const char *output, char *dir, size_t sz)
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

static void not_usable(struct lt_im *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void not_usable(struct lt_im *im, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(im->why_not[F_CUDA], sizeof(im->why_not[F_CUDA]), fmt, ap);
	va_end(ap);
	memcpy(im->why_not[F_PY], im->why_not[F_CUDA], sizeof(im->why_not[F_PY]));
	im->usable = 0;
}

/* The user a launched command runs as, whose files are taken from lstage. */
static uid_t launch_owner(const struct lt_im *im)
{
	return im->o.launch_as ? im->o.launch_uid : geteuid();
}

/* A launched command's staging directory, where the log directory is on a
 * network file system (`kind`): its libraries write their logs there by
 * path, never on the store. 0, or -1 (said: not usable). */
static int stage_launch(struct lt_im *im, const char *kind)
{
	char err[600];

	if (!kind || !im->o.launch || !(im->usable & LT_IM_CUDA))
		return 0;
	im->lstagefd = lt_ilog_stage_launch(im->dir, kind, im->o.launch_as ? launch_owner(im) : (uid_t)-1,
					    im->o.launch_gid, im->lstage, sizeof(im->lstage), err, sizeof(err));
	if (im->lstagefd < 0) {
		not_usable(im, "%s", err);
		return -1;
	}
	im_log(im, LT_IM_CUDA, 'I', "the launched command's CUDA logs are staged in %s (mode 0700, uid %u's; "
	       "the log directory %s is on %s): copied there at the end", im->lstage,
	       (unsigned)launch_owner(im), im->dir, kind);
	return 0;
}

/* Where the staging files go, and the publisher: before any thread of ours. */
static void stage_open(struct lt_im *im)
{
	char err[600];
	const char *kind;

	im->stagefd = lt_ilog_stage(im->dir, im->dirfd, im->stage, sizeof(im->stage), &kind, err, sizeof(err));
	if (im->stagefd < 0)
		return not_usable(im, "%s", err);
	im->staged_apart = kind != NULL;
	if (stage_launch(im, kind))
		return;
	struct lt_ipub_dirs d = { .outfd = im->dirfd, .stagefd = im->stagefd, .stage = im->stage,
				  .launchfd = im->lstagefd, .launch = im->lstage, .owner = launch_owner(im) };
	if (lt_ipub_start(&im->pub, &d, err, sizeof(err)))
		return not_usable(im, "%s", err);
	if (kind)
		im_log(im, 0, 'I', "the library logs are staged in %s (the log directory %s is on %s, a network "
		       "file system): copied there at the end; a profile cut short leaves them here, as "
		       ".NAME.partial", im->stage, im->dir, kind);
	im_log(im, 0, 'D', "the library logs are published by process %d", (int)lt_ipub_pid(im->pub));
}

/* The launched command's staging directory at the end: removed when empty;
 * what its libraries left there (a log not published, one still being
 * written) keeps it, said. */
static void unstage_launch(struct lt_im *im)
{
	if (im->lstagefd < 0)
		return;
	close(im->lstagefd);
	im->lstagefd = -1;
	if (rmdir(im->lstage) && (errno == ENOTEMPTY || errno == EEXIST))
		im_log(im, LT_IM_CUDA, 'I', "the launched command's staging directory %s is kept: it holds "
		       "what was not published", im->lstage);
}

struct lt_im *lt_im_new(const struct lt_im_opts *o)
{
	char dir[PATH_MAX];
	struct lt_im *im = calloc(1, sizeof(*im));
	if (!im)
		return NULL;
	im->o = *o;
	im->child_sock = im->dirfd = im->stagefd = im->lstagefd = -1;
	im->fork_sock[0] = im->fork_sock[1] = -1;
	pthread_mutex_init(&im->mu, NULL);
	for (int i = 0; i < IM_MAX; i++)
		im->t[i].sock = -1;
	if (!im->o.finalize_ms)
		im->o.finalize_ms = 3000;
	im->usable = o->features & (LT_IM_CUDA | LT_IM_PYTHON);
	if (o->host)
		snprintf(im->host, sizeof(im->host), "%s", o->host);
	else
		lt_node_name(im->host, sizeof(im->host));
	for (char *p = im->host; *p; p++)
		if (*p == ' ' || *p == '/')
			*p = '_';
	if (o->session && evlog_session_set(o->session))
		evlog_session_hex(o->session, im->session);
	pick_dir(o->log_dir, o->output, dir, sizeof(dir));
	if (find_lib(im->lib, o->lib_path)) {
		not_usable(im, "the inject library %s was not found; install it beside the collector "
			   "(lib/libllmtracker-inject.so)", o->lib_path ? o->lib_path : "libllmtracker-inject.so");
	} else {
		mkdir(dir, 0755);
		if (!realpath(dir, im->dir) || (im->dirfd = lt_ilog_dir(im->dir)) < 0)
			not_usable(im, "log directory %s: %s", dir, strerror(errno));
		else
			stage_open(im);
	}
	if ((im->usable & LT_IM_CUDA) && !driver_present() && !o->skip_driver_check) {
		im->usable &= ~LT_IM_CUDA;
		snprintf(im->why_not[F_CUDA], sizeof(im->why_not[F_CUDA]), "no NVIDIA GPU driver on this node");
		im_log(im, LT_IM_CUDA, 'W', "CUDA kernel profiling cannot start: no NVIDIA GPU driver on "
		       "this node (/proc/driver/nvidia/version and /dev/nvidiactl missing); the other "
		       "sources go on");
	} else if ((o->features & LT_IM_CUDA) && !(im->usable & LT_IM_CUDA)) {
		im_log(im, LT_IM_CUDA, 'W', "--enable-cuda-kernel: %s", im->why_not[F_CUDA]);
	}
	if (im->dirfd >= 0)
		fork_channel_open(im);
	return im;
}

int lt_im_usable(const struct lt_im *im, unsigned feature, const char **why)
{
	if (im && (im->usable & feature))
		return 1;
	if (why)
		*why = !im ? "out of memory" : im->why_not[feature == LT_IM_CUDA ? F_CUDA : F_PY][0] ?
		       im->why_not[feature == LT_IM_CUDA ? F_CUDA : F_PY] : "not asked for";
	return 0;
}

const char *lt_im_dir(const struct lt_im *im)
{
	return im ? im->dir : NULL;
}

/* ------------------------------------------------------------ protocol */

/* "ok pid=N src=cuda file=..." -> F_CUDA; -1 untagged. */
static int reply_src(const char *reply)
{
	const char *p = lt_ictl_text(reply);
	return !strncmp(p, "src=cuda", 8) ? F_CUDA : !strncmp(p, "src=python", 10) ? F_PY : -1;
}

/* What a reply says past its verb, pid and src: "err pid=N src=cuda TEXT" -> "TEXT". */
static const char *reply_text(const char *reply)
{
	const char *p = lt_ictl_text(reply);
	if (!strncmp(p, "src=", 4)) {
		p += strcspn(p, " ");
		p += strspn(p, " ");
	}
	return p;
}

/* What the library added to "ok" (e.g. " launches=activity (...)"), without
 * its file=, pid= and src= keys: the collector names the file, from its own
 * state. */
static const char *reply_notes(const char *reply, char *out, size_t sz)
{
	const char *p = lt_ictl_text(reply);
	size_t n = 0;
	out[0] = 0;
	while (*p) {
		size_t w = strcspn(p, " ");
		if (strncmp(p, "file=", 5) && strncmp(p, "pid=", 4) && strncmp(p, "src=", 4))
			n += (size_t)snprintf(out + n, n < sz ? sz - n : 0, " %.*s", (int)w, p);
		if (n >= sz)
			break;
		p += w;
		p += strspn(p, " ");
	}
	return out;
}

/* "start ..." for `feats`, with the one file per feature the library may
 * write (inject_log.h): no directory, no path of ours. */
static int send_start(struct lt_im *im, struct im_target *t, unsigned feats, int cuda_wait, int cuda_init,
		      int py_wait_ms, int py_hold, char *err, size_t errsz)
{
	char msg[1400];
	int fds[F_N + 1], nfds = 0, rc = 0;
	for (int f = 0; f < F_N && !rc; f++) {
		if (!(feats & f_bit[f]))
			continue;
		int fd = lt_ilog_create(&t->log[f], im->stagefd, f_prefix[f], im->host, t->pid, err, errsz);
		if (fd < 0)
			rc = fd;
		else
			fds[nfds++] = fd;
	}
	size_t n = (size_t)snprintf(msg, sizeof(msg), "start pid=%d host=%s session=%s cuda=%d python=%d",
				    t->pid, im->host, im->session[0] ? im->session : "-",
				    !!(feats & LT_IM_CUDA), !!(feats & LT_IM_PYTHON));
	if (feats & LT_IM_CUDA)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, " runtime=%d finalize_ms=%d%s%s",
				      !!im->o.api_records, im->o.finalize_ms, cuda_wait ? " cuda_wait=1" : "",
				      cuda_wait && cuda_init ? " cuda_init=1" : "");
	if (feats & LT_IM_PYTHON)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, " py_wait_ms=%d%s%s", py_wait_ms,
				      py_hold ? " py_hold=1" : "", im->fork_sock[1] >= 0 ? " fork=1" : "");
	int ff = -1; /* the fork channel: closed below with the log fds */
	if ((feats & LT_IM_PYTHON) && im->fork_sock[1] >= 0 && !rc &&
	    (ff = fcntl(im->fork_sock[1], F_DUPFD_CLOEXEC, 0)) >= 0)
		fds[nfds++] = ff;
	if ((feats & LT_IM_CUDA) && im->o.start_extra && n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - n, " %.256s", im->o.start_extra);
	t->asked = feats;
	if (!rc && (rc = lt_ictl_send(t->sock, msg, fds, nfds)))
		snprintf(err, errsz, "the injected library took no start message: %s", strerror(-rc));
	while (nfds > 0)
		close(fds[--nfds]);
	return rc;
}

/* The start's replies, one per feature asked (inject.h), within ms in all:
 * rep[F_CUDA], rep[F_PY] ("" where none came). 0, or -ETIMEDOUT, or -EPIPE
 * (the library went away) with some missing. */
static int recv_replies(struct im_target *t, char rep[F_N][1024], int ms)
{
	unsigned need = t->asked;
	uint64_t end = lt_mono_ms() + (uint64_t)ms;
	rep[F_CUDA][0] = rep[F_PY][0] = 0;
	for (int k = 0; need && k < 16; k++) {
		char buf[1024];
		long long left = (long long)(end - lt_mono_ms());
		int rc = lt_ictl_recv(t->sock, buf, sizeof(buf), left > 0 ? (int)left : 0);
		if (rc <= 0)
			return rc == 0 ? -EPIPE : rc;
		int f = reply_src(buf);
		if (f < 0) /* untagged (a library of before the tags): the first one due */
			f = need & LT_IM_CUDA ? F_CUDA : F_PY;
		if (!(need & f_bit[f]))
			continue;
		memcpy(rep[f], buf, sizeof(buf));
		need &= ~f_bit[f];
	}
	return need ? -ETIMEDOUT : 0;
}

/* ------------------------------------------------------------ targets */

/* A loaded target goes into t[] (lt_im_stop stops and unloads it). */
static int keep_target(struct lt_im *im, const struct im_target *t)
{
	int kept = 0;
	pthread_mutex_lock(&im->mu);
	if (im->n < IM_MAX) {
		im->t[im->n++] = *t;
		kept = 1;
	}
	pthread_mutex_unlock(&im->mu);
	return kept;
}

/* Take the library out again; 0 left loaded on purpose, 1 out, -errno. A
 * library that still runs its control thread is heard out first ("stop",
 * "stopped"), or the unload would find it running and leave it in. */
static int undo_target(struct lt_im *im, struct im_target *t, int running, char *err, size_t errsz)
{
	char reply[256];
	if (running && lt_ictl_send(t->sock, "stop", NULL, 0) == 0)
		lt_ictl_await(t->sock, "stopped", reply, sizeof(reply), REPLY_MS);
	int u = t->inj.loaded ? lt_inj_unload(&t->inj, err, errsz) : 1;
	if (!t->inj.loaded && t->inj.sock >= 0)
		close(t->inj.sock);
	t->inj.sock = t->sock = -1;
	for (int f = 0; f < F_N; f++)
		lt_ilog_drop(&t->log[f], im->stagefd);
	return u;
}

/* Has the library that was loaded into t gone with an exec since? (A
 * fork's came with the fork: gone once it exec'd.) */
static int target_gone_image(const struct im_target *t)
{
	if (t->forked)
		return !fork_no_exec(t->pid);
	return t->launched || !lt_inj_present(&t->inj);
}

/* The target of `pid` whose library is still in its image, or NULL. */
static struct im_target *find_target(struct lt_im *im, int pid)
{
	for (int i = im->n - 1; i >= 0; i--)
		if (im->t[i].pid == pid && !im->t[i].launched && !target_gone_image(&im->t[i]))
			return &im->t[i];
	return NULL;
}

/* ------------------------------------------------------------ forks
 *
 * A hooked process's forked child records into a log of its own, which it
 * makes in memory (a memfd) at its first call and hands over on the fork
 * channel, with a control socket of its own (inject/pyhook.c
 * "forks"). The channel is one socket pair per profile: our end with
 * SO_PASSCRED (the kernel tells who sent each message, its pid as we see
 * it), the other end given to every hooked process with its start and
 * inherited by its forks. A thread of ours hears it, makes each child a
 * target (its socket stops it like any library; it is never injected nor
 * unloaded: its library is its parent's copy), and copies each child's
 * memfd into the child's staging file as it grows, freeing the copied
 * pages. What comes is the target's: checked (a memfd, an AF_UNIX
 * SOCK_SEQPACKET socket, the sender named by the kernel), bounded (IM_MAX
 * targets, LT_ILOG_MAX_BYTES a log, FORK_MSGS messages a round). */
#define FORK_TICK_MS 100
#define FORK_MSGS 64

static int fork_memfd(int fd)
{
	struct stat sb; /* an unlinked shmem file: not a file of the node's */
	return !fstat(fd, &sb) && S_ISREG(sb.st_mode) && sb.st_nlink == 0 && fcntl(fd, F_GET_SEALS) >= 0;
}

static int fork_socket(int fd)
{
	int type = 0, dom = 0;
	socklen_t l = sizeof(type), m = sizeof(dom);
	return !getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) && type == SOCK_SEQPACKET &&
	       !getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &m) && dom == AF_UNIX;
}

static void fork_close(int *fds, int n)
{
	while (n > 0)
		close(fds[--n]);
}

/* One announced fork: a target of its own. Takes the fds. */
static void fork_take(struct lt_im *im, int pid, const char *text, int *fds, int nfds)
{
	char err[512];
	if (pid <= 0 || nfds != 2 || strncmp(text, "forked ", 7) || !fork_memfd(fds[0]) || !fork_socket(fds[1])) {
		im_log(im, LT_IM_PYTHON, 'D', "python: a message on the fork channel from pid %d was not a "
		       "fork's announcement: ignored", pid);
		return fork_close(fds, nfds);
	}
	pthread_mutex_lock(&im->mu);
	int known = find_target(im, pid) != NULL;
	pthread_mutex_unlock(&im->mu);
	if (known)
		return fork_close(fds, nfds);
	struct im_target t = { .pid = pid, .forked = 1, .asked = LT_IM_PYTHON, .on = LT_IM_PYTHON,
			       .sock = fds[1], .inj = { .sock = -1 }, .fork_src = fds[0] };
	t.fork_dst = lt_ilog_create(&t.log[F_PY], im->stagefd, f_prefix[F_PY], im->host, pid, err, sizeof(err));
	unsigned long long ns_pid = lt_ictl_field(text, "pid");
	if (t.fork_dst >= 0 && ns_pid && ns_pid != (unsigned long long)pid) { /* in a container: its own pid */
		t.log[F_PY].pid_from = (uint32_t)ns_pid;
		t.log[F_PY].pid_to = (uint32_t)pid;
	}
	if (t.fork_dst < 0 || !keep_target(im, &t)) {
		const char *why = t.fork_dst < 0 ? err : "too many processes with the library";
		im_log(im, LT_IM_PYTHON, 'W', "python: pid %d (forked): its calls are not recorded: %s", pid, why);
		im_unseen(im, LT_IM_PYTHON, pid, why);
		if (t.fork_dst >= 0) {
			close(t.fork_dst);
			lt_ilog_drop(&t.log[F_PY], im->stagefd);
		}
		return fork_close(fds, nfds);
	}
	atomic_fetch_add(&im->py_later, 1);
	im_log(im, LT_IM_PYTHON, 'I', "python: pid %d: tracing functions through the profile hook it inherited "
	       "at its fork, log %s, in %s", pid, t.log[F_PY].name, im->dir);
}

/* Every announcement waiting on the channel (a bounded round). */
static void fork_hear(struct lt_im *im)
{
	for (int k = 0; k < FORK_MSGS; k++) {
		char buf[256], cbuf[CMSG_SPACE(sizeof(int) * 4) + CMSG_SPACE(sizeof(struct ucred))];
		struct iovec iov = { buf, sizeof(buf) - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		int fds[4], nfds = 0, pid = 0;
		ssize_t n = recvmsg(im->fork_sock[0], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET)
				continue;
			if (cm->cmsg_type == SCM_CREDENTIALS && cm->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
				struct ucred cr;
				memcpy(&cr, CMSG_DATA(cm), sizeof(cr));
				pid = cr.pid;
			} else if (cm->cmsg_type == SCM_RIGHTS) {
				size_t c = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				for (size_t i = 0; i < c; i++) {
					int fd;
					memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
					if (nfds < 4)
						fds[nfds++] = fd;
					else
						close(fd);
				}
			}
		}
		buf[n > 0 ? n : 0] = 0;
		if (mh.msg_flags & MSG_CTRUNC)
			pid = 0; /* fds lost on the way: not taken */
		fork_take(im, pid, buf, fds, nfds);
	}
}

/* Each fork's memfd into its staging file, so far (under im->mu). */
static void fork_feed(struct im_target *t)
{
	if (t->forked && t->fork_src >= 0 && t->fork_dst >= 0)
		lt_ilog_feed(t->fork_dst, t->fork_src, &t->fork_off);
}

/* The last of it, once its library stopped or it is gone; fds closed. */
static void fork_done(struct im_target *t)
{
	if (!t->forked)
		return;
	fork_feed(t);
	if (t->fork_src >= 0)
		close(t->fork_src);
	if (t->fork_dst >= 0)
		close(t->fork_dst);
	t->fork_src = t->fork_dst = -1;
}

static void *fork_main(void *arg)
{
	struct lt_im *im = arg;
	while (!atomic_load(&im->fork_stop)) {
		struct pollfd p = { im->fork_sock[0], POLLIN, 0 };
		poll(&p, 1, FORK_TICK_MS);
		fork_hear(im);
		pthread_mutex_lock(&im->mu);
		for (int i = 0; i < im->n; i++)
			fork_feed(&im->t[i]);
		pthread_mutex_unlock(&im->mu);
	}
	fork_hear(im); /* forks announced up to the end are stopped with the rest */
	return NULL;
}

/* The channel and its thread, where Python's forks are followed. */
static void fork_channel_open(struct lt_im *im)
{
	int on = 1;
	if (!im->o.follow_forks || !(im->usable & LT_IM_PYTHON) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, im->fork_sock))
		return;
	if (setsockopt(im->fork_sock[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) ||
	    pthread_create(&im->fork_th, NULL, fork_main, im)) {
		close(im->fork_sock[0]);
		close(im->fork_sock[1]);
		im->fork_sock[0] = im->fork_sock[1] = -1;
		return;
	}
	im->fork_th_on = 1;
}

static void fork_channel_stop(struct lt_im *im)
{
	atomic_store(&im->fork_stop, 1);
	if (im->fork_th_on)
		pthread_join(im->fork_th, NULL);
	im->fork_th_on = 0;
}

int lt_im_follows_forks(struct lt_im *im, int pid)
{
	return im && fork_inherits(im, pid);
}

/* Is `pid`, forked since the profile began, the child of a process whose
 * hook follows its forks? Then it announces itself, or, exec'd, is held
 * from that exec (its own request): never injected as it runs. */
static int fork_inherits(struct lt_im *im, int pid)
{
	char buf[512];
	int ppid = 0;
	if (im->fork_sock[0] < 0)
		return 0;
	const char *p = lt_tf_proc_stat(pid, buf, sizeof(buf));
	if (!p || sscanf(p, " %*c %d", &ppid) != 1)
		return 0;
	pthread_mutex_lock(&im->mu);
	struct im_target *t = find_target(im, ppid);
	int yes = t && (t->on & LT_IM_PYTHON);
	pthread_mutex_unlock(&im->mu);
	return yes;
}

/* ------------------------------------------------------------ one start */

/* One injection: how the library goes in, what its start asks, what came back. */
enum { HOW_SLEEPING, HOW_BUSY, HOW_HELD };
struct im_start {
	struct lt_im *im;
	struct im_target t;
	unsigned feats;
	int cuda_wait, py_wait_ms;
	int rc;                         /* the start: 0 every reply came, else -errno */
	int given;                      /* -p */
	int held;                       /* loaded from a thread held at Py_RunMain */
	int by_path;                    /* loaded by its path: CUDA's load gets this copy */
	int installed;                  /* the hook went on there */
	int adopt;                      /* HOW_HELD: its main thread, held from its exec (inject_exec.h) */
	char rep[F_N][1024];
	char err[512];
};

static void start_and_hear(struct im_start *st, int hold)
{
	st->rc = send_start(st->im, &st->t, st->feats, st->cuda_wait, st->by_path, st->py_wait_ms, hold,
			    st->err, sizeof(st->err));
	if (!st->rc)
		st->rc = recv_replies(&st->t, st->rep, REPLY_MS + st->py_wait_ms);
}

/* The start latch's thread is still stopped: start the library, then have
 * it install the profile function on that thread (llmt_pyhook_held). */
static void on_held(struct lt_inj *inj, void *arg)
{
	struct im_start *st = arg;
	uint64_t ret = 1;
	st->t.sock = inj->sock;
	start_and_hear(st, 1);
	if (!strncmp(st->rep[F_PY], "ok", 2) &&
	    !lt_inj_call_held(inj, "llmt_pyhook_held", &ret, st->err, sizeof(st->err)))
		st->installed = (int)ret == 0;
}

/* Load the library into `pid` and start it. -errno when it did not go in
 * (st->err says why; the target is as it was); 0 when it did, st->rc and
 * st->rep telling how each feature's start went. */
static int inject_start(struct im_start *st, int pid, int how)
{
	struct lt_im *im = st->im;
	const struct lt_inj_hold hold = { on_held, st, st->adopt };
	st->t = (struct im_target){ .pid = pid, .sock = -1, .inj = { .sock = -1 } };
	st->t.given = st->given;
	st->held = how == HOW_HELD;
	st->rep[F_CUDA][0] = st->rep[F_PY][0] = 0;
	unsigned fl = st->by_path ? LT_INJ_BY_PATH : 0;
	int rc = how == HOW_HELD ? lt_inj_load_held(&st->t.inj, pid, im->lib, fl, &py_latch_start, &hold,
						    st->err, sizeof(st->err))
				 : lt_inj_load_busy(&st->t.inj, pid, im->lib, fl, how == HOW_BUSY ? &py_latch : NULL,
						    st->err, sizeof(st->err));
	st->t.inj.hold = NULL;
	if (st->feats & LT_IM_PYTHON)
		st->t.inj.latch = &py_latch; /* the unload stops any busy thread */
	if (rc)
		return rc;
	st->t.sock = st->t.inj.sock;
	if (how != HOW_HELD)
		start_and_hear(st, 0);
	return 0;
}

/* Why a feature did not start, from its reply (or its absence). */
static const char *start_why(const struct im_start *st, int f)
{
	if (!strncmp(st->rep[f], "err", 3))
		return reply_text(st->rep[f]);
	if (st->rc == -ETIMEDOUT)
		return "the injected library did not answer";
	if (st->rc == -EPIPE)
		return "the injected library went away";
	return st->err[0] ? st->err : "the injected library did not start";
}

static int rep_ok(const struct im_start *st, int f)
{
	return !strncmp(st->rep[f], "ok", 2);
}

/* CUDA's part of a start that went in: said, and counted where it failed. */
static void cuda_said(struct lt_im *im, struct im_start *st)
{
	char notes[1024];
	int pid = st->t.pid;
	if (rep_ok(st, F_CUDA) && lt_ictl_field(st->rep[F_CUDA], "launch"))
		im_log(im, LT_IM_CUDA, 'I', "CUDA kernel profiling of pid %d: by the library copy CUDA loaded "
		       "(launch mode), the one the hook went into", pid);
	else if (rep_ok(st, F_CUDA) && lt_ictl_field(st->rep[F_CUDA], "wait"))
		im_log(im, LT_IM_CUDA, 'I', "CUDA kernel profiling of pid %d starts once it loads CUDA "
		       "(the library waits for the driver): %s/%s", pid, im->dir, st->t.log[F_CUDA].name);
	else if (rep_ok(st, F_CUDA))
		im_log(im, LT_IM_CUDA, 'I', "CUDA kernel profiling of pid %d started: %s/%s%s", pid, im->dir,
		       st->t.log[F_CUDA].name, reply_notes(st->rep[F_CUDA], notes, sizeof(notes)));
	else if (!strncmp(st->rep[F_CUDA], "err", 3)) {
		im_log(im, LT_IM_CUDA, 'W', "pid %d: %s", pid, reply_text(st->rep[F_CUDA]));
		im_unseen(im, LT_IM_CUDA, pid, reply_text(st->rep[F_CUDA]));
	} else {
		im_log(im, LT_IM_CUDA, 'W', "CUDA kernel profiling cannot start in pid %d: %s", pid,
		       start_why(st, F_CUDA));
		im_unseen(im, LT_IM_CUDA, pid, start_why(st, F_CUDA));
	}
}

/* A start that went in: keep the target where any feature runs (its failed
 * features' empty files go), else undo it. Returns the features on. */
static unsigned settle(struct lt_im *im, struct im_start *st, int keep_failed)
{
	unsigned on = 0;
	for (int f = 0; f < F_N; f++)
		if ((st->feats & f_bit[f]) && rep_ok(st, f))
			on |= f_bit[f];
	if ((on & LT_IM_CUDA) && lt_ictl_field(st->rep[F_CUDA], "launch")) {
		on &= ~LT_IM_CUDA; /* CUDA's own start reports it, on the launch socket */
		st->t.asked &= ~LT_IM_CUDA;
	}
	st->t.on = on;
	for (int f = 0; f < F_N; f++)
		if ((st->feats & f_bit[f]) && !(on & f_bit[f]) && on)
			lt_ilog_drop(&st->t.log[f], im->stagefd);
	if (on || keep_failed) {
		if (keep_target(im, &st->t))
			return on;
		snprintf(st->err, sizeof(st->err), "too many processes with the library");
		on = 0;
	}
	char err[512];
	int running = st->rc != -ETIMEDOUT && st->rc != -EPIPE;
	if (undo_target(im, &st->t, running, err, sizeof(err)) == 0) {
		size_t n = strlen(st->err);
		snprintf(st->err + n, sizeof(st->err) - n, " (the library stays loaded: %s)",
			 st->feats & LT_IM_CUDA ? "CUPTI holds its callbacks"
						: "the interpreter could not be reached to remove its profile function");
	}
	return on;
}

/* Python's outcome in msg: what the library said, or why not. */
static void py_said(const struct im_start *st, char *msg, size_t msgsz)
{
	if (rep_ok(st, F_PY))
		snprintf(msg, msgsz, "%s, log %s%s%s%s", reply_text(st->rep[F_PY]), st->t.log[F_PY].name,
			 st->installed ? ", installed at Py_RunMain before the program's first Python instruction"
			 : st->t.inj.latched_at ? ", loaded from a busy thread stopped at " : "",
			 st->installed ? "" : st->t.inj.latched_at ? st->t.inj.latched_at : "",
			 st->held && !st->installed ? " (installed by the library later: not at Py_RunMain)" : "");
	else
		snprintf(msg, msgsz, "%s", start_why(st, F_PY));
}

/* ------------------------------------------------------------ looking at a process */

static int proc_alive(int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", pid);
	return access(path, F_OK) == 0 && kill(pid, 0) == 0;
}

/* Alive and not a zombie (a launched child is reaped only after us). */
static int proc_running(int pid)
{
	return lt_tf_proc_running(pid);
}

/* Has the dynamic loader of `pid` mapped libc (dlopen is there)? */
static int map_is_libc(const struct lt_tf_map *m, void *ctx)
{
	(void)ctx;
	return strstr(m->path, "/libc.so") || strstr(m->path, "/libc-");
}

static int libc_mapped(int pid)
{
	return lt_tf_maps_each(LT_TF_PROC, pid, map_is_libc, NULL) > 0;
}

int lt_im_ready(int pid)
{
	return libc_mapped(pid);
}

/* Has `pid` mapped the CUDA driver (libcuda.so.*), or, unless
 * `driver_only`, CUPTI itself (libcupti.so.*)? Either is what the library's
 * CUDA start needs: CUPTI loaded, or the driver, with a CUPTI beside the
 * process's libcudart (inject/cupti.c open_cupti). */
static int map_is_cuda(const struct lt_tf_map *m, void *driver_only)
{
	const char *base = strrchr(m->path, '/');
	return base && (!strncmp(base, "/libcuda.so", 11) ||
			(!*(int *)driver_only && !strncmp(base, "/libcupti.so", 12)));
}

static int cuda_mapped(int pid, int driver_only)
{
	return lt_tf_maps_each(LT_TF_PROC, pid, map_is_cuda, &driver_only) > 0;
}

/* Forked and not exec'd since (PF_FORKNOEXEC): its mappings may be its
 * parent's. */
#define PF_FORKNOEXEC_FLAG 0x40 /* include/linux/sched.h */
static int fork_no_exec(int pid)
{
	char buf[1024];
	unsigned long flags = 0;
	const char *p = lt_tf_proc_stat(pid, buf, sizeof(buf));
	/* after the comm: state ppid pgrp session tty_nr tpgid flags */
	return p && sscanf(p, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1 && (flags & PF_FORKNOEXEC_FLAG);
}

/* Launch mode: a process whose environment names our library in
 * CUDA_INJECTION64_PATH (the launched command and its descendants) gets it
 * from CUDA itself and reports on the launch socket. */
static int launch_covered(const struct lt_im *im, int pid)
{
	enum { ENV_MAX = 1 << 20 };
	char path[64], want[PATH_MAX + 32];
	if (!im->env[0])
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC), covered = 0;
	char *buf = fd >= 0 ? malloc(ENV_MAX + 1) : NULL;
	size_t n = 0;
	ssize_t r = 1;
	while (buf && n < ENV_MAX && r > 0)
		if ((r = read(fd, buf + n, ENV_MAX - n)) > 0)
			n += (size_t)r;
	int len = snprintf(want, sizeof(want), "CUDA_INJECTION64_PATH=%s", im->lib);
	for (size_t i = 0; buf && i < n && !covered; i += strnlen(buf + i, n - i) + 1)
		covered = n - i > (size_t)len && !memcmp(buf + i, want, (size_t)len + 1);
	free(buf);
	if (fd >= 0)
		close(fd);
	return covered;
}

/* May CUDA be started in `pid`, as first looked at? A fork of a process
 * that initialized CUDA (a DataLoader worker) has its driver mapped but
 * cannot use CUDA (CUDA does not survive a fork): left alone; an exec of it
 * is announced anew. A launch-mode process gets the library from CUDA. */
static int cuda_eligible(const struct lt_im *im, int pid)
{
	if (im->env[0] && lt_launch_is_own_fork(pid)) /* the launched command, before its exec */
		return 0;
	return (im->usable & LT_IM_CUDA) && !launch_covered(im, pid) && !(fork_no_exec(pid) && cuda_mapped(pid, 1));
}

/* ------------------------------------------------------------ attach now */

/* CUDA alone into `pid`. 0 started; -errno otherwise, said through log and
 * unseen, except, when `later`, what may change (-EAGAIN: no thread could
 * take the load now, or the library found no CUDA driver loaded yet),
 * which is left to the caller with `why`. */
static int attach_cuda(struct lt_im *im, int pid, int later, char *why, size_t whysz)
{
	struct im_start st = { .im = im, .feats = LT_IM_CUDA, .given = !later };
	int rc = inject_start(&st, pid, HOW_SLEEPING);
	if (rc) {
		snprintf(why, whysz, "%s", st.err);
		if (later && (rc == -EAGAIN || rc == -ESRCH))
			return rc;
		im_log(im, LT_IM_CUDA, 'W', "CUDA kernel profiling cannot start in pid %d: %s; the process "
		       "is as it was", pid, st.err);
		im_unseen(im, LT_IM_CUDA, pid, st.err);
		return rc;
	}
	if (later && !strncmp(st.rep[F_CUDA], "err", 3) && strstr(st.rep[F_CUDA], LI_ERR_NO_DRIVER)) {
		char err[512];
		snprintf(why, whysz, "%s", reply_text(st.rep[F_CUDA]));
		if (undo_target(im, &st.t, 1, err, sizeof(err)) == 0)
			im_log(im, LT_IM_CUDA, 'D', "pid %d: the library stays loaded (CUPTI holds its callbacks)", pid);
		return -EAGAIN;
	}
	cuda_said(im, &st);
	return settle(im, &st, 1) & LT_IM_CUDA ? 0 : -EIO; /* a failed one: lt_im_stop unloads it */
}

/* The Python hook into `pid` (with CUDA too, `with_cuda`, where the profile
 * asks for it and the process may have it: the library then starts CUPTI
 * once CUDA is loaded). In a launch-mode process (the profile records
 * kernels, `cuda_wanted`, and CUDA_INJECTION64_PATH names our
 * library) the library goes in by that path when it names the same file
 * there: CUDA's own load at cuInit then gets this copy, whose start asked
 * CUDA to wait for it (one copy, one start); elsewhere CUDA loads its own
 * copy and reports on the launch socket, and the hook's start asks Python
 * only. -errno when the library did not go in (st->err); else 0, and what
 * started in *on. */
static int attach_py(struct lt_im *im, struct im_start *st, int pid, int how, int wait_ms, int with_cuda,
		     int cuda_wanted, int given, int adopt, unsigned *on)
{
	int covered = cuda_wanted && launch_covered(im, pid);
	int by_path = covered && lt_tf_same_view(pid, true) == 1;
	if (covered) /* CUDA with the hook only where CUDA's load gets this copy */
		with_cuda = by_path && !(fork_no_exec(pid) && cuda_mapped(pid, 1));
	*st = (struct im_start){ .im = im, .feats = LT_IM_PYTHON | (with_cuda ? LT_IM_CUDA : 0),
				 .cuda_wait = 1, .py_wait_ms = wait_ms, .given = given, .by_path = by_path,
				 .adopt = adopt };
	*on = 0;
	int rc = inject_start(st, pid, how);
	if (rc)
		return rc;
	st->t.launch_copy = by_path; /* CUDA loads (or loaded) this copy too */
	if (with_cuda)
		cuda_said(im, st);
	*on = settle(im, st, 0);
	if (!(*on & LT_IM_PYTHON) && rep_ok(st, F_PY)) /* kept nowhere: too many */
		snprintf(st->rep[F_PY], sizeof(st->rep[F_PY]), "err %s", st->err);
	return 0;
}

int lt_im_attach(struct lt_im *im, int pid, unsigned feature, int wait_ms, char *msg, size_t msgsz)
{
	const char *why;
	char err[512];
	msg[0] = 0;
	if (!lt_im_usable(im, feature, &why))
		return snprintf(msg, msgsz, "%s", why), -ENODEV;
	if (atomic_load(&im->stopping))
		return snprintf(msg, msgsz, "the profile is ending"), -ECANCELED;
	pthread_mutex_lock(&im->mu);
	struct im_target *t = find_target(im, pid);
	unsigned asked = t ? t->asked : 0, on = t ? t->on : 0;
	pthread_mutex_unlock(&im->mu);
	if (t && (asked & feature))
		return on & feature ? 0 : (snprintf(msg, msgsz, "it did not start there (said above)"), -EIO);
	if (t)
		return snprintf(msg, msgsz, "the library already runs in it without this feature (one start "
				"per process)"), -EBUSY;
	if (feature == LT_IM_CUDA && launch_covered(im, pid))
		return 0; /* launch mode (a command launched before --delay): CUDA loads it */
	if (feature == LT_IM_CUDA)
		return attach_cuda(im, pid, 0, err, sizeof(err));
	struct im_start st;
	int cuda = !!(im->usable & LT_IM_CUDA);
	int rc = attach_py(im, &st, pid, HOW_BUSY, wait_ms, cuda, cuda, 1, 0, &on);
	if (rc)
		return snprintf(msg, msgsz, "%s", st.err), rc;
	py_said(&st, msg, msgsz);
	return on & LT_IM_PYTHON ? 0 : -EIO;
}

/* ------------------------------------------------------------ later */

static int job_gone(const struct im_job *j)
{
	struct pollfd p = { j->pidfd, POLLIN, 0 };
	return poll(&p, 1, 0) != 0; /* readable: it exited */
}

/* Sleep ms in short steps; 0 when the profile is ending. */
static int job_sleep(struct lt_im *im, int ms)
{
	for (; ms > 0 && !atomic_load(&im->stopping); ms -= 20)
		usleep((ms < 20 ? ms : 20) * 1000);
	return !atomic_load(&im->stopping);
}

/* A process that execs an interpreter (the launched command, seized
 * before its execve; or one that has just exec'd): held from its exec
 * until the interpreter is mapped, then stopped at Py_RunMain, where the
 * library goes in and the hook on before the program's first instruction.
 * -EAGAIN/-ETIMEDOUT: not at Py_RunMain (it was past it, or never comes);
 * -ENOEXEC: no interpreter in this image (a later exec is asked anew). */
static int job_hold(struct im_job *j, struct im_start *st, int with_cuda, int cuda_wanted, unsigned *on)
{
	struct lt_xc x;
	char err[512];
	int pre = lt_launch_is_own_fork(j->pid); /* the launched command, stopped before its execve */
	int rc = lt_xc_seize(&x, j->pid, pre, err, sizeof(err));
	atomic_store(&j->armed, 1);
	if (!rc)
		rc = lt_xc_run_to(&x, py_latch_start.object, py_start_syms[0], PY_MAP_WAIT_MS, err, sizeof(err));
	if (rc) {
		snprintf(st->err, sizeof(st->err), "%s", err);
		return rc == -ESRCH || rc == -ENOEXEC ? rc : -EAGAIN;
	}
	rc = attach_py(j->im, st, j->pid, HOW_HELD, PY_LATER_WAIT_MS, with_cuda, cuda_wanted, 0, x.pid, on);
	lt_xc_release(&x); /* where the injector did not take it over */
	return rc == -ENOENT ? -EAGAIN : rc;
}

/* The hold, from a thread first in line for a CPU while it holds it: the
 * process races to its program's start (a privilege: else as it is). */
#define JOB_CATCH_NICE (-10)
static int job_at_start(struct im_job *j, struct im_start *st, int with_cuda, int cuda_wanted, unsigned *on)
{
	setpriority(PRIO_PROCESS, (id_t)gettid(), JOB_CATCH_NICE);
	int rc = job_hold(j, st, with_cuda, cuda_wanted, on);
	setpriority(PRIO_PROCESS, (id_t)gettid(), 0);
	return rc;
}

/* The Python hook (and CUDA with it, `with_cuda`) into a process that is
 * starting or was followed: as soon as it can take the library (libc, and
 * a thread asleep in a system call or stopped at a CPython entry; just
 * exec'd: at Py_RunMain first), within PY_LATER_MS. Said here. Returns 1
 * when the library went in (CUDA, if asked, is then settled too). */
static int job_python(struct im_job *j, int with_cuda, int cuda_wanted)
{
	struct lt_im *im = j->im;
	struct im_start st = { .im = im };
	char msg[1400];
	uint64_t end = lt_mono_ms() + PY_LATER_MS;
	int rc = -ETIMEDOUT;
	unsigned on = 0;
	pthread_mutex_lock(&im->mu);
	struct im_target *in = find_target(im, j->pid);
	int done = in && (in->asked & LT_IM_PYTHON);
	pthread_mutex_unlock(&im->mu);
	if (done) /* its exec, heard while this thread held it for that very exec */
		return 1;
	while (!atomic_load(&im->stopping) && lt_mono_ms() < end && proc_alive(j->pid)) {
		if (atomic_load(&j->fresh)) {
			rc = job_at_start(j, &st, with_cuda, cuda_wanted, &on);
			if (rc == -EAGAIN || rc == -ETIMEDOUT) { /* not at Py_RunMain: any thread, any time */
				atomic_store(&j->fresh, 0);
				im_log(im, LT_IM_PYTHON, 'D', "python: pid %d: not held at its start (%s); the hook "
				       "goes in where it runs", j->pid, st.err);
			}
			if (rc == -EAGAIN || rc == -ETIMEDOUT)
				continue;
			break;
		}
		if (!libc_mapped(j->pid)) {
			usleep(2000);
			continue;
		}
		/* CUDA's environment is looked at now: a launched command has exec'd */
		rc = attach_py(im, &st, j->pid, HOW_BUSY, PY_LATER_WAIT_MS, with_cuda, cuda_wanted, 0, 0, &on);
		if (rc != -EAGAIN)
			break;
	}
	if (!rc && (on & LT_IM_PYTHON)) {
		atomic_fetch_add(&im->py_later, 1);
		py_said(&st, msg, sizeof(msg));
		im_log(im, LT_IM_PYTHON, 'I', "python: pid %d: tracing functions through the injected profile "
		       "hook: %s, in %s", j->pid, msg, im->dir);
	} else if (rc == -ENOEXEC) {
		im_log(im, LT_IM_PYTHON, 'D', "python: pid %d: %s", j->pid, st.err);
	} else if (rc == -ESRCH && proc_alive(j->pid)) {
		/* it exec'd while held (a launched command let go): the hold
		 * its exec brings, or the exec's own look, takes it from here */
		im_log(im, LT_IM_PYTHON, 'D', "python: pid %d: exec'd while held for its start", j->pid);
	} else if (proc_alive(j->pid) && !atomic_load(&im->stopping)) {
		if (rc)
			snprintf(msg, sizeof(msg), "%s", rc == -ETIMEDOUT ? "timed out" : st.err);
		else
			py_said(&st, msg, sizeof(msg));
		im_log(im, LT_IM_PYTHON, 'W', "python: pid %d: cannot trace Python functions: the profile "
		       "hook could not go in: %s", j->pid, msg);
		char why[sizeof(msg) + 64];
		snprintf(why, sizeof(why), "the profile hook could not go in: %s", msg);
		im_unseen(im, LT_IM_PYTHON, j->pid, why);
	} else {
		im_unseen(im, LT_IM_PYTHON, j->pid, atomic_load(&im->stopping) ?
			  "the profile ended before the hook could go in" :
			  "it exited before the profile hook could go in");
	}
	return rc == 0;
}

/* CUDA alone, once the process has mapped the driver or CUPTI, within
 * `end`; again a little later when the library finds no driver loaded yet
 * (the map seen mid-load). Returns early (0) when Python is asked for
 * meanwhile (an exec into Python): the caller goes there first. */
static int job_cuda(struct im_job *j, uint64_t end, int py_done)
{
	struct lt_im *im = j->im;
	char why[512] = "";
	int saw_cuda = 0, retry = 0, poll_ms = CUDA_POLL_MIN_MS;
	while (!atomic_load(&im->stopping) && lt_mono_ms() < end && !job_gone(j)) {
		if (atomic_load(&j->py_asks) != py_done)
			return 0;
		if (!cuda_mapped(j->pid, fork_no_exec(j->pid))) {
			job_sleep(im, poll_ms);
			poll_ms = poll_ms * 2 > CUDA_POLL_MAX_MS ? CUDA_POLL_MAX_MS : poll_ms * 2;
			continue;
		}
		saw_cuda = 1;
		int rc = attach_cuda(im, j->pid, 1, why, sizeof(why));
		if (!(retry = rc == -EAGAIN || rc == -ESRCH))
			break;
		job_sleep(im, CUDA_RETRY_MS);
	}
	if (!saw_cuda || !retry)
		return 1; /* no CUDA there: nothing to record; else started, or said by attach_cuda */
	if (job_gone(j)) {
		im_unseen(im, LT_IM_CUDA, j->pid, "it exited before CUDA kernel profiling could start in it");
	} else if (atomic_load(&im->stopping)) {
		im_unseen(im, LT_IM_CUDA, j->pid, "the profile ended before CUDA kernel profiling could start in it");
	} else {
		im_log(im, LT_IM_CUDA, 'W', "CUDA kernel profiling cannot start in pid %d: %s", j->pid,
		       why[0] ? why : "timed out");
		im_unseen(im, LT_IM_CUDA, j->pid, why[0] ? why : "timed out");
	}
	return 1;
}

/* One followed process, each feature asked in turn: Python first (CUDA in
 * the same start where it may go), then CUDA alone where it did not. A
 * request that comes meanwhile (an exec) is taken by the same thread. */
static void *job_main(void *arg)
{
	struct im_job *j = arg;
	struct lt_im *im = j->im;
	uint64_t cuda_end = lt_mono_ms() + CUDA_LATER_MS;
	int asks = atomic_load(&j->asks), py_done = 0, cuda_done = 0;
	int cuda_ok = cuda_eligible(im, j->pid);
	for (;;) {
		pthread_mutex_lock(&im->mu); /* lt_im_attach_later adds under it */
		unsigned want = atomic_load(&j->want);
		int py_asks = atomic_load(&j->py_asks);
		if (atomic_load(&j->asks) != asks) {
			asks = atomic_load(&j->asks);
			cuda_ok = cuda_ok || cuda_eligible(im, j->pid); /* an exec: looked at anew */
		}
		int cuda_due = (want & LT_IM_CUDA) && cuda_ok && !cuda_done;
		if (atomic_load(&im->stopping) || (py_asks == py_done && !cuda_due)) {
			atomic_store(&j->done, 1);
			pthread_mutex_unlock(&im->mu);
			break;
		}
		pthread_mutex_unlock(&im->mu);
		if (py_asks != py_done) {
			py_done = py_asks;
			if (job_python(j, cuda_due, !!(want & LT_IM_CUDA)))
				cuda_done |= cuda_due;
		} else if (j->now) { /* as lt_im_attach does, off the caller's thread */
			char why[512];
			attach_cuda(im, j->pid, 0, why, sizeof(why));
			cuda_done = 1;
		} else {
			cuda_done = job_cuda(j, cuda_end, py_done);
		}
	}
	return NULL;
}

/* A free slot for a job (never used, or its thread is done: joined here),
 * or the job already waiting for `pid`. Under im->mu. */
static struct im_job *job_slot(struct lt_im *im, int pid, struct im_job **waiting)
{
	struct im_job *free_slot = NULL;
	*waiting = NULL;
	for (int i = 0; i < IM_MAX; i++) {
		struct im_job *j = &im->jobs[i];
		if (j->used && atomic_load(&j->done)) {
			pthread_join(j->th, NULL);
			close(j->pidfd);
			j->used = 0;
		}
		if (j->used && j->pid == pid)
			*waiting = j;
		if (!j->used && !free_slot)
			free_slot = j;
	}
	return free_slot;
}

int lt_im_attach_later(struct lt_im *im, int pid, unsigned feature, unsigned flags)
{
	int fresh = !!(flags & LT_IM_FRESH);
	struct im_job *waiting, *j;
	int rc = 0;
	if (!im || !(im->usable & feature))
		return 0;
	if (atomic_load(&im->stopping))
		return -ECANCELED;
	if ((feature & LT_IM_PYTHON) && (flags & LT_IM_FORKED) && fork_inherits(im, pid)) {
		feature &= ~LT_IM_PYTHON; /* it announces itself (forks, above) */
		if (!feature || !(im->usable & feature))
			return 0;
	}
	/* The Python hook's start carries CUDA too wherever the profile asks
	 * for both: one start per process. */
	unsigned want = feature | (feature & LT_IM_PYTHON ? im->usable & LT_IM_CUDA : 0);
	pthread_mutex_lock(&im->mu);
	struct im_target *t = find_target(im, pid);
	if (t && !(feature & ~t->asked)) {
		pthread_mutex_unlock(&im->mu);
		return 0; /* in, with that feature (started, or said why not) */
	}
	if (t) {
		pthread_mutex_unlock(&im->mu);
		im_unseen(im, feature, pid, "the library already ran in it without this feature (one start "
			  "per process)");
		return 0;
	}
	j = job_slot(im, pid, &waiting);
	if (waiting) { /* an exec of a process we already wait for: looked at anew */
		atomic_fetch_or(&waiting->want, want);
		if (fresh)
			atomic_store(&waiting->fresh, 1);
		if (feature & LT_IM_PYTHON)
			atomic_fetch_add(&waiting->py_asks, 1);
		atomic_fetch_add(&waiting->asks, 1);
	} else if (!j) {
		rc = -E2BIG;
	} else {
		int fd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (fd < 0) {
			rc = errno == ESRCH ? 0 : -errno;
		} else {
			*j = (struct im_job){ .im = im, .pid = pid, .pidfd = fd, .used = 1,
					      .now = !!(flags & LT_IM_NOW) };
			atomic_store(&j->want, want);
			atomic_store(&j->fresh, fresh);
			atomic_store(&j->py_asks, feature & LT_IM_PYTHON ? 1 : 0);
			if ((rc = -pthread_create(&j->th, NULL, job_main, j))) {
				close(fd);
				j->used = 0;
			}
		}
	}
	pthread_mutex_unlock(&im->mu);
	return rc;
}

void lt_im_before_exec(struct lt_im *im, int pid, int ms)
{
	struct im_job *j = NULL;
	if (!im)
		return;
	pthread_mutex_lock(&im->mu);
	for (int i = 0; i < IM_MAX && !j; i++)
		if (im->jobs[i].used && im->jobs[i].pid == pid && !atomic_load(&im->jobs[i].done))
			j = &im->jobs[i];
	pthread_mutex_unlock(&im->mu); /* a job slot is freed only under mu, by a later attach */
	for (uint64_t end = lt_mono_ms() + (uint64_t)ms; j && lt_mono_ms() < end; usleep(200))
		if (atomic_load(&j->armed) || atomic_load(&j->done))
			break;
}

static void jobs_join_all(struct lt_im *im)
{
	atomic_store(&im->stopping, 1);
	for (int i = 0; i < IM_MAX; i++) {
		struct im_job *j = &im->jobs[i];
		if (!j->used)
			continue;
		pthread_join(j->th, NULL);
		close(j->pidfd);
		j->used = 0;
	}
}

/* ------------------------------------------------------------ launch */

char *const *lt_im_launch_env(struct lt_im *im)
{
	if (!im || !(im->usable & LT_IM_CUDA))
		return NULL;
	if (im->env[0])
		return im->env;
	int sv[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
		/* The child's end survives exec; the library marks it CLOEXEC. */
		fcntl(sv[1], F_SETFD, 0);
		im->child_sock = sv[1];
		im->t[0].sock = sv[0]; /* lt_im_launched's target */
	}
	int i = 0;
	snprintf(im->envbuf[i++], sizeof(im->envbuf[0]), "CUDA_INJECTION64_PATH=%s", im->lib);
	snprintf(im->envbuf[i++], sizeof(im->envbuf[0]), "LLMT_CUPTI_DIR=%s",
		 im->lstagefd >= 0 ? im->lstage : im->dir);
	snprintf(im->envbuf[i++], sizeof(im->envbuf[0]), "LLMT_HOST=%s", im->host);
	snprintf(im->envbuf[i++], sizeof(im->envbuf[0]), "LLMT_CUPTI_RUNTIME=%d", !!im->o.api_records);
	if (im->session[0])
		snprintf(im->envbuf[i++], sizeof(im->envbuf[0]), "LLMT_SESSION=%s", im->session);
	if (im->child_sock >= 0)
		snprintf(im->envbuf[i++], sizeof(im->envbuf[0]), "LLMT_INJECT_SOCK=%d", im->child_sock);
	for (int k = 0; k < i; k++)
		im->env[k] = im->envbuf[k];
	im->env[i] = NULL;
	return im->env;
}

void lt_im_launched(struct lt_im *im, int pid)
{
	if (!im || !(im->usable & LT_IM_CUDA) || im->n >= IM_MAX)
		return;
	if (im->child_sock >= 0) {
		close(im->child_sock);
		im->child_sock = -1;
	}
	struct im_target *t = &im->t[im->n];
	if (im->n > 0) /* a second launch: no socket of its own */
		t->sock = -1;
	t->pid = pid;
	t->launched = 1;
	t->asked = t->on = LT_IM_CUDA;
	im->n++;
	im_log(im, LT_IM_CUDA, 'I', "CUDA kernel profiling of pid %d: CUDA will load %s at its first CUDA "
	       "call; logs go to %s", pid, im->lib, im->lstagefd >= 0 ? im->lstage : im->dir);
}

void lt_im_env_set(struct lt_im *im)
{
	char *const *env = lt_im_launch_env(im);
	for (int i = 0; env && env[i]; i++)
		putenv(env[i]);
}

void lt_im_env_unset(struct lt_im *im)
{
	for (int i = 0; im && im->env[i]; i++) {
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(im->env[i], "="), im->env[i]);
		unsetenv(name);
	}
}

/* ------------------------------------------------------------ stop */

/* What a kept CUPTI costs the job: CUPTI takes one subscriber per process
 * (torch.profiler then warned CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * and recorded no kernel, on the GPU host: docs/MEASUREMENTS.md, CUDA
 * graphs and detach). */
#define KEPT_COST "; until this process exits, its own CUPTI clients (torch.profiler's CUDA " \
		  "activities, Nsight) cannot start in it"

/* Why the library left CUPTI attached (its reply's kept=, LI_KEPT_*). */
static const char *kept_why(unsigned long long kept)
{
	switch (kept) {
	case LI_KEPT_GRAPH:
		return "stays attached, recording nothing: a CUDA graph ran while recording, and "
		       "detaching CUPTI then makes the GPU fault at the graph's next replay; a later "
		       "profile of this process reuses it" KEPT_COST;
	case LI_KEPT_ASKED:
		return "stays attached, recording nothing, as asked (teardown=never)" KEPT_COST;
	case LI_KEPT_CUT:
		return "stays attached, recording nothing: its final flush had not ended by the stop's "
		       "deadline, and what it still held is lost" KEPT_COST;
	default:
		return "still attached (no CUDA call to detach at); it detaches at the process's "
		       "next CUDA call";
	}
}

/* The CUDA events a "stopped" says its log holds (the gpu row's). */
static uint64_t cuda_events(const char *reply)
{
	return lt_ictl_field(reply, "kernels") + lt_ictl_field(reply, "memcpy") + lt_ictl_field(reply, "memset");
}

/* From the launch's stop thread too: the figures under im->mu. */
static void account(struct lt_im *im, int pid, const char *reply)
{
	unsigned long long k = lt_ictl_field(reply, "kernels"), a = lt_ictl_field(reply, "api"),
			   d = lt_ictl_field(reply, "dropped");
	int fin = (int)lt_ictl_field(reply, "finalized");
	pthread_mutex_lock(&im->mu);
	im->tot.kernels += k;
	im->tot.memcpys += lt_ictl_field(reply, "memcpy");
	im->tot.memsets += lt_ictl_field(reply, "memset");
	im->tot.apis += a;
	im->tot.dropped += d;
	im->tot.finalized += fin;
	pthread_mutex_unlock(&im->mu);
	unsigned long long early = lt_ictl_field(reply, "earlier"), untimed = lt_ictl_field(reply, "untimed");
	char earlier[160] = "", no_time[96] = "";
	if (early)
		snprintf(earlier, sizeof(earlier), ", %llu records of work started before recording began "
			 "(an earlier recording's, delivered late) left out", early);
	if (untimed)
		snprintf(no_time, sizeof(no_time), ", %llu records CUPTI could not time left out", untimed);
	/* Counts are details; records dropped or left out are said by default. */
	if (k || a)
		im_log(im, LT_IM_CUDA, d || early || untimed ? 'I' : 'D', "pid %d: %llu kernels, %llu memcpy, %llu memset, %llu API calls, "
		       "%llu dropped%s%s; CUPTI %s", pid, k, lt_ictl_field(reply, "memcpy"),
		       lt_ictl_field(reply, "memset"), a, d, earlier, no_time, fin ? "detached" :
		       lt_ictl_field(reply, "exiting") ? "flushed at the process's exit" :
		       kept_why(lt_ictl_field(reply, "kept")));
}

/* CUDA asked with cuda_wait=1 never started: where it matters, why. */
static void cuda_never_came(struct lt_im *im, const struct im_target *t)
{
	if (t->given)
		im_unseen(im, LT_IM_CUDA, t->pid, "CUDA kernel profiling cannot start: " LI_ERR_NO_DRIVER);
	else if (proc_running(t->pid) && cuda_mapped(t->pid, 0))
		im_unseen(im, LT_IM_CUDA, t->pid, "the profile ended before CUDA kernel profiling could start in it");
}

/* What the library said unasked while it ran (CUPTI started, or could not,
 * once CUDA was loaded: "ok/err src=cuda"). */
static void heard_later(struct lt_im *im, struct im_target *t, const char *m)
{
	char notes[1024];
	if (reply_src(m) != F_CUDA || !(t->on & LT_IM_CUDA))
		return;
	if (!strncmp(m, "ok", 2) && !lt_ictl_field(m, "wait")) {
		im_log(im, LT_IM_CUDA, 'I', "CUDA kernel profiling of pid %d started once it loaded CUDA: %s/%s%s",
		       t->pid, im->dir, t->log[F_CUDA].name, reply_notes(m, notes, sizeof(notes)));
	} else if (!strncmp(m, "err", 3)) {
		im_log(im, LT_IM_CUDA, 'W', "pid %d: %s", t->pid, reply_text(m));
		im_unseen(im, LT_IM_CUDA, t->pid, reply_text(m));
		t->on &= ~LT_IM_CUDA;
	}
}

static void pub_lost(struct lt_im *im, const struct im_pub *p, const char *why);

/* A log handed to the publisher, heard back in pubs_heard(); 0, or -1
 * (too many: said). */
static int pub_add(struct lt_im *im, int pid, int f, struct lt_ilog *l, const char *name, uint64_t events)
{
	struct im_pub p = { .pid = pid, .f = f, .l = l, .events = events, .staged = !l && im->lstagefd >= 0 };
	char why[64];
	snprintf(p.name, sizeof(p.name), "%s", name);
	pthread_mutex_lock(&im->mu);
	p.ticket = !im->pub ? -ENOSPC : l ? lt_ipub_publish(im->pub, l) :
		   p.staged ? lt_ipub_fetch(im->pub, name) : lt_ipub_describe(im->pub, name);
	if (p.ticket >= 0 && im->n_pubs < IM_PUBS)
		im->pubs[im->n_pubs++] = p;
	pthread_mutex_unlock(&im->mu);
	if (p.ticket >= 0)
		return 0;
	snprintf(why, sizeof(why), "more than %d library logs in one profile", LT_IPUB_MAX);
	pub_lost(im, &p, why);
	return -1;
}

/* Launch mode: a process of the launched command published its own log
 * and named it in its "stopped" (file=NAME): recorded as found once the
 * publisher has read it, or copied it from the launch's staging directory
 * and published it (pubs_heard). */
static void record_launched(struct lt_im *im, int pid, const char *reply)
{
	char name[256];
	const char *v = strstr(reply, " file=");
	if (!v)
		return;
	v += 6;
	size_t n = strcspn(v, " ");
	if (n >= sizeof(name) || (n == 1 && *v == '-'))
		return;
	memcpy(name, v, n);
	name[n] = 0;
	if (!lt_ilog_name_ok(name))
		im_log(im, LT_IM_CUDA, 'W', "pid %d: its log '%.200s' is no name of a library log; not recorded",
		       pid, name);
	else
		pub_add(im, pid, F_CUDA, NULL, name, cuda_events(reply));
}

/* "stop", with the time the library has to answer (CUDA's part: inject.h). */
static int send_stop(int sock)
{
	char msg[32];
	snprintf(msg, sizeof(msg), "stop ms=%d", STOP_CUDA_MS - STOP_SLACK_MS);
	return lt_ictl_send(sock, msg, NULL, 0);
}

/* Launch mode: every CUDA process of the launched tree may have reported
 * on the shared socket ("ok"/"err" at its CUDA start, "stopped" at exit).
 * Stop those still running, one "stop" each. Returns how many started. */
static int stop_launched(struct lt_im *im, struct im_target *t)
{
	int pids[IM_MAX], n = 0, asked = 0, started = 0;
	char reply[1024];
	for (int round = 0; round < 2; round++) {
		/* One deadline per round, however much the processes say. */
		long long end = (long long)lt_mono_ms() + (round ? STOP_CUDA_MS : 0);
		for (int k = 0; k < 4 * IM_MAX; k++) {
			long long left = end - (long long)lt_mono_ms();
			int rc = lt_ictl_recv(t->sock, reply, sizeof(reply), left > 0 ? (int)left : 0);
			if (rc <= 0)
				break;
			int pid = (int)lt_ictl_field(reply, "pid");
			if (!strncmp(reply, "ok", 2) && n < IM_MAX) {
				pids[n++] = pid;
				started++;
			} else if (!strncmp(reply, "err", 3)) {
				im_log(im, LT_IM_CUDA, 'W', "pid %d: %s", pid, reply_text(reply));
				im_unseen(im, LT_IM_CUDA, pid, reply_text(reply));
			} else if (!strncmp(reply, "stopped", 7)) {
				account(im, pid, reply);
				record_launched(im, pid, reply);
				for (int i = 0; i < n; i++)
					if (pids[i] == pid)
						pids[i] = pids[--n];
				if (round && --asked <= 0)
					break;
			}
		}
		if (round)
			break;
		for (int i = 0; i < n; i++)
			if (proc_running(pids[i]) && send_stop(t->sock) == 0)
				asked++;
		if (!asked)
			break;
	}
	return started;
}

/* t's logs, once its library is done with them: handed to the publisher.
 * events: what each holds, where known (F_N entries). */
static void publish_logs(struct lt_im *im, struct im_target *t, int done, const uint64_t *events)
{
	char err[600];
	for (int f = 0; f < F_N; f++) {
		struct lt_ilog *l = &t->log[f];
		if (!l->live)
			continue;
		int rc = done ? lt_ilog_seal(l, err, sizeof(err)) : -EBUSY;
		if (rc == 0) {
			lt_ilog_drop(l, im->stagefd);
			continue;
		}
		if (rc == 1 && pub_add(im, t->pid, f, l, l->name, events[f]) == 0)
			continue;
		if (rc < 0) {
			struct im_pub p = { .pid = t->pid, .f = f, .l = l, .events = events[f] };
			snprintf(p.name, sizeof(p.name), "%s", l->name);
			pub_lost(im, &p, rc == -EBUSY ? "its library did not answer the stop and may still write it"
						      : err);
		}
		lt_ilog_keep(l);
	}
}

/* A log not published (or not recorded): said, named in the summary, its
 * events counted lost. */
static void pub_lost(struct lt_im *im, const struct im_pub *p, const char *why)
{
	char path[PATH_MAX + 256];
	const char *py = p->f == F_PY ? "python: " : "";
	if (p->l || p->staged) {
		snprintf(path, sizeof(path), "%s/%s", p->l ? im->stage : im->lstage, p->l ? p->l->partial : p->name);
		im_log(im, f_bit[p->f], 'W', "%spid %d: its log %s is not published: %s; kept as %s", py, p->pid,
		       p->name, why, path);
	} else {
		snprintf(path, sizeof(path), "%s/%s", im->dir, p->name);
		im_log(im, f_bit[p->f], 'W', "%spid %d: its log %s: %s; not recorded", py, p->pid, path, why);
	}
	pthread_mutex_lock(&im->mu); /* the launch's stop may say one */
	if (p->f == F_PY) {
		im->tot.py_events -= p->events < im->tot.py_events ? p->events : im->tot.py_events;
		im->tot.py_unpublished += p->events;
	} else {
		im->tot.cuda_unpublished += p->events;
	}
	pthread_mutex_unlock(&im->mu);
	if (im->o.unpublished)
		im->o.unpublished(f_bit[p->f], p->pid, path, why);
}

/* A log published (or read): recorded in the profile's log. */
static void pub_done(struct lt_im *im, const struct im_pub *p, const struct lt_ipub_res *r)
{
	const char *py = p->f == F_PY ? "python: " : "";
	im_published(im, f_bit[p->f], p->pid, p->name, r->size, r->digest);
	if (p->staged)
		lt_ilog_staged_done(im->lstagefd, p->name, (dev_t)r->dev, (ino_t)r->ino);
	else if (p->l)
		lt_ilog_published(p->l, im->stagefd);
	else
		return;
	if (p->l ? p->l->capped : r->capped)
		im_log(im, f_bit[p->f], 'W', "%spid %d: its log %s/%s was larger than %llu bytes; only "
		       "those were published", py, p->pid, im->dir, p->name, LT_ILOG_MAX_BYTES);
	if (p->f == F_CUDA)
		im_log(im, LT_IM_CUDA, 'D', "pid %d: CUDA log %s/%s", p->pid, im->dir, p->name);
}

/* Every log handed to the publisher, heard back by im->store_by at most:
 * a log not published by then never is (inject_pub.h). */
static void pubs_heard(struct lt_im *im)
{
	char why[700];
	for (int i = 0; i < im->n_pubs; i++) {
		struct im_pub *p = &im->pubs[i];
		struct lt_ipub_res r;
		int answered = lt_ipub_result(im->pub, p->ticket, im->store_by, &r);
		if (answered && !r.rc) {
			pub_done(im, p, &r);
			continue;
		}
		if (answered && !p->l && !p->staged) { /* a launched process's own log: unreadable, or none */
			im_log(im, f_bit[p->f], 'W', "pid %d: %s", p->pid, r.err);
			continue;
		}
		if (answered || r.rc != -ETIMEDOUT)
			snprintf(why, sizeof(why), "%s", r.err);
		else
			snprintf(why, sizeof(why), "the output store did not answer within %d s", LT_STORE_WAIT_S);
		pub_lost(im, p, why);
		if (p->l)
			lt_ilog_keep(p->l);
	}
	im->n_pubs = 0;
}

/* ------------------------------------------------------------ stop, all at once */

static int stop_bound_ms(const struct im_target *t)
{
	return t->asked & LT_IM_CUDA ? STOP_CUDA_MS : STOP_PY_MS;
}

/* The process's name (/proc/PID/comm), printable, "?" when gone. */
static void proc_comm(int pid, char *out, size_t sz)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(out, 1, sz - 1, f) : 0;
	if (f)
		fclose(f);
	out[n] = 0;
	out[strcspn(out, "\n")] = 0;
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	if (!out[0])
		snprintf(out, sz, "?");
}

/* The library stays in t's process: said in the summary, with why. */
static void say_kept(struct lt_im *im, const struct im_target *t, const char *why)
{
	char comm[20];
	if (!im->o.kept)
		return;
	proc_comm(t->pid, comm, sizeof(comm));
	im->o.kept(t->pid, comm, why);
}

/* "stop" to every target's library at once (a launched command's socket
 * aside: stop_launched); each wait runs from now on its own bound. */
static void stop_ask_all(struct lt_im *im, struct im_stop *st)
{
	uint64_t now = lt_mono_ms();
	for (int i = 0; i < im->n; i++) {
		struct im_target *t = &im->t[i];
		st[i] = (struct im_stop){ .im = im, .t = t, .rc = 0 };
		if (t->launched || t->sock < 0)
			continue;
		st[i].bound_ms = stop_bound_ms(t);
		st[i].end = now + (uint64_t)st[i].bound_ms;
		st[i].rc = STOP_WAITING;
		send_stop(t->sock); /* a library gone: EOF below */
	}
}

/* One message from st's library: "stopped" or EOF ends its wait; what it
 * said unasked before that is heard out. */
static void stop_hear_one(struct im_stop *st)
{
	char buf[sizeof(st->reply)];
	int rc = lt_ictl_recv(st->t->sock, buf, sizeof(buf), 0);
	if (rc == -ETIMEDOUT)
		return;
	if (rc > 0 && strncmp(buf, "stopped", 7)) {
		heard_later(st->im, st->t, buf);
		if (++st->others >= STOP_MAX_OTHER)
			st->rc = -ETIMEDOUT;
		return;
	}
	if (rc > 0)
		memcpy(st->reply, buf, sizeof(buf));
	st->rc = rc > 0 ? rc : 0;
}

/* Every asked library heard at once, each until its own deadline: the
 * whole wait is the longest bound, not their sum. */
static void stop_hear_all(struct lt_im *im, struct im_stop *st)
{
	struct pollfd pfd[IM_MAX];
	int idx[IM_MAX];
	for (;;) {
		uint64_t now = lt_mono_ms(), first = UINT64_MAX;
		int np = 0;
		for (int i = 0; i < im->n; i++) {
			if (st[i].rc != STOP_WAITING)
				continue;
			if (now >= st[i].end) {
				st[i].rc = -ETIMEDOUT;
				continue;
			}
			first = st[i].end < first ? st[i].end : first;
			pfd[np] = (struct pollfd){ st[i].t->sock, POLLIN, 0 };
			idx[np++] = i;
		}
		if (!np)
			return;
		int r = poll(pfd, (nfds_t)np, (int)(first - now));
		if (r < 0 && errno != EINTR) {
			for (int k = 0; k < np; k++)
				st[idx[k]].rc = -ETIMEDOUT;
			return;
		}
		for (int k = 0; r > 0 && k < np; k++)
			if (pfd[k].revents)
				stop_hear_one(&st[idx[k]]);
	}
}

/* The events in a log the library wrote, from its chunks' headers. */
static uint64_t log_events(struct lt_ilog *l)
{
	uint64_t a, b = lt_ilog_events_so_far(l);
	do
		a = b;
	while ((b = lt_ilog_events_so_far(l)) != a);
	return b;
}

/* A hooked process's Python events: its "stopped" reply's counts, or,
 * gone without one (a fork ended by os._exit), what its log holds. */
static uint64_t py_count(struct lt_im *im, struct im_target *t, const char *reply)
{
	uint64_t n = reply && strstr(reply, "py_enter=") ?
		     lt_ictl_field(reply, "py_enter") + lt_ictl_field(reply, "py_exit") : log_events(&t->log[F_PY]);
	pthread_mutex_lock(&im->mu); /* the launch's stop counts too */
	im->tot.py_events += n;
	if (n && im->tot.py_procs < (int)(sizeof(im->tot.py_pids) / sizeof(im->tot.py_pids[0])))
		im->tot.py_pids[im->tot.py_procs] = t->pid;
	im->tot.py_procs += n > 0;
	pthread_mutex_unlock(&im->mu);
	return n;
}

/* What a target's stop reply says, logged and counted; its logs published
 * where the library is done with them. Returns 1 where CUDA kernel
 * profiling had started in a process of the launched command. */
static int stop_said(struct lt_im *im, struct im_stop *st)
{
	struct im_target *t = st->t;
	const char *reply = st->reply;
	int rc = st->rc, started;
	uint64_t events[F_N] = { 0 };
	if (rc > 0 && (t->asked & LT_IM_CUDA)) {
		account(im, t->pid, reply);
		events[F_CUDA] = cuda_events(reply);
	}
	started = t->launch_copy && rc > 0 && (t->on & LT_IM_CUDA) && !lt_ictl_field(reply, "cuda_wait");
	/* (CUDA's own start is counted on the launch socket: t->on lost CUDA, launch=1) */
	if (rc > 0 && (t->on & LT_IM_CUDA) && lt_ictl_field(reply, "cuda_wait"))
		cuda_never_came(im, t);
	if (rc != -ETIMEDOUT || !proc_running(t->pid))
		fork_done(t); /* a fork's memfd: all of it, now that it is done */
	if (t->on & LT_IM_PYTHON)
		events[F_PY] = py_count(im, t, rc > 0 ? reply : NULL);
	if (rc > 0 && (t->on & LT_IM_PYTHON)) {
		const char *py = strstr(lt_ictl_text(reply), "py_enter="); /* past CUDA's part */
		im_log(im, LT_IM_PYTHON, 'D', "python: pid %d: hook %s, log %s/%s", t->pid,
		       py ? py : lt_ictl_text(reply), im->dir, t->log[F_PY].name);
	}
	/* (one that did not answer is said by leave_loaded) */
	if (rc == 0 && (t->asked & LT_IM_CUDA))
		im_log(im, LT_IM_CUDA, 'W', "pid %d: the injected library is gone (process exited?)", t->pid);
	if (rc == 0 && (t->on & LT_IM_PYTHON))
		im_log(im, LT_IM_PYTHON, 'D', "python: pid %d: the hook library is gone (the process exited; "
		       "its log holds what it wrote)", t->pid);
	/* Published once the library is done with them: it said "stopped", or
	 * it is gone (EOF: the process or its control thread ended). */
	publish_logs(im, t, rc != -ETIMEDOUT || !proc_running(t->pid), events);
	return started;
}

/* A library that did not answer in time (or whose CUPTI flush was given
 * up: cut=1, CUPTI still holds its callbacks) is left loaded and untouched:
 * its control thread may still wait for the GIL to take its hook off (it
 * does once it has it), so its fini would refuse the unload, and the
 * injector would have stopped the process's threads for nothing. Our end
 * of its socket closes: the library sees EOF, as when a collector dies. */
static void leave_loaded(struct lt_im *im, struct im_stop *st)
{
	struct im_target *t = st->t;
	char why[200];
	if (t->inj.sock >= 0)
		close(t->inj.sock);
	t->inj.sock = t->sock = -1;
	if (!t->inj.loaded || !proc_running(t->pid) || !lt_inj_present(&t->inj))
		return; /* gone with the process, or with an exec of a new image */
	if (st->rc == -ETIMEDOUT)
		snprintf(why, sizeof(why), "did not answer within %d ms%s", st->bound_ms,
			 t->on & LT_IM_PYTHON ? " (holding the GIL?)" : "");
	else if (st->rc > 0)
		snprintf(why, sizeof(why), "gave up CUPTI's final flush after %d ms (its log holds what "
			 "came before; what CUPTI still held is lost)", STOP_CUDA_MS - STOP_SLACK_MS);
	else
		snprintf(why, sizeof(why), "%s", st->bound_ms ? "closed its channel without answering"
							  : "had no channel to be asked to stop");
	im_log(im, t->asked & LT_IM_CUDA ? LT_IM_CUDA : LT_IM_PYTHON, 'W', "%spid %d: the library stays "
	       "loaded, not unloaded: it %s; the process runs on, never stopped, no longer recorded",
	       t->asked & LT_IM_CUDA ? "" : "python: ", t->pid, why);
	say_kept(im, t, why);
}

/* Its "stopped" says CUPTI's final flush was given up (cut=1). */
static int flush_cut(const struct im_stop *st)
{
	return st->rc > 0 && lt_ictl_field(st->reply, "cut") == 1;
}

static void *unload_main(void *arg)
{
	struct im_stop *st = arg;
	st->unloaded = lt_inj_unload(&st->t->inj, st->err, sizeof(st->err));
	return NULL;
}

/* What an unload came to, said (a library left in is named in the summary). */
static void unload_said(struct lt_im *im, struct im_stop *st)
{
	struct im_target *t = st->t;
	int u = st->unloaded;
	const char *kept = NULL;
	t->sock = -1; /* closed by lt_inj_unload */
	if (u == 1)
		im->tot.unloaded++;
	else if (u == 0 && (t->on & LT_IM_CUDA))
		im_log(im, LT_IM_CUDA, 'D', "pid %d: the library stays loaded while CUPTI holds its callbacks",
		       t->pid), kept = "CUPTI holds its callbacks";
	else if (u == 0 && t->launch_copy)
		im_log(im, LT_IM_PYTHON, 'D', "python: pid %d: the library stays loaded: it is CUDA's copy too "
		       "(launch mode), recording", t->pid);
	else if (u == 0)
		im_log(im, LT_IM_PYTHON, 'W', "python: pid %d: the hook library stays loaded: the interpreter "
		       "could not be reached to remove its profile function (GIL held, or exiting)", t->pid),
			kept = "its profile function could not be taken off";
	else if (u != -ESRCH)
		im_log(im, t->asked & LT_IM_CUDA ? LT_IM_CUDA : LT_IM_PYTHON, 'W', "pid %d: unloading the "
		       "library: %s", t->pid, st->err), kept = st->err;
	if (kept)
		say_kept(im, t, kept);
}

/* The unloads of the targets that answered, all at once (each a ptrace
 * session of its own thread, bounded by the injector); the others are
 * left as they run. */
static void unload_answered(struct lt_im *im, struct im_stop *st)
{
	for (int i = 0; i < im->n; i++) {
		struct im_target *t = st[i].t;
		if (t->launched || !t->inj.loaded || st[i].rc <= 0 || flush_cut(&st[i]))
			continue;
		st[i].unload_ran = 1;
		st[i].threaded = pthread_create(&st[i].th, NULL, unload_main, &st[i]) == 0;
		if (!st[i].threaded)
			unload_main(&st[i]);
	}
	for (int i = 0; i < im->n; i++) {
		struct im_target *t = st[i].t;
		if (st[i].threaded)
			pthread_join(st[i].th, NULL);
		if (t->launched)
			continue;
		if (st[i].unload_ran)
			unload_said(im, &st[i]);
		else if (st[i].rc <= 0 || flush_cut(&st[i]))
			leave_loaded(im, &st[i]);
		if (t->sock >= 0)
			close(t->sock);
		t->sock = -1;
	}
}

/* A launched command's socket, stopped beside the others. */
struct im_launch_stop {
	struct lt_im *im;
	struct im_target *t;
	int started;
	pthread_t th;
};

static void *launch_stop_main(void *arg)
{
	struct im_launch_stop *ls = arg;
	ls->started = stop_launched(ls->im, ls->t) > 0;
	return NULL;
}

/* Stops every target at once; returns 1 where CUDA kernel profiling had
 * started in a process of the launched command. */
static int stop_all(struct lt_im *im, struct im_stop *st)
{
	struct im_launch_stop ls = { .im = im };
	int started = 0, threaded = 0;
	for (int i = 0; i < im->n && !ls.t; i++)
		if (im->t[i].launched && im->t[i].sock >= 0)
			ls.t = &im->t[i];
	if (ls.t && !(threaded = pthread_create(&ls.th, NULL, launch_stop_main, &ls) == 0))
		launch_stop_main(&ls);
	stop_ask_all(im, st);
	stop_hear_all(im, st);
	for (int i = 0; i < im->n; i++)
		if (st[i].bound_ms) /* asked */
			started += stop_said(im, &st[i]);
	unload_answered(im, st);
	if (threaded)
		pthread_join(ls.th, NULL);
	if (ls.t) {
		close(ls.t->sock);
		ls.t->sock = -1;
	}
	return started + ls.started;
}

void lt_im_stop(struct lt_im *im)
{
	if (!im || im->stopped)
		return;
	uint64_t t0 = lt_mono_ms();
	/* The logs are published as each target's stop is heard, the unloads
	 * and the launch's stop going on meanwhile: one bound for all. */
	im->store_by = t0 + LT_STORE_WAIT_S * 1000ull;
	jobs_join_all(im);
	fork_channel_stop(im); /* no target is added from here on */
	memset(&im->tot, 0, sizeof(im->tot));
	int launched = -1;
	for (int i = 0; i < im->n; i++) {
		if (im->t[i].launched && im->t[i].sock >= 0 && launched < 0)
			launched = im->t[i].pid; /* the launch with the socket */
		im->tot.targets += !!(im->t[i].asked & LT_IM_CUDA);
	}
	int started = stop_all(im, im->stops);
	int handed = im->n_pubs;
	pubs_heard(im);
	unstage_launch(im);
	if (!handed)
		im->store_by = 0;
	/* Said once all are in: a launched process may have started CUDA in
	 * the copy the hook went into (its own socket, not the launch one). */
	if (launched > 0 && !started && !im->tot.kernels && !im->tot.apis) {
		im_log(im, LT_IM_CUDA, 'I', "pid %d: no process of it started CUDA kernel profiling (no CUDA "
		       "initialized, or no GPU)", launched);
		im_unseen(im, LT_IM_CUDA, launched, "no process of the launched command initialized CUDA");
	}
	im->tot.py_later = atomic_load(&im->py_later);
	if (im->n)
		im_log(im, 0, 'D', "the injected libraries of %d process(es) stopped in %llu ms", im->n,
		       (unsigned long long)(lt_mono_ms() - t0));
	im->n = 0;
	im->stopped = 1;
}

uint64_t lt_im_store_by(const struct lt_im *im)
{
	return im ? im->store_by : 0;
}

void lt_im_totals(const struct lt_im *im, struct lt_im_totals *t)
{
	if (im)
		*t = im->tot;
	else
		memset(t, 0, sizeof(*t));
}

void lt_im_so_far(struct lt_im *im, struct lt_im_so_far *sf)
{
	memset(sf, 0, sizeof(*sf));
	if (!im)
		return;
	/* Never wait: a job thread may hold the lock through a remote call. */
	if (pthread_mutex_trylock(&im->mu) == 0) {
		struct lt_im_so_far n = { 0 };
		for (int i = 0; i < im->n; i++) {
			n.cuda_events += lt_ilog_events_so_far(&im->t[i].log[F_CUDA]);
			n.python_events += lt_ilog_events_so_far(&im->t[i].log[F_PY]);
			n.bytes += im->t[i].log[F_CUDA].tail_off + im->t[i].log[F_PY].tail_off;
		}
		pthread_mutex_unlock(&im->mu);
		im->so_far = n;
	}
	*sf = im->so_far;
}

void lt_im_free(struct lt_im *im)
{
	if (!im)
		return;
	lt_im_stop(im);
	for (int i = 0; i < IM_MAX; i++)
		for (int f = 0; f < F_N; f++)
			lt_ilog_tail_close(&im->t[i].log[f]);
	fork_channel_stop(im);
	for (int i = 0; i < IM_MAX; i++)
		if (im->t[i].forked)
			fork_done(&im->t[i]);
	for (int k = 0; k < 2; k++)
		if (im->fork_sock[k] >= 0)
			close(im->fork_sock[k]);
	if (im->child_sock >= 0)
		close(im->child_sock);
	if (im->t[0].sock >= 0) /* a launch that never started */
		close(im->t[0].sock);
	lt_ipub_close(im->pub);
	lt_ilog_unstage(im->stagefd, im->stage, im->staged_apart);
	if (im->dirfd >= 0)
		close(im->dirfd);
	pthread_mutex_destroy(&im->mu);
	free(im);
}
