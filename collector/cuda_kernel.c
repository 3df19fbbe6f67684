// SPDX-License-Identifier: Apache-2.0
/*
 * cuda_kernel: get libllmtracker-inject.so into targets and out again, and
 * talk to it over the socket described in collector/inject/inject.h.
 */
#include "clock.h"
#include "cuda_kernel.h"
#include "nodename.h"
#include "injector.h"
#include "inject_ctl.h"
#include "inject_log.h"
#include "inject/inject.h"
#include "../eventlog/eventlog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 256
#define REPLY_MS 10000
/* A followed process (lt_ck_attach_later): how long it may take to load
 * CUDA (a training worker imports and reads data first), how often its maps
 * are looked at (backing off to the most), and how soon a library that found
 * no driver loaded yet (the maps showed it mid-load) is tried again. */
#define LATER_MS (300 * 1000)
#define LATER_POLL_MIN_MS 20
#define LATER_POLL_MAX_MS 1000
#define LATER_RETRY_MS 200

struct ck_target {
	int pid;
	int sock;
	int launched;
	struct lt_inj inj;
	struct lt_ilog log;             /* attach: the file made for its library */
};

/* One followed process waiting for CUDA, on a thread of its own. */
struct ck_later {
	struct lt_cuda_kernel *ck;
	int pid;
	int pidfd;                      /* holds the process: its pid names no other while we wait */
	int used;
	atomic_int done;
	pthread_t th;
};

struct lt_cuda_kernel {
	struct lt_ck_opts o;
	char lib[PATH_MAX];
	char dir[PATH_MAX];
	int dirfd;                      /* dir, ours alone: targets get one file each */
	char host[256];
	char session[EVLOG_SESSION_HEX]; /* hex, "" for none: into every log's header */
	int available;
	int child_sock;                 /* launch mode: the child's end */
	char *env[8];
	char envbuf[8][PATH_MAX + 64];
	pthread_mutex_t mu;             /* t[], n: later attaches add targets from their threads */
	struct ck_target t[MAX_TARGETS];
	int n;
	struct ck_later later[MAX_TARGETS];
	atomic_int stopping;
	struct lt_ck_totals tot;
};

static void ck_log(const struct lt_cuda_kernel *ck, char level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ck_log(const struct lt_cuda_kernel *ck, char level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (ck->o.log)
		ck->o.log(level, buf);
	else
		fprintf(stderr, "%c llmtracker: %s\n", level, buf);
}

/* A process whose kernels are not recorded: say why to whoever sums up. */
static void ck_unseen(const struct lt_cuda_kernel *ck, int pid, const char *why)
{
	if (ck->o.unseen)
		ck->o.unseen(pid, why);
}

/* The driver's kernel side is what CUDA needs; no libcuda lookup here (the
 * collector may be static, and the target's libraries are its own). */
static int driver_present(void)
{
	return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

static int find_lib(struct lt_cuda_kernel *ck, const char *given)
{
	if (given) {
		if (!realpath(given, ck->lib))
			return -errno;
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	static const char *const rel[] = { "../lib/libllmtracker-inject.so", "libllmtracker-inject.so",
					    "../lib/llmtracker/libllmtracker-inject.so" };
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), "%s/%s", exe, rel[i]);
		if (realpath(p, ck->lib))
			return 0;
	}
	return -ENOENT;
}

