/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pass 1: read every log once for metadata only — hosts and their clocks,
 * processes, threads, GPUs and streams, symbols, correlation ids seen on
 * each side of a launch (cudacorr.c), the time range — then number the tracks. Symbols
 * usually come at the end of a log, which is why timeline items can only be
 * named in a second pass.
 */
#include "common/grow.h"
#include "converter/conv_int.h"
#include "converter/pairing/launchpair.h"

#include <stdlib.h>
#include <string.h>

#define DUR_MAX (1ULL << 46) /* ~19.5 h: longer durations are corrupt */

static int str_eq(const char *a, struct evlog_str b)
{
	return strlen(a) == b.len && memcmp(a, b.ptr, b.len) == 0;
}

static char *dup_str(struct cv_core *c, struct evlog_str s)
{
	return cv_arena_strndup(&c->arena, s.len ? s.ptr : "", s.len);
}

static const char *clean_host(struct evlog_str h)
{
	return h.len ? NULL : "unknown-host";
}

/* Syscall numbers are named from our table only for the machine it was
 * generated for. */
static int syscall_table_of(const char *machine)
{
#if defined(__x86_64__)
	return !strcmp(machine, "x86_64");
#else
	(void)machine;
	return 0;
#endif
}

static struct cv_host *host_for(struct cv_core *c, const struct evlog_header *hdr,
				struct cv_log *log)
{
	const char *dflt = clean_host(hdr->host);
	struct evlog_str hn = dflt ? evlog_s(dflt) : hdr->host;

	for (size_t i = 0; i < c->n_hosts; i++) {
		struct cv_host *h = &c->hosts[i];

		if (!str_eq(h->name, hn))
			continue;
		log->host = (uint32_t)i;
		/* Same boot: same CLOCK_MONOTONIC. Otherwise go through wall time.
		 * A log without a boot id (the injected CUPTI library's) was
		 * written on this host's running kernel: same clock. */
		if (h->boot_id[0] && hdr->boot_id.len && !str_eq(h->boot_id, hdr->boot_id) &&
		    hdr->mono_ns && h->anchor_mono)
			log->clock_off = (int64_t)((hdr->realtime_ns - hdr->mono_ns) -
						   (h->anchor_rt - h->anchor_mono));
		if (!h->machine[0] && hdr->machine.len && !(h->machine = dup_str(c, hdr->machine)))
			return NULL;
		if (!h->boot_id[0] && hdr->boot_id.len && !(h->boot_id = dup_str(c, hdr->boot_id)))
			return NULL;
		return h;
	}
	struct cv_host *nh = realloc(c->hosts, (c->n_hosts + 1) * sizeof(*nh));

	if (!nh)
		return NULL;
	c->hosts = nh;
	struct cv_host *h = &c->hosts[c->n_hosts];

	memset(h, 0, sizeof(*h));
	h->name = dup_str(c, hn);
	h->boot_id = dup_str(c, hdr->boot_id);
	h->machine = dup_str(c, hdr->machine);
	if (!h->name || !h->boot_id || !h->machine)
		return NULL;
	h->anchor_mono = hdr->mono_ns;
	h->anchor_rt = hdr->realtime_ns;
	h->min_ts = UINT64_MAX;
	h->max_ts = 0;
	h->syscall_table = syscall_table_of(h->machine);
	log->host = (uint32_t)c->n_hosts++;
	return h;
}

/* ------------------------------------------------------------ registration */

static struct conv_process *proc_get(struct cv_core *c, struct cv_host *h, uint32_t pid)
{
	int is_new;
	uint64_t *v = cv_map_put(&h->procs, pid, 0, &is_new);

	if (!v)
		return NULL;
	if (!is_new)
		return &h->proc_v[*v - 1];
	if (lt_grow((void **)&h->proc_v, &h->cap_proc, h->n_proc + 1, sizeof(*h->proc_v), 16))
		return NULL;
	struct conv_process *p = &h->proc_v[h->n_proc++];

	*v = h->n_proc;
	p->pid = pid;
	p->name = "";
	p->cmdline = "";
	p->rank = -1;
	p->label = "";
	(void)c;
	return p;
}

