/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Perfetto's protobuf trace, written front to back with bounded memory like
 * the trace JSON, with the JSON's tracks, slices, arguments and flows:
 *
 *  - sequence 1 holds the clock snapshot (CLOCK_MONOTONIC is the trace's
 *    clock, paired with CLOCK_REALTIME for wall time) and the track
 *    descriptors: processes, threads, GPUs and their streams, Steps;
 *  - every track's events form a packet sequence of their own (items come
 *    track by track): it clears its incremental state first and sets packet
 *    defaults, its track and a sequence clock whose timestamps are deltas
 *    from the packet before (1-3 bytes where an absolute one takes 8);
 *  - names, categories, argument names, repeated argument values and
 *    Python source locations are interned per sequence: each is written
 *    once, in the first packet that uses it, and referred to by number;
 *  - an item becomes a slice-begin packet and, when it ends (items come
 *    sorted and nested), a slice-end packet; samples are instants; a launch
 *    carries its flow id and the kernel it launched ends that flow.
 *
 * Field numbers are those of perfetto's protos/perfetto/trace/ (a copy of
 * the ones used: tests/perfetto/protos, which the tests decode against).
 */
#include "converter/output/perfetto.h"
#include "converter/cv_util.h"
#include "converter/output/fold.h"
#include "converter/output/jsonw.h"
#include "converter/output/pbwire.h"
#include "converter/output/trace_ids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { /* Trace, TracePacket */
	TRACE_PACKET = 1,
	TP_CLOCK_SNAPSHOT = 6, TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11,
	TP_INTERNED = 12, TP_SEQ_FLAGS = 13, TP_DEFAULTS = 59, TP_TRACK_DESCRIPTOR = 60,
	SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2,
};
enum { /* TrackEvent */
	TE_CATEGORY_IIDS = 3, TE_DEBUG_ANNOTATIONS = 4, TE_TYPE = 9, TE_NAME_IID = 10,
	TE_CATEGORIES = 22, TE_NAME = 23, TE_SOURCE_LOCATION = 33, TE_SOURCE_LOCATION_IID = 34,
	TE_FLOW_IDS = 47, TE_TERMINATING_FLOW_IDS = 48,
	TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3,
};
enum { /* DebugAnnotation */
	DA_NAME_IID = 1, DA_UINT = 3, DA_INT = 4, DA_DOUBLE = 5, DA_STRING = 6, DA_NAME = 10,
	DA_ARRAY = 12, DA_STRING_IID = 17,
};
enum { /* SourceLocation; the interned entries' iid and name/str */
	SL_FILE = 2, SL_FUNCTION = 3, SL_LINE = 4, ENT_IID = 1, ENT_NAME = 2,
};
enum { /* ClockSnapshot, BuiltinClock, TracePacketDefaults */
	CS_CLOCKS = 1, CS_PRIMARY_TRACE_CLOCK = 2, CLK_ID = 1, CLK_TIMESTAMP = 2, CLK_INCREMENTAL = 3,
	CLOCK_REALTIME = 1, CLOCK_MONOTONIC = 3, CLOCK_SEQUENCE = 64,
	DEF_TIMESTAMP_CLOCK_ID = 58, DEF_TRACK_EVENT = 11, TED_TRACK_UUID = 11,
};
enum { /* TrackDescriptor, ProcessDescriptor, ThreadDescriptor */
	TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5,
	TD_CHILD_ORDERING = 11, TD_SIBLING_ORDER_RANK = 12, CHILD_ORDERING_EXPLICIT = 3,
	PD_PID = 1, PD_CMDLINE = 2, PD_NAME = 6, THD_PID = 1, THD_TID = 2, THD_NAME = 5,
};

/* What a sequence interns, and where InternedData keeps each. */
enum pf_kind { K_NAME, K_CAT, K_ANN, K_STR, K_LOC, K_N };
static const unsigned intern_field[K_N] = { 2, 1, 3, 29, 4 };

