/* SPDX-License-Identifier: Apache-2.0 */
#include "converter/output/trace_json.h"
#include "converter/output/evview.h"
#include "converter/output/fold.h"
#include "converter/output/jsonw.h"
#include "converter/output/trace_ids.h"
#include "tb_layout/tb_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	struct cv_gpumem mem;       /* the GPU memory track's totals (counter) */
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

static uint64_t gpu_pid_of(const struct tj *t, uint32_t device)
{
	for (uint32_t i = 0; i < t->meta->n_gpus; i++)
		if (t->meta->gpus[i].device == device)
			return t->pid_base + t->gpu_pid[i];
	return t->pid_base + TRACE_GPU_PID_CLASH_BASE + device;
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

		trace_process_name(m, p, !t->logdir_mode, buf, sizeof(buf));
		if (meta_ev(t, "process_name", pid, 0, "name", buf, 0) ||
		    meta_ev(t, "process_labels", pid, 0, "labels", "CPU", 0) ||
		    meta_ev(t, "process_sort_index", pid, 0, "sort_index", NULL,
			    t->pid_base + (p->rank >= 0 ? (uint64_t)p->rank : p->pid)))
			return -1;
	}
	for (uint32_t i = 0; i < m->n_threads; i++) {
		const struct conv_thread *th = &m->threads[i];
		const struct conv_process *p = conv_meta_process(m, th->pid);
		const char *n = *th->name ? th->name : p && *p->name ? p->name : "";

		if (conv_is_device_tid(th->tid) && *th->name)
			snprintf(buf, sizeof(buf), "%s", th->name); /* "GPU 0" */
		else if (*n)
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
		t->gpu_pid[i] = trace_gpu_pid(m, g->device);
		uint64_t pid = t->pid_base + t->gpu_pid[i];

		trace_gpu_name(g, buf, sizeof(buf));
		snprintf(lab, sizeof(lab), "GPU %u", g->device);
		if (meta_ev(t, "process_name", pid, 0, "name", buf, 0) ||
		    meta_ev(t, "process_labels", pid, 0, "labels", lab, 0) ||
		    meta_ev(t, "process_sort_index", pid, 0, "sort_index", NULL,
			    TRACE_GPU_SORT_BASE + g->device) || add_devprops(t, g))
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
	cv_gpumem_free(&t->mem); /* the same pid and tid on another host: another track */
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
		t->pid_base = trace_pid_base(m, 1);
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

static inline __attribute__((always_inline)) int args_u64(struct tj *t, const char *k, uint64_t v)
{
	return arg_key(t, k) || cv_json_u64(&t->cur, v);
}

static inline __attribute__((always_inline)) int args_i64(struct tj *t, const char *k, int64_t v)
{
	return arg_key(t, k) || cv_json_i64(&t->cur, v);
}

static inline __attribute__((always_inline)) int args_dbl(struct tj *t, const char *k, double v)
{
	return arg_key(t, k) || cv_json_double(&t->cur, v);
}

static inline __attribute__((always_inline)) int args_str(struct tj *t, const char *k, const char *s, size_t n)
{
	return arg_key(t, k) || cv_json_str(&t->cur, s ? s : "", s ? n : 0);
}

static inline __attribute__((always_inline)) int args_dim3(struct tj *t, const char *k, const uint32_t *v)
{
	struct cv_out *o = &t->cur;

	return arg_key(t, k) || CV_OUT_LIT(o, "[") ||
	       cv_json_u64(o, v[0]) || CV_OUT_LIT(o, ",") || cv_json_u64(o, v[1]) ||
	       CV_OUT_LIT(o, ",") || cv_json_u64(o, v[2]) || CV_OUT_LIT(o, "]");
}

static inline __attribute__((always_inline)) int args_py(struct tj *t, const char *file, size_t n,
							  uint32_t line)
{
	return args_str(t, "file", file, n) || args_u64(t, "line", line);
}

static inline const struct evlog_event *args_props(const struct tj *t, uint32_t device)
{
	return trace_gpu_props(t->meta, device);
}

#define ARGS_CTX struct tj
#include "converter/output/item_args.h"

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

/* After a gpu_memory item, its process's bytes on the GPU as a counter:
 * "GPU <n> memory allocated" (device memory), "GPU <n> host memory
 * allocated" (pinned and pageable host memory), on the process. */
static int memory_counter(struct tj *t, const struct conv_item *it, uint64_t pid, uint64_t tid)
{
	struct cv_out *o = &t->cur;
	int cls = cv_gpumem_class(it->ev);

	if (cv_gpumem_add(&t->mem, it))
		return -1;
	return ev_open(t) || CV_OUT_LIT(o, "\"ph\":\"C\",\"cat\":\"gpu_memory\",\"name\":\"GPU ") ||
	       cv_json_u64(o, it->ev->u.gpu_memory.device) ||
	       (cls == CV_GPUMEM_HOST ? CV_OUT_LIT(o, " host memory allocated\"")
				      : CV_OUT_LIT(o, " memory allocated\"")) ||
	       pid_tid_ts(t, pid, tid) || cv_json_us(o, (int64_t)(it->start_ns + (uint64_t)t->off)) ||
	       CV_OUT_LIT(o, ",\"args\":{\"bytes\":") || cv_json_u64(o, t->mem.total[cls]) ||
	       CV_OUT_LIT(o, "}}");
}

static int tj_item(void *ctx, const struct conv_item *it)
{
	struct tj *t = ctx;
	struct cv_out *o = &t->cur;
	uint64_t pid, tid;
	int instant = cv_view_of(it->ev->type)->instant;

	if (it->track == CONV_TRACK_STREAM) {
		pid = gpu_pid_of(t, it->device);
		tid = it->stream;
	} else if (trace_on_steps(it)) {
		pid = t->pid_base + it->pid;
		tid = TRACE_STEPS_TID;
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
	if (it->ev->type == EV_GPU_MEMORY && memory_counter(t, it, pid, tid))
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

/* Bytes per item, from the output on the demo's profile
 * (docs/MEASUREMENTS.md): every string is written with every item. */
const struct fold_model trace_json_model = {
	.what = "trace JSON", .budget_x = 1,
	.item = 130, .str_pct = 100, .flow = 110, .fold = 300, .track = 150,
};

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
		snprintf(err, errsz, "output %s: name it .json or .json.gz (or .pftrace: Perfetto's own format)", path);
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
	cv_gpumem_free(&t->mem);
	free(t->logdir);
	free(t->run);
	free(t->path);
	free(t);
}
