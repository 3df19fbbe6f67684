/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pass 2: read every log again, turn events into timeline records (Python
 * enter/exit pairs become one complete record; samples get their folded
 * stack), spill them into sorted runs, then merge the runs and feed the
 * sinks host by host, track by track, repairing nesting on the way.
 */
#include "converter/conv_int.h"
#include "converter/pairing/dedup.h"
#include "converter/output/evview.h"
#include "converter/pairing/launchpair.h"
#include "converter/output/sizes.h"
#include "converter/input/spill.h"
#include "converter/pairing/steps.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DUR_MAX (1ULL << 46)
#define PY_DEPTH_MAX 2048
#define RUN_MB_DEFAULT 64
/* x86_64's uretprobe(2) (Linux 6.11+): the return-probe trampoline's own
 * system call, made by the profiler's probes, not by the application. */
#define X86_64_NR_URETPROBE 335

/* ----------------------------------------------------- Python call stacks */

struct py_frame {
	uint64_t ts;
	uint32_t line;
	uint32_t func_off, func_len, file_off, file_len;
	uint32_t sid;         /* its function's id for the step detector */
};

struct py_thread {
	struct py_frame *fr;
	uint32_t n, cap;
	struct cv_buf strs;   /* func and file strings of open frames */
	uint32_t host, log, pid, tid;
};

struct pass2 {
	struct cv_core *c;
	struct cv_sync_bind sync; /* CUPTI synchronizations waiting for their thread */
	struct cv_spill *sp;
	struct cv_steps *steps;  /* candidate step series, judged after reading */
	struct cv_map py;     /* (host<<32|pid, tid) -> struct py_thread * */
	struct cv_buf fold;
	struct cv_map stack_cache; /* hash of a raw CPU stack -> folded id + 1 */
	/* The thread of the last event and its track: events come in runs of
	 * one thread, so most lookups end here. */
	struct {
		const struct cv_host *h;
		uint32_t pid, tid;
		int32_t track;
	} memo;
	uint64_t py_k1, py_k2;     /* the same for Python stacks */
	struct py_thread *py_last;
};

static int32_t track_of_thread(const struct cv_host *h, uint32_t pid, uint32_t tid)
{
	const uint64_t *v = cv_map_get(&h->threads, pid, tid ? tid : pid);

	return v ? (int32_t)(h->track_base + *v - 1) : -1;
}

static int32_t thread_track(struct pass2 *p, const struct cv_host *h, uint32_t pid, uint32_t tid)
{
	if (p->memo.h != h || p->memo.pid != pid || p->memo.tid != tid) {
		p->memo.h = h;
		p->memo.pid = pid;
		p->memo.tid = tid;
		p->memo.track = track_of_thread(h, pid, tid);
	}
	return p->memo.track;
}

static int32_t track_of_stream(const struct cv_host *h, uint32_t dev, uint32_t stream)
{
	const uint64_t *v = cv_map_get(&h->streams, dev, stream);

	return v ? (int32_t)(*v - 1) : -1;
}

static int spill_event(struct pass2 *p, uint32_t log, int32_t track, uint64_t start,
		       uint64_t dur, uint32_t stack, const struct evlog_event *e)
{
	struct cv_core *c = p->c;
	struct cv_rec *r;
	size_t len = cv_rec_size(e);

	if (track < 0)
		return 0; /* pass 1 registered every track: cannot happen */
	if (!(r = cv_spill_reserve(p->sp, len, c->err, sizeof(c->err))))
		return -1;
	r->track = (uint32_t)track;
	r->start = start;
	r->dur = dur;
	r->log = log;
	r->stack = stack;
	cv_rec_pack(r, e);
	return 0;
}

static struct py_thread *py_thread(struct pass2 *p, uint32_t host, uint32_t log,
				   const struct evlog_event *e)
{
	uint32_t tid = e->tid ? e->tid : e->pid;
	uint64_t k1 = ((uint64_t)host << 32) | e->pid;
	int is_new;

	if (p->py_last && p->py_k1 == k1 && p->py_k2 == tid)
		return p->py_last;
	uint64_t *v = cv_map_put(&p->py, k1, tid, &is_new);

	if (!v)
		return NULL;
	if (is_new) {
		struct py_thread *t = calloc(1, sizeof(*t));

		if (!t)
			return NULL;
		t->host = host;
		t->log = log;
		t->pid = e->pid;
		t->tid = tid;
		*v = (uint64_t)(uintptr_t)t;
	}
	p->py_k1 = k1;
	p->py_k2 = tid;
	p->py_last = (struct py_thread *)(uintptr_t)*v;
	return p->py_last;
}