/* Past this many bytes interned on one sequence (a thread with endless
 * distinct strings), strings are written in place: memory stays bounded. */
#define INTERN_MAX (64u << 20)

/* What a track uuid stands for. */
enum { U_PROCESS = 1, U_THREAD, U_GPU, U_STREAM, U_STEPS };

struct pf_seq {
	uint32_t id;            /* trusted_packet_sequence_id; 0: not started */
	uint64_t uuid;          /* its track */
	uint64_t last_ts;       /* its clock's last value */
	struct cv_strtab tab[K_N];
	size_t tab_bytes;
	uint64_t *ends;         /* open slices' ends, innermost last */
	size_t n_ends, cap_ends;
};

struct pf {
	struct conv_sink sink;  /* first: the sink is the object */
	int overwrite, open;
	struct cv_out out;
	const struct conv_host_meta *meta;
	int64_t off;            /* ns to add to a host timestamp: the trace's clock */
	int64_t ref;            /* the trace clock's value at the run's start */
	int have_ref;
	uint64_t pid_base;
	uint32_t next_seq;
	struct pf_seq thr, steps;
	uint64_t steps_named;   /* Steps track described (its uuid), 0: none yet */
	const struct conv_item *cur; /* the item being written ... */
	struct pf_seq *q;       /* ... on this sequence */
	struct pbm pkt, te, intern, ann, ent;
	struct cv_buf key;
	struct perfetto_stats st;
};

static int fail(struct pf *f, const char *msg)
{
	snprintf(f->sink.err, sizeof(f->sink.err), "%.250s", msg);
	return -1;
}