int lt_ck_new(struct lt_cuda_kernel **out, const struct lt_ck_opts *o, char *err, size_t errsz)
{
	*out = NULL;
	struct lt_cuda_kernel *ck = calloc(1, sizeof(*ck));
	if (!ck)
		return -ENOMEM;
	ck->o = *o;
	ck->child_sock = -1;
	ck->dirfd = -1;
	pthread_mutex_init(&ck->mu, NULL);
	for (int i = 0; i < MAX_TARGETS; i++)
		ck->t[i].sock = -1;
	if (!ck->o.finalize_ms)
		ck->o.finalize_ms = 3000;
	if (find_lib(ck, o->lib_path)) {
		snprintf(err, errsz, "--enable-cuda-kernel: the inject library %s was not found; "
			 "install it beside the collector (lib/libllmtracker-inject.so)",
			 o->lib_path ? o->lib_path : "libllmtracker-inject.so");
		pthread_mutex_destroy(&ck->mu);
		free(ck);
		return -ENOENT;
	}
	const char *dir = o->cupti_dir && *o->cupti_dir ? o->cupti_dir : ".";
	mkdir(dir, 0755);
	if (!realpath(dir, ck->dir) || (ck->dirfd = lt_ilog_dir(ck->dir)) < 0) {
		int e = errno;
		snprintf(err, errsz, "--cupti-dir %s: %s", dir, strerror(e));
		pthread_mutex_destroy(&ck->mu);
		free(ck);
		return -e;
	}
	if (o->host)
		snprintf(ck->host, sizeof(ck->host), "%s", o->host);
	else
		lt_node_name(ck->host, sizeof(ck->host));
	for (char *p = ck->host; *p; p++)
		if (*p == ' ' || *p == '/')
			*p = '_';
	if (o->session && evlog_session_set(o->session))
		evlog_session_hex(o->session, ck->session);
	ck->available = driver_present() || o->skip_driver_check;
	if (!ck->available)
		ck_log(ck, 'W', "CUDA kernel profiling cannot start: no NVIDIA GPU driver on this node "
		       "(/proc/driver/nvidia/version and /dev/nvidiactl missing); the other sources go on");
	*out = ck;
	return 0;
}

int lt_ck_available(const struct lt_cuda_kernel *ck)
{
	return ck && ck->available;
}

/* ------------------------------------------------------------ protocol */

/* "start ..." with the one file the library may write (inject_log.h). */
static int send_start(struct lt_cuda_kernel *ck, struct ck_target *t, char *err, size_t errsz)
{
	char msg[900];
	int fd = lt_ilog_create(&t->log, ck->dirfd, "llmtracker-cupti", ck->host, t->pid, err, errsz);
	if (fd < 0)
		return fd;
	snprintf(msg, sizeof(msg), "start pid=%d host=%s session=%s driver=%d runtime=%d finalize_ms=%d %.256s",
		 t->pid, ck->host, ck->session[0] ? ck->session : "-", !!ck->o.driver_api,
		 !ck->o.kernels_only, /* inject.h: runtime= ($LLMT_CUPTI_START may say 2) */
		 ck->o.finalize_ms,
		 ck->o.start_extra ? ck->o.start_extra : "");
	int rc = lt_ictl_send(t->sock, msg, &fd, 1);
	close(fd);
	if (rc)
		snprintf(err, errsz, "the injected library took no start message: %s", strerror(-rc));
	return rc;
}

static int msg_pid(const char *m)
{
	return (int)lt_ictl_field(m, "pid");
}

/* What the library added to "ok" (e.g. " launches=activity (...)"), without
 * its file= key: the collector names the file, from its own state. */
static const char *reply_notes(const char *reply, char *out, size_t sz)
{
	const char *p = lt_ictl_text(reply);
	size_t n = 0;
	out[0] = 0;
	while (*p) {
		size_t w = strcspn(p, " ");
		if (strncmp(p, "file=", 5) && strncmp(p, "pid=", 4))
			n += (size_t)snprintf(out + n, n < sz ? sz - n : 0, " %.*s", (int)w, p);
		if (n >= sz)
			break;
		p += w;
		p += strspn(p, " ");
	}
	return out;
}

/* ------------------------------------------------------------ launch */

char *const *lt_ck_launch_env(struct lt_cuda_kernel *ck)
{
	if (!ck || !ck->available)
		return NULL;
	int sv[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
		/* The child's end survives exec; the library marks it CLOEXEC. */
		fcntl(sv[1], F_SETFD, 0);
		ck->child_sock = sv[1];
		ck->t[0].sock = sv[0];
	}
	int i = 0;
	snprintf(ck->envbuf[i++], sizeof(ck->envbuf[0]), "CUDA_INJECTION64_PATH=%s", ck->lib);
	snprintf(ck->envbuf[i++], sizeof(ck->envbuf[0]), "LLMT_CUPTI_DIR=%s", ck->dir);
	snprintf(ck->envbuf[i++], sizeof(ck->envbuf[0]), "LLMT_HOST=%s", ck->host);
	snprintf(ck->envbuf[i++], sizeof(ck->envbuf[0]), "LLMT_CUPTI_DRIVER=%d", !!ck->o.driver_api);
	if (ck->session[0])
		snprintf(ck->envbuf[i++], sizeof(ck->envbuf[0]), "LLMT_SESSION=%s", ck->session);
	if (ck->child_sock >= 0)
		snprintf(ck->envbuf[i++], sizeof(ck->envbuf[0]), "LLMT_INJECT_SOCK=%d", ck->child_sock);
	for (int j = 0; j < i; j++)
		ck->env[j] = ck->envbuf[j];
	ck->env[i] = NULL;
	return ck->env;
}