static int py_push(struct pass2 *p, struct py_thread *t, uint64_t ts, const struct evlog_event *e)
{
	if (t->n >= PY_DEPTH_MAX) {
		p->c->st.py_too_deep++;
		return 0;
	}
	if (t->n == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 32;
		struct py_frame *nf = realloc(t->fr, nc * sizeof(*nf));

		if (!nf)
			return -1;
		t->fr = nf;
		t->cap = nc;
	}
	struct py_frame *f = &t->fr[t->n];
	int64_t sid = cv_steps_py_name(p->steps, e);

	if (sid < 0)
		return -1;
	f->sid = (uint32_t)sid;
	f->ts = ts;
	f->line = e->u.py_enter.line;
	f->func_off = (uint32_t)t->strs.len;
	f->func_len = e->u.py_enter.func.len;
	if (cv_buf_append(&t->strs, e->u.py_enter.func.ptr, e->u.py_enter.func.len))
		return -1;
	f->file_off = (uint32_t)t->strs.len;
	f->file_len = e->u.py_enter.file.len;
	if (cv_buf_append(&t->strs, e->u.py_enter.file.ptr, e->u.py_enter.file.len))
		return -1;
	t->n++;
	return 0;
}

/* The event of open frame f of t (strings in t->strs). */
static void py_frame_event(const struct py_thread *t, const struct py_frame *f, struct evlog_event *e)
{
	*e = (struct evlog_event){ .type = EV_PY_ENTER, .ts = f->ts, .pid = t->pid, .tid = t->tid };
	e->u.py_enter.func = (struct evlog_str){ .ptr = t->strs.p + f->func_off, .len = f->func_len };
	e->u.py_enter.file = (struct evlog_str){ .ptr = t->strs.p + f->file_off, .len = f->file_len };
	e->u.py_enter.line = f->line;
}

/* Close the innermost open frame at end_ts as one complete record; a call
 * that completed (not cut by the end of the logs) is a step candidate. */
static int py_pop(struct pass2 *p, struct py_thread *t, uint64_t end_ts, int completed)
{
	const struct cv_host *h = &p->c->hosts[t->host];
	struct py_frame *f = &t->fr[--t->n];
	const struct py_frame *up = t->n ? &t->fr[t->n - 1] : NULL;
	struct evlog_event e;

	py_frame_event(t, f, &e);
	int32_t track = thread_track(p, h, t->pid, t->tid);
	uint64_t dur = end_ts > f->ts ? end_ts - f->ts : 0;
	int rc = spill_event(p, t->log, track, f->ts, dur, 0, &e);

	if (rc == 0 && track >= 0 && completed &&
	    cv_steps_feed_py(p->steps, t->host, (uint32_t)track, f->ts, dur, &e, f->sid,
			     up ? up->sid : CV_STEPS_TOP, up ? up->ts : 0))
		rc = -1;

	t->strs.len = f->func_off;
	return rc;
}

static int py_exit(struct pass2 *p, struct py_thread *t, uint64_t ts)
{
	if (!t->n) {
		p->c->st.py_unmatched_exit++;
		return 0;
	}
	return py_pop(p, t, ts, 1);
}

/* Frames still open when the logs end are closed at their host's end. */
static int py_close_all(struct pass2 *p)
{
	for (size_t i = 0; i < p->py.n; i++) {
		struct py_thread *t = (struct py_thread *)(uintptr_t)p->py.ents[i].val;

		while (t->n) {
			p->c->st.py_unclosed++;
			if (py_pop(p, t, p->c->hosts[t->host].max_ts, 0))
				return -1;
		}
	}
	return 0;
}

static void py_free(struct pass2 *p)
{
	for (size_t i = 0; i < p->py.n; i++) {
		struct py_thread *t = (struct py_thread *)(uintptr_t)p->py.ents[i].val;

		free(t->fr);
		cv_buf_free(&t->strs);
		free(t);
	}
	cv_map_free(&p->py);
	p->py_last = NULL;
}

/* ----------------------------------------------------------- pass 2 read */

static uint64_t checked_dur(struct cv_core *c, uint64_t dur)
{
	if (dur > DUR_MAX) {
		c->st.bad_time++;
		return 0;
	}
	return dur;
}

