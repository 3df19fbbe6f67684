/* SPDX-License-Identifier: Apache-2.0 */
#include "trace_json.h"
#include "jsonw.h"
#include "../tb_layout/tb_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_PID_STRIDE 10000000u   /* > pid_max (4194304): hosts never share pids */
#define GPU_PID_CLASH_BASE 4200000u /* GPU pid when a process has the device's number */
/* Detected steps get a track of their own in the driving process, "Steps",
 * above every Linux tid (PID_MAX_LIMIT is 2^22) and sorted first. */
#define STEPS_TID 4300000u
#define GPU_SORT_BASE 5000000u      /* as Kineto: GPUs sort after processes */

struct tj {
	struct conv_sink sink;      /* first: the sink is the object */
	int logdir_mode, overwrite, gz;
	char *path, *logdir, *run;
	int run_dir;                /* logdir mode: the run directory */
	struct cv_out cur;
	int cur_open, first;
	struct cv_out *done;        /* finished files waiting for publication */
	size_t n_done;
	const struct conv_host_meta *meta;
	int64_t off;                /* ns to add to a host timestamp */
	uint64_t pid_base;
	uint32_t *gpu_pid;          /* per meta->gpus index */
	int argn;                   /* arguments written in the current args object */
	/* ",\"pid\":P,\"tid\":T,\"ts\":" of the track written last: items come
	 * track by track, so it is rendered once per track, not per event. */
	uint64_t pt_pid, pt_tid;
	int pt_valid;
	size_t pt_len;
	char pt[64];
	char *devprops;             /* deviceProperties entries, JSON text */
	size_t dp_len, dp_cap;
	uint64_t steps_pid;         /* the process whose Steps track was named last */
	struct trace_json_stats st;
};

static int fail(struct tj *t, const char *msg)
{
	snprintf(t->sink.err, sizeof(t->sink.err), "%.250s", msg);
	return -1;
}

static int write_head(struct tj *t)
{
	t->first = 1;
	return CV_OUT_LIT(&t->cur, "{\"traceEvents\":[\n");
}

/* Separator before each event: "," after the first. */
static int ev_open(struct tj *t)
{
	t->st.events++;
	if (t->first) {
		t->first = 0;
		return CV_OUT_LIT(&t->cur, "{");
	}
	return CV_OUT_LIT(&t->cur, ",\n{");
}

static int dp_append(struct tj *t, const char *s, size_t n)
{
	if (t->dp_len + n + 1 > t->dp_cap) {
		size_t nc = t->dp_cap ? t->dp_cap * 2 : 1024;

		while (nc < t->dp_len + n + 1)
			nc *= 2;
		char *p = realloc(t->devprops, nc);

		if (!p)
			return -1;
		t->devprops = p;
		t->dp_cap = nc;
	}
	memcpy(t->devprops + t->dp_len, s, n);
	t->dp_len += n;
	t->devprops[t->dp_len] = 0;
	return 0;
}