int lt_ck_launched(struct lt_cuda_kernel *ck, int pid)
{
	if (!ck || !ck->available || ck->n >= MAX_TARGETS)
		return 0;
	if (ck->child_sock >= 0) {
		close(ck->child_sock);
		ck->child_sock = -1;
	}
	struct ck_target *t = &ck->t[ck->n];
	if (ck->n > 0) /* a second launch: no socket of its own */
		t->sock = -1;
	t->pid = pid;
	t->launched = 1;
	ck->n++;
	ck_log(ck, 'I', "CUDA kernel profiling of pid %d: CUDA will load %s at its first CUDA call; "
	       "logs go to %s", pid, ck->lib, ck->dir);
	return 0;
}

void lt_ck_env_set(struct lt_cuda_kernel *ck)
{
	char *const *env = lt_ck_launch_env(ck);
	for (int i = 0; env && env[i]; i++)
		putenv(env[i]);
}

void lt_ck_env_unset(struct lt_cuda_kernel *ck)
{
	for (int i = 0; ck && ck->env[i]; i++) {
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(ck->env[i], "="), ck->env[i]);
		unsetenv(name);
	}
}

struct lt_cuda_kernel *lt_ck_open(const char *cupti_dir, const char *output,
				  const uint8_t *session, void (*log)(char level, const char *msg),
				  void (*unseen)(int pid, const char *why))
{
	char dir[PATH_MAX], err[600];
	if (cupti_dir && *cupti_dir) {
		snprintf(dir, sizeof(dir), "%s", cupti_dir);
	} else {
		snprintf(dir, sizeof(dir), "%s", output && *output ? output : "./x");
		char *slash = strrchr(dir, '/');
		if (slash == dir)
			dir[1] = 0;
		else if (slash)
			*slash = 0;
		else
			snprintf(dir, sizeof(dir), ".");
	}
	/* Recording options for measurements (see inject.h), e.g. "runtime=0". */
	struct lt_ck_opts o = { .cupti_dir = dir, .session = session, .log = log, .unseen = unseen,
				.start_extra = getenv("LLMT_CUPTI_START") };
	struct lt_cuda_kernel *ck = NULL;
	if (lt_ck_new(&ck, &o, err, sizeof(err))) {
		char line[700];
		snprintf(line, sizeof(line), "CUDA kernel profiling cannot start: %s; the other sources go on", err);
		if (log)
			log('W', line);
		else
			fprintf(stderr, "W llmtracker: %s\n", line);
		return NULL;
	}
	if (!ck->available) {
		lt_ck_free(ck);
		return NULL;
	}
	return ck;
}

/* ------------------------------------------------------------ attach */

/* A loaded target goes into t[] (lt_ck_stop stops and unloads it). */
static void keep_target(struct lt_cuda_kernel *ck, const struct ck_target *t)
{
	pthread_mutex_lock(&ck->mu);
	if (ck->n < MAX_TARGETS)
		ck->t[ck->n++] = *t;
	pthread_mutex_unlock(&ck->mu);
}

/* A library that found no CUDA started nothing: hear its last word, take
 * it out and drop its empty log, so that it can be tried again. */
static void undo_target(struct lt_cuda_kernel *ck, struct ck_target *t)
{
	char reply[256], err[512];
	if (lt_ictl_send(t->sock, "stop", NULL, 0) == 0)
		lt_ictl_await(t->sock, "stopped", reply, sizeof(reply), REPLY_MS);
	if (lt_inj_unload(&t->inj, err, sizeof(err)) == 0)
		ck_log(ck, 'I', "pid %d: the library stays loaded (CUPTI holds its callbacks)", t->pid);
	lt_ilog_drop(&t->log, ck->dirfd);
	t->sock = -1;
}