static int sample_event(struct pass2 *p, const struct cv_host *h, uint32_t li, uint64_t ts,
			const struct evlog_event *e)
{
	struct evlog_event copy = *e;
	int rc;

	if (e->type == EV_CPU_SAMPLE) {
		const struct evlog_stack *st = &e->u.cpu_sample.stack;
		uint64_t nf = (uint64_t)st->n_kernel + st->n_user;
		/* Samples repeat a few stacks: fold each distinct one once. The key
		 * is a 64-bit hash of (host, pid, frames) plus the frame counts. */
		uint64_t key = st->ips && nf <= EVLOG_MAX_FRAMES
			? lt_hash_bytes(st->ips, nf * 8) ^ ((uint64_t)e->pid << 20) ^ li * 0x9e3779b97f4a7c15ULL
			: 0;
		uint64_t *hit = key ? cv_map_get(&p->stack_cache, key,
						  ((uint64_t)st->n_kernel << 32) | st->n_user) : NULL;

		memset(&copy.u.cpu_sample.stack, 0, sizeof(copy.u.cpu_sample.stack));
		if (hit)
			return spill_event(p, li, thread_track(p, h, e->pid, e->tid), ts, 0,
					   (uint32_t)*hit, &copy);
		rc = cv_fold_cpu(h, e->pid, st, &p->fold);
		if (!rc && key) {
			int64_t id = cv_strtab_intern(&p->c->stacks, p->fold.p, p->fold.len);
			uint64_t *v = id < 0 ? NULL : cv_map_put(&p->stack_cache, key,
					((uint64_t)st->n_kernel << 32) | st->n_user, NULL);

			if (!v) {
				snprintf(p->c->err, sizeof(p->c->err), "out of memory folding stacks");
				return -1;
			}
			*v = (uint64_t)id + 1;
		}
	} else {
		rc = cv_fold_py(&e->u.py_sample.stack, &p->fold);
		memset(&copy.u.py_sample.stack, 0, sizeof(copy.u.py_sample.stack));
	}
	int64_t id = rc ? -1 : cv_strtab_intern(&p->c->stacks, p->fold.p, p->fold.len);

	if (id < 0) {
		snprintf(p->c->err, sizeof(p->c->err), "out of memory folding stacks");
		return -1;
	}
	return spill_event(p, li, thread_track(p, h, e->pid, e->tid), ts, 0, (uint32_t)id + 1,
			   &copy);
}

/* A library call or marker on its thread: a record, and a step candidate. */
static int host_call(struct pass2 *p, uint32_t li, uint64_t ts, uint64_t dur, uint32_t depth,
		     const struct evlog_event *e)
{
	const struct cv_log *l = &p->c->in.logs[li];
	int32_t track = thread_track(p, &p->c->hosts[l->host], e->pid, e->tid);

	if (spill_event(p, li, track, ts, dur, 0, e))
		return -1;
	return track < 0 ? 0 : cv_steps_feed(p->steps, l->host, (uint32_t)track, ts, dur, depth, e);
}

/* Any other type: one item on its thread, device track or GPU stream, its
 * duration as its schema traits say (eventlog/evlog_schema.h); metadata
 * (consumed by pass 1) makes none. */
static int plain_item(struct pass2 *p, uint32_t li, const struct cv_host *h, uint64_t ts,
		      const struct evlog_event *e)
{
	int32_t track;

	switch (evlog_type_traits(e->type)->track) {
	case EVLOG_TRACK_THREAD:
		track = thread_track(p, h, e->pid, e->tid);
		break;
	case EVLOG_TRACK_STREAM:
		track = track_of_stream(h, evlog_device(e), evlog_stream(e));
		break;
	case EVLOG_TRACK_DEVICE:
		track = thread_track(p, h, e->pid, CV_DEVICE_TID(evlog_device(e)));
		break;
	default:
		return 0;
	}
	return spill_event(p, li, track, ts, checked_dur(p->c, evlog_dur(e)), 0, e);
}