static struct conv_thread *thread_get(struct cv_core *c, struct cv_host *h, uint32_t pid,
				      uint32_t tid)
{
	int is_new;
	uint64_t *v = cv_map_put(&h->threads, pid, tid, &is_new);

	if (!v)
		return NULL;
	if (!is_new)
		return &h->thr_v[*v - 1];
	if (h->n_thr == h->cap_thr) {
		size_t nc = h->cap_thr ? h->cap_thr * 2 : 16;
		struct conv_thread *nt = realloc(h->thr_v, nc * sizeof(*nt));

		if (!nt)
			return NULL;
		h->thr_v = nt;
		h->cap_thr = nc;
	}
	struct conv_thread *t = &h->thr_v[h->n_thr++];

	*v = h->n_thr;
	t->pid = pid;
	t->tid = tid;
	t->name = "";
	t->own = 0;
	return proc_get(c, h, pid) ? t : NULL;
}

static int gpu_get(struct cv_host *h, uint32_t device)
{
	int is_new;
	uint64_t *v = cv_map_put(&h->gpus, device, 0, &is_new);

	if (!v)
		return -1;
	if (!is_new)
		return (int)(*v - 1);
	if (h->n_gpu == h->cap_gpu) {
		size_t nc = h->cap_gpu ? h->cap_gpu * 2 : 8;
		struct conv_gpu *ng = realloc(h->gpu_v, nc * sizeof(*ng));

		if (!ng)
			return -1;
		h->gpu_v = ng;
		struct evlog_event *np = realloc(h->gpu_props, nc * sizeof(*np));

		if (!np)
			return -1;
		h->gpu_props = np;
		h->cap_gpu = nc;
	}
	memset(&h->gpu_v[h->n_gpu], 0, sizeof(h->gpu_v[0]));
	memset(&h->gpu_props[h->n_gpu], 0, sizeof(h->gpu_props[0]));
	h->gpu_v[h->n_gpu].device = device;
	*v = ++h->n_gpu;
	return (int)(*v - 1);
}

static int stream_get(struct cv_core *c, struct cv_host *h, uint32_t pid, uint32_t device,
		      uint32_t stream)
{
	int is_new;

	if (gpu_get(h, device) < 0 || !proc_get(c, h, pid))
		return -1;
	return cv_map_put(&h->stream_set, device, stream, &is_new) ? 0 : -1;
}

static int add_symbol(struct cv_core *c, struct cv_host *h, const struct evlog_event *e)
{
	int is_new;
	uint64_t *v = cv_map_put(&h->syms, e->pid, e->u.symbol.addr, &is_new);

	if (!v)
		return -1;
	if (!is_new)
		return 0;
	struct cv_sym *s = cv_arena_alloc(&c->arena, sizeof(*s));

	if (!s)
		return -1;
	/* Frames show demangled names; the collector may have logged raw ones. */
	const char *dm = cv_demangle(c, e->u.symbol.name.ptr, e->u.symbol.name.len);

	s->name = dm ? dm : dup_str(c, e->u.symbol.name);
	s->module = dup_str(c, e->u.symbol.module);
	s->offset = e->u.symbol.offset;
	if (!s->name || !s->module)
		return -1;
	*v = (uint64_t)(uintptr_t)s;
	return 0;
}

const struct cv_sym *cv_sym_find(const struct cv_host *h, uint32_t pid, uint64_t addr)
{
	const uint64_t *v = cv_map_get(&h->syms, pid, addr);

	return v ? (const struct cv_sym *)(uintptr_t)*v : NULL;
}

static int gpu_props(struct cv_core *c, struct cv_host *h, const struct evlog_event *e)
{
	int g = gpu_get(h, e->u.gpu_device.device);

	if (g < 0)
		return -1;
	struct evlog_event *p = &h->gpu_props[g];

	*p = *e;
	p->u.gpu_device.name.ptr = dup_str(c, e->u.gpu_device.name);
	p->u.gpu_device.uuid.ptr = dup_str(c, e->u.gpu_device.uuid);
	if (!p->u.gpu_device.name.ptr || !p->u.gpu_device.uuid.ptr)
		return -1;
	h->gpu_v[g].props = p;
	return 0;
}

static int set_name(struct cv_core *c, const char **dst, struct evlog_str s)
{
	if (!s.len)
		return 0;
	char *n = dup_str(c, s);

	if (!n)
		return -1;
	*dst = n;
	return 0;
}