/* Inject into `pid` and start recording. 0 started; -errno otherwise, said
 * through opts.log and opts.unseen, except, when `later`, what may change
 * (-EAGAIN: no thread could take the load now, or the library found no CUDA
 * driver loaded yet), which is left to the caller with `why`. */
static int attach_one(struct lt_cuda_kernel *ck, int pid, int later, char *why, size_t whysz)
{
	struct ck_target t = { .pid = pid, .sock = -1 };
	char err[512], reply[1024];
	int rc = lt_inj_load(&t.inj, pid, ck->lib, err, sizeof(err));
	if (rc) {
		snprintf(why, whysz, "%s", err);
		if (later && (rc == -EAGAIN || rc == -ESRCH))
			return rc;
		ck_log(ck, 'W', "CUDA kernel profiling cannot start in pid %d: %s; the process is as it was",
		       pid, err);
		ck_unseen(ck, pid, err);
		return rc;
	}
	t.sock = t.inj.sock;
	if ((rc = send_start(ck, &t, err, sizeof(err))) == 0)
		rc = lt_ictl_recv(t.sock, reply, sizeof(reply), REPLY_MS);
	if (rc > 0 && !strncmp(reply, "ok", 2)) {
		char notes[sizeof(reply)];
		ck_log(ck, 'I', "CUDA kernel profiling of pid %d started: %s/%s%s", pid, ck->dir,
		       t.log.name, reply_notes(reply, notes, sizeof(notes)));
		keep_target(ck, &t);
		return 0;
	}
	if (later && rc > 0 && strstr(reply, LI_ERR_NO_DRIVER)) {
		snprintf(why, whysz, "%s", lt_ictl_text(reply));
		undo_target(ck, &t);
		return -EAGAIN;
	}
	keep_target(ck, &t); /* lt_ck_stop() unloads it */
	if (rc < 0 && rc != -ETIMEDOUT) {
		ck_log(ck, 'W', "CUDA kernel profiling cannot start in pid %d: %s", pid, err);
		ck_unseen(ck, pid, err);
	} else if (rc > 0 && !strncmp(reply, "err ", 4)) {
		ck_log(ck, 'W', "pid %d: %s", pid, lt_ictl_text(reply));
		ck_unseen(ck, pid, lt_ictl_text(reply));
	} else {
		ck_log(ck, 'W', "CUDA kernel profiling cannot start in pid %d: the injected library %s",
		       pid, rc == -ETIMEDOUT ? "did not answer" : "went away");
		ck_unseen(ck, pid, rc == -ETIMEDOUT ? "the injected library did not answer"
						    : "the injected library went away");
	}
	return -EIO;
}

int lt_ck_attach(struct lt_cuda_kernel *ck, int pid)
{
	char why[512];
	if (!ck || !ck->available)
		return -ENODEV;
	if (ck->n >= MAX_TARGETS)
		return -E2BIG;
	return attach_one(ck, pid, 0, why, sizeof(why));
}

/* ------------------------------------------------------------ later */

/* Has `pid` mapped the CUDA driver (libcuda.so.*), or, unless
 * `driver_only`, CUPTI itself (libcupti.so.*)? Either is what the library's
 * start needs: CUPTI loaded, or the driver, with a CUPTI beside the
 * process's libcudart (collector/inject/cupti.c open_cupti). A process that
 * maps neither runs no CUDA and is never touched. */
static int cuda_mapped(int pid, int driver_only)
{
	char path[64], line[1200];
	int found = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *base = strrchr(line, '/');
		found = base && (!strncmp(base, "/libcuda.so", 11) ||
				 (!driver_only && !strncmp(base, "/libcupti.so", 12)));
	}
	if (f)
		fclose(f);
	return found;
}

/* Forked and not exec'd since (PF_FORKNOEXEC): its mappings may be its
 * parent's. */
#define PF_FORKNOEXEC_FLAG 0x40 /* include/linux/sched.h */
static int fork_no_exec(int pid)
{
	char path[64], buf[1024];
	unsigned long flags = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	/* after the comm: state ppid pgrp session tty_nr tpgid flags */
	return p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1 && (flags & PF_FORKNOEXEC_FLAG);
}

