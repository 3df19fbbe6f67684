// SPDX-License-Identifier: Apache-2.0
/*
 * Entry points of libllmtracker-inject.so and its control thread.
 *
 * The functions the injector calls run on a borrowed thread of the target,
 * so they only start a thread and return; everything that can block
 * (CUPTI, files) happens on that thread, with every signal blocked so the
 * target's signal delivery is unchanged.
 */
#include "inject.h"
#include "pyhook.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { LI_IDLE, LI_RUNNING, LI_DONE };
#define LI_FINI_WAIT_MS 2000    /* llmt_inject_fini: longest wait for the control thread */

/*
 * A control channel: a socket to the collector, the thread that serves it
 * and what its start turned on. Two at most in a process, one copy of the
 * library for both: the one the collector's injector starts
 * (llmt_inject_attach: li_att) and launch mode's (InitializeInjection, on
 * the socket the launched command inherited: li_lch). Each stops and
 * reports what it started. CUDA's start (from either thread, or from cuInit)
 * and stop are ordered by li_cuda_mu.
 */
struct li_chan {
	pthread_t thread;
	atomic_int state;
	int sock;
	int early;              /* launch: CUPTI started in InitializeInjection */
	int early_rc;
	char early_msg[512];
	struct li_config cfg;
	/* CUPTI recording; CUPTI waiting for the driver (start key cuda_wait=1:
	 * started by CUDA's own call of InitializeInjection when
	 * CUDA_INJECTION64_PATH names this copy, else by the tick once the
	 * process has loaded CUDA); the Python hook. */
	int cuda_on, cuda_wait, py_on;
	int stop_ms;            /* the stop's ms= (0: none) */
	int forked;             /* a forked child's own channel: started by the fork */
};
static struct li_chan li_att = { .sock = -1 }, li_lch = { .sock = -1 };
static pthread_mutex_t li_cuda_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int li_unloadable = 1;    /* li_att's sources let go of this library */
static uint64_t li_att_token;           /* the injector's last attach (injector.h) */

