// SPDX-License-Identifier: Apache-2.0
#include "inject_gate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GATE_MAX_THREADS 4096
#define PF_EXITING_FLAG 0x4 /* include/linux/sched.h PF_EXITING */

/* One small /proc file, bounded, NUL-terminated. */
static int gate_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	return 0;
}

/* State letter and flags of one task from its stat (after the comm, which
 * may hold anything, ')' included). */
static int gate_stat(const char *dir, char *state, unsigned long *flags)
{
	char path[96], buf[1024];
	snprintf(path, sizeof(path), "%s/stat", dir);
	if (gate_read(path, buf, sizeof(buf)))
		return -ESRCH;
	const char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -ESRCH;
	*state = p[2];
	/* fields after the state: ppid pgrp session tty_nr tpgid flags */
	*flags = 0;
	sscanf(p + 3, "%*d %*d %*d %*d %*d %lu", flags);
	return 0;
}

static int gate_tracer(const char *dir)
{
	char path[96], buf[2048];
	snprintf(path, sizeof(path), "%s/status", dir);
	if (gate_read(path, buf, sizeof(buf)))
		return 0;
	const char *p = strstr(buf, "\nTracerPid:");
	return p ? atoi(p + 11) : 0;
}

/* One task; tid 0 is the process itself. `seized`: a thread we trace
 * ourselves, whose tracing stop is ours. */
static int gate_task(int pid, int tid, int seized, char *why, size_t whysz)
{
	char dir[64], st;
	unsigned long flags;
	if (tid)
		snprintf(dir, sizeof(dir), "/proc/%d/task/%d", pid, tid);
	else
		snprintf(dir, sizeof(dir), "/proc/%d", pid);
	if (gate_stat(dir, &st, &flags))
		return tid ? 0 : (snprintf(why, whysz, "process %d not found", pid), -ESRCH);
	if (st == 'Z' || st == 'X')
		return snprintf(why, whysz, "process %d is a zombie (state %c): not injected", pid, st), -ESRCH;
	if (flags & PF_EXITING_FLAG)
		return snprintf(why, whysz, "process %d is exiting: not injected", pid), -ESRCH;
	if (seized)
		return 0;
	int tracer = gate_tracer(dir);
	if (tracer && tracer != gettid())
		return snprintf(why, whysz, "process %d is traced by pid %d (a debugger, strace or "
				"another profiler): not injected; it is left as it was", pid, tracer), -EAGAIN;
	if (st == 'T' || st == 't')
		return snprintf(why, whysz, "process %d is stopped (state %c: SIGSTOP or a "
				"debugger): not injected; it is left as it was, stopped", pid, st), -EAGAIN;
	return 0;
}

int lt_inj_gate(int pid, int ours, char *why, size_t whysz)
{
	char path[64];
	int rc = gate_task(pid, 0, ours == pid, why, whysz);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return snprintf(why, whysz, "process %d not found", pid), -ESRCH;
	struct dirent *de;
	for (int n = 0; !rc && n < GATE_MAX_THREADS && (de = readdir(d)); n++) {
		int tid = atoi(de->d_name);
		if (tid > 0)
			rc = gate_task(pid, tid, tid == ours, why, whysz);
	}
	closedir(d);
	return rc;
}