/* Launch mode: a process whose environment names our library in
 * CUDA_INJECTION64_PATH (the launched command and its descendants) gets it
 * from CUDA itself and reports on the launch socket. */
static int launch_covered(const struct lt_cuda_kernel *ck, int pid)
{
	enum { ENV_MAX = 1 << 20 };
	char path[64], want[PATH_MAX + 32];
	if (!ck->env[0])
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC), covered = 0;
	char *buf = fd >= 0 ? malloc(ENV_MAX + 1) : NULL;
	size_t n = 0;
	ssize_t r = 1;
	while (buf && n < ENV_MAX && r > 0)
		if ((r = read(fd, buf + n, ENV_MAX - n)) > 0)
			n += (size_t)r;
	int len = snprintf(want, sizeof(want), "CUDA_INJECTION64_PATH=%s", ck->lib);
	for (size_t i = 0; buf && i < n && !covered; i += strnlen(buf + i, n - i) + 1)
		covered = n - i > (size_t)len && !memcmp(buf + i, want, (size_t)len + 1);
	free(buf);
	if (fd >= 0)
		close(fd);
	return covered;
}

static int later_gone(const struct ck_later *l)
{
	struct pollfd p = { l->pidfd, POLLIN, 0 };
	return poll(&p, 1, 0) != 0; /* readable: it exited */
}

/* Sleep ms in short steps; 0 when the profile is ending. */
static int later_sleep(struct lt_cuda_kernel *ck, int ms)
{
	for (; ms > 0 && !atomic_load(&ck->stopping); ms -= 20)
		usleep((ms < 20 ? ms : 20) * 1000);
	return !atomic_load(&ck->stopping);
}

static void *later_main(void *arg)
{
	struct ck_later *l = arg;
	struct lt_cuda_kernel *ck = l->ck;
	char why[512] = "";
	uint64_t end = lt_mono_ms() + LATER_MS;
	int saw_cuda = 0, retry = 0, poll_ms = LATER_POLL_MIN_MS;
	/* A fork of a process that initialized CUDA (a DataLoader worker) has
	 * its driver mapped but cannot use CUDA (CUDA does not survive a
	 * fork): left alone; an exec of it is announced anew. Else what it
	 * maps itself counts: the driver while it runs its parent's image
	 * (CUPTI may be its parent's, mapped at import), the driver or CUPTI
	 * once it has exec'd. */
	if (launch_covered(ck, l->pid) || (fork_no_exec(l->pid) && cuda_mapped(l->pid, 1)))
		goto out;
	while (!atomic_load(&ck->stopping) && lt_mono_ms() < end && !later_gone(l)) {
		if (!cuda_mapped(l->pid, fork_no_exec(l->pid))) {
			later_sleep(ck, poll_ms);
			poll_ms = poll_ms * 2 > LATER_POLL_MAX_MS ? LATER_POLL_MAX_MS : poll_ms * 2;
			continue;
		}
		saw_cuda = 1;
		int rc = attach_one(ck, l->pid, 1, why, sizeof(why));
		if (!(retry = rc == -EAGAIN || rc == -ESRCH))
			break;
		later_sleep(ck, LATER_RETRY_MS);
	}
	if (!saw_cuda || !retry)
		goto out; /* no CUDA there: nothing to record; else started, or said by attach_one */
	if (later_gone(l)) {
		ck_unseen(ck, l->pid, "it exited before CUDA kernel profiling could start in it");
	} else if (atomic_load(&ck->stopping)) {
		ck_unseen(ck, l->pid, "the profile ended before CUDA kernel profiling could start in it");
	} else {
		ck_log(ck, 'W', "CUDA kernel profiling cannot start in pid %d: %s", l->pid,
		       why[0] ? why : "timed out");
		ck_unseen(ck, l->pid, why[0] ? why : "timed out");
	}
out:
	atomic_store(&l->done, 1);
	return NULL;
}

/* A free slot for a thread: never used, or its thread is done (joined here). */
static struct ck_later *later_slot(struct lt_cuda_kernel *ck, int pid, int *waiting)
{
	struct ck_later *free_slot = NULL;
	*waiting = 0;
	for (int i = 0; i < MAX_TARGETS; i++) {
		struct ck_later *l = &ck->later[i];
		if (l->used && atomic_load(&l->done)) {
			pthread_join(l->th, NULL);
			close(l->pidfd);
			l->used = 0;
		}
		if (l->used && l->pid == pid)
			*waiting = 1;
		if (!l->used && !free_slot)
			free_slot = l;
	}
	return free_slot;
}

