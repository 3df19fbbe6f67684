// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"

static bool is_exec_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* PATH lookup here, in the collector, so the child makes exactly one
 * execve (as strace would show it) instead of one per PATH entry. */
static int resolve(const char *cmd, char *out, size_t sz)
{
	const char *path = getenv("PATH"), *p, *e;

	if (strchr(cmd, '/')) {
		snprintf(out, sz, "%s", cmd);
		return is_exec_file(out) ? 0 : -1;
	}
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *e ? e + 1 : e) {
		e = strchr(p, ':');
		if (!e)
			e = p + strlen(p);
		if ((size_t)snprintf(out, sz, "%.*s%s%s", (int)(e - p), p, e == p ? "" : "/", cmd) >= sz)
			continue;
		if (is_exec_file(out))
			return 0;
	}
	return -1;
}

/* What the keeper tells the collector, one write each (< PIPE_BUF). */
struct keeper_msg {
	char kind;          /* 'S': ready, waiting before its execve; 'X': ended */
	pid_t pid;
	int status;         /* wait status, for 'X' */
	char why[240];      /* 'X' before 'S': why it could not start, if it said */
};

static void keeper_say(int fd, char kind, pid_t pid, int status, const char *why)
{
	struct keeper_msg m = { .kind = kind, .pid = pid, .status = status };
	ssize_t n;

	snprintf(m.why, sizeof(m.why), "%s", why ? why : "");
	do
		n = write(fd, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
}

/* The command's failure before its stop: one line, to the keeper, which
 * passes it on to the collector. */
static void command_fail(int efd, const char *why)
{
	ssize_t n;

	do
		n = write(efd, why, strlen(why));
	while (n < 0 && errno == EINTR);
	_exit(126);
}

/*
 * The command, forked by the keeper: as the user it runs as, it says it is
 * ready (the 'S' report, on the keeper's pipe to the collector) and waits
 * in a read of its release socket, whose other end only the collector
 * holds: a byte lets it exec, end of file (the collector gone, however it
 * ended, whatever became of the keeper) ends it before its execve. So
 * nothing can leave it waiting. Its exec pipe (close-on-exec) tells the keeper
 * that the execve happened. No system call between the wait and the
 * execve: the profile's first event is the execve.
 */
static void command_main(const char *path, char *const argv[], const struct lt_runas *as, int efd,
			 int wfd, int rfd, const sigset_t *mask)
{
	char why[240], go = 0;
	ssize_t n;

	sigprocmask(SIG_SETMASK, mask, NULL); /* the collector's own */
	if (as && lt_runas_apply(as, why, sizeof(why)))
		command_fail(efd, why);
	if (as && access(path, X_OK)) {
		snprintf(why, sizeof(why), "user %.32s cannot run %.120s: %.40s", as->name, path,
			 strerror(errno));
		command_fail(efd, why);
	}
	keeper_say(wfd, 'S', getpid(), 0, NULL);
	do /* wait until the collector has attached */
		n = read(rfd, &go, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		command_fail(efd, "the collector ended before it let the command run");
	execv(path, argv);
	fprintf(stderr, "llmtracker: cannot run %s: %s\n", path, strerror(errno));
	_exit(127);
}

/* The keeper's view of the command and of the collector. */
struct keeper {
	pid_t cmd, collector;
	int report_fd;      /* to the collector */
	int exec_fd;        /* the command's exec pipe, -1 at its end */
	int chld_fd;        /* SIGCHLD (signalfd) */
	int collector_fd;   /* pidfd of the collector; -1: poll getppid() */
	bool exec_done;
	char why[240];      /* what the command said before it ended */
	size_t why_len;
};

/* What the command wrote on its exec pipe (a reason it could not start),
 * up to its end: the execve closed it, or the command ended. */
static void keeper_read_exec(struct keeper *k, bool block)
{
	char buf[256];
	ssize_t n;

	if (k->exec_fd < 0)
		return;
	fcntl(k->exec_fd, F_SETFL, block ? 0 : O_NONBLOCK);
	while ((n = read(k->exec_fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
		size_t room = sizeof(k->why) - 1 - k->why_len, take = n > 0 ? (size_t)n : 0;

		take = take < room ? take : room;
		memcpy(k->why + k->why_len, buf, take);
		k->why_len += take;
	}
	if (n < 0 && errno == EAGAIN)
		return;
	close(k->exec_fd);
	k->exec_fd = -1;
	k->exec_done = k->why_len == 0;
}

/* Collect the command's end. True once it has ended (reported). */
static bool keeper_reap(struct keeper *k)
{
	struct signalfd_siginfo si;
	int st;
	pid_t r;

	while (read(k->chld_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	while ((r = waitpid(k->cmd, &st, WNOHANG)) > 0 || (r < 0 && errno == EINTR)) {
		if (r < 0)
			continue;
		keeper_read_exec(k, true);
		keeper_say(k->report_fd, 'X', k->cmd, st, k->why);
		return true;
	}
	return r < 0; /* no such child: nothing left to wait for */
}

static bool collector_gone(const struct keeper *k, const struct pollfd *pfd)
{
	return k->collector_fd >= 0 ? pfd->revents != 0 : getppid() != k->collector;
}

/*
 * The collector is gone (killed, or ended while the command still runs): a
 * command that has not exec'd never started its real work and nobody will
 * release it, so it is killed (it would end by itself at its release
 * socket's end of file); one that has exec'd is the user's job and goes on
 * (its parent becomes init). Either way the keeper ends.
 */
static void keeper_orphaned(struct keeper *k)
{
	int st;

	keeper_read_exec(k, false);
	if (k->exec_done)
		return;
	kill(k->cmd, SIGKILL);
	while (waitpid(k->cmd, &st, 0) < 0 && errno == EINTR)
		;
}

static void keeper_loop(struct keeper *k)
{
	if (keeper_reap(k))
		return;
	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = k->collector_fd, .events = POLLIN },
			{ .fd = k->chld_fd, .events = POLLIN },
			{ .fd = k->exec_fd, .events = POLLIN },
		};
		/* without a pidfd (an old kernel), look at the parent 5 times a second */
		int rc = poll(pfd, 3, k->collector_fd >= 0 ? -1 : 200);

		if (rc < 0 && errno != EINTR)
			_exit(126);
		if (pfd[2].revents)
			keeper_read_exec(k, false);
		if (keeper_reap(k))
			return;
		if (collector_gone(k, &pfd[0])) {
			keeper_orphaned(k);
			return;
		}
	}
}

/* The collector, watched through a pidfd: readable once every one of its
 * threads has exited, so after a tracer thread of ours let go of the
 * command. A parent already gone (getppid() changed) is seen at once. */
static int watch_collector(pid_t collector)
{
	int fd = (int)syscall(SYS_pidfd_open, collector, 0);

	if (fd >= 0 && getppid() != collector) {
		close(fd);
		return open("/dev/null", O_RDONLY | O_CLOEXEC); /* always readable: gone */
	}
	return fd;
}

/* Our fds at 3 (reports) and 4 (the exec pipe); none of the collector's. */
static void keeper_fds(int *wfd, int *efd)
{
	int w = fcntl(*wfd, F_DUPFD_CLOEXEC, 10), e = fcntl(*efd, F_DUPFD_CLOEXEC, 10);

	if (w < 0 || e < 0 || dup2(w, 3) < 0 || dup2(e, 4) < 0)
		_exit(126);
	close_range(5, ~0u, 0);
	*wfd = 3;
	*efd = 4;
}

/*
 * The keeper, the command's parent. The command is not our own child
 * because the injector's threads ptrace it: a tracer's thread group sees its
 * tracee's ptrace stops in any wait on it, so the parent's wait took the
 * stops the injector waited for (the command was left stopped at a trap and
 * read as ended, 0x57f or 0xb7f). The keeper waits for the command and
 * reports its end through a pipe (the command itself says there that it
 * is ready, before it waits for its release); it holds none of our files,
 * and it ends with the collector (keeper_orphaned() says what then
 * becomes of the command).
 */
static void keeper_main(const char *path, char *const argv[], const struct lt_runas *as, int wfd,
			const int rel[2], pid_t collector)
{
	struct keeper k = { .collector = collector, .exec_fd = -1 };
	sigset_t chld, old;
	int ep[2];

	close(rel[1]); /* the collector's alone */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old); /* none lost before the signalfd */
	if (pipe2(ep, O_CLOEXEC))
		_exit(126);
	k.cmd = fork();
	if (k.cmd == 0) {
		close(ep[0]);
		command_main(path, argv, as, ep[1], wfd, rel[0], &old);
	}
	if (k.cmd < 0)
		_exit(126);
	close(ep[1]);
	close(rel[0]);
	/* After the fork: the command keeps our signal dispositions. While the
	 * collector lives, the keeper outlives a terminal's Ctrl-C or a kill of
	 * the process group, to report; it ends with the collector. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	/* Not auto-reaped, whatever we inherited. This discards a pending
	 * SIGCHLD (POSIX), so the loop first looks without waiting for one. */
	signal(SIGCHLD, SIG_DFL);
	keeper_fds(&wfd, &ep[0]);
	k.report_fd = wfd;
	k.exec_fd = ep[0];
	k.chld_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	k.collector_fd = watch_collector(collector);
	if (k.chld_fd < 0)
		_exit(126);
	keeper_loop(&k);
	_exit(0);
}

/* One message, or 0 at end of file; blocking or not as the fd is. */
static int keeper_read(struct lt_launch *l, struct keeper_msg *m)
{
	ssize_t n;
	do
		n = read(l->keeper_fd, m, sizeof(*m));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(*m))
		return 1;
	return n < 0 && errno == EAGAIN ? -EAGAIN : 0;
}

static void release_close(struct lt_launch *l)
{
	if (l->release_fd > 0)
		close(l->release_fd);
	l->release_fd = -1;
}

static void keeper_close(struct lt_launch *l)
{
	if (l->keeper_fd > 0)
		close(l->keeper_fd);
	l->keeper_fd = -1;
	if (l->keeper > 0)
		while (waitpid(l->keeper, NULL, 0) < 0 && errno == EINTR)
			;
	l->keeper = 0;
}

int lt_launch_start(struct lt_launch *l, char *const argv[], const struct lt_runas *as, char *err,
		    size_t errsz)
{
	pid_t collector = getpid();
	char *path = l->path;
	struct keeper_msg m;
	int p[2], rel[2];

	memset(l, 0, sizeof(*l));
	l->keeper_fd = l->release_fd = -1;
	if (resolve(argv[0], path, sizeof(l->path))) {
		snprintf(err, errsz, "cannot run '%s': no such executable file (searched PATH)", argv[0]);
		return -1;
	}
	/* (the release's end a socket: sent to without SIGPIPE) */
	if (pipe2(p, O_CLOEXEC) ||
	    (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rel) && (close(p[0]), close(p[1]), 1))) {
		snprintf(err, errsz, "cannot start '%s': pipe: %s", argv[0], strerror(errno));
		return -1;
	}
	l->keeper = fork();
	if (l->keeper == 0) {
		close(p[0]);
		keeper_main(path, argv, as, p[1], rel, collector);
	}
	close(p[1]);
	close(rel[0]);
	l->keeper_fd = p[0];
	l->release_fd = rel[1];
	if (l->keeper < 0) {
		snprintf(err, errsz, "cannot start '%s': fork: %s", argv[0], strerror(errno));
		l->keeper = 0;
		release_close(l);
		keeper_close(l);
		return -1;
	}
	if (keeper_read(l, &m) != 1) {
		snprintf(err, errsz, "cannot start '%s': fork failed", argv[0]);
		release_close(l);
		keeper_close(l);
		return -1;
	}
	l->pid = m.pid;
	if (m.kind != 'S') {
		m.why[sizeof(m.why) - 1] = 0;
		if (m.why[0])
			snprintf(err, errsz, "cannot start '%s': %s", argv[0], m.why);
		else
			snprintf(err, errsz, "cannot start '%s': it ended before it could be attached", argv[0]);
		l->reaped = true;
		l->status = m.status;
		release_close(l);
		keeper_close(l);
		return -1;
	}
	fcntl(l->keeper_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

int lt_launch_release(struct lt_launch *l)
{
	ssize_t n;

	if (!l->pid || l->released)
		return 0;
	l->released = true;
	do
		n = send(l->release_fd, "g", 1, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	release_close(l);
	return n == 1 ? 0 : -EPIPE; /* EPIPE: it is gone */
}

bool lt_launch_reap(struct lt_launch *l, bool block)
{
	struct keeper_msg m;
	int rc;

	if (!l->pid || l->reaped)
		return l->reaped;
	if (block)
		fcntl(l->keeper_fd, F_SETFL, 0);
	while ((rc = keeper_read(l, &m)) == 1)
		if (m.kind == 'X')
			break;
	if (rc == -EAGAIN)
		return false;
	l->reaped = true;
	l->status = rc == 1 ? m.status : -1; /* the keeper is gone: no status */
	keeper_close(l);
	return true;
}

void lt_launch_abort(struct lt_launch *l)
{
	/* Once released it is the user's program running: leave it be. */
	if (!l->pid || l->reaped || l->released)
		return;
	kill(l->pid, SIGKILL);
	release_close(l);
	lt_launch_reap(l, true);
}

const char *lt_launch_status_str(const struct lt_launch *l, char *buf, size_t sz)
{
	if (!l->reaped)
		snprintf(buf, sz, "still running (pid %d), no longer profiled", (int)l->pid);
	else if (l->status < 0)
		snprintf(buf, sz, "status unknown (its keeper process was killed)");
	else if (WIFEXITED(l->status))
		snprintf(buf, sz, "exited with status %d", WEXITSTATUS(l->status));
	else if (WIFSIGNALED(l->status))
		snprintf(buf, sz, "killed by signal %d (%s)", WTERMSIG(l->status), strsignal(WTERMSIG(l->status)));
	else
		snprintf(buf, sz, "ended (wait status %#x)", l->status);
	return buf;
}

bool lt_launch_is_own_fork(int pid)
{
	char a[64], self[PATH_MAX], other[PATH_MAX];
	ssize_t n, m;

	snprintf(a, sizeof(a), "/proc/%d/exe", pid);
	n = readlink(a, other, sizeof(other) - 1);
	m = readlink("/proc/self/exe", self, sizeof(self) - 1);
	return n > 0 && n == m && !memcmp(self, other, (size_t)n);
}