static int timeline_event(struct pass2 *p, uint32_t li, const struct evlog_event *e)
{
	struct cv_core *c = p->c;
	const struct cv_log *l = &c->in.logs[li];
	const struct cv_host *h = &c->hosts[l->host];
	uint64_t ts = e->ts + (uint64_t)l->clock_off;
	struct py_thread *t;

	switch (e->type) {
	case EV_SYSCALL:
		if (l->syscall_table && e->u.syscall.nr == X86_64_NR_URETPROBE) {
			c->st.uretprobe++;
			return 0;
		}
		return spill_event(p, li, thread_track(p, h, e->pid, e->tid), ts,
				   checked_dur(c, e->u.syscall.dur), 0, e);
	case EV_LIB_CALL:
		return host_call(p, li, ts, checked_dur(c, e->u.lib_call.dur), e->u.lib_call.depth, e);
	case EV_GPU_API:
		return host_call(p, li, ts, checked_dur(c, e->u.gpu_api.dur), 0, e);
	case EV_MARKER:
		return host_call(p, li, ts, checked_dur(c, e->u.marker.dur), 0, e);
	case EV_GPU_KERNEL: {
		int32_t track = track_of_stream(h, e->u.gpu_kernel.device, e->u.gpu_kernel.stream);
		uint64_t dur = checked_dur(c, e->u.gpu_kernel.dur);

		if (spill_event(p, li, track, ts, dur, 0, e))
			return -1;
		return track < 0 ? 0 : cv_steps_feed(p->steps, l->host, (uint32_t)track, ts, dur, 0, e);
	}
	case EV_CPU_SAMPLE:
	case EV_PY_SAMPLE:
		return sample_event(p, h, li, ts, e);
	case EV_PY_ENTER:
		return (t = py_thread(p, l->host, li, e)) ? py_push(p, t, ts, e) : -1;
	case EV_PY_EXIT:
		return (t = py_thread(p, l->host, li, e)) ? py_exit(p, t, ts) : -1;
	default:
		return plain_item(p, li, h, ts, e);
	}
}

static int sync_emit(void *p, uint32_t li, const struct evlog_event *e)
{
	return timeline_event(p, li, e);
}

/* Every event of a log goes through here first: CUPTI's synchronizations
 * wait there for the thread of their call (cudacorr.h). */
static int sync_event(struct pass2 *p, uint32_t li, const struct evlog_event *e)
{
	return cv_sync_concerns(&p->sync, e) ? cv_sync_feed(&p->sync, li, e)
					     : timeline_event(p, li, e);
}