/* deviceProperties as Kineto writes them, from EV_GPU_DEVICE. */
static int add_devprops(struct tj *t, const struct conv_gpu *g)
{
	const struct evlog_event *p = g->props;
	char name[6 * 100 + 8], buf[1200];
	int n;

	if (!p)
		return 0;
	size_t nl = p->u.gpu_device.name.len < 100 ? p->u.gpu_device.name.len : 100;

	name[cv_json_escape(name, p->u.gpu_device.name.ptr ? p->u.gpu_device.name.ptr : "", nl)] = 0;
	n = snprintf(buf, sizeof(buf),
		     "%s{\"id\":%u,\"name\":%s,\"totalGlobalMem\":%llu,\"computeMajor\":%u,"
		     "\"computeMinor\":%u,\"maxThreadsPerMultiprocessor\":%u,"
		     "\"regsPerMultiprocessor\":%u,\"warpSize\":32,"
		     "\"sharedMemPerMultiprocessor\":%u,\"numSms\":%u,\"clockRateKHz\":%u,"
		     "\"memoryBandwidthBytesPerSec\":%llu}",
		     t->dp_len ? "," : "", g->device, name,
		     (unsigned long long)p->u.gpu_device.memory_bytes, p->u.gpu_device.cc_major,
		     p->u.gpu_device.cc_minor, p->u.gpu_device.max_threads_per_sm,
		     p->u.gpu_device.max_regs_per_sm, p->u.gpu_device.max_smem_per_sm,
		     p->u.gpu_device.sm_count, p->u.gpu_device.clock_khz,
		     (unsigned long long)p->u.gpu_device.memory_bandwidth);
	return dp_append(t, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static int write_tail(struct tj *t)
{
	struct cv_out *o = &t->cur;
	uint64_t base = t->meta ? t->meta->run_base_realtime_ns : 0;

	if (CV_OUT_LIT(o, "\n],\n\"baseTimeNanoseconds\":") || cv_json_u64(o, base) ||
	    CV_OUT_LIT(o, ",\n\"displayTimeUnit\":\"ms\",\n\"schemaVersion\":1,\n"
			  "\"traceName\":\"llmtracker\",\n\"deviceProperties\":[") ||
	    (t->dp_len && cv_out_write(o, t->devprops, t->dp_len)) || CV_OUT_LIT(o, "]}\n"))
		return -1;
	return 0;
}

/* ------------------------------------------------------------- metadata */

static const struct conv_process *find_proc(const struct conv_host_meta *m, uint32_t pid)
{
	size_t lo = 0, hi = m->n_processes;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->processes[mid].pid == pid)
			return &m->processes[mid];
		if (m->processes[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static uint64_t gpu_pid_of(const struct tj *t, uint32_t device)
{
	for (uint32_t i = 0; i < t->meta->n_gpus; i++)
		if (t->meta->gpus[i].device == device)
			return t->pid_base + t->gpu_pid[i];
	return t->pid_base + GPU_PID_CLASH_BASE + device;
}

static int meta_ev(struct tj *t, const char *what, uint64_t pid, uint64_t tid, const char *key,
		   const char *sval, uint64_t ival)
{
	struct cv_out *o = &t->cur;

	if (ev_open(t) || CV_OUT_LIT(o, "\"name\":\"") || cv_out_str(o, what) ||
	    CV_OUT_LIT(o, "\",\"ph\":\"M\",\"ts\":0,\"pid\":") || cv_json_u64(o, pid) ||
	    CV_OUT_LIT(o, ",\"tid\":") || cv_json_u64(o, tid) || CV_OUT_LIT(o, ",\"args\":{\"") ||
	    cv_out_str(o, key) || CV_OUT_LIT(o, "\":"))
		return -1;
	if (sval ? cv_json_str(o, sval, strlen(sval)) : cv_json_u64(o, ival))
		return -1;
	return CV_OUT_LIT(o, "}}");
}

static int name_processes(struct tj *t)
{
	const struct conv_host_meta *m = t->meta;
	char buf[600];

	for (uint32_t i = 0; i < m->n_processes; i++) {
		const struct conv_process *p = &m->processes[i];
		uint64_t pid = t->pid_base + p->pid;

		if (*p->label)
			snprintf(buf, sizeof(buf), "%s%s%s", p->label, *p->name ? " " : "", p->name);
		else if (*p->name)
			snprintf(buf, sizeof(buf), "%s", p->name);
		else
			snprintf(buf, sizeof(buf), "pid %u", p->pid);
		if (m->n_hosts > 1 && !t->logdir_mode)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), " @%s", m->host);
		if (meta_ev(t, "process_name", pid, 0, "name", buf, 0) ||
		    meta_ev(t, "process_labels", pid, 0, "labels", "CPU", 0) ||
		    meta_ev(t, "process_sort_index", pid, 0, "sort_index", NULL,
			    t->pid_base + (p->rank >= 0 ? (uint64_t)p->rank : p->pid)))
			return -1;
	}
	for (uint32_t i = 0; i < m->n_threads; i++) {
		const struct conv_thread *th = &m->threads[i];
		const struct conv_process *p = find_proc(m, th->pid);
		const char *n = *th->name ? th->name : p && *p->name ? p->name : "";

		if (*n)
			snprintf(buf, sizeof(buf), "thread %u (%s)", th->tid, n);
		else
			snprintf(buf, sizeof(buf), "thread %u", th->tid);
		if (meta_ev(t, "thread_name", t->pid_base + th->pid, th->tid, "name", buf, 0) ||
		    meta_ev(t, "thread_sort_index", t->pid_base + th->pid, th->tid, "sort_index",
			    NULL, th->tid))
			return -1;
	}
	return 0;
}

static int name_gpus(struct tj *t)
{
	const struct conv_host_meta *m = t->meta;
	char buf[300], lab[64];

	free(t->gpu_pid);
	t->gpu_pid = calloc(m->n_gpus ? m->n_gpus : 1, sizeof(*t->gpu_pid));
	if (!t->gpu_pid)
		return -1;
	for (uint32_t i = 0; i < m->n_gpus; i++) {
		const struct conv_gpu *g = &m->gpus[i];
		/* Kineto's convention: the GPU's pid is its number. */
		t->gpu_pid[i] = find_proc(m, g->device) ? GPU_PID_CLASH_BASE + g->device : g->device;
		uint64_t pid = t->pid_base + t->gpu_pid[i];
		int nl = g->props ? (int)(g->props->u.gpu_device.name.len < 200
						 ? g->props->u.gpu_device.name.len : 200) : 0;

		if (nl)
			snprintf(buf, sizeof(buf), "GPU %u (%.*s)", g->device, nl,
				 g->props->u.gpu_device.name.ptr);
		else
			snprintf(buf, sizeof(buf), "GPU %u", g->device);
		snprintf(lab, sizeof(lab), "GPU %u", g->device);
		if (meta_ev(t, "process_name", pid, 0, "name", buf, 0) ||
		    meta_ev(t, "process_labels", pid, 0, "labels", lab, 0) ||
		    meta_ev(t, "process_sort_index", pid, 0, "sort_index", NULL,
			    GPU_SORT_BASE + g->device) || add_devprops(t, g))
			return -1;
		for (uint32_t s = 0; s < g->n_streams; s++) {
			snprintf(buf, sizeof(buf), "stream %u", g->streams[s]);
			if (meta_ev(t, "thread_name", pid, g->streams[s], "name", buf, 0) ||
			    meta_ev(t, "thread_sort_index", pid, g->streams[s], "sort_index", NULL,
				    g->streams[s]))
				return -1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

static int open_host_file(struct tj *t, const struct conv_host_meta *m)
{
	char name[TB_NAME_MAX + 32];

	if (tb_host_filename(m->host, name, sizeof(name) - 20))
		return fail(t, "host name does not fit a file name");
	strcat(name, ".trace.json.gz");
	if (cv_out_open(&t->cur, t->run_dir, name, 1, t->overwrite, t->sink.err,
			sizeof(t->sink.err)))
		return -1;
	t->cur_open = 1;
	t->dp_len = 0;
	return write_head(t);
}

static int tj_begin_host(void *ctx, const struct conv_host_meta *m)
{
	struct tj *t = ctx;

	t->meta = m;
	t->steps_pid = UINT64_MAX;
	if (t->logdir_mode) {
		if (t->run_dir < 0) {
			char runbuf[64];
			const char *run = t->run;

			if (!run) {
				if (tb_run_name(m->run_base_realtime_ns, runbuf, sizeof(runbuf)))
					snprintf(runbuf, sizeof(runbuf), "run_%llu",
						 (unsigned long long)m->run_base_realtime_ns);
				run = runbuf;
			}
			t->run_dir = tb_open_run_dir(t->logdir, run, 1, t->sink.err, sizeof(t->sink.err));
			if (t->run_dir < 0)
				return -1;
		}
		if (open_host_file(t, m))
			return -1;
		t->pid_base = 0;
	} else {
		t->pid_base = m->n_hosts > 1 ? (uint64_t)m->host_index * HOST_PID_STRIDE : 0;
	}
	/* Unsigned arithmetic: wraps (defined) instead of overflowing on corrupt clocks. */
	t->off = (int64_t)(m->base_realtime_ns - m->run_base_realtime_ns - m->base_mono_ns);
	return name_processes(t) || name_gpus(t) ? (t->sink.err[0] ? -1 : fail(t, t->cur.err[0] ? t->cur.err : "write failed")) : 0;
}

static int tj_end_host(void *ctx)
{
	struct tj *t = ctx;

	if (!t->logdir_mode)
		return 0;
	if (write_tail(t) || cv_out_close(&t->cur))
		return fail(t, t->cur.err[0] ? t->cur.err : "write failed");
	t->st.bytes_json += t->cur.bytes_in;
	t->st.bytes_file += t->cur.bytes_out;
	struct cv_out *nd = realloc(t->done, (t->n_done + 1) * sizeof(*nd));

	if (!nd)
		return fail(t, "out of memory");
	t->done = nd;
	t->done[t->n_done++] = t->cur;
	t->cur_open = 0;
	return 0;
}

static int tj_finish(void *ctx, int ok)
{
	struct tj *t = ctx;
	int rc = 0;

	if (!t->logdir_mode && t->cur_open) {
		if (ok && (write_tail(t) || cv_out_close(&t->cur))) {
			fail(t, t->cur.err[0] ? t->cur.err : "write failed");
			ok = 0;
			rc = -1;
		}
		if (ok) {
			t->st.bytes_json += t->cur.bytes_in;
			t->st.bytes_file += t->cur.bytes_out;
			if (cv_out_publish(&t->cur, t->overwrite, t->sink.err, sizeof(t->sink.err)))
				rc = -1;
		} else {
			cv_out_discard(&t->cur);
		}
		t->cur_open = 0;
	}
	if (t->logdir_mode && t->cur_open) {
		cv_out_discard(&t->cur);
		t->cur_open = 0;
	}
	for (size_t i = 0; i < t->n_done; i++) {
		if (ok && !rc) {
			if (cv_out_publish(&t->done[i], t->overwrite, t->sink.err, sizeof(t->sink.err)))
				rc = -1;
		} else {
			cv_out_discard(&t->done[i]);
		}
	}
	t->n_done = 0;
	return rc;
}

/* ----------------------------------------------------------------- items */

/* ",\"pid\":P,\"tid\":T,\"ts\":" rendered for this track. */
static void pid_tid_prefix(struct tj *t, uint64_t pid, uint64_t tid)
{
	if (!t->pt_valid || pid != t->pt_pid || tid != t->pt_tid) {
		int n = snprintf(t->pt, sizeof(t->pt), ",\"pid\":%llu,\"tid\":%llu,\"ts\":",
				 (unsigned long long)pid, (unsigned long long)tid);

		t->pt_len = n > 0 && (size_t)n < sizeof(t->pt) ? (size_t)n : 0;
		t->pt_pid = pid;
		t->pt_tid = tid;
		t->pt_valid = 1;
	}
}

static int pid_tid_ts(struct tj *t, uint64_t pid, uint64_t tid)
{
	pid_tid_prefix(t, pid, tid);
	return cv_out_write(&t->cur, t->pt, t->pt_len);
}

#define PUT_LIT(d, s) (memcpy((d), (s), sizeof(s) - 1), (d) += sizeof(s) - 1)

/* The usual item head (a name with nothing to escape) in one reservation:
 * "{\"ph\":\"X\",\"cat\":\"C\",\"name\":\"N\",\"pid\":P,\"tid\":T,\"ts\":" */
static int common_fast(struct tj *t, const char *ph, const struct conv_item *it, size_t nl)
{
	struct cv_out *o = &t->cur;
	size_t phl = strlen(ph), cl = strlen(it->category);

	if (cv_out_reserve(o, 48 + phl + cl + nl + t->pt_len))
		return -1;
	char *d = o->buf + o->len;

	t->st.events++;
	if (t->first)
		t->first = 0;
	else
		PUT_LIT(d, ",\n");
	PUT_LIT(d, "{\"ph\":\"");
	memcpy(d, ph, phl);
	d += phl;
	PUT_LIT(d, "\",\"cat\":\"");
	memcpy(d, it->category, cl);
	d += cl;
	PUT_LIT(d, "\",\"name\":\"");
	memcpy(d, it->name, nl);
	d += nl;
	*d++ = '"';
	memcpy(d, t->pt, t->pt_len);
	d += t->pt_len;
	o->len = (size_t)(d - o->buf);
	return 0;
}

static int common(struct tj *t, const char *ph, const struct conv_item *it, uint64_t pid,
		  uint64_t tid)
{
	struct cv_out *o = &t->cur;
	size_t nl = strlen(it->name);

	if (nl <= 4096 && cv_json_plain_len(it->name, nl) == nl) {
		pid_tid_prefix(t, pid, tid);
		return common_fast(t, ph, it, nl) ||
		       cv_json_us(o, (int64_t)(it->start_ns + (uint64_t)t->off));
	}
	return ev_open(t) || CV_OUT_LIT(o, "\"ph\":\"") || cv_out_str(o, ph) ||
	       CV_OUT_LIT(o, "\",\"cat\":\"") || cv_out_str(o, it->category) ||
	       CV_OUT_LIT(o, "\",\"name\":") || cv_json_str(o, it->name, strlen(it->name)) ||
	       pid_tid_ts(t, pid, tid) || cv_json_us(o, (int64_t)(it->start_ns + (uint64_t)t->off));
}

/* ",\"key\":" (no comma before the first argument). */
static inline __attribute__((always_inline)) int arg_key(struct tj *t, const char *k)
{
	struct cv_out *o = &t->cur;
	size_t n = strlen(k); /* a constant once inlined */

	if (cv_out_reserve(o, n + 4))
		return -1;
	char *d = o->buf + o->len;

	if (t->argn++)
		*d++ = ',';
	*d++ = '"';
	memcpy(d, k, n);
	d += n;
	*d++ = '"';
	*d++ = ':';
	o->len = (size_t)(d - o->buf);
	return 0;
}

static inline __attribute__((always_inline)) int arg_u64(struct tj *t, const char *k, uint64_t v)
{
	struct cv_out *o = &t->cur;

	return arg_key(t, k) ||
	       cv_json_u64(o, v);
}

static inline __attribute__((always_inline)) int arg_i64(struct tj *t, const char *k, int64_t v)
{
	struct cv_out *o = &t->cur;

	return arg_key(t, k) ||
	       cv_json_i64(o, v);
}

static inline __attribute__((always_inline)) int arg_str(struct tj *t, const char *k, const char *s, size_t n)
{
	struct cv_out *o = &t->cur;

	return arg_key(t, k) ||
	       cv_json_str(o, s ? s : "", s ? n : 0);
}

static inline __attribute__((always_inline)) int arg_dim3(struct tj *t, const char *k, const uint32_t *v)
{
	struct cv_out *o = &t->cur;

	return arg_key(t, k) || CV_OUT_LIT(o, "[") ||
	       cv_json_u64(o, v[0]) || CV_OUT_LIT(o, ",") || cv_json_u64(o, v[1]) ||
	       CV_OUT_LIT(o, ",") || cv_json_u64(o, v[2]) || CV_OUT_LIT(o, "]");
}

/* Syscalls whose first argument is a file descriptor and third a size. */
static int fd_syscall(const char *n, int *has_size)
{
	static const char *const sized[] = { "read", "write", "pread64", "pwrite64", "recvfrom",
					     "sendto", NULL };
	static const char *const fd[] = { "readv", "writev", "close", "fsync", "fdatasync", "ioctl",
					  "fstat", "lseek", "recvmsg", "sendmsg", "epoll_wait",
					  "epoll_pwait", "getdents64", "sendfile", NULL };

	/* One system call item in a few: compare the first byte before the rest. */
	for (int i = 0; sized[i]; i++)
		if (n[0] == sized[i][0] && !strcmp(n, sized[i]))
			return *has_size = 1;
	*has_size = 0;
	for (int i = 0; fd[i]; i++)
		if (n[0] == fd[i][0] && !strcmp(n, fd[i]))
			return 1;
	return 0;
}

static const struct evlog_event *gpu_props_of(const struct tj *t, uint32_t device)
{
	for (uint32_t i = 0; i < t->meta->n_gpus; i++)
		if (t->meta->gpus[i].device == device)
			return t->meta->gpus[i].props;
	return NULL;
}

static int kernel_args(struct tj *t, const struct evlog_event *e)
{
	struct cv_out *o = &t->cur;
	const struct evlog_event *p = gpu_props_of(t, e->u.gpu_kernel.device);
	uint64_t blocks = (uint64_t)e->u.gpu_kernel.grid[0] * e->u.gpu_kernel.grid[1] *
			  e->u.gpu_kernel.grid[2];

	if (arg_u64(t, "device", e->u.gpu_kernel.device) ||
	    arg_u64(t, "context", e->u.gpu_kernel.context) ||
	    arg_u64(t, "stream", e->u.gpu_kernel.stream) ||
	    arg_u64(t, "correlation", e->u.gpu_kernel.correlation_id) ||
	    arg_u64(t, "registers per thread", e->u.gpu_kernel.registers) ||
	    arg_u64(t, "shared memory",
		    (uint64_t)e->u.gpu_kernel.static_smem + e->u.gpu_kernel.dynamic_smem) ||
	    arg_dim3(t, "grid", e->u.gpu_kernel.grid) || arg_dim3(t, "block", e->u.gpu_kernel.block))
		return -1;
	if (p && p->u.gpu_device.sm_count &&
	    (arg_key(t, "blocks per SM") ||
	     cv_json_double(o, (double)blocks / p->u.gpu_device.sm_count)))
		return -1;
	if (e->u.gpu_kernel.graph_id && arg_u64(t, "graph id", e->u.gpu_kernel.graph_id))
		return -1;
	return 0;
}

static int copy_args(struct tj *t, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t corr,
		     uint64_t bytes, uint64_t dur)
{
	struct cv_out *o = &t->cur;

	if (arg_u64(t, "device", dev) || arg_u64(t, "context", ctx) ||
	    arg_u64(t, "stream", stream) || arg_u64(t, "correlation", corr) ||
	    arg_u64(t, "bytes", bytes))
		return -1;
	/* bytes per ns = GB/s */
	return dur && (arg_key(t, "memory bandwidth (GB/s)") ||
		       cv_json_double(o, (double)bytes / (double)dur));
}

/* As Kineto writes them: the kind's name, the stream (-1: none, a context
 * synchronization), the correlation id, the context, and the event waited on. */
static int sync_args(struct tj *t, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;
	uint8_t k = e->u.gpu_sync.kind;

	if (arg_str(t, "cuda_sync_kind", it->name, strlen(it->name)) ||
	    arg_i64(t, "stream", (int32_t)e->u.gpu_sync.stream) ||
	    arg_u64(t, "correlation", e->u.gpu_sync.correlation_id) ||
	    arg_u64(t, "context", e->u.gpu_sync.context))
		return -1;
	return (k == 1 || k == 2) && e->u.gpu_sync.cuda_event != UINT32_MAX &&
	       arg_u64(t, "wait_on_cuda_event_id", e->u.gpu_sync.cuda_event);
}

static int item_args(struct tj *t, const struct conv_item *it)
{
	const struct evlog_event *e = it->ev;
	int has_size;

	switch (e->type) {
	case EV_SYSCALL:
		if (arg_i64(t, "ret", e->u.syscall.ret))
			return -1;
		if (fd_syscall(it->name, &has_size) &&
		    (arg_u64(t, "fd", e->u.syscall.arg0) ||
		     (has_size && arg_u64(t, "size", e->u.syscall.arg2))))
			return -1;
		return 0;
	case EV_PY_ENTER:
		return arg_str(t, "file", e->u.py_enter.file.ptr, e->u.py_enter.file.len) ||
		       arg_u64(t, "line", e->u.py_enter.line);
	case EV_CPU_SAMPLE:
		return arg_u64(t, "cpu", e->u.cpu_sample.cpu) ||
		       arg_str(t, "stack", it->stack_folded, strlen(it->stack_folded));
	case EV_PY_SAMPLE:
		return arg_str(t, "stack", it->stack_folded, strlen(it->stack_folded));
	case EV_LIB_CALL:
		if (arg_str(t, "library", e->u.lib_call.lib.ptr, e->u.lib_call.lib.len) ||
		    arg_i64(t, "ret", (int64_t)e->u.lib_call.ret) ||
		    arg_u64(t, "depth", e->u.lib_call.depth))
			return -1;
		if (e->u.lib_call.correlation_id &&
		    arg_u64(t, "correlation", e->u.lib_call.correlation_id))
			return -1;
		return e->u.lib_call.detail.len &&
		       arg_str(t, "args", e->u.lib_call.detail.ptr, e->u.lib_call.detail.len);
	case EV_GPU_API:
		return arg_u64(t, "cbid", e->u.gpu_api.cbid) ||
		       arg_u64(t, "correlation", e->u.gpu_api.correlation_id) ||
		       arg_i64(t, "ret", e->u.gpu_api.ret);
	case EV_GPU_KERNEL:
		return kernel_args(t, e);
	case EV_GPU_MEMCPY:
		return copy_args(t, e->u.gpu_memcpy.device, e->u.gpu_memcpy.context,
				 e->u.gpu_memcpy.stream, e->u.gpu_memcpy.correlation_id,
				 e->u.gpu_memcpy.bytes, it->dur_ns) ||
		       arg_u64(t, "kind", e->u.gpu_memcpy.copy_kind);
	case EV_GPU_MEMSET:
		return copy_args(t, e->u.gpu_memset.device, e->u.gpu_memset.context,
				 e->u.gpu_memset.stream, e->u.gpu_memset.correlation_id,
				 e->u.gpu_memset.bytes, it->dur_ns) ||
		       arg_u64(t, "value", e->u.gpu_memset.value);
	case EV_GPU_SYNC:
		return sync_args(t, it);
	case EV_MARKER:
		if (it->step && arg_u64(t, "step", it->step - 1))
			return -1;
		return (e->u.marker.text.len &&
			arg_str(t, "text", e->u.marker.text.ptr, e->u.marker.text.len)) ||
		       arg_u64(t, "value", e->u.marker.value);
	default:
		return 0;
	}
}

static int flow(struct tj *t, const struct conv_item *it, uint64_t pid, uint64_t tid)
{
	struct cv_out *o = &t->cur;

	t->st.flows++;
	return ev_open(t) || CV_OUT_LIT(o, "\"ph\":\"") || cv_out_str(o, it->flow_start ? "s" : "f") ||
	       CV_OUT_LIT(o, "\",\"id\":") || cv_json_u64(o, it->flow_id) ||
	       pid_tid_ts(t, pid, tid) || cv_json_us(o, (int64_t)(it->start_ns + (uint64_t)t->off)) ||
	       CV_OUT_LIT(o, ",\"cat\":\"ac2g\",\"name\":\"ac2g\"") ||
	       (!it->flow_start && CV_OUT_LIT(o, ",\"bp\":\"e\"")) || CV_OUT_LIT(o, "}");
}

static int tj_item(void *ctx, const struct conv_item *it)
{
	struct tj *t = ctx;
	struct cv_out *o = &t->cur;
	uint64_t pid, tid;
	int instant = it->ev->type == EV_CPU_SAMPLE || it->ev->type == EV_PY_SAMPLE;

	if (it->track == CONV_TRACK_STREAM) {
		pid = gpu_pid_of(t, it->device);
		tid = it->stream;
	} else if (it->step && !strcmp(it->category, "step")) {
		pid = t->pid_base + it->pid;
		tid = STEPS_TID;
		/* a process's steps come in one run (one track) */
		if (pid != t->steps_pid &&
		    (meta_ev(t, "thread_name", pid, tid, "name", "Steps", 0) ||
		     meta_ev(t, "thread_sort_index", pid, tid, "sort_index", NULL, 0)))
			goto err;
		t->steps_pid = pid;
	} else {
		pid = t->pid_base + it->pid;
		tid = it->tid;
	}
	if (common(t, instant ? "i" : "X", it, pid, tid))
		goto err;
	if (instant ? CV_OUT_LIT(o, ",\"s\":\"t\"")
		    : CV_OUT_LIT(o, ",\"dur\":") || cv_json_us(o, (int64_t)it->dur_ns))
		goto err;
	t->argn = 0;
	if (CV_OUT_LIT(o, ",\"args\":{") || item_args(t, it) || CV_OUT_LIT(o, "}}"))
		goto err;
	if (it->flow_id && flow(t, it, pid, tid))
		goto err;
	return 0;
err:
	return fail(t, t->cur.err[0] ? t->cur.err : "out of memory");
}

/* ----------------------------------------------------------- construction */

static struct tj *tj_alloc(void)
{
	struct tj *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->sink.name = "trace JSON";
	t->sink.ctx = t;
	t->sink.begin_host = tj_begin_host;
	t->sink.item = tj_item;
	t->sink.end_host = tj_end_host;
	t->sink.finish = tj_finish;
	t->run_dir = -1;
	t->cur.tmp.fd = t->cur.tmp.dirfd = -1;
	return t;
}

static int ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

struct conv_sink *trace_json_new_file(const char *path, int overwrite, char *err, size_t errsz)
{
	struct tj *t = tj_alloc();

	if (!t) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	t->gz = ends_with(path, ".gz");
	t->overwrite = overwrite;
	if (!ends_with(path, ".json") && !ends_with(path, ".json.gz")) {
		snprintf(err, errsz, "output %s: name it .json or .json.gz", path);
		free(t);
		return NULL;
	}
	if (cv_out_open(&t->cur, -1, path, t->gz, overwrite, err, errsz)) {
		free(t);
		return NULL;
	}
	t->cur_open = 1;
	if (write_head(t)) {
		cv_out_discard(&t->cur);
		free(t);
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	return &t->sink;
}

struct conv_sink *trace_json_new_logdir(const char *logdir, const char *run, int overwrite,
					char *err, size_t errsz)
{
	struct tj *t = tj_alloc();

	if (!t || !(t->logdir = strdup(logdir)) || (run && !(t->run = strdup(run)))) {
		if (t)
			free(t->logdir);
		free(t);
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	t->logdir_mode = 1;
	t->gz = 1;
	t->overwrite = overwrite;
	return &t->sink;
}

void trace_json_stats(const struct conv_sink *s, struct trace_json_stats *st)
{
	*st = ((const struct tj *)s->ctx)->st;
}

void trace_json_free(struct conv_sink *s)
{
	if (!s)
		return;
	struct tj *t = s->ctx;

	if (t->cur_open || t->n_done)
		tj_finish(t, 0);
	if (t->run_dir >= 0)
		close(t->run_dir);
	free(t->done);
	free(t->gpu_pid);
	free(t->devprops);
	free(t->logdir);
	free(t->run);
	free(t->path);
	free(t);
}
