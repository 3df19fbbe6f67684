// SPDX-License-Identifier: Apache-2.0
/*
 * The proc source (always on): process and thread lifecycle of the targets
 * from bpf/proc.bpf.c, as EV_PROCESS / EV_THREAD / EV_THREAD_EXIT /
 * EV_PROCESS_EXIT. New processes (followed children) and exec'd images are
 * announced to the other sources, which may attach per-process probes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "bpf/proc.skel.h"
#include "bpf/proc.h"
#include "collector/session/profile.h"
#include "rank.h"
#include "collector/target/targets.h"

static int proc_start(struct lt_session *s, void **state)
{
	struct proc_bpf *skel = proc_bpf__open();
	int err;

	*state = skel;
	if (!skel)
		return lt_session_errorf(s, "cannot open the proc BPF object: %s", strerror(errno));
	skel->rodata->follow_children = s->opt.follow_children;
	if (lt_session_share_maps(s, skel->obj))
		return -1;
	err = proc_bpf__load(skel);
	if (err)
		return lt_session_errorf(s, "cannot load the proc BPF programs: %s", strerror(-err));
	err = proc_bpf__attach(skel);
	if (err)
		return lt_session_errorf(s, "cannot attach to the scheduler tracepoints: %s", strerror(-err));
	return 0;
}

static void proc_stop(struct lt_session *s, void *state)
{
	(void)s;
	proc_bpf__destroy(state);
}

/* comm fields from BPF are at most 16 bytes and may lack the NUL. */
static void comm_str(char *dst, const char *src)
{
	memcpy(dst, src, LT_COMM_LEN);
	dst[LT_COMM_LEN] = 0;
}

static void emit_thread(struct lt_session *s, uint64_t ts, int pid, int tid, const char *name, bool is_new)
{
	struct evlog_event ev = { .type = EV_THREAD, .ts = ts, .pid = pid, .tid = tid };

	ev.u.thread.name = evlog_s(name);
	ev.u.thread.is_new = is_new;
	lt_session_emit(s, &ev);
}

static void on_fork(struct lt_session *s, const struct lt_rec_fork *r)
{
	char comm[LT_COMM_LEN + 1];

	comm_str(comm, r->comm);
	if (r->child_pid != r->h.pid) {
		/* A followed child: same image as its parent until it execs. */
		lt_targets_emit_process(s, r->h.ts, r->child_pid, r->child_tid, r->h.pid, comm, false);
		emit_thread(s, r->h.ts, r->child_pid, r->child_tid, comm, true);
		lt_targets_emit_ns_tid(s, r->h.ts, r->child_pid, r->child_tid, r->child_ns_tid);
		LT_INFO(2, "following child %u of %u (%s)", r->child_pid, r->h.pid, comm);
		lt_session_notify_target(s, r->child_pid);
		return;
	}
	emit_thread(s, r->h.ts, r->h.pid, r->child_tid, comm, true);
	lt_targets_emit_ns_tid(s, r->h.ts, r->h.pid, r->child_tid, r->child_ns_tid);
}

static void on_exec(struct lt_session *s, const struct lt_rec_exec *r)
{
	char comm[LT_COMM_LEN + 1], file[sizeof(r->filename) + 1];
	struct evlog_event ev = { .type = EV_PROCESS, .ts = r->h.ts, .pid = r->h.pid, .tid = r->h.tid };
	char cmdline[4096], exe[4096];

	comm_str(comm, r->comm);
	memcpy(file, r->filename, sizeof(r->filename));
	file[sizeof(r->filename)] = 0;
	/* /proc may already show a later image, or nothing: fall back to BPF's view. */
	if (lt_proc_read_cmdline(r->h.pid, cmdline, sizeof(cmdline)) || !cmdline[0])
		snprintf(cmdline, sizeof(cmdline), "%s", file);
	if (lt_proc_read_exe(r->h.pid, exe, sizeof(exe)) || !exe[0])
		snprintf(exe, sizeof(exe), "%s", file);
	ev.u.process.ppid = lt_proc_read_ppid(r->h.pid);
	ev.u.process.name = evlog_s(comm);
	ev.u.process.cmdline = evlog_s(cmdline);
	ev.u.process.exe = evlog_s(exe);
	ev.u.process.is_exec = 1;
	lt_session_emit(s, &ev);
	lt_rank_emit(s, r->h.ts, r->h.pid);
	emit_thread(s, r->h.ts, r->h.pid, r->h.tid, comm, false);
	LT_INFO(2, "pid %u exec %s", r->h.pid, file);
	if (r->old_tid != r->h.pid) /* exec'd by another thread than the leader */
		lt_session_drop_target(s, r->h.pid);
	lt_session_notify_target(s, r->h.pid); /* new image, new libraries */
}

static int proc_handle(struct lt_session *s, void *state, const struct lt_rec_hdr *h, size_t size)
{
	struct evlog_event ev = { .ts = h->ts, .pid = h->pid, .tid = h->tid };
	char comm[LT_COMM_LEN + 1];

	(void)state;
	switch (h->kind) {
	case LT_REC_FORK:
		if (size >= sizeof(struct lt_rec_fork))
			on_fork(s, (const void *)h);
		return 0;
	case LT_REC_EXEC:
		if (size >= sizeof(struct lt_rec_exec))
			on_exec(s, (const void *)h);
		return 0;
	case LT_REC_COMM:
		if (size < sizeof(struct lt_rec_comm))
			return 0;
		comm_str(comm, ((const struct lt_rec_comm *)h)->comm);
		emit_thread(s, h->ts, h->pid, h->tid, comm, false);
		return 0;
	case LT_REC_EXIT:
		ev.type = EV_THREAD_EXIT;
		return lt_session_emit(s, &ev);
	case LT_REC_PROC_EXIT:
		if (size < sizeof(struct lt_rec_exit))
			return 0;
		ev.type = EV_PROCESS_EXIT;
		ev.u.process_exit.code = ((const struct lt_rec_exit *)h)->code;
		LT_INFO(1, "target %u exited (code %lld)", h->pid, (long long)ev.u.process_exit.code);
		return lt_session_emit(s, &ev);
	}
	return 0;
}

const struct lt_source lt_source_proc = {
	.kind_lo = 1,
	.kind_hi = 15,
	.start = proc_start,
	.handle = proc_handle,
	.stop = proc_stop,
};