/* Time range of timeline events, on the host clock. */
static void widen(struct cv_host *h, const struct cv_log *l, uint64_t ts, uint64_t dur)
{
	if (!ts)
		return;
	uint64_t s = ts + (uint64_t)l->clock_off;

	if (dur > DUR_MAX)
		dur = 0;
	if (s < h->min_ts)
		h->min_ts = s;
	if (s + dur > h->max_ts)
		h->max_ts = s + dur;
}

static int thread_event(struct cv_core *c, struct cv_host *h, const struct evlog_event *e)
{
	uint32_t tid = e->tid ? e->tid : e->pid;

	/* Events come in runs of one thread: skip the lookup for a repeat. */
	uint32_t hi = (uint32_t)(h - c->hosts) + 1;

	if (c->thr_memo_host == hi && c->thr_memo_pid == e->pid && c->thr_memo_tid == tid)
		return 0;
	if (!thread_get(c, h, e->pid, tid))
		return -1;
	c->thr_memo_host = hi;
	c->thr_memo_pid = e->pid;
	c->thr_memo_tid = tid;
	return 0;
}

/* The process's track of the event's GPU (CV_DEVICE_TID). */
static int device_event(struct cv_core *c, struct cv_host *h, const struct evlog_event *e)
{
	uint32_t dev = evlog_device(e);
	struct conv_thread *t = thread_get(c, h, e->pid, CV_DEVICE_TID(dev));
	char name[16];

	if (!t)
		return -1;
	if (*t->name)
		return 0;
	snprintf(name, sizeof(name), "GPU %u", dev);
	return set_name(c, &t->name, evlog_s(name));
}

const struct evlog_event *cv_node_tid(const struct cv_host *h, const struct cv_log *l,
				      const struct evlog_event *e, struct evlog_event *tmp)
{
	uint64_t *node;

	/* the library itself writes its main thread as the node's pid */
	if (!l->ns_pid || e->pid == l->ns_pid || !e->tid || e->tid == e->pid)
		return e;
	*tmp = *e;
	if (e->tid == l->ns_pid)
		tmp->tid = e->pid;
	else if ((node = cv_map_get(&h->ns_tids, e->pid, e->tid)))
		tmp->tid = (uint32_t)*node;
	else
		return e; /* no marker: a thread the collector did not see */
	return tmp;
}

/* Pass 1 for an event with a place on a timeline and nothing else to
 * collect: the host's time range, its thread, device track or GPU stream
 * (and the stream's correlation id), as its schema traits say. */
static inline __attribute__((always_inline))
int meta_timeline(struct cv_core *c, struct cv_host *h, struct cv_log *l, const struct evlog_event *e)
{
	const struct evlog_traits *tr = evlog_type_traits(e->type);

	if (tr->track == EVLOG_TRACK_META) {
		c->st.unknown_type += e->type > EV_TYPE_MAX; /* the reader returns none */
		return 0;
	}
	widen(h, l, e->ts, evlog_dur(e));
	if (tr->track == EVLOG_TRACK_THREAD)
		return thread_event(c, h, e);
	if (tr->track == EVLOG_TRACK_DEVICE)
		return device_event(c, h, e);
	if (cv_corr_mark(c, l->host, e->pid, evlog_corr(e), CV_CORR_GPU))
		return -1;
	return stream_get(c, h, e->pid, evlog_device(e), evlog_stream(e));
}