static uint64_t uuid_of(int kind, uint64_t pid, uint64_t tid)
{
	uint64_t x = ((uint64_t)kind << 56) ^ (pid << 24) ^ tid ^ 0x9e3779b97f4a7c15ull;

	/* splitmix64's finalizer: distinct inputs, distinct well-spread uuids */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* ---------------------------------------------------------------- output */

/* The packet built in f->pkt, as one Trace.packet field. */
static int put_packet(struct pf *f)
{
	uint8_t head[1 + LT_VARINT_MAX], *e = head;

	if (f->pkt.oom)
		return fail(f, "out of memory");
	*e++ = TRACE_PACKET << 3 | PB_LEN;
	e = lt_varint_put(e, f->pkt.len);
	if (cv_out_write(&f->out, head, (size_t)(e - head)) ||
	    cv_out_write(&f->out, f->pkt.p, f->pkt.len))
		return fail(f, f->out.err[0] ? f->out.err : "write failed");
	f->st.packets++;
	return 0;
}

static void put_clock(struct pbm *cs, struct pbm *c, uint32_t id, uint64_t ts, int incremental)
{
	pbm_reset(c);
	pbm_uint(c, CLK_ID, id);
	pbm_uint(c, CLK_TIMESTAMP, ts);
	if (incremental)
		pbm_uint(c, CLK_INCREMENTAL, 1);
	pbm_msg(cs, CS_CLOCKS, c);
}

/* The trace's clock: CLOCK_MONOTONIC of the first host, the run's start
 * paired with its wall time. Other hosts are put on it by wall time, as
 * the trace JSON aligns them. */
static int clock_snapshot(struct pf *f)
{
	pbm_reset(&f->te);
	put_clock(&f->te, &f->ent, CLOCK_MONOTONIC, (uint64_t)f->ref, 0);
	put_clock(&f->te, &f->ent, CLOCK_REALTIME, f->meta->run_base_realtime_ns, 0);
	pbm_uint(&f->te, CS_PRIMARY_TRACE_CLOCK, CLOCK_MONOTONIC);
	pbm_reset(&f->pkt);
	pbm_msg(&f->pkt, TP_CLOCK_SNAPSHOT, &f->te);
	pbm_uint(&f->pkt, TP_SEQ_ID, 1);
	return put_packet(f);
}

/* ------------------------------------------------------------- sequences */

static void seq_reset(struct pf_seq *q)
{
	for (int k = 0; k < K_N; k++)
		cv_strtab_free(&q->tab[k]);
	memset(q->tab, 0, sizeof(q->tab));
	q->tab_bytes = 0;
	q->n_ends = 0;
	q->id = 0;
}

/* A sequence's first packet, as Perfetto's own SDK writes it: incremental
 * state cleared, its defaults (track, clock), and its clock anchored at ts
 * on the trace's clock. */
static int seq_start(struct pf *f, struct pf_seq *q, uint64_t ts)
{
	q->id = ++f->next_seq;
	q->last_ts = ts;
	pbm_reset(&f->ent);
	pbm_uint(&f->ent, TED_TRACK_UUID, q->uuid);
	pbm_reset(&f->te);
	pbm_uint(&f->te, DEF_TIMESTAMP_CLOCK_ID, CLOCK_SEQUENCE);
	pbm_msg(&f->te, DEF_TRACK_EVENT, &f->ent);
	pbm_reset(&f->pkt);
	pbm_uint(&f->pkt, TP_SEQ_ID, q->id);
	pbm_uint(&f->pkt, TP_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	pbm_msg(&f->pkt, TP_DEFAULTS, &f->te);
	pbm_reset(&f->te);
	put_clock(&f->te, &f->ann, CLOCK_MONOTONIC, ts, 0);
	put_clock(&f->te, &f->ann, CLOCK_SEQUENCE, ts, 1);
	pbm_msg(&f->pkt, TP_CLOCK_SNAPSHOT, &f->te);
	return put_packet(f);
}

/* The event built in f->te (and what it interned, in f->intern) at ts. */
static int event_packet(struct pf *f, struct pf_seq *q, uint64_t ts)
{
	pbm_reset(&f->pkt);
	pbm_uint(&f->pkt, TP_TIMESTAMP, ts - q->last_ts);
	q->last_ts = ts;
	pbm_msg(&f->pkt, TP_TRACK_EVENT, &f->te);
	if (f->intern.len)
		pbm_msg(&f->pkt, TP_INTERNED, &f->intern);
	pbm_uint(&f->pkt, TP_SEQ_ID, q->id);
	pbm_uint(&f->pkt, TP_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	return put_packet(f);
}

static int slice_end(struct pf *f, struct pf_seq *q, uint64_t ts)
{
	pbm_reset(&f->te);
	pbm_reset(&f->intern);
	pbm_uint(&f->te, TE_TYPE, TYPE_SLICE_END);
	return event_packet(f, q, ts);
}

/* End the open slices that end by ts, innermost first. */
static int close_until(struct pf *f, struct pf_seq *q, uint64_t ts)
{
	while (q->n_ends && q->ends[q->n_ends - 1] <= ts)
		if (slice_end(f, q, q->ends[--q->n_ends]))
			return -1;
	return 0;
}

/* End a sequence: its slices, and its interned strings, which no later
 * packet refers to. */
static int seq_end(struct pf *f, struct pf_seq *q)
{
	int rc = q->id ? close_until(f, q, UINT64_MAX) : 0;

	seq_reset(q);
	return rc;
}

static int push_end(struct pf_seq *q, uint64_t end)
{
	if (q->n_ends == q->cap_ends) {
		size_t nc = q->cap_ends ? q->cap_ends * 2 : 64;
		uint64_t *ne = realloc(q->ends, nc * sizeof(*ne));

		if (!ne)
			return -1;
		q->ends = ne;
		q->cap_ends = nc;
	}
	q->ends[q->n_ends++] = end;
	return 0;
}

/* ------------------------------------------------------------- interning */

/* The interning id of s[0..n) on sequence q, its entry written into
 * f->intern the first time (*is_new; a K_LOC entry, a whole SourceLocation,
 * the caller writes); 0 when it is to be written in place (the bound
 * reached, or out of memory). */
static uint64_t intern(struct pf *f, struct pf_seq *q, enum pf_kind k, const char *s, size_t n,
		       int *is_new)
{
	struct cv_strtab *t = &q->tab[k];
	size_t before = t->n;

	*is_new = 0;
	if (q->tab_bytes + n > INTERN_MAX)
		return 0;
	int64_t idx = cv_strtab_intern(t, s, n);

	if (idx < 0)
		return 0;
	if ((size_t)idx == before) {
		*is_new = 1;
		q->tab_bytes += n + 32;
		if (k != K_LOC) {
			pbm_reset(&f->ent);
			pbm_uint(&f->ent, ENT_IID, (uint64_t)idx + 1);
			pbm_str(&f->ent, ENT_NAME, s, n);
			pbm_msg(&f->intern, intern_field[k], &f->ent);
		}
	}
	return (uint64_t)idx + 1;
}

/* A string field of the event: its interned id (iid_field), else in place. */
static void str_ref(struct pf *f, struct pbm *m, enum pf_kind k, unsigned iid_field,
		    unsigned str_field, const char *s, size_t n)
{
	int is_new;
	uint64_t iid = intern(f, f->q, k, s, n, &is_new);

	if (iid)
		pbm_uint(m, iid_field, iid);
	else
		pbm_str(m, str_field, s, n);
}

/* ------------------------------------------------------------- arguments */

/* Each argument is a debug annotation with an interned name. */
static void ann_begin(struct pf *f, const char *k)
{
	pbm_reset(&f->ann);
	str_ref(f, &f->ann, K_ANN, DA_NAME_IID, DA_NAME, k, strlen(k));
}

static int ann_end(struct pf *f)
{
	pbm_msg(&f->te, TE_DEBUG_ANNOTATIONS, &f->ann);
	return 0;
}

static inline int args_u64(struct pf *f, const char *k, uint64_t v)
{
	ann_begin(f, k);
	pbm_uint(&f->ann, DA_UINT, v);
	return ann_end(f);
}

static inline int args_i64(struct pf *f, const char *k, int64_t v)
{
	ann_begin(f, k);
	pbm_int(&f->ann, DA_INT, v);
	return ann_end(f);
}

static inline int args_dbl(struct pf *f, const char *k, double v)
{
	ann_begin(f, k);
	pbm_double(&f->ann, DA_DOUBLE, v);
	return ann_end(f);
}

/* Values that repeat (libraries, stacks, kinds) are interned; a call's own
 * text (its decoded arguments, a marker's text, a fold's tops) is not. */
static int args_str(struct pf *f, const char *k, const char *s, size_t n)
{
	if (!s) {
		s = "";
		n = 0;
	}
	ann_begin(f, k);
	if (!strcmp(k, "args") || !strcmp(k, "text") || !strncmp(k, "top ", 4))
		pbm_str(&f->ann, DA_STRING, s, n);
	else
		str_ref(f, &f->ann, K_STR, DA_STRING_IID, DA_STRING, s, n);
	return ann_end(f);
}

static int args_dim3(struct pf *f, const char *k, const uint32_t *v)
{
	ann_begin(f, k);
	for (int i = 0; i < 3; i++) {
		/* an array value: a DebugAnnotation of one uint_value */
		pbm_tag(&f->ann, DA_ARRAY, PB_LEN);
		pbm_varint(&f->ann, 1 + lt_varint_len(v[i]));
		pbm_uint(&f->ann, DA_UINT, v[i]);
	}
	return ann_end(f);
}

/* A Python call's file and line: its interned source location. */
static int args_py(struct pf *f, const char *file, size_t n, uint32_t line)
{
	const char *fn = f->cur->name;
	size_t fl = strlen(fn);
	struct cv_buf *k = &f->key;
	int is_new;
	uint64_t iid;

	k->len = 0;
	if (cv_buf_append(k, file ? file : "", file ? n : 0) || cv_buf_putc(k, 0) ||
	    cv_buf_append(k, fn, fl) || cv_buf_append(k, &line, sizeof(line)))
		return -1;
	iid = intern(f, f->q, K_LOC, k->p, k->len, &is_new);
	pbm_reset(&f->ent);
	if (iid)
		pbm_uint(&f->ent, ENT_IID, iid);
	if (!iid || is_new) {
		pbm_str(&f->ent, SL_FILE, file ? file : "", file ? n : 0);
		pbm_str(&f->ent, SL_FUNCTION, fn, fl);
		pbm_uint(&f->ent, SL_LINE, line);
	}
	if (!iid)
		pbm_msg(&f->te, TE_SOURCE_LOCATION, &f->ent);
	else if (is_new)
		pbm_msg(&f->intern, intern_field[K_LOC], &f->ent);
	if (iid)
		pbm_uint(&f->te, TE_SOURCE_LOCATION_IID, iid);
	return 0;
}

static inline const struct evlog_event *args_props(const struct pf *f, uint32_t device)
{
	return trace_gpu_props(f->meta, device);
}

#define ARGS_CTX struct pf
#include "converter/output/item_args.h"

/* ----------------------------------------------------------- descriptors */

static int descriptor(struct pf *f)
{
	pbm_reset(&f->pkt);
	pbm_msg(&f->pkt, TP_TRACK_DESCRIPTOR, &f->te);
	pbm_uint(&f->pkt, TP_SEQ_ID, 1);
	return put_packet(f);
}

static int describe_process(struct pf *f, const struct conv_process *p)
{
	uint64_t pid = f->pid_base + p->pid;
	char name[600];

	trace_process_name(f->meta, p, 1, name, sizeof(name));
	pbm_reset(&f->ent);
	pbm_uint(&f->ent, PD_PID, pid);
	if (*p->cmdline)
		pbm_str(&f->ent, PD_CMDLINE, p->cmdline, strlen(p->cmdline));
	pbm_str(&f->ent, PD_NAME, name, strlen(name));
	pbm_reset(&f->te);
	pbm_uint(&f->te, TD_UUID, uuid_of(U_PROCESS, pid, 0));
	pbm_msg(&f->te, TD_PROCESS, &f->ent);
	return descriptor(f);
}

static int describe_thread(struct pf *f, const struct conv_thread *th)
{
	const struct conv_process *p = conv_meta_process(f->meta, th->pid);
	const char *n = *th->name ? th->name : p ? p->name : "";
	uint64_t pid = f->pid_base + th->pid;

	pbm_reset(&f->ent);
	pbm_uint(&f->ent, THD_PID, pid);
	pbm_uint(&f->ent, THD_TID, th->tid);
	if (*n)
		pbm_str(&f->ent, THD_NAME, n, strlen(n));
	pbm_reset(&f->te);
	pbm_uint(&f->te, TD_UUID, uuid_of(U_THREAD, pid, th->tid));
	pbm_msg(&f->te, TD_THREAD, &f->ent);
	return descriptor(f);
}

/* A named track: a GPU (parent 0), one of its streams, a process's Steps. */
static int describe_named(struct pf *f, uint64_t uuid, uint64_t parent, const char *name,
			  int64_t rank)
{
	pbm_reset(&f->te);
	pbm_uint(&f->te, TD_UUID, uuid);
	if (parent)
		pbm_uint(&f->te, TD_PARENT, parent);
	pbm_str(&f->te, TD_NAME, name, strlen(name));
	if (rank >= 0)
		pbm_uint(&f->te, TD_SIBLING_ORDER_RANK, (uint64_t)rank);
	else
		pbm_uint(&f->te, TD_CHILD_ORDERING, CHILD_ORDERING_EXPLICIT);
	return descriptor(f);
}

static uint64_t gpu_pid(const struct pf *f, uint32_t device)
{
	return f->pid_base + trace_gpu_pid(f->meta, device);
}

static int describe_gpus(struct pf *f)
{
	const struct conv_host_meta *m = f->meta;
	char name[300];

	for (uint32_t i = 0; i < m->n_gpus; i++) {
		const struct conv_gpu *g = &m->gpus[i];
		uint64_t pid = gpu_pid(f, g->device), gu = uuid_of(U_GPU, pid, 0);

		trace_gpu_name(g, name, sizeof(name));
		if (describe_named(f, gu, 0, name, -1))
			return -1;
		for (uint32_t s = 0; s < g->n_streams; s++) {
			snprintf(name, sizeof(name), "stream %u", g->streams[s]);
			if (describe_named(f, uuid_of(U_STREAM, pid, g->streams[s]), gu, name,
					   g->streams[s] & 0x7fffffff))
				return -1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

static int pf_begin_host(void *ctx, const struct conv_host_meta *m)
{
	struct pf *f = ctx;

	f->meta = m;
	f->pid_base = trace_pid_base(m, 1);
	/* Unsigned arithmetic: wraps (defined) instead of overflowing on corrupt clocks. */
	int64_t run_rel = (int64_t)(m->base_realtime_ns - m->run_base_realtime_ns - m->base_mono_ns);

	if (!f->have_ref) {
		f->ref = (int64_t)(m->base_mono_ns - (m->base_realtime_ns - m->run_base_realtime_ns));
		f->have_ref = 1;
		if (clock_snapshot(f))
			return -1;
	}
	f->off = run_rel + f->ref;
	f->steps_named = 0;
	for (uint32_t i = 0; i < m->n_processes; i++)
		if (describe_process(f, &m->processes[i]))
			return -1;
	for (uint32_t i = 0; i < m->n_threads; i++)
		if (describe_thread(f, &m->threads[i]))
			return -1;
	return describe_gpus(f);
}

static int pf_end_host(void *ctx)
{
	struct pf *f = ctx;

	return seq_end(f, &f->thr) || seq_end(f, &f->steps) ? -1 : 0;
}

static int pf_finish(void *ctx, int ok)
{
	struct pf *f = ctx;
	int rc = 0;

	if (!f->open)
		return 0;
	f->open = 0;
	if (ok && cv_out_close(&f->out)) {
		fail(f, f->out.err[0] ? f->out.err : "write failed");
		ok = 0;
		rc = -1;
	}
	if (!ok) {
		cv_out_discard(&f->out);
		return rc;
	}
	f->st.bytes = f->out.bytes_out;
	return cv_out_publish(&f->out, f->overwrite, f->sink.err, sizeof(f->sink.err));
}

/* ----------------------------------------------------------------- items */

static uint64_t trace_ts(const struct pf *f, uint64_t host_ns)
{
	int64_t v = (int64_t)(host_ns + (uint64_t)f->off);

	return v > 0 ? (uint64_t)v : 0;
}

/* The sequence of the item's track, started, with what ended before ts
 * ended. */
static struct pf_seq *seq_for(struct pf *f, const struct conv_item *it, uint64_t ts)
{
	struct pf_seq *q = &f->thr;
	uint64_t pid = f->pid_base + it->pid, uuid;

	if (it->track == CONV_TRACK_STREAM) {
		pid = gpu_pid(f, it->device);
		uuid = uuid_of(U_STREAM, pid, it->stream);
	} else if (trace_on_steps(it)) {
		q = &f->steps;
		uuid = uuid_of(U_STEPS, pid, 0);
		if (f->steps_named != uuid) {
			if (describe_named(f, uuid, uuid_of(U_PROCESS, pid, 0), "Steps", -1))
				return NULL;
			f->steps_named = uuid;
		}
	} else {
		uuid = uuid_of(U_THREAD, pid, it->tid);
	}
	if (q->id && q->uuid != uuid && seq_end(f, q))
		return NULL;
	q->uuid = uuid;
	if (!q->id && seq_start(f, q, ts))
		return NULL;
	if (close_until(f, q, ts))
		return NULL;
	return q;
}

/* The item's begin (or instant) event into f->te, what it interns into f->intern. */
static int begin_event(struct pf *f, const struct conv_item *it, int instant)
{
	pbm_reset(&f->te);
	pbm_reset(&f->intern);
	pbm_uint(&f->te, TE_TYPE, instant ? TYPE_INSTANT : TYPE_SLICE_BEGIN);
	if (it->fold) /* a name of its own: not worth interning */
		pbm_str(&f->te, TE_NAME, it->name, strlen(it->name));
	else
		str_ref(f, &f->te, K_NAME, TE_NAME_IID, TE_NAME, it->name, strlen(it->name));
	str_ref(f, &f->te, K_CAT, TE_CATEGORY_IIDS, TE_CATEGORIES, it->category,
		strlen(it->category));
	if (item_args(f, it))
		return fail(f, "out of memory");
	if (it->flow_id) {
		pbm_fixed64(&f->te, it->flow_start ? TE_FLOW_IDS : TE_TERMINATING_FLOW_IDS, it->flow_id);
		f->st.flows++;
	}
	return 0;
}

static int pf_item(void *ctx, const struct conv_item *it)
{
	struct pf *f = ctx;
	int instant = cv_view_of(it->ev->type)->instant;
	uint64_t ts = trace_ts(f, it->start_ns), end;
	struct pf_seq *q = seq_for(f, it, ts);

	if (!q)
		return -1;
	if (ts < q->last_ts) { /* items come sorted: not expected */
		f->st.reordered++;
		ts = q->last_ts;
	}
	end = ts + it->dur_ns;
	if (q->n_ends && end > q->ends[q->n_ends - 1])
		end = q->ends[q->n_ends - 1]; /* nested in its parent, as it came */
	f->cur = it;
	f->q = q;
	if (begin_event(f, it, instant) || event_packet(f, q, ts))
		return -1;
	if (instant) {
		f->st.instants++;
		return 0;
	}
	f->st.slices++;
	if (end == ts)
		return slice_end(f, q, ts);
	return push_end(q, end) ? fail(f, "out of memory") : 0;
}

/* ----------------------------------------------------------- construction */

/* Bytes per item, from the output on the demo's profile
 * (docs/MEASUREMENTS.md): strings are interned, a slice is a begin and an
 * end packet. It may take 5x the JSON's budget: ~5x denser, and its viewer
 * is built for big traces (the JSON's viewers parse the whole text at
 * once; Perfetto streams packets into its own tables). */
const struct fold_model perfetto_model = {
	.what = "Perfetto trace", .budget_x = 5,
	.item = 34, .str_pct = 3, .flow = 12, .fold = 160, .track = 80,
};

struct conv_sink *perfetto_new_file(const char *path, int overwrite, char *err, size_t errsz)
{
	struct pf *f = calloc(1, sizeof(*f));

	if (!f) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	if (cv_out_open(&f->out, -1, path, 0, overwrite, err, errsz)) {
		free(f);
		return NULL;
	}
	f->open = 1;
	f->overwrite = overwrite;
	f->next_seq = 1; /* 1: the clock and the track descriptors */
	f->sink.name = "Perfetto trace";
	f->sink.ctx = f;
	f->sink.begin_host = pf_begin_host;
	f->sink.item = pf_item;
	f->sink.end_host = pf_end_host;
	f->sink.finish = pf_finish;
	return &f->sink;
}

void perfetto_stats(const struct conv_sink *s, struct perfetto_stats *st)
{
	*st = ((const struct pf *)s->ctx)->st;
}

void perfetto_free(struct conv_sink *s)
{
	if (!s)
		return;
	struct pf *f = s->ctx;

	pf_finish(f, 0);
	seq_reset(&f->thr);
	seq_reset(&f->steps);
	free(f->thr.ends);
	free(f->steps.ends);
	pbm_free(&f->pkt);
	pbm_free(&f->te);
	pbm_free(&f->intern);
	pbm_free(&f->ann);
	pbm_free(&f->ent);
	cv_buf_free(&f->key);
	free(f);
}