static int read_log2(struct pass2 *p, uint32_t li, uint64_t *done)
{
	struct cv_core *c = p->c;
	struct cv_log *l = &c->in.logs[li];
	struct evlog_reader *r;
	struct evlog_event mapped;
	const struct evlog_event *e;
	char msg[256];
	int rc;
	uint64_t n = 0;

	if (l->bad)
		return 0;
	if (cv_log_reader(l, &r, msg, sizeof(msg))) {
		cv_buf_printf(&c->in.notes, "%s: could not be read again: %s\n", l->name, msg);
		return 0;
	}
	/* Never read past what pass 1 saw (a log still being appended to). */
	while (n < l->events && (rc = evlog_next(r, &e)) == 0) {
		n++;
		if (cv_is_meta_marker(e))
			continue;
		if (sync_event(p, li, cv_node_tid(&c->hosts[l->host], l, e, &mapped))) {
			if (!c->err[0])
				snprintf(c->err, sizeof(c->err), "out of memory converting %s",
					 l->name);
			evlog_reader_close(r);
			return -1;
		}
		if ((++*done & 0xffff) == 0 && cv_progress(c, "sorting", *done, c->total_events)) {
			evlog_reader_close(r);
			return -1;
		}
	}
	evlog_reader_close(r);
	if (cv_sync_flush(&p->sync)) {
		snprintf(c->err, sizeof(c->err), "out of memory converting %s", l->name);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ emit */

struct emitter {
	struct cv_core *c;
	struct conv_sink *const *sinks;
	int n_sinks;
	int32_t host;         /* current host, -1 before the first */
	uint32_t track;
	uint64_t *ends;       /* open parents' end times on the current track */
	size_t n_ends, cap_ends;
	int merged;           /* the current record is a uprobe call paired with CUPTI's */
	uint32_t set_next;    /* the host's step set due next */
	uint32_t step_next;   /* its steps already sent */
};

static int sink_fail(struct cv_core *c, struct conv_sink *s)
{
	snprintf(c->err, sizeof(c->err), "%s output: %s", s->name,
		 s->err[0] ? s->err : "write failed");
	return -1;
}

static int host_begin(struct emitter *em, uint32_t h)
{
	for (int i = 0; i < em->n_sinks; i++)
		if (em->sinks[i]->begin_host &&
		    em->sinks[i]->begin_host(em->sinks[i]->ctx, &em->c->hosts[h].meta))
			return sink_fail(em->c, em->sinks[i]);
	return 0;
}

static int host_end(struct emitter *em)
{
	for (int i = 0; i < em->n_sinks; i++)
		if (em->sinks[i]->end_host && em->sinks[i]->end_host(em->sinks[i]->ctx))
			return sink_fail(em->c, em->sinks[i]);
	return 0;
}

/* Move on to host h, opening and closing every host in between. */
static int goto_host(struct emitter *em, int32_t h)
{
	while (em->host < h) {
		if (em->host >= 0 && host_end(em))
			return -1;
		em->host++;
		em->set_next = 0;
		em->step_next = 0;
		if (em->host < (int32_t)em->c->n_hosts && em->host <= h && host_begin(em, (uint32_t)em->host))
			return -1;
	}
	return 0;
}

/* Cut an item that would overlap its parent; returns the (maybe cut) dur. */
static uint64_t nest(struct emitter *em, uint32_t track, uint64_t start, uint64_t dur)
{
	if (track != em->track) {
		em->track = track;
		em->n_ends = 0;
	}
	while (em->n_ends && em->ends[em->n_ends - 1] <= start)
		em->n_ends--;
	if (!dur)
		return 0;
	if (em->n_ends && start + dur > em->ends[em->n_ends - 1]) {
		dur = em->ends[em->n_ends - 1] - start;
		em->c->st.overlaps_cut++;
		if (!dur)
			return 0;
	}
	if (em->n_ends == em->cap_ends) {
		size_t nc = em->cap_ends ? em->cap_ends * 2 : 64;
		uint64_t *ne = realloc(em->ends, nc * sizeof(*ne));

		if (!ne)
			return dur; /* nesting still holds; only this level is not tracked */
		em->ends = ne;
		em->cap_ends = nc;
	}
	em->ends[em->n_ends++] = start + dur;
	return dur;
}

static const char *leaf_of(const char *folded)
{
	const char *s = strrchr(folded, ';');

	return s ? s + 1 : folded;
}

/* A sample's name: the leaf of its folded stack, which it carries too. */
static const char *view_sample_name(struct cv_core *c, const struct cv_rec *r,
				    const struct evlog_event *e, struct conv_item *it)
{
	(void)e;
	it->stack_folded = cv_strtab_get(&c->stacks, r->stack ? r->stack - 1 : UINT32_MAX);
	return leaf_of(it->stack_folded);
}

/* A marker's name; a step's is "ProfilerStep#N", and it carries N. */
static const char *view_marker_name(const struct evlog_event *e, struct conv_item *it, char *buf,
				    size_t bufsz)
{
	if (!cv_is_step_marker(e))
		return e->u.marker.name.len ? e->u.marker.name.ptr : "<marker>";
	it->step = (uint32_t)e->u.marker.value + 1;
	snprintf(buf, bufsz, "ProfilerStep#%llu", (unsigned long long)e->u.marker.value);
	return buf;
}

static const char *view_demangled(struct cv_core *c, struct evlog_str s, const char *fallback)
{
	const char *d = cv_demangle(c, s.ptr, s.len);

	return d ? d : s.len ? s.ptr : fallback;
}

/* The item's name, category and flow, as its type's view (evview.h) says. */
#define DESCRIBE_NAME_FIELD(s, fallback) ((s).len ? (s).ptr : (fallback))
#define DESCRIBE_NAME_DEMANGLED(s, fallback) view_demangled(c, (s), (fallback))
#define DESCRIBE_NAME_MADE(bytes, x) (x)
#define DESCRIBE_FLOW_NOFLOW
#define DESCRIBE_FLOW_LAUNCH(merged) \
	cv_flow_launch(c, (uint32_t)em->host, it, evlog_corr(e), (merged));
#define DESCRIBE_FLOW_GPU cv_flow_gpu(c, (uint32_t)em->host, it, e->pid, evlog_corr(e));
#define DESCRIBE_VIEW(m, cat, nm, flow, shape, fold, xline, xs) \
	it->name = DESCRIBE_NAME_##nm; \
	it->category = (cat); \
	DESCRIBE_FLOW_##flow
#define DESCRIBE_CASE(N, num, m, track, dur, corr) \
	case EV_##N: \
		EVVIEW_##m(DESCRIBE_VIEW) break;

static void describe(struct emitter *em, const struct cv_rec *r, const struct evlog_event *e,
		     struct conv_item *it, char *buf, size_t bufsz)
{
	struct cv_core *c = em->c;
	const struct cv_log *l = &c->in.logs[r->log < c->in.n ? r->log : 0];

	switch (e->type) {
		EVLOG_TYPES(DESCRIBE_CASE)
	default:
		it->name = "?";
		it->category = "other";
	}
}

/* corr != 0: an EV_LIB_CALL that stands for CUPTI's record of the same call
 * too; it carries CUPTI's correlation id (and so the launch flow). */
static int send(struct emitter *em, const struct conv_item *it)
{
	for (int i = 0; i < em->n_sinks; i++)
		if (em->sinks[i]->item(em->sinks[i]->ctx, it))
			return sink_fail(em->c, em->sinks[i]);
	return 0;
}

/* Detected steps join their driving thread's track: those starting at or
 * before `upto` (before the record starting there: a step is its parent). */
static int send_steps(struct emitter *em, const struct conv_step_set *st, uint64_t upto)
{
	char name[48];

	for (; em->step_next < st->n && st->start[em->step_next] <= upto; em->step_next++) {
		uint32_t i = em->step_next, num = st->first + i;
		struct evlog_event e = { .type = EV_MARKER, .ts = st->start[i], .pid = st->pid,
					 .tid = st->tid };
		struct conv_item it = { .track = st->on_stream ? CONV_TRACK_STREAM : CONV_TRACK_THREAD,
					.pid = st->pid, .tid = st->tid, .device = st->device,
					.stream = st->stream, .start_ns = st->start[i],
					.category = "step", .name = name, .step = num + 1, .ev = &e };
		int n = snprintf(name, sizeof(name), "ProfilerStep#%u", num);

		e.u.marker.name = (struct evlog_str){ .ptr = name, .len = (uint32_t)n };
		e.u.marker.value = num;
		e.u.marker.dur = st->end[i] - st->start[i];
		it.dur_ns = nest(em, st->track, it.start_ns, e.u.marker.dur);
		if (send(em, &it))
			return -1;
	}
	return 0;
}

/* Before a record of track `track` starting at `start`: the steps due (the
 * sets lie on the host's tracks in their order; markers are records). */
static int steps_before(struct emitter *em, uint32_t track, uint64_t start)
{
	const struct conv_steps *st = em->host >= 0 ? em->c->hosts[em->host].meta.steps : NULL;

	while (st && em->set_next < st->n_sets) {
		const struct conv_step_set *set = &st->sets[em->set_next];

		if (!set->from_markers) {
			if (track < set->track)
				return 0;
			if (send_steps(em, set, track == set->track ? start : UINT64_MAX))
				return -1;
			if (track == set->track)
				return 0;
		}
		em->set_next++;
		em->step_next = 0;
	}
	return 0;
}

static int emit_rec(void *ctx, const struct cv_rec *r, uint64_t corr)
{
	struct emitter *em = ctx;
	struct cv_core *c = em->c;
	struct evlog_event e;
	struct conv_item it;
	char buf[256], kernel[CV_LP_NAME_ROOM];

	if (r->track >= c->n_tracks || cv_rec_unpack(r, &e))
		return 0;
	em->merged = corr && e.type == EV_LIB_CALL;
	if (em->merged)
		e.u.lib_call.correlation_id = corr;
	const struct cv_track *t = &c->tracks[r->track];

	cv_lp_apply(c, t->host, r->start, &e, kernel, sizeof(kernel));

	if (em->host >= 0 && (int32_t)t->host != em->host && steps_before(em, UINT32_MAX, 0))
		return -1;
	if (goto_host(em, (int32_t)t->host) || steps_before(em, r->track, r->start))
		return -1;
	memset(&it, 0, sizeof(it));
	it.track = t->kind;
	if (t->kind == CONV_TRACK_THREAD) {
		it.pid = t->a;
		it.tid = t->b;
	} else {
		it.pid = e.pid;
		it.device = t->a;
		it.stream = t->b;
	}
	it.start_ns = r->start;
	it.dur_ns = nest(em, r->track, r->start, r->dur);
	it.ev = &e;
	describe(em, r, &e, &it, buf, sizeof(buf));
	return send(em, &it);
}

static int emit_all(struct cv_core *c, struct cv_spill *sp, struct conv_sink *const *sinks,
		    int n_sinks)
{
	struct emitter em = { .c = c, .sinks = sinks, .n_sinks = n_sinks, .host = -1,
			      .track = UINT32_MAX };
	const struct cv_rec *r;
	uint64_t n = 0, total = cv_spill_count(sp);
	struct cv_dedup dd;
	/* Pairing only matters when both the uprobes and CUPTI saw CUDA calls. */
	int pair = c->n_lib_calls && c->n_gpu_api;
	int rc;

	cv_dedup_init(&dd, emit_rec, &em);
	while ((rc = cv_spill_next(sp, &r, c->err, sizeof(c->err))) == 1) {
		if (pair ? cv_dedup_feed(&dd, r) : emit_rec(&em, r, 0)) {
			rc = -1;
			break;
		}
		if ((++n & 0xffff) == 0 && cv_progress(c, "writing", n, total)) {
			rc = -1;
			break;
		}
	}
	if (rc == 0 && cv_dedup_flush(&dd))
		rc = -1;
	c->st.dup_merged = dd.merged;
	cv_dedup_free(&dd);
	if (rc == 0 && em.host >= 0)
		rc = steps_before(&em, UINT32_MAX, 0);
	if (rc == 0 && goto_host(&em, (int32_t)c->n_hosts - 1) == 0 && em.host >= 0)
		rc = host_end(&em);
	free(em.ends);
	return rc;
}

static size_t run_bytes(void)
{
	const char *s = getenv("LLMT_CONV_RUN_MB");
	long mb = s ? strtol(s, NULL, 10) : 0;

	return (size_t)(mb > 0 && mb < 65536 ? mb : RUN_MB_DEFAULT) << 20;
}

/* A rank's processes are named by it ("rank 0 (pid 123)"); ranks the
 * detector numbered in the order they started are written back. */
static int name_ranks(struct cv_core *c, const struct conv_job *job)
{
	char buf[64];

	for (uint32_t r = 0; job && r < job->n_ranks; r++) {
		struct cv_host *h = &c->hosts[job->ranks[r].host];
		const uint64_t *i = cv_map_get(&h->procs, job->ranks[r].pid, 0);

		if (i)
			h->proc_v[*i - 1].rank = job->ranks[r].rank;
	}
	for (size_t hi = 0; hi < c->n_hosts; hi++)
		for (size_t i = 0; i < c->hosts[hi].n_proc; i++) {
			struct conv_process *p = &c->hosts[hi].proc_v[i];
			int n;

			if (p->rank < 0)
				continue;
			n = snprintf(buf, sizeof(buf), "rank %d (pid %u)", p->rank, p->pid);
			if (!(p->label = cv_arena_strndup(&c->arena, buf, (size_t)n)))
				return -1;
		}
	return 0;
}

/* Judge the step candidates gathered while reading; sinks see the result
 * in their host's metadata. */
static int find_steps(struct cv_core *c, struct cv_steps *st)
{
	struct conv_host_meta **metas = calloc(c->n_hosts + 1, sizeof(*metas));
	int rc = -1;

	if (metas) {
		for (size_t i = 0; i < c->n_hosts; i++)
			metas[i] = &c->hosts[i].meta;
		rc = cv_steps_detect(st, metas);
	}
	free(metas);
	for (size_t i = 0; rc == 0 && i < c->n_hosts; i++) {
		c->hosts[i].meta.steps = cv_steps_of(st, (uint32_t)i);
		c->hosts[i].meta.job = cv_steps_job(st);
	}
	if (rc == 0)
		rc = name_ranks(c, cv_steps_job(st));
	if (rc)
		snprintf(c->err, sizeof(c->err), "out of memory");
	return rc;
}

/* Sinks that plan (a size budget) learn what is coming: one pass over the
 * records before the one that writes them. */
static int plan_sinks(struct cv_core *c, struct cv_spill *sp, struct conv_sink *const *sinks,
		      int n_sinks)
{
	struct conv_sizes *sz = NULL;
	int rc = 0;

	for (int i = 0; i < n_sinks && rc == 0; i++) {
		if (!sinks[i]->plan)
			continue;
		if (!sz) {
			if (!(sz = malloc(sizeof(*sz)))) {
				snprintf(c->err, sizeof(c->err), "out of memory");
				return -1;
			}
			if (cv_sizes_scan(c, sp, sz))
				rc = -1;
		}
		if (rc == 0 && sinks[i]->plan(sinks[i]->ctx, sz))
			rc = sink_fail(c, sinks[i]);
	}
	free(sz);
	return rc;
}

int cv_pass2(struct cv_core *c, struct conv_sink *const *sinks, int n_sinks)
{
	struct pass2 p = { .c = c };
	uint64_t done = 0;
	int rc = -1;

	cv_sync_init(&p.sync, sync_emit, &p);
	if (cv_flow_prepare(c))
		return -1;
	/* No bigger than the logs need (~100 bytes a record): small logs stay
	 * small in memory, big ones get the whole run buffer. */
	size_t want = run_bytes(), need = (size_t)(c->total_events < (1ULL << 40) ? c->total_events : 0) * 160 + (4u << 20);

	p.sp = cv_spill_new(need < want ? need : want, c->n_tracks, NULL, c->err, sizeof(c->err));
	if (!p.sp)
		goto out;
	if (!(p.steps = cv_steps_new((uint32_t)c->n_hosts))) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < c->in.n; i++)
		if (read_log2(&p, i, &done))
			goto out;
	if (py_close_all(&p) || cv_spill_finish(p.sp, c->err, sizeof(c->err)))
		goto out;
	py_free(&p);
	cv_buf_free(&p.fold);
	if (find_steps(c, p.steps) || plan_sinks(c, p.sp, sinks, n_sinks))
		goto out;
	rc = emit_all(c, p.sp, sinks, n_sinks);
out:
	cv_progress_end(c);
	py_free(&p);
	cv_buf_free(&p.fold);
	cv_spill_free(p.sp);
	for (size_t i = 0; i < c->n_hosts; i++)
		c->hosts[i].meta.steps = NULL; /* they live in p.steps */
	for (size_t i = 0; i < c->n_hosts; i++)
		c->hosts[i].meta.job = NULL;
	cv_steps_free(p.steps);
	cv_map_free(&p.stack_cache);
	return rc;
}

/* --------------------------------------------------------------- progress */

volatile sig_atomic_t conv_stop_signal;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t line_every_ns(void)
{
	const char *s = getenv("LLMT_PROGRESS_SECONDS");
	double v = s ? strtod(s, NULL) : 0;

	return (uint64_t)((v > 0 && v < 86400 ? v : 10) * 1e9);
}

int cv_progress_mode(int wanted)
{
	return !wanted ? CV_PROGRESS_NONE : isatty(2) ? CV_PROGRESS_BAR : CV_PROGRESS_LINES;
}

int cv_progress(struct cv_core *c, const char *phase, uint64_t done, uint64_t total)
{
	uint64_t now;

	if (conv_stop_signal) {
		snprintf(c->err, sizeof(c->err), "interrupted (%s)",
			 conv_stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
		return -1;
	}
	if (c->progress == CV_PROGRESS_NONE)
		return 0;
	now = mono_ns();
	if (!c->progress_t0) {
		/* Short conversions stay quiet: the first sign after 2 s. */
		c->progress_t0 = now;
		c->progress_next = now + (c->progress == CV_PROGRESS_BAR ? 2000000000ull : line_every_ns());
	}
	if (now < c->progress_next)
		return 0;
	int pct = total ? (int)(done * 100 / total) : -1;
	double secs = (now - c->progress_t0) / 1e9;

	if (pct > 100)
		pct = 100;
	if (c->progress == CV_PROGRESS_LINES) {
		c->progress_next = now + line_every_ns();
		if (pct >= 0)
			fprintf(stderr, "llmtracker-convert: %s %d%% (%llu of %llu events), %.0f s\n", phase,
				pct, (unsigned long long)done, (unsigned long long)total, secs);
		else
			fprintf(stderr, "llmtracker-convert: %s %llu events, %.0f s\n", phase,
				(unsigned long long)done, secs);
		return 0;
	}
	/* Redraw only when the figure changes: a terminal is slow. */
	if (pct == c->progress_last && phase == c->progress_phase)
		return 0;
	c->progress_last = pct;
	c->progress_phase = phase;
	if (pct >= 0) {
		int bars = pct * 30 / 100;

		fprintf(stderr, "\r%-8s [%.*s%*s] %3d%% %llu/%llu events, %.0f s (Ctrl-C stops, "
			"publishing nothing)", phase, bars, "##############################", 30 - bars,
			"", pct, (unsigned long long)done, (unsigned long long)total, secs);
	} else {
		fprintf(stderr, "\r%-8s %llu events, %.0f s", phase, (unsigned long long)done, secs);
	}
	return 0;
}

void cv_progress_end(struct cv_core *c)
{
	if (c->progress == CV_PROGRESS_BAR && c->progress_phase)
		fprintf(stderr, "\r\033[K");
}
