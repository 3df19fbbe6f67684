// SPDX-License-Identifier: Apache-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "collector/sources/rank.h"
#include "targets.h"
#include "tfile.h"
#include "collector/session/clock.h"

uint64_t lt_now_ns(void)
{
	return lt_mono_ns();
}

/* Read a small /proc file into buf (NUL-terminated). Returns bytes or -1. */
static ssize_t read_small(const char *path, char *buf, size_t sz)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = 0;
	if (fd < 0)
		return -1;
	n = read(fd, buf, sz - 1);
	close(fd);
	if (n < 0) {
		buf[0] = 0;
		return -1;
	}
	buf[n] = 0;
	return n;
}

/* State letter and ppid from /proc/<pid>/stat; the comm field may hold
 * spaces and parentheses, so parse from the last ')'. */
static int read_stat(int pid, char *state, int *ppid)
{
	char buf[1024];
	const char *p = lt_tf_proc_stat(pid, buf, sizeof(buf));

	return p && sscanf(p, " %c %d", state, ppid) == 2 ? 0 : -1;
}

uint64_t lt_proc_read_start(int pid)
{
	char buf[1024];
	const char *p = lt_tf_proc_stat(pid, buf, sizeof(buf));
	unsigned long long start;

	if (!p)
		return 0;
	/* fields 3..21 after the comm, then starttime (22) */
	if (sscanf(p, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &start) != 1)
		return 0;
	return start;
}

bool lt_proc_alive(int pid)
{
	char st;
	int ppid;

	if (read_stat(pid, &st, &ppid))
		return false;
	return st != 'Z' && st != 'X' && st != 'x';
}

int lt_proc_read_ppid(int pid)
{
	char st;
	int ppid;

	return read_stat(pid, &st, &ppid) ? 0 : ppid;
}

