// SPDX-License-Identifier: Apache-2.0
/*
 * The syscall source (-t syscall): bpf/syscall.bpf.c records -> EV_SYSCALL.
 * Calls still in flight when profiling ends (a thread blocked in read or
 * epoll_wait) are written at finish with their duration so far and
 * ret = -EINPROGRESS, so a thread stuck in the kernel is visible.
 */
#include <asm/unistd.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/syscall.skel.h"
#include "bpf/syscall.h"
#include "collector/session/session.h"
#include "collector/target/targets.h"

static int sys_start(struct lt_session *s, void **state)
{
	struct syscall_bpf *skel = syscall_bpf__open();
	int err;

	*state = skel;
	if (!skel)
		return lt_session_errorf(s, "cannot open the syscall BPF object: %s", strerror(errno));
	skel->rodata->nr_exit = __NR_exit;
#ifdef __NR_uretprobe
	skel->rodata->nr_uretprobe = __NR_uretprobe;
#elif defined(__x86_64__)
	skel->rodata->nr_uretprobe = 335; /* headers older than Linux 6.11 */
#endif
	skel->rodata->nr_exit_group = __NR_exit_group;
	if (lt_session_share_maps(s, skel->obj))
		return -1;
	/* Wake the reader when the buffer is 1/8 full; otherwise it polls. */
	skel->rodata->wakeup_bytes = bpf_map__max_entries(skel->maps.events) / 8;
	err = syscall_bpf__load(skel);
	if (err)
		return lt_session_errorf(s, "cannot load the syscall BPF programs: %s", strerror(-err));
	err = syscall_bpf__attach(skel);
	if (err)
		return lt_session_errorf(s, "cannot attach to raw tracepoints sys_enter/sys_exit: %s",
					 strerror(-err));
	return 0;
}

static int sys_handle(struct lt_session *s, void *state, const struct lt_rec_hdr *h, size_t size)
{
	const struct lt_rec_syscall *r = (const void *)h;
	struct evlog_event ev = { .type = EV_SYSCALL, .ts = h->ts, .pid = h->pid, .tid = h->tid };

	(void)state;
	if (size < sizeof(*r))
		return 0;
	ev.u.syscall.nr = r->nr;
	ev.u.syscall.dur = r->dur;
	ev.u.syscall.ret = r->ret;
	ev.u.syscall.arg0 = r->arg0;
	ev.u.syscall.arg1 = r->arg1;
	ev.u.syscall.arg2 = r->arg2;
	return lt_session_emit(s, &ev);
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9+: a pidfd for one thread */
#endif

/* The call in flight of one thread, looked up through a pidfd (task
 * storage is keyed by pidfd from user space). */
static void emit_in_flight(struct lt_session *s, int map_fd, int pid, int tid, uint64_t now)
{
	struct evlog_event ev = { .type = EV_SYSCALL, .pid = pid, .tid = tid };
	struct lt_sys_pending p;
	int pfd = syscall(SYS_pidfd_open, tid, tid == pid ? 0 : PIDFD_THREAD);

	if (pfd < 0)
		return;
	if (bpf_map_lookup_elem(map_fd, &pfd, &p) == 0 && p.ts && p.ts <= now) {
		ev.ts = p.ts;
		ev.u.syscall.nr = p.nr;
		ev.u.syscall.dur = now - p.ts;
		ev.u.syscall.ret = -EINPROGRESS;
		ev.u.syscall.arg0 = p.arg0;
		ev.u.syscall.arg1 = p.arg1;
		ev.u.syscall.arg2 = p.arg2;
		lt_session_emit(s, &ev);
	}
	close(pfd);
}

static void in_flight_of(struct lt_session *s, int map_fd, int pid, uint64_t now)
{
	char path[64];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (!(d = opendir(path)))
		return;
	while ((de = readdir(d)))
		if (atoi(de->d_name) > 0)
			emit_in_flight(s, map_fd, pid, atoi(de->d_name), now);
	closedir(d);
}

/* Write the calls still in flight at the end (a thread blocked in read). */
static int sys_finish(struct lt_session *s, void *state)
{
	struct syscall_bpf *skel = state;
	int fd = bpf_map__fd(skel->maps.lt_sys_pending);
	uint64_t now = lt_now_ns();
	uint32_t key, next;
	void *prev = NULL;

	for (int guard = 0; guard < 2 * 65536 && bpf_map_get_next_key(s->targets_fd, prev, &next) == 0;
	     guard++) {
		key = next;
		prev = &key;
		in_flight_of(s, fd, (int)key, now);
	}
	return 0;
}

static void sys_quiesce(struct lt_session *s, void *state)
{
	(void)s;
	syscall_bpf__detach(state);
}

static void sys_stop(struct lt_session *s, void *state)
{
	(void)s;
	syscall_bpf__destroy(state);
}

const struct lt_source lt_source_syscall = {
	.kind_lo = LT_REC_SYSCALL,
	.kind_hi = 31,
	.start = sys_start,
	.handle = sys_handle,
	.quiesce = sys_quiesce,
	.finish = sys_finish,
	.stop = sys_stop,
};