int lt_ck_attach_later(struct lt_cuda_kernel *ck, int pid)
{
	int waiting;
	if (!ck || !ck->available || atomic_load(&ck->stopping))
		return ck ? 0 : -ENODEV;
	struct ck_later *l = later_slot(ck, pid, &waiting);
	if (waiting)
		return 0; /* an exec of a process we already wait for: its maps are looked at anew */
	if (!l)
		return -E2BIG;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return errno == ESRCH ? 0 : -errno;
	*l = (struct ck_later){ .ck = ck, .pid = pid, .pidfd = fd, .used = 1 };
	int rc = pthread_create(&l->th, NULL, later_main, l);
	if (rc) {
		close(fd);
		l->used = 0;
		return -rc;
	}
	return 0;
}

static void later_join_all(struct lt_cuda_kernel *ck)
{
	atomic_store(&ck->stopping, 1);
	for (int i = 0; i < MAX_TARGETS; i++) {
		struct ck_later *l = &ck->later[i];
		if (!l->used)
			continue;
		pthread_join(l->th, NULL);
		close(l->pidfd);
		l->used = 0;
	}
}

/* ------------------------------------------------------------ stop */

/* What a kept CUPTI costs the job: CUPTI takes one subscriber per process
 * (torch.profiler then warned CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * and recorded no kernel, on the GPU host: docs/MEASUREMENTS.md). */
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
	case LI_KEPT_CALLBACKS:
		return "stays attached, recording nothing: launches were taken by callback, and a "
		       "process detached after that and subscribed again has died; a later profile "
		       "of this process reuses it" KEPT_COST;
	case LI_KEPT_ASKED:
		return "stays attached, recording nothing, as asked (teardown=never)" KEPT_COST;
	default:
		return "still attached (no CUDA call to detach at); it detaches at the process's "
		       "next CUDA call";
	}
}

static void account(struct lt_cuda_kernel *ck, int pid, const char *reply)
{
	unsigned long long k = lt_ictl_field(reply, "kernels"), a = lt_ictl_field(reply, "api"), d = lt_ictl_field(reply, "dropped");
	int fin = (int)lt_ictl_field(reply, "finalized");
	ck->tot.kernels += k;
	ck->tot.memcpys += lt_ictl_field(reply, "memcpy");
	ck->tot.memsets += lt_ictl_field(reply, "memset");
	ck->tot.apis += a;
	ck->tot.dropped += d;
	ck->tot.finalized += fin;
	if (k || a)
		ck_log(ck, 'I', "pid %d: %llu kernels, %llu memcpy, %llu memset, %llu API calls, "
		       "%llu dropped; CUPTI %s", pid, k, lt_ictl_field(reply, "memcpy"), lt_ictl_field(reply, "memset"),
		       a, d, fin ? "detached" : lt_ictl_field(reply, "exiting") ? "flushed at the process's exit" :
		       kept_why(lt_ictl_field(reply, "kept")));
}