int lt_proc_read_tgid(int pid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (read_small(path, buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nTgid:")))
		return 0;
	return atoi(p + 6);
}

uint32_t lt_proc_read_ns_tid(int pid, int tid)
{
	char path[64], buf[4096], *p, *end;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (read_small(path, buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nNSpid:")))
		return 0;
	if ((end = strchr(p + 1, '\n')))
		*end = 0;
	p = strrchr(p, '\t');
	return p ? (uint32_t)strtoul(p + 1, NULL, 10) : 0;
}

int lt_proc_read_comm(int pid, int tid, char *buf, size_t sz)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	n = read_small(path, buf, sz);
	if (n <= 0)
		return -1;
	if (buf[n - 1] == '\n')
		buf[n - 1] = 0;
	return 0;
}

int lt_proc_read_cmdline(int pid, char *buf, size_t sz)
{
	char path[64];
	ssize_t n, i;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = read_small(path, buf, sz);
	if (n < 0)
		return -1;
	while (n > 0 && buf[n - 1] == 0)
		n--;
	for (i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	buf[n] = 0;
	return 0;
}

int lt_proc_read_exe(int pid, char *buf, size_t sz)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, buf, sz - 1);
	if (n < 0) {
		buf[0] = 0;
		return -1;
	}
	buf[n] = 0;
	return 0;
}

int lt_targets_emit_process(struct lt_session *s, uint64_t ts, int pid, int tid, int ppid,
			    const char *comm, bool is_exec)
{
	char cmdline[4096], exe[4096];
	struct evlog_event ev = { .type = EV_PROCESS, .ts = ts, .pid = pid, .tid = tid };

	lt_proc_read_cmdline(pid, cmdline, sizeof(cmdline));
	lt_proc_read_exe(pid, exe, sizeof(exe));
	ev.u.process.ppid = ppid;
	ev.u.process.name = evlog_s(comm);
	ev.u.process.cmdline = evlog_s(cmdline);
	ev.u.process.exe = evlog_s(exe);
	ev.u.process.is_exec = is_exec;
	int rc = lt_session_emit(s, &ev);

	lt_rank_emit(s, ts, pid);
	return rc;
}

static int emit_thread(struct lt_session *s, uint64_t ts, int pid, int tid, const char *name)
{
	struct evlog_event ev = { .type = EV_THREAD, .ts = ts, .pid = pid, .tid = tid };

	ev.u.thread.name = evlog_s(name);
	return lt_session_emit(s, &ev);
}

int lt_targets_emit_ns_tid(struct lt_session *s, uint64_t ts, int pid, int tid, uint32_t ns_tid)
{
	struct evlog_event ev = { .type = EV_MARKER, .ts = ts, .pid = pid, .tid = tid };

	if (!ns_tid || ns_tid == (uint32_t)tid)
		return 0;
	ev.u.marker.kind = EVLOG_MARK_NS_TID;
	ev.u.marker.value = ns_tid;
	return lt_session_emit(s, &ev);
}

int lt_targets_snapshot(struct lt_session *s, int pid)
{
	char dirpath[64], comm[64];
	uint64_t ts = lt_now_ns();
	struct dirent *de;
	DIR *d;

	if (lt_proc_read_comm(pid, pid, comm, sizeof(comm)))
		return -ESRCH;
	lt_targets_emit_process(s, ts, pid, pid, lt_proc_read_ppid(pid), comm, false);
	snprintf(dirpath, sizeof(dirpath), "/proc/%d/task", pid);
	d = opendir(dirpath);
	if (!d)
		return -ESRCH;
	while ((de = readdir(d))) {
		int tid = atoi(de->d_name);

		if (tid <= 0 || lt_proc_read_comm(pid, tid, comm, sizeof(comm)))
			continue;
		emit_thread(s, ts, pid, tid, comm);
		lt_targets_emit_ns_tid(s, ts, pid, tid, lt_proc_read_ns_tid(pid, tid));
	}
	closedir(d);
	return 0;
}

struct pp { int pid, ppid; };

static int read_all_ppids(struct pp **out)
{
	struct dirent *de;
	struct pp *v = NULL;
	int n = 0, cap = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		int pid = atoi(de->d_name), ppid;
		char st;

		if (pid <= 0 || read_stat(pid, &st, &ppid) || st == 'Z')
			continue;
		if (n == cap) {
			struct pp *nv = realloc(v, (cap = cap ? cap * 2 : 1024) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		v[n].pid = pid;
		v[n++].ppid = ppid;
	}
	closedir(d);
	*out = v;
	return n;
}

static bool in_set(const int *v, int n, int x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

int lt_targets_descendants(const int *roots, int n_roots, int *out, int max)
{
	struct pp *all = NULL;
	int n_all = read_all_ppids(&all), n = 0;
	bool grew = true;

	/* Repeat until no new process joins: /proc order is not tree order. */
	while (grew && n < max) {
		grew = false;
		for (int i = 0; i < n_all && n < max; i++) {
			if (in_set(roots, n_roots, all[i].pid) || in_set(out, n, all[i].pid))
				continue;
			if (in_set(roots, n_roots, all[i].ppid) || in_set(out, n, all[i].ppid)) {
				out[n++] = all[i].pid;
				grew = true;
			}
		}
	}
	free(all);
	return n;
}

int lt_targets_sweep(struct lt_session *s)
{
	uint32_t key, next, dead[256];
	int alive = 0, n_dead = 0;
	void *prev = NULL;

	/* Bounded: BPF deletes exiting targets meanwhile, and a vanished key
	 * makes get_next_key start over. */
	for (int guard = 0; guard < 2 * 65536 && bpf_map_get_next_key(s->targets_fd, prev, &next) == 0;
	     guard++) {
		key = next;
		prev = &key;
		if (lt_proc_alive((int)key))
			alive++;
		else if (n_dead < 256)
			dead[n_dead++] = key;
	}
	for (int i = 0; i < n_dead; i++) {
		LT_INFO(1, "target %u is gone", dead[i]);
		bpf_map_delete_elem(s->targets_fd, &dead[i]);
	}
	return alive;
}