static int meta_event(struct cv_core *c, struct cv_host *h, struct cv_log *l,
		      const struct evlog_event *e)
{
	struct conv_process *p;
	struct conv_thread *t;
	uint64_t *slot;
	int lp = cv_lp_note(c, l->host, l, e);

	if (lp)
		return lp < 0 ? -1 : 0;
	switch (e->type) {
	case EV_PROCESS:
		if (!(p = proc_get(c, h, e->pid)))
			return -1;
		if (!p->start_ns || e->ts + (uint64_t)l->clock_off < p->start_ns)
			p->start_ns = e->ts + (uint64_t)l->clock_off;
		return set_name(c, &p->name, e->u.process.name) ||
		       set_name(c, &p->cmdline, e->u.process.cmdline) ? -1 : 0;
	case EV_RANK:
		if (!(p = proc_get(c, h, e->pid)))
			return -1;
		if (e->u.rank.rank >= 0 && e->u.rank.rank <= INT32_MAX)
			p->rank = (int32_t)e->u.rank.rank;
		return 0;
	case EV_THREAD:
		if (!(t = thread_get(c, h, e->pid, e->tid ? e->tid : e->pid)))
			return -1;
		return set_name(c, &t->name, e->u.thread.name);
	case EV_MARKER:
		switch (e->u.marker.kind) {
		case EVLOG_MARK_NOTE:
			return meta_timeline(c, h, l, e);
		case EVLOG_MARK_NS_TID:
			if (!(slot = cv_map_put(&h->ns_tids, e->pid, (uint32_t)e->u.marker.value, NULL)))
				return -1;
			*slot = e->tid;
			return 0;
		case EVLOG_MARK_OWN_THREAD:
			if (!(t = thread_get(c, h, e->pid, e->tid ? e->tid : e->pid)))
				return -1;
			t->own = 1;
			t->name = EVLOG_OWN_THREAD_NAME;
			return 0;
		default: /* the CUPTI switches (launchpair.c), or a later kind */
			return 0;
		}
	case EV_LIB_CALL:
		c->n_lib_calls++;
		widen(h, l, e->ts, evlog_dur(e));
		if (cv_corr_mark(c, l->host, e->pid, e->u.lib_call.correlation_id, CV_CORR_LIB))
			return -1;
		return thread_event(c, h, e);
	case EV_GPU_API:
		c->n_gpu_api++;
		widen(h, l, e->ts, evlog_dur(e));
		if (cv_corr_mark(c, l->host, e->pid, e->u.gpu_api.correlation_id, CV_CORR_API))
			return -1;
		return thread_event(c, h, e);
	case EV_GPU_DEVICE:
		return gpu_props(c, h, e);
	case EV_LOST:
		if (e->u.lost.source <= EVSRC_MAX)
			c->st.lost[e->u.lost.source] += e->u.lost.count;
		else
			c->st.lost[EVSRC_OTHER] += e->u.lost.count;
		return 0;
	case EV_SYMBOL:
		return add_symbol(c, h, e);
	default:
		return meta_timeline(c, h, l, e);
	}
}

static int is_target_log(const struct evlog_header *hdr)
{
	return hdr->producer.len == 6 && !memcmp(hdr->producer.ptr, "inject", 6);
}

/* A writer's partial file (".NAME.partial"): a log it has not published. */
static int unfinished(const char *name)
{
	const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
	size_t n = strlen(base);

	return base[0] == '.' && n > 9 && !strcmp(base + n - 8, ".partial");
}

/* Round 0 reads every log but those a target wrote itself (the injected
 * library's), round 1 those: by then the collector's EVLOG_MARK_NS_TID
 * markers are known. Hosts are numbered in input order all the same. */
