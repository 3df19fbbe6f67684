// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	char kind;          /* 'S': stopped before its execve; 'X': ended */
	pid_t pid;
	int status;         /* wait status, for 'X' */
};

static void keeper_say(int fd, char kind, pid_t pid, int status)
{
	struct keeper_msg m = { kind, pid, status };
	ssize_t n;
	do
		n = write(fd, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
}

/*
 * The keeper, the command's parent. The command is not our own child
 * because the injector's threads ptrace it: a tracer's thread group sees its
 * tracee's ptrace stops in any wait on it, so the parent's wait took the
 * stops the injector waited for (the command was left stopped at a trap and
 * read as ended, 0x57f or 0xb7f). The keeper waits for the command and
 * reports its stop and its end through a pipe; it holds none of our files.
 */
static void keeper_main(const char *path, char *const argv[], int wfd)
{
	int st;
	pid_t cmd = fork();

	if (cmd == 0) {
		close(wfd);
		raise(SIGSTOP); /* wait, stopped, until the collector has attached */
		execv(path, argv);
		fprintf(stderr, "llmtracker: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	if (cmd < 0)
		_exit(126);
	/* After the fork: the command keeps our signal dispositions. The keeper
	 * outlives a terminal's Ctrl-C or a kill of the process group, to report. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (dup2(wfd, 3) < 0)
		_exit(126);
	close_range(4, ~0u, 0);
	while (waitpid(cmd, &st, WUNTRACED) < 0)
		if (errno != EINTR)
			_exit(126);
	keeper_say(3, WIFSTOPPED(st) ? 'S' : 'X', cmd, st);
	while (WIFSTOPPED(st))
		while (waitpid(cmd, &st, 0) < 0)
			if (errno != EINTR)
				_exit(126);
	if (!WIFSTOPPED(st))
		keeper_say(3, 'X', cmd, st);
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

int lt_launch_start(struct lt_launch *l, char *const argv[], char *err, size_t errsz)
{
	char *path = l->path;
	struct keeper_msg m;
	int p[2];

	memset(l, 0, sizeof(*l));
	l->keeper_fd = -1;
	if (resolve(argv[0], path, sizeof(l->path))) {
		snprintf(err, errsz, "cannot run '%s': no such executable file (searched PATH)", argv[0]);
		return -1;
	}
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, errsz, "cannot start '%s': pipe: %s", argv[0], strerror(errno));
		return -1;
	}
	l->keeper = fork();
	if (l->keeper == 0) {
		close(p[0]);
		keeper_main(path, argv, p[1]);
	}
	close(p[1]);
	l->keeper_fd = p[0];
	if (l->keeper < 0) {
		snprintf(err, errsz, "cannot start '%s': fork: %s", argv[0], strerror(errno));
		l->keeper = 0;
		keeper_close(l);
		return -1;
	}
	if (keeper_read(l, &m) != 1) {
		snprintf(err, errsz, "cannot start '%s': fork failed", argv[0]);
		keeper_close(l);
		return -1;
	}
	l->pid = m.pid;
	if (m.kind != 'S') {
		snprintf(err, errsz, "cannot start '%s': it ended before it could be attached", argv[0]);
		l->reaped = true;
		l->status = m.status;
		keeper_close(l);
		return -1;
	}
	fcntl(l->keeper_fd, F_SETFL, O_NONBLOCK);
	return 0;
}

int lt_launch_release(struct lt_launch *l)
{
	if (!l->pid || l->released)
		return 0;
	l->released = true;
	return kill(l->pid, SIGCONT) ? -errno : 0;
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
	lt_launch_reap(l, true);
}

const char *lt_launch_status_str(const struct lt_launch *l, char *buf, size_t sz)
{
	if (!l->reaped || l->status < 0)
		snprintf(buf, sz, "still running");
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
