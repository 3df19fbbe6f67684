// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
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

int lt_launch_start(struct lt_launch *l, char *const argv[], char *err, size_t errsz)
{
	char *path = l->path;
	int st;

	memset(l, 0, sizeof(*l));
	if (resolve(argv[0], path, sizeof(l->path))) {
		snprintf(err, errsz, "cannot run '%s': no such executable file (searched PATH)", argv[0]);
		return -1;
	}
	l->pid = fork();
	if (l->pid < 0) {
		snprintf(err, errsz, "cannot start '%s': fork: %s", argv[0], strerror(errno));
		l->pid = 0;
		return -1;
	}
	if (l->pid == 0) {
		/* Wait, stopped, until the collector has attached. */
		raise(SIGSTOP);
		execv(path, argv);
		fprintf(stderr, "llmtracker: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	while (waitpid(l->pid, &st, WUNTRACED) < 0)
		if (errno != EINTR) {
			snprintf(err, errsz, "cannot start '%s': waitpid: %s", argv[0], strerror(errno));
			lt_launch_abort(l);
			return -1;
		}
	if (!WIFSTOPPED(st)) {
		snprintf(err, errsz, "cannot start '%s': it ended before it could be attached", argv[0]);
		l->reaped = true;
		l->status = st;
		return -1;
	}
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
	int st;
	pid_t r;

	if (!l->pid || l->reaped)
		return l->reaped;
	do
		r = waitpid(l->pid, &st, block ? 0 : WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == l->pid) {
		l->reaped = true;
		l->status = st;
	} else if (r < 0) {
		l->reaped = true; /* not our child any more: nothing to wait for */
		l->status = -1;
	}
	return l->reaped;
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