/* "WORD rest" -> "WORD pid=N rest": several processes may share a socket. */
static void send_msg(const struct li_chan *ch, const char *msg)
{
	char buf[LI_MSG_MAX];
	size_t w = strcspn(msg, " ");
	if (ch->sock < 0)
		return;
	snprintf(buf, sizeof(buf), "%.*s pid=%d%s", (int)w, msg, (int)getpid(), msg + w);
	send(ch->sock, buf, strlen(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void cfg_defaults(struct li_config *c)
{
	memset(c, 0, sizeof(*c));
	c->pid = (uint32_t)getpid();
	c->cupti_fd = c->py_fd = c->fork_fd = -1;
	c->driver = 0;
	c->runtime = 1;
	c->finalize_ms = 3000;
	c->cuda = 1;
	if (gethostname(c->host, sizeof(c->host) - 1))
		snprintf(c->host, sizeof(c->host), "unknown");
}

/* "start pid=1 host=h driver=1 finalize_ms=3000" -> cfg (no key names a
 * path: where the logs go comes as fds only) */
static void cfg_parse(struct li_config *c, char *msg)
{
	char *save = NULL;
	for (char *tok = strtok_r(msg, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq++ = 0;
		if (!strcmp(tok, "pid"))
			c->pid = (uint32_t)strtoul(eq, NULL, 10);
		else if (!strcmp(tok, "host"))
			snprintf(c->host, sizeof(c->host), "%s", eq);
		else if (!strcmp(tok, "session"))
			evlog_session_parse(eq, c->session); /* malformed or "-": none */
		else if (!strcmp(tok, "driver"))
			c->driver = atoi(eq);
		else if (!strcmp(tok, "runtime"))
			c->runtime = atoi(eq) != 0;
		else if (!strcmp(tok, "finalize_ms"))
			c->finalize_ms = atoi(eq);
		else if (!strcmp(tok, "cuda_wait"))
			c->cuda_wait = atoi(eq) == 1;
		else if (!strcmp(tok, "cuda_init"))
			c->cuda_init = atoi(eq) == 1;
		else if (!strcmp(tok, "teardown"))
			c->teardown = !strcmp(eq, "always") ? LI_TEARDOWN_ALWAYS :
				      !strcmp(eq, "never") ? LI_TEARDOWN_NEVER : LI_TEARDOWN_AUTO;
		else if (!strcmp(tok, "cuda"))
			c->cuda = atoi(eq);
		else if (!strcmp(tok, "python"))
			c->python = atoi(eq);
		else if (!strcmp(tok, "py_wait_ms"))
			c->py_wait_ms = atoi(eq);
		else if (!strcmp(tok, "py_hold"))
			c->py_hold = atoi(eq) == 1;
		else if (!strcmp(tok, "fork"))
			c->fork = atoi(eq) == 1;
	}
}

#define LI_MAX_FDS 3 /* one log file per source, the fork channel */

/* Receive one message and the fds that came with it (up to LI_MAX_FDS; the
 * kernel drops any beyond; fds is NULL: none kept). 0 on EOF/error. */
static ssize_t recv_msg(const struct li_chan *ch, char *buf, size_t len, int *fds, int *nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * LI_MAX_FDS)];
	struct iovec iov = { buf, len - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n;
	do
		n = recvmsg(ch->sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (fds && *nfds < LI_MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return n;
}

/* The start message's fds, in the order of its sources (inject.h). */
static void take_log_fds(struct li_config *c, int *fds, int nfds)
{
	int k = 0;
	c->cupti_fd = c->cuda && k < nfds ? fds[k++] : -1;
	c->py_fd = c->python && k < nfds ? fds[k++] : -1;
	c->fork_fd = c->python && c->fork && k < nfds ? fds[k++] : -1;
	while (k < nfds)
		close(fds[k++]);
}

/* Each writer holds its own copy from open: ours go, but CUPTI's while it
 * waits for the driver (cuInit may be settling that wait meanwhile). */
static void close_log_fds(struct li_chan *ch)
{
	struct li_config *c = &ch->cfg;
	pthread_mutex_lock(&li_cuda_mu);
	if (c->cupti_fd >= 0 && !ch->cuda_wait) {
		close(c->cupti_fd);
		c->cupti_fd = -1;
	}
	pthread_mutex_unlock(&li_cuda_mu);
	if (c->py_fd >= 0)
		close(c->py_fd);
	if (c->fork_fd >= 0)
		close(c->fork_fd);
	c->py_fd = c->fork_fd = -1;
}

static void li_exit_at_exit(void);

/* "ok file=..." from a source -> "ok src=SRC file=...": with both sources
 * in one start, each answers for itself (inject.h). */
static void send_src(const struct li_chan *ch, const char *src, const char *msg)
{
	char buf[LI_MSG_MAX];
	size_t w = strcspn(msg, " ");
	snprintf(buf, sizeof(buf), "%.*s src=%s%s", (int)w, msg, src, msg + w);
	send_msg(ch, buf);
}

/* CUDA asked while the process had no driver loaded: start CUPTI as soon
 * as it has (what the collector's retries did from outside, but without a
 * second start: the Python hook already runs in this process). `in_init`:
 * called by CUDA from cuInit (InitializeInjection), before any kernel.
 * Returns 1 when CUDA is this channel's (started now or before). */
static int cuda_wait_end(struct li_chan *ch, int in_init)
{
	char msg[600];
	pthread_mutex_lock(&li_cuda_mu);
	int mine = ch->cuda_on;
	if (!ch->cuda_wait || (ch->cfg.cuda_init && !in_init))
		goto out;
	ch->cfg.in_init = in_init;
	int rc = li_cupti_start(&ch->cfg, msg, sizeof(msg));
	if (rc && strstr(msg, LI_ERR_NO_DRIVER) && !in_init)
		goto out; /* not yet */
	mine = 1;
	ch->cuda_wait = 0;
	if (ch->cfg.cupti_fd >= 0)
		close(ch->cfg.cupti_fd);
	ch->cfg.cupti_fd = -1;
	if (!rc) {
		ch->cuda_on = 1;
		li_exit_at_exit();
	}
	send_src(ch, "cuda", msg);
out:
	pthread_mutex_unlock(&li_cuda_mu);
	return mine;
}

static uint64_t li_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for "stop" or EOF, ticking the log so data reaches disk (every
 * TICK_MS) and, while Python calls are traced, draining their ring. */
#define TICK_MS 200
static void wait_stop(struct li_chan *ch)
{
	char buf[256];
	uint64_t next_tick = 0;
	for (;;) {
		struct pollfd p = { ch->sock, POLLIN, 0 };
		int r = poll(&p, 1, li_pyhook_running() ? LI_PYHOOK_DRAIN_MS : TICK_MS);
		if (r == 0) {
			li_pyhook_drain();
			uint64_t now = li_mono_ms();
			if (now < next_tick)
				continue;
			next_tick = now + TICK_MS;
			cuda_wait_end(ch, 0);
			li_cupti_tick();
			li_pyhook_tick();
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || !recv_msg(ch, buf, sizeof(buf), NULL, NULL))
			return;
		if (!strncmp(buf, "stop", 4)) {
			const char *ms = strstr(buf, " ms=");
			ch->stop_ms = ms ? atoi(ms + 4) : 0;
			return;
		}
	}
}

/* The thread's last act: from LI_DONE on, llmt_inject_fini may join it,
 * and nothing left here blocks (the send does not wait). */
static void final_msg(struct li_chan *ch, const char *msg)
{
	int sock = ch->sock;
	atomic_store(&ch->state, LI_DONE);
	if (msg)
		send_msg(ch, msg);
	ch->sock = -1;
	close(sock);
}

static void stats_msg(const struct li_stats *s, char *msg, size_t len)
{
	const struct li_stats st = *s;
	snprintf(msg, len, "stopped kernels=%llu memcpy=%llu memset=%llu api=%llu sync=%llu "
		 "devices=%llu dropped=%llu earlier=%llu untimed=%llu finalized=%d kept=%d cut=%d file=%s",
		 (unsigned long long)st.kernels, (unsigned long long)st.memcpys,
		 (unsigned long long)st.memsets, (unsigned long long)st.apis,
		 (unsigned long long)st.syncs, (unsigned long long)st.devices,
		 (unsigned long long)st.dropped, (unsigned long long)st.earlier,
		 (unsigned long long)st.untimed, st.finalized, st.kept, st.cut,
		 st.file[0] ? st.file : "-");
}

static void stop_and_report(struct li_chan *ch)
{
	struct li_stats st;
	char msg[512];
	memset(&st, 0, sizeof(st));
	msg[0] = 0;
	int unloadable = 1;
	pthread_mutex_lock(&li_cuda_mu); /* no CUDA start from cuInit from here on */
	if (ch->cuda_on || ch->cuda_wait) {
		if (ch->cuda_on)
			unloadable = li_cupti_stop(&st, 1, ch->stop_ms);
		stats_msg(&st, msg, sizeof(msg));
		if (ch->cuda_wait) /* the driver never came */
			strncat(msg, " cuda_wait=1", sizeof(msg) - strlen(msg) - 1);
		ch->cuda_on = ch->cuda_wait = 0;
		if (ch->cfg.cupti_fd >= 0)
			close(ch->cfg.cupti_fd);
		ch->cfg.cupti_fd = -1;
	}
	pthread_mutex_unlock(&li_cuda_mu);
	if (ch->py_on) { /* "stopped py_enter=..." alone, or appended */
		char pm[512];
		size_t n = strlen(msg);
		unloadable &= li_pyhook_stop(0, pm, sizeof(pm));
		snprintf(msg + n, sizeof(msg) - n, "%s", n ? pm + 7 : pm);
		ch->py_on = 0;
	}
	if (ch == &li_att)
		atomic_store(&li_unloadable, unloadable);
	final_msg(ch, msg);
}

/* CUPTI and/or Python calls, as "start" asked (cuda=, python=): one reply
 * per source asked, CUDA's first, each tagged src= (inject.h). A process
 * with no CUDA driver loaded yet answers "ok src=cuda wait=1" when asked
 * cuda_wait=1, and starts CUPTI once it has one; one whose CUDA loaded
 * this copy first (launch mode) answers "ok src=cuda launch=1": its
 * kernels are reported on the launch socket. 0 when any source is on. */
static int start_sources(struct li_chan *ch)
{
	struct li_config *c = &ch->cfg;
	char msg[600];
	if (c->cuda) {
		pthread_mutex_lock(&li_cuda_mu);
		/* CUDA's cuInit starts it, unless that call came already */
		int init = c->cuda_wait && c->cuda_init && !li_lch.early;
		int rc = li_lch.cuda_on || init ? -EBUSY : li_cupti_start(c, msg, sizeof(msg));
		if (li_lch.cuda_on) {
			snprintf(msg, sizeof(msg), "ok launch=1");
		} else if (init) {
			ch->cuda_wait = 1;
			snprintf(msg, sizeof(msg), "ok wait=1");
		} else if (!rc) {
			ch->cuda_on = 1;
			li_exit_at_exit();
		} else if (c->cuda_wait && strstr(msg, LI_ERR_NO_DRIVER)) {
			ch->cuda_wait = 1;
			snprintf(msg, sizeof(msg), "ok wait=1");
		}
		send_src(ch, "cuda", msg);
		pthread_mutex_unlock(&li_cuda_mu);
	}
	if (c->python) {
		ch->py_on = li_pyhook_start(c, msg, sizeof(msg)) == 0;
		send_src(ch, "python", msg);
	}
	return ch->cuda_on || ch->cuda_wait || ch->py_on ? 0 : -1;
}

static void *worker(void *arg)
{
	struct li_chan *ch = arg;
	char buf[LI_MSG_MAX];
	int rc = ch->early_rc;
	prctl(PR_SET_NAME, EVLOG_OWN_THREAD_NAME); /* not the target's name: the profiler's thread */
	if (ch->early) {
		ch->cuda_on = !rc;
		send_msg(ch, ch->early_msg);
	} else if (ch->forked) {
		rc = 0; /* started by the fork: stop is all it waits for */
	} else {
		int fds[LI_MAX_FDS], nfds = 0;
		if (!recv_msg(ch, buf, sizeof(buf), fds, &nfds) || strncmp(buf, "start", 5)) {
			while (nfds > 0)
				close(fds[--nfds]);
			goto out; /* the collector went away before starting us */
		}
		cfg_parse(&ch->cfg, buf + 5);
		take_log_fds(&ch->cfg, fds, nfds);
		rc = start_sources(ch);
		close_log_fds(ch);
	}
	if (ch->py_on)
		li_pyhook_mark_own();
	wait_stop(ch);
	if (rc == 0)
		stop_and_report(ch);
	else
		final_msg(ch, "stopped kernels=0 memcpy=0 memset=0 api=0 sync=0 devices=0 dropped=0 "
			  "finalized=0 file=-");
	return NULL;
out:
	final_msg(ch, NULL);
	return NULL;
}

static int start_worker(struct li_chan *ch)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_store(&ch->state, LI_RUNNING);
	int rc = pthread_create(&ch->thread, NULL, worker, ch);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		atomic_store(&ch->state, LI_IDLE);
	return -rc;
}

/* A forked child inherits the attach channel but not its thread: CUDA it
 * may initialize itself (a worker forked before its parent's CUDA) never
 * starts under the parent's start, into the parent's log; launch mode's
 * own start is what it gets then. The parent's socket is closed; a child
 * that records Python calls gets a channel of its own (li_chan_forked). */
static void atfork_child(void)
{
	pthread_mutex_init(&li_cuda_mu, NULL);
	li_att.cuda_wait = 0;
	if (li_att.cfg.cupti_fd >= 0)
		close(li_att.cfg.cupti_fd);
	li_att.cfg.cupti_fd = -1;
	if (li_att.sock >= 0) /* the parent's: its end is the parent's alone */
		close(li_att.sock);
	li_att.sock = -1;
	li_att.cuda_on = li_att.py_on = li_att.forked = 0;
	atomic_store(&li_att.state, LI_IDLE);
	atomic_store(&li_unloadable, 1);
}

int li_chan_forked(int sock)
{
	if (atomic_load(&li_att.state) != LI_IDLE) {
		close(sock);
		return -EBUSY;
	}
	li_att.sock = sock;
	li_att.forked = li_att.py_on = 1;
	li_att.cuda_on = li_att.cuda_wait = 0;
	li_att.cfg.pid = (uint32_t)getpid();
	int rc = start_worker(&li_att);
	if (rc) {
		close(sock);
		li_att.sock = -1;
		li_att.forked = li_att.py_on = 0;
	}
	return rc;
}

/* Called by the injector on a borrowed thread: start the control thread. */
LI_API int llmt_inject_attach(int sock, uint64_t token)
{
	static int atfork_set;
	if (atomic_load(&li_att.state) == LI_DONE) { /* the last one ended unasked by fini */
		pthread_join(li_att.thread, NULL);
		atomic_store(&li_att.state, LI_IDLE);
	}
	if (atomic_load(&li_att.state) != LI_IDLE) {
		close(sock);
		return -EBUSY;
	}
	if (!atfork_set)
		atfork_set = pthread_atfork(NULL, NULL, atfork_child) == 0;
	li_att_token = token;
	li_att.sock = sock;
	li_att.cuda_on = li_att.cuda_wait = li_att.py_on = li_att.forked = 0;
	cfg_defaults(&li_att.cfg);
	int rc = start_worker(&li_att);
	if (rc) {
		close(sock);
		li_att.sock = -1;
	}
	return rc;
}

/* Called by the injector on the thread it holds stopped at the entry of
 * Py_RunMain (start key py_hold=1): install the profile function there,
 * before the program's first Python instruction. 0 when installed. */
LI_API int llmt_pyhook_held(void)
{
	return li_pyhook_held();
}

/* Called by the injector before dlclose: 1 if nothing the injector's start
 * began still runs and CUPTI holds no pointer into this library. A copy
 * whose launch channel runs stays: that one is CUDA's, and a program that
 * dropped CUDA's reference must not lose the library under it. */
LI_API int llmt_inject_fini(uint64_t token)
{
	if (token != li_att_token)
		return 0; /* not the copy that attach started: another image's */
	/* The collector closed its end before calling us: the control thread
	 * sees EOF and ends at once, but on a busy machine it may not have run
	 * yet. Wait for it (bounded; this borrowed thread holds no lock). */
	const struct timespec tick = { 0, 1000000 };
	for (int i = 0; i < LI_FINI_WAIT_MS && atomic_load(&li_att.state) == LI_RUNNING; i++)
		nanosleep(&tick, NULL);
	int st = atomic_load(&li_att.state);
	if (st == LI_RUNNING)
		return 0;
	if (st == LI_DONE) {
		pthread_join(li_att.thread, NULL);
		atomic_store(&li_att.state, LI_IDLE);
	}
	if (li_lch.early && (atomic_load(&li_lch.state) == LI_RUNNING || li_cupti_running()))
		return 0;
	return atomic_load(&li_unloadable);
}

/* Launch mode: the collector left a socket in the environment. Every CUDA
 * process of the launched tree that inherited it reports on it, each
 * message tagged with its pid; the collector stops each one. Without it,
 * or once the collector has closed its end (the profile is over, the
 * command runs on), nothing is recorded. */
static int launch_socket(void)
{
	const char *s = getenv("LLMT_INJECT_SOCK");
	if (!s)
		return -1;
	int fd = atoi(s), type = 0;
	socklen_t len = sizeof(type);
	if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_SEQPACKET)
		return -1;
	struct pollfd p = { .fd = fd, .events = 0 }; /* a hang-up is reported anyway */
	if (poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)))
		return -1;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

/* CUPTI's injection entry (CUDA_INJECTION64_PATH), called once from cuInit.
 * The collector may have loaded this very copy already (by the same path:
 * the dynamic loader gives CUDA the loaded one) for the Python hook, with
 * CUDA asked to wait for the driver: CUPTI starts here then, on that
 * start's terms and into its log, and says so on its socket. Else CUPTI
 * starts as launch mode has it, reporting on the inherited socket. */
LI_API int InitializeInjection(void)
{
	if (atomic_load(&li_att.state) == LI_RUNNING && cuda_wait_end(&li_att, 1))
		return 1;
	pthread_mutex_lock(&li_cuda_mu);
	int sock = li_lch.early || li_att.cuda_on ? -1 : launch_socket();
	if (sock < 0) {
		pthread_mutex_unlock(&li_cuda_mu);
		return 1;
	}
	struct li_config *c = &li_lch.cfg;
	cfg_defaults(c);
	c->launch = c->in_init = 1;
	const char *v;
	if ((v = getenv("LLMT_CUPTI_DIR")))
		snprintf(c->dir, sizeof(c->dir), "%s", v);
	if ((v = getenv("LLMT_HOST")))
		snprintf(c->host, sizeof(c->host), "%s", v);
	if ((v = getenv("LLMT_SESSION")))
		evlog_session_parse(v, c->session);
	if ((v = getenv("LLMT_CUPTI_RUNTIME")))
		c->runtime = atoi(v) != 0;
	if ((v = getenv("LLMT_CUPTI_START"))) { /* recording options, as in attach mode */
		char opts[512];
		snprintf(opts, sizeof(opts), "%s", v);
		cfg_parse(c, opts);
	}
	li_lch.early_rc = li_cupti_start(c, li_lch.early_msg, sizeof(li_lch.early_msg));
	li_lch.early = 1;
	li_lch.cuda_on = !li_lch.early_rc;
	pthread_mutex_unlock(&li_cuda_mu);
	if (!li_lch.early_rc)
		li_exit_at_exit();
	li_lch.sock = sock;
	if (start_worker(&li_lch)) {
		close(li_lch.sock);
		li_lch.sock = -1;
	}
	return 1;
}

/* The channel whose start turned CUPTI on (NULL: none). */
static struct li_chan *cuda_owner(void)
{
	return li_lch.cuda_on ? &li_lch : li_att.cuda_on ? &li_att : NULL;
}

static void li_exit_cupti(void)
{
	if (li_cupti_running()) {
		struct li_stats st;
		char msg[512];
		li_cupti_stop(&st, 0, 0);
		stats_msg(&st, msg, sizeof(msg));
		strncat(msg, " exiting=1", sizeof(msg) - strlen(msg) - 1);
		if (cuda_owner())
			send_msg(cuda_owner(), msg);
	}
}

/*
 * A library's destructor runs after every atexit handler (ld.so registers
 * its _dl_fini first, so it runs last), when CUDA has torn itself down:
 * CUPTI's flush there killed every launched torch job on the H200 at its
 * exit (SIGSEGV). Registered once CUDA is up (InitializeInjection, or a
 * start that records kernels), this handler runs before the handlers CUDA
 * registered earlier, as NVIDIA's injection sample does. On dlclose glibc
 * runs it too, when there is nothing left to stop.
 */
static void li_exit_at_exit(void)
{
	static atomic_int registered;
	if (!atomic_exchange(&registered, 1))
		atexit(li_exit_cupti);
}

/* Process exit (or dlclose): publish what is still recorded. */
__attribute__((destructor)) static void li_exit(void)
{
	if (li_pyhook_running()) {
		char pm[512];
		li_pyhook_stop(1, pm, sizeof(pm));
		send_msg(&li_att, pm);
	}
	li_exit_cupti();
}