static int read_log(struct cv_core *c, struct cv_log *l, int round)
{
	struct evlog_reader *r;
	struct evlog_event mapped;
	const struct evlog_event *e;
	char msg[512];
	int rc;

	if (l->bad) /* dropped before reading (see cv_inputs_filter_cupti) */
		return 0;
	if (cv_log_reader(l, &r, msg, sizeof(msg))) {
		l->bad = 1;
		c->in.skipped++;
		cv_buf_printf(&c->in.notes, "skipped %s: %s\n", l->name, msg);
		return 0;
	}
	const struct evlog_header *hdr = evlog_reader_header(r);
	struct cv_host *h = host_for(c, hdr, l);

	if (!h) {
		evlog_reader_close(r);
		snprintf(c->err, sizeof(c->err), "out of memory reading %s", l->name);
		return -1;
	}
	if (round != is_target_log(hdr)) {
		evlog_reader_close(r);
		return 0;
	}
	l->ns_pid = round ? hdr->producer_pid : 0;
	/* Each log's own machine names its syscalls; the host's when it has none. */
	if (hdr->machine.len) {
		char m[32] = "";

		if (hdr->machine.len < sizeof(m))
			memcpy(m, hdr->machine.ptr, hdr->machine.len);
		l->syscall_table = syscall_table_of(m);
		if (!h->syscall_table)
			h->syscall_table = l->syscall_table;
	} else {
		l->syscall_table = h->syscall_table;
	}
	while ((rc = evlog_next(r, &e)) == 0) {
		l->events++;
		if (meta_event(c, h, l, cv_node_tid(h, l, e, &mapped))) {
			evlog_reader_close(r);
			snprintf(c->err, sizeof(c->err), "out of memory reading %s", l->name);
			return -1;
		}
		if ((l->events & 0xfffff) == 0 && cv_progress(c, "reading", l->events, 0)) {
			evlog_reader_close(r);
			return -1;
		}
	}
	if (rc != -EVLOG_END)
		cv_buf_printf(&c->in.notes, "%s: read error after %llu events: %s\n", l->name,
			      (unsigned long long)l->events, evlog_reader_error(r));
	evlog_reader_stats(r, &l->rs);
	evlog_reader_close(r);
	c->total_events += l->events;
	c->st.chunks_bad += l->rs.chunks_bad;
	c->st.bytes_skipped += l->rs.bytes_skipped;
	if (l->rs.truncated) {
		c->st.truncated_logs++;
		cv_buf_printf(&c->in.notes, "%s: truncated (cut while written); read its %llu "
			      "complete chunks\n", l->name, (unsigned long long)l->rs.chunks_ok);
	}
	if (l->rs.chunks_bad)
		cv_buf_printf(&c->in.notes, "%s: skipped %llu corrupt chunks (%llu bytes)\n",
			      l->name, (unsigned long long)l->rs.chunks_bad,
			      (unsigned long long)l->rs.bytes_skipped);
	if (l->chain)
		cv_buf_printf(&c->in.notes, "%s: read with its %zu earlier segments, each as its "
			      "successor records it\n", l->name, evlog_chain_count(l->chain) - 1);
	if (unfinished(l->name))
		cv_buf_printf(&c->in.notes, "%s: never published (its writer died, or still writes "
			      "it): read as far as it was written; what its writer held then is "
			      "lost, counted only as far as its lost-event records go\n", l->name);
	return 0;
}

/* ------------------------------------------------------------- finalizing */

static int cmp_thread(const void *a, const void *b)
{
	const struct conv_thread *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct conv_process *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int push_track(struct cv_core *c, enum conv_track_kind k, uint32_t host, uint32_t a,
		      uint32_t b)
{
	if ((c->n_tracks & (c->n_tracks - 1)) == 0 || !c->tracks) {
		size_t nc = c->n_tracks ? (size_t)c->n_tracks * 2 : 64;
		struct cv_track *nt = realloc(c->tracks, nc * sizeof(*nt));

		if (!nt)
			return -1;
		c->tracks = nt;
	}
	c->tracks[c->n_tracks++] = (struct cv_track){ k, host, a, b };
	return 0;
}

/* Streams of every GPU, sorted: (device, stream) pairs packed in u64. */
static int finalize_streams(struct cv_core *c, struct cv_host *h, uint32_t hi)
{
	size_t n = h->stream_set.n, k = 0;
	uint64_t *v = malloc((n ? n : 1) * sizeof(*v));
	uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));

	if (!v || !ids)
		goto oom;
	for (size_t i = 0; i < n; i++)
		v[k++] = (h->stream_set.ents[i].a << 32) | (uint32_t)h->stream_set.ents[i].b;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < n; i++) {
		uint32_t dev = (uint32_t)(v[i] >> 32), s = (uint32_t)v[i];
		uint64_t *slot = cv_map_put(&h->streams, dev, s, NULL);

		ids[i] = s;
		if (!slot || push_track(c, CONV_TRACK_STREAM, hi, dev, s))
			goto oom;
		*slot = c->n_tracks;
	}
	/* Point each GPU at its run of the ids array (kept in the arena). */
	uint32_t *keep = cv_arena_alloc(&c->arena, (n ? n : 1) * sizeof(*keep));

	if (!keep)
		goto oom;
	memcpy(keep, ids, n * sizeof(*ids));
	for (size_t g = 0; g < h->n_gpu; g++) {
		struct conv_gpu *gp = &h->gpu_v[g];
		size_t i = 0;

		while (i < n && (uint32_t)(v[i] >> 32) != gp->device)
			i++;
		gp->streams = keep + i;
		while (i < n && (uint32_t)(v[i] >> 32) == gp->device) {
			gp->n_streams++;
			i++;
		}
	}
	free(v);
	free(ids);
	return 0;
oom:
	free(v);
	free(ids);
	return -1;
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct conv_gpu *x = a, *y = b;

	return x->device < y->device ? -1 : x->device > y->device;
}