/* Alive and not a zombie (a launched child is reaped only after us). */
static int proc_running(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void publish_log(struct lt_cuda_kernel *ck, struct ck_target *t, int done)
{
	char err[600];
	int rc = done ? lt_ilog_publish(&t->log, ck->dirfd, err, sizeof(err)) : -EBUSY;
	if (rc == -EBUSY)
		ck_log(ck, 'W', "pid %d: its CUDA log stays as %s/%s (the library may still write it)",
		       t->pid, ck->dir, t->log.partial);
	else if (rc < 0)
		ck_log(ck, 'W', "pid %d: %s", t->pid, err);
	else if (rc == 1)
		ck_log(ck, 'I', "pid %d: CUDA log %s/%s", t->pid, ck->dir, t->log.name);
}

/* Launch mode: every CUDA process of the launched tree may have reported
 * on the shared socket ("ok"/"err" at its CUDA start, "stopped" at exit).
 * Stop those still running, one "stop" each. */

static void stop_launched(struct lt_cuda_kernel *ck, struct ck_target *t)
{
	int pids[MAX_TARGETS], n = 0, asked = 0;
	char reply[1024];
	for (int round = 0; round < 2; round++) {
		/* One deadline per round, however much the processes say. */
		long long end = (long long)lt_mono_ms() + (round ? ck->o.finalize_ms + REPLY_MS : 0);
		for (int k = 0; k < 4 * MAX_TARGETS; k++) {
			long long left = end - (long long)lt_mono_ms();
			int rc = lt_ictl_recv(t->sock, reply, sizeof(reply), left > 0 ? (int)left : 0);
			if (rc <= 0)
				break;
			int pid = msg_pid(reply);
			if (!strncmp(reply, "ok", 2) && n < MAX_TARGETS) {
				pids[n++] = pid;
			} else if (!strncmp(reply, "err", 3)) {
				ck_log(ck, 'W', "pid %d: %s", pid, lt_ictl_text(reply));
				ck_unseen(ck, pid, lt_ictl_text(reply));
			} else if (!strncmp(reply, "stopped", 7)) {
				account(ck, pid, reply);
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
			if (proc_running(pids[i]) && lt_ictl_send(t->sock, "stop", NULL, 0) == 0)
				asked++;
		if (!asked)
			break;
	}
	if (!ck->tot.kernels && !ck->tot.apis && !n) {
		ck_log(ck, 'I', "pid %d: no process of it started CUDA kernel profiling (no CUDA "
		       "initialized, or no GPU)", t->pid);
		ck_unseen(ck, t->pid, "no process of the launched command initialized CUDA");
	}
}

static void stop_one(struct lt_cuda_kernel *ck, struct ck_target *t)
{
	char reply[1024] = "";
	int rc = 0;
	if (t->launched && t->sock >= 0) {
		stop_launched(ck, t);
	} else if (t->sock >= 0) {
		lt_ictl_send(t->sock, "stop", NULL, 0);
		rc = lt_ictl_await(t->sock, "stopped", reply, sizeof(reply), ck->o.finalize_ms + REPLY_MS);
		if (rc > 0)
			account(ck, t->pid, reply);
		else
			ck_log(ck, 'W', "pid %d: the injected library %s", t->pid,
			       rc == -ETIMEDOUT ? "did not answer the stop request" : "is gone (process exited?)");
	}
	/* Published once the library is done with it: it said "stopped", or
	 * it is gone (EOF: the process or its control thread ended). */
	if (t->log.live)
		publish_log(ck, t, rc != -ETIMEDOUT || !proc_running(t->pid));
	if (t->inj.loaded) {
		char err[512];
		int u = lt_inj_unload(&t->inj, err, sizeof(err));
		t->sock = -1; /* closed by lt_inj_unload */
		if (u == 1)
			ck->tot.unloaded++;
		else if (u == 0)
			ck_log(ck, 'I', "pid %d: the library stays loaded while CUPTI holds its callbacks", t->pid);
		else if (u != -ESRCH)
			ck_log(ck, 'W', "pid %d: unloading the library: %s", t->pid, err);
	}
	if (t->sock >= 0)
		close(t->sock);
	t->sock = -1;
}

void lt_ck_stop(struct lt_cuda_kernel *ck)
{
	if (!ck)
		return;
	later_join_all(ck); /* no target is added from here on */
	memset(&ck->tot, 0, sizeof(ck->tot));
	for (int i = 0; i < ck->n; i++) {
		stop_one(ck, &ck->t[i]);
		ck->tot.targets++;
	}
	ck->n = 0;
}

void lt_ck_totals(const struct lt_cuda_kernel *ck, struct lt_ck_totals *t)
{
	if (ck)
		*t = ck->tot;
	else
		memset(t, 0, sizeof(*t));
}

void lt_ck_free(struct lt_cuda_kernel *ck)
{
	if (!ck)
		return;
	lt_ck_stop(ck);
	if (ck->child_sock >= 0)
		close(ck->child_sock);
	if (ck->t[0].sock >= 0)
		close(ck->t[0].sock);
	if (ck->dirfd >= 0)
		close(ck->dirfd);
	pthread_mutex_destroy(&ck->mu);
	free(ck);
}