static int finalize_host(struct cv_core *c, struct cv_host *h, uint32_t hi)
{
	if (h->min_ts > h->max_ts)
		h->min_ts = h->max_ts = h->anchor_mono;
	if (h->n_proc)
		qsort(h->proc_v, h->n_proc, sizeof(*h->proc_v), cmp_proc);
	if (h->n_thr)
		qsort(h->thr_v, h->n_thr, sizeof(*h->thr_v), cmp_thread);
	/* Each GPU's props sit at its insertion index: carry it through the sort. */
	if (h->n_gpu) {
		for (size_t g = 0; g < h->n_gpu; g++)
			h->gpu_v[g].n_streams = (uint32_t)g;
		qsort(h->gpu_v, h->n_gpu, sizeof(*h->gpu_v), cmp_gpu);
		for (size_t g = 0; g < h->n_gpu; g++) {
			uint32_t pi = h->gpu_v[g].n_streams;

			h->gpu_v[g].props = h->gpu_props[pi].type ? &h->gpu_props[pi] : NULL;
			h->gpu_v[g].streams = NULL;
			h->gpu_v[g].n_streams = 0;
		}
	}
	h->track_base = c->n_tracks;
	for (size_t i = 0; i < h->n_thr; i++) {
		uint64_t *v = cv_map_get(&h->threads, h->thr_v[i].pid, h->thr_v[i].tid);

		*v = i + 1;
		if (push_track(c, CONV_TRACK_THREAD, hi, h->thr_v[i].pid, h->thr_v[i].tid))
			return -1;
	}
	for (size_t i = 0; i < h->n_proc; i++)
		*cv_map_get(&h->procs, h->proc_v[i].pid, 0) = i + 1;
	if (finalize_streams(c, h, hi))
		return -1;
	h->n_tracks = c->n_tracks - h->track_base;

	struct conv_host_meta *m = &h->meta;

	m->host = h->name;
	m->base_mono_ns = h->min_ts;
	m->base_realtime_ns = h->anchor_rt ? h->min_ts - h->anchor_mono + h->anchor_rt : h->min_ts;
	m->start_ns = h->min_ts;
	m->stop_ns = h->max_ts;
	m->n_processes = (uint32_t)h->n_proc;
	m->n_threads = (uint32_t)h->n_thr;
	m->n_gpus = (uint32_t)h->n_gpu;
	m->processes = h->proc_v;
	m->threads = h->thr_v;
	m->gpus = h->gpu_v;
	m->host_index = hi;
	return 0;
}

int cv_pass1(struct cv_core *c)
{
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < c->in.n; i++)
			if (read_log(c, &c->in.logs[i], round))
				return -1;
	c->run_base_rt = UINT64_MAX;
	for (size_t i = 0; i < c->n_hosts; i++) {
		if (finalize_host(c, &c->hosts[i], (uint32_t)i)) {
			snprintf(c->err, sizeof(c->err), "out of memory numbering tracks");
			return -1;
		}
		if (c->hosts[i].meta.base_realtime_ns < c->run_base_rt)
			c->run_base_rt = c->hosts[i].meta.base_realtime_ns;
	}
	for (size_t i = 0; i < c->n_hosts; i++) {
		c->hosts[i].meta.run_base_realtime_ns = c->run_base_rt;
		c->hosts[i].meta.n_hosts = (uint32_t)c->n_hosts;
	}
	return cv_lp_solve(c);
}

static void host_free(struct cv_host *h)
{
	cv_map_free(&h->procs);
	cv_map_free(&h->threads);
	cv_map_free(&h->gpus);
	cv_map_free(&h->streams);
	cv_map_free(&h->syms);
	cv_map_free(&h->ns_tids);
	cv_map_free(&h->stream_set);
	free(h->proc_v);
	free(h->thr_v);
	free(h->gpu_v);
	free(h->gpu_props);
}

void cv_core_free(struct cv_core *c)
{
	for (size_t i = 0; i < c->n_hosts; i++)
		host_free(&c->hosts[i]);
	free(c->hosts);
	free(c->tracks);
	cv_corr_free(&c->corr);
	cv_map_free(&c->demangle_cache);
	cv_strtab_free(&c->stacks);
	cv_strtab_free(&c->names);
	cv_arena_free(&c->arena);
	cv_inputs_free(&c->in);
	cv_lp_free(c);
}
