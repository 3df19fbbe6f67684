// SPDX-License-Identifier: Apache-2.0
/*
 * Session mechanics: the shared BPF maps every object reuses, the list of
 * sources, ring-buffer dispatch by record kind, the lost-event table, the
 * event-log writer and the end summary. The flow that uses these (checks,
 * delay, launch, main loop, detach) is in profile.c.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cli.h"
#include "clock.h"
#include "collector/injection/inject_mgr.h"
#include "nodename.h"
#include "bpf/common.h"
#include "bpf/pysample.h"
#include "profile.h"
#include "store.h"
#include "collector/target/targets.h"

/* A source as the session runs it: its line of LT_SOURCES and its code. */
struct lt_source_row {
	const char *name;
	unsigned type_bit;            /* enum lt_type_bit; 0: always on (proc) */
	uint32_t evsrc;               /* enum evlog_source, for lost counters */
	const struct lt_source *ops;
};
#define LT_SOURCE_ROW_(id, ID, bit, t, evsrc, caps) { #id, bit, evsrc, &lt_source_##id },
static const struct lt_source_row lt_sources[] = { LT_SOURCES(LT_SOURCE_ROW_) };
#undef LT_SOURCE_ROW_

struct lt_slot {
	const struct lt_source_row *src;
	void *state;
	bool attempted, started;
	uint64_t events; /* events its records produced (not the records: some only steer it) */
	uint64_t lost;   /* lost outside the ring buffer (lt_session_add_lost) */
	char not_recorded[200]; /* why (some of) it was not recorded under -t all: the first reason */
	char note[200];         /* lt_session_note: shown under its row */
};

/* What a source could not see, one reason with the processes it held for. */
#define LT_UNSEEN_MAX 16   /* distinct reasons kept; later ones are counted */
#define LT_UNSEEN_PIDS 6   /* processes named per reason */
struct lt_unseen {
	char src[16];              /* a source's name */
	char why[200];
	unsigned n;
	int pids[LT_UNSEEN_PIDS];
};

/* A process left with the injected library loaded at the end, and why. */
#define LT_KEPT_MAX 16     /* named in the summary; later ones are counted */
struct lt_kept {
	int pid;
	char comm[20];
	char why[200];
};

/* A library log not published at the end: where it stays, and why. */
struct lt_unpub {
	int pid;
	char src[16];
	char path[512];
	char why[200];
};

struct lt_priv {
	struct lt_slot slots[LT_N_SOURCES];
	struct lt_unseen unseen[LT_UNSEEN_MAX];
	unsigned n_unseen, unseen_dropped;
	struct lt_kept kept[LT_KEPT_MAX];
	unsigned n_kept;
	struct lt_unpub unpub[LT_KEPT_MAX];
	unsigned n_unpub;
	bool store_shared;                /* lt_session_store_by: the wait is shared, */
	uint64_t store_left_ms;           /* and this much of it was left */
	signed char kind_slot[LT_REC_KIND_MAX + 1];
	uint64_t unknown_records, write_errors;
	uint64_t emitted; /* events handed to the log, by anyone */
	uint64_t lost[LT_LOST_SLOTS];
	struct evlog_writer_stats wstats;
	bool have_wstats;
	/* The output store (store.h): its writer process, how it ended, the
	 * drops already counted in the log (EV_LOST), by source. */
	struct lt_store *store;
	struct lt_store_state store_end;
	int store_rc;                     /* lt_store_close's: 0 done, 1 left writing, -1 failed */
	bool store_closed, stall_warned;
	uint64_t store_lost_logged[EVSRC_MAX + 1];
	bool published;         /* the log is under its name (else only the partial) */
	struct lt_watch {                 /* fds polled beside the ring buffer */
		int fd;
		void (*ready)(struct lt_session *s, void *arg);
		void *arg;
	} watch[LT_MAX_WATCH];
	int n_watch;
};

static struct lt_priv *P(struct lt_session *s)
{
	return s->priv;
}

int lt_session_errorf(struct lt_session *s, const char *fmt, ...)
{
	char tmp[sizeof(s->err)];
	va_list ap;

	/* fmt's arguments may point into s->err itself. */
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	memcpy(s->err, tmp, sizeof(tmp));
	return -1;
}

void lt_session_refuse(struct lt_session *s, const char *fmt, ...)
{
	char tmp[sizeof(s->refused)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (s->attached)
		LT_WARN("%s", tmp);
	else if (!s->refused[0])
		memcpy(s->refused, tmp, sizeof(tmp));
}

void lt_session_not_recorded(struct lt_session *s, const char *source, const char *fmt, ...)
{
	struct lt_priv *p = P(s);
	va_list ap;

	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		struct lt_slot *sl = &p->slots[i];

		if (strcmp(sl->src->name, source) || sl->not_recorded[0])
			continue;
		va_start(ap, fmt);
		vsnprintf(sl->not_recorded, sizeof(sl->not_recorded), fmt, ap);
		va_end(ap);
	}
}

static pthread_mutex_t unseen_mu = PTHREAD_MUTEX_INITIALIZER; /* sources' threads call in */

void lt_session_unseen(struct lt_session *s, const char *source, int pid, const char *fmt, ...)
{
	struct lt_priv *p = P(s);
	struct lt_unseen *u = NULL;
	char why[sizeof(u->why)];
	va_list ap;

	if (!p)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&unseen_mu);
	for (unsigned i = 0; i < p->n_unseen && !u; i++)
		if (!strcmp(p->unseen[i].src, source) && !strcmp(p->unseen[i].why, why))
			u = &p->unseen[i];
	if (!u && p->n_unseen < LT_UNSEEN_MAX) {
		u = &p->unseen[p->n_unseen++];
		snprintf(u->src, sizeof(u->src), "%s", source);
		memcpy(u->why, why, sizeof(why));
	}
	if (!u)
		p->unseen_dropped++;
	else if (u->n++ < LT_UNSEEN_PIDS)
		u->pids[u->n - 1] = pid;
	pthread_mutex_unlock(&unseen_mu);
}

void lt_session_seen(struct lt_session *s, const char *source, int pid)
{
	struct lt_priv *p = P(s);

	if (!p)
		return;
	pthread_mutex_lock(&unseen_mu);
	for (unsigned i = 0; i < p->n_unseen;) {
		struct lt_unseen *u = &p->unseen[i];
		unsigned k = 0, kept = u->n < LT_UNSEEN_PIDS ? u->n : LT_UNSEEN_PIDS;

		while (k < kept && (strcmp(u->src, source) || u->pids[k] != pid))
			k++;
		if (k < kept) {
			memmove(&u->pids[k], &u->pids[k + 1], (kept - k - 1) * sizeof(u->pids[0]));
			u->n--;
		}
		if (!u->n)
			memmove(u, u + 1, (--p->n_unseen - i) * sizeof(*u));
		else
			i++;
	}
	pthread_mutex_unlock(&unseen_mu);
}

void lt_session_note(struct lt_session *s, const char *source, const char *fmt, ...)
{
	struct lt_priv *p = P(s);
	va_list ap;

	for (size_t i = 0; p && i < LT_N_SOURCES; i++) {
		if (strcmp(p->slots[i].src->name, source))
			continue;
		va_start(ap, fmt);
		vsnprintf(p->slots[i].note, sizeof(p->slots[i].note), fmt, ap);
		va_end(ap);
	}
}

unsigned lt_session_unseen_text(struct lt_session *s, const char *source, char *buf, size_t n)
{
	struct lt_priv *p = P(s);
	unsigned count = 0;
	size_t len = 0;

	if (n)
		buf[0] = 0;
	if (!p)
		return 0;
	pthread_mutex_lock(&unseen_mu);
	for (unsigned i = 0; i < p->n_unseen; i++) {
		const struct lt_unseen *u = &p->unseen[i];

		if (strcmp(u->src, source))
			continue;
		count += u->n;
		for (unsigned k = 0; k < u->n && k < LT_UNSEEN_PIDS && len < n; k++)
			len += (size_t)snprintf(buf + len, n - len, "%spid %d (%s)", len ? ", " : "", u->pids[k],
						u->why);
	}
	pthread_mutex_unlock(&unseen_mu);
	return count;
}

/* Under a row: each reason, how many processes, which. */
static void summary_unseen(struct lt_priv *p, const char *src)
{
	for (unsigned i = 0; i < p->n_unseen; i++) {
		const struct lt_unseen *u = &p->unseen[i];
		char pids[96] = "";
		size_t len = 0;

		if (strcmp(u->src, src))
			continue;
		for (unsigned k = 0; k < u->n && k < LT_UNSEEN_PIDS && len < sizeof(pids); k++)
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%d", k ? ", " : "",
						u->pids[k]);
		fprintf(stderr, "    not seen in %u process%s: %s (pid %s%s)\n", u->n, u->n == 1 ? "" : "es",
			u->why, pids, u->n > LT_UNSEEN_PIDS ? ", ..." : "");
	}
}

void lt_session_kept(struct lt_session *s, int pid, const char *comm, const char *why)
{
	struct lt_priv *p = P(s);

	if (!p)
		return;
	pthread_mutex_lock(&unseen_mu);
	if (p->n_kept < LT_KEPT_MAX) {
		struct lt_kept *k = &p->kept[p->n_kept];

		k->pid = pid;
		snprintf(k->comm, sizeof(k->comm), "%s", comm);
		snprintf(k->why, sizeof(k->why), "%s", why);
	}
	p->n_kept++;
	pthread_mutex_unlock(&unseen_mu);
}

static void summary_kept(const struct lt_priv *p)
{
	if (!p->n_kept)
		return;
	fprintf(stderr, "  the injected library stays loaded in %u process%s (left running: never stopped, "
		"no longer recorded):\n", p->n_kept, p->n_kept == 1 ? "" : "es");
	for (unsigned i = 0; i < p->n_kept && i < LT_KEPT_MAX; i++)
		fprintf(stderr, "    pid %d (%s): %s\n", p->kept[i].pid, p->kept[i].comm, p->kept[i].why);
	if (p->n_kept > LT_KEPT_MAX)
		fprintf(stderr, "    (%u more: see the W lines above)\n", p->n_kept - LT_KEPT_MAX);
}

void lt_session_unpublished(struct lt_session *s, const char *source, int pid, const char *path,
			    const char *why)
{
	struct lt_priv *p = P(s);

	if (!p)
		return;
	pthread_mutex_lock(&unseen_mu);
	if (p->n_unpub < LT_KEPT_MAX) {
		struct lt_unpub *u = &p->unpub[p->n_unpub];

		u->pid = pid;
		snprintf(u->src, sizeof(u->src), "%s", source);
		snprintf(u->path, sizeof(u->path), "%s", path);
		snprintf(u->why, sizeof(u->why), "%s", why);
	}
	p->n_unpub++;
	pthread_mutex_unlock(&unseen_mu);
}

static void summary_unpublished(const struct lt_priv *p)
{
	if (!p->n_unpub)
		return;
	fprintf(stderr, "  NOT published: %u library log%s (kept on this node; the events %s counted as lost):\n",
		p->n_unpub, p->n_unpub == 1 ? "" : "s", p->n_unpub == 1 ? "it holds" : "they hold");
	for (unsigned i = 0; i < p->n_unpub && i < LT_KEPT_MAX; i++)
		fprintf(stderr, "    pid %d (%s): %s: %s\n", p->unpub[i].pid, p->unpub[i].src, p->unpub[i].path,
			p->unpub[i].why);
	if (p->n_unpub > LT_KEPT_MAX)
		fprintf(stderr, "    (%u more: see the W lines above)\n", p->n_unpub - LT_KEPT_MAX);
}

void lt_session_store_by(struct lt_session *s, uint64_t mono_ms)
{
	uint64_t now = lt_mono_ms();

	if (P(s) && mono_ms) {
		P(s)->store_shared = true;
		P(s)->store_left_ms = mono_ms > now ? mono_ms - now : 0;
	}
}

void lt_session_add_events(struct lt_session *s, const char *source, uint64_t n)
{
	struct lt_priv *p = P(s);

	for (size_t i = 0; i < LT_N_SOURCES; i++)
		if (!strcmp(p->slots[i].src->name, source))
			p->slots[i].events += n;
}

void lt_session_add_lost(struct lt_session *s, const char *source, uint64_t n)
{
	struct lt_priv *p = P(s);

	for (size_t i = 0; i < LT_N_SOURCES; i++)
		if (!strcmp(p->slots[i].src->name, source))
			p->slots[i].lost += n;
}

void lt_session_init(struct lt_session *s, const struct lt_options *opt)
{
	struct lt_priv *p;

	memset(s, 0, sizeof(*s));
	s->opt = *opt;
	if (s->opt.segment_mb <= 0)
		s->opt.segment_mb = LT_DEFAULT_SEGMENT_MB;
	if (s->opt.segment_s <= 0)
		s->opt.segment_s = LT_DEFAULT_SEGMENT_S;
	s->targets_fd = s->events_fd = s->lost_fd = -1;
	s->pys_procs_fd = s->pys_threads_fd = -1;
	p = calloc(1, sizeof(*p));
	if (!p)
		abort(); /* a few hundred bytes at start-up */
	for (size_t i = 0; i < LT_N_SOURCES; i++)
		p->slots[i].src = &lt_sources[i];
	memset(p->kind_slot, -1, sizeof(p->kind_slot));
	s->priv = p;
}

/* ------------------------------------------------------------- event log */

static void read_line(const char *path, char *buf, size_t sz)
{
	FILE *f = fopen(path, "re");

	buf[0] = 0;
	if (!f)
		return;
	if (fgets(buf, sz, f))
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

static void options_str(const struct lt_options *o, char *buf, size_t sz)
{
	char types[128];
	size_t n;

	n = snprintf(buf, sz, "types=%s%s duration=%g delay=%g cpu_buffer_mb=%u freq=%u cpu_stack_bytes=%u children=%d cuda_kernel=%d pids=",
		     lt_t_list(o->types, ",", types, sizeof(types)), o->types_all ? " (all)" : "",
		     o->duration_s, o->delay_s, o->cpu_buffer_mb, o->freq_hz, o->cpu_stack_bytes,
		     o->follow_children,
		     o->cuda_kernel);
	for (int i = 0; i < o->n_pids && n < sz; i++)
		n += snprintf(buf + n, sz - n, "%s%d", i ? "," : "", o->pids[i]);
}

static uint64_t segment_bytes(const struct lt_options *o)
{
	return (uint64_t)(o->segment_mb * 1048576.0);
}

/* Wait for the store writer to finish (LT_STORE_WAIT_S at most, or what
 * was left of the wait lt_session_store_by shares): the log's end is
 * published, or it is left to do so alone. */
static void close_store(struct lt_session *s)
{
	struct lt_priv *p = P(s);
	uint64_t wait_ms = p->store_shared ? p->store_left_ms : LT_STORE_WAIT_S * 1000ull;

	if (!p->store)
		return;
	p->store_rc = lt_store_close(p->store, wait_ms, &p->store_end);
	if (p->store_shared && p->store_rc > 0) { /* not done in the whole shared wait, at least */
		uint64_t waited_ns = (LT_STORE_WAIT_S * 1000ull - wait_ms) * 1000000ull;

		if (waited_ns > p->store_end.busy_ns)
			p->store_end.busy_ns = waited_ns;
	}
	p->store = NULL;
	p->store_closed = true;
}

int lt_session_open_log(struct lt_session *s, const char *cmdline)
{
	char host[256] = "", boot[64], opts[2048], msg[512];
	struct evlog_header h = { 0 };
	struct utsname u;
	int rc;

	lt_node_name(host, sizeof(host));
	read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	uname(&u);
	options_str(&s->opt, opts, sizeof(opts));
	h.host = evlog_s(host);
	h.boot_id = evlog_s(boot);
	h.machine = evlog_s(u.machine);
	h.producer = evlog_s("collector");
	h.cmdline = evlog_s(cmdline);
	h.options = evlog_s(opts);
	h.producer_pid = getpid();
	memcpy(h.session, s->opt.session, sizeof(h.session));
	rc = lt_store_open(&P(s)->store, s->opt.output, 2 * segment_bytes(&s->opt), msg, sizeof(msg));
	if (rc == -EVLOG_EEXIST)
		return lt_session_errorf(s, "output %s already exists: choose another -o or remove it (never overwritten)",
					 s->opt.output);
	if (rc)
		return lt_session_errorf(s, "cannot create the event log %s: %s", s->opt.output, msg);
	const char *slash = strrchr(s->opt.output, '/');
	struct evlog_writer_opts wo = { .segment_bytes = segment_bytes(&s->opt),
					.segment_ns = (uint64_t)(s->opt.segment_s * 1e9) };

	rc = evlog_writer_open_sink(&s->log, slash ? slash + 1 : s->opt.output, &lt_store_sink,
				    P(s)->store, &h, &wo, msg, sizeof(msg));
	if (rc) {
		close_store(s);
		return lt_session_errorf(s, "cannot create the event log %s: %s", s->opt.output, msg);
	}
	LT_INFO(1, "the event log is written by process %d (segments of %.0f MiB or %.0f s)",
		(int)lt_store_pid(P(s)->store), segment_bytes(&s->opt) / 1048576.0, s->opt.segment_s);
	return 0;
}

int lt_session_emit(struct lt_session *s, const struct evlog_event *ev)
{
	int rc;

	if (!s->log)
		return -1;
	rc = evlog_write(s->log, ev);
	P(s)->emitted++;
	if (rc < 0) {
		/* The disk is full or gone: stop, keeping what was flushed. */
		if (!P(s)->write_errors++)
			LT_ERR("cannot write the event log %s: %s; stopping", s->opt.output,
			       evlog_writer_error(s->log));
		s->stopping = 1;
	}
	return rc;
}

int lt_session_emit_clock(struct lt_session *s)
{
	struct evlog_event ev = { .type = EV_CLOCK };
	struct timespec rt;

	ev.ts = lt_now_ns();
	clock_gettime(CLOCK_REALTIME, &rt);
	ev.u.clock.realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull + rt.tv_nsec;
	return lt_session_emit(s, &ev);
}

int lt_session_close_log(struct lt_session *s)
{
	int rc;

	if (!s->log)
		return 0;
	char msg[512];

	evlog_writer_flush(s->log);
	evlog_writer_stats(s->log, &P(s)->wstats);
	P(s)->have_wstats = true;
	rc = evlog_writer_close_msg(s->log, msg, sizeof(msg));
	s->log = NULL;
	close_store(s);
	if (rc)
		return lt_session_errorf(s, "cannot publish the event log %s: %s", s->opt.output, msg);
	if (P(s)->store_rc < 0)
		return lt_session_errorf(s, "cannot publish the event log %s: %s", s->opt.output,
					 P(s)->store_end.msg);
	if (P(s)->store_rc > 0)
		return lt_session_errorf(s, "the event log %s is not published yet: the output store "
					 "has not answered for %.0f s, %.1f MiB not written; the "
					 "store writer process goes on for up to %d s and publishes "
					 "it if the store answers", s->opt.output,
					 P(s)->store_end.busy_ns / 1e9,
					 P(s)->store_end.queued / 1048576.0, LT_STORE_LINGER_S);
	P(s)->published = true;
	return 0;
}

void lt_session_abort_log(struct lt_session *s)
{
	if (s->log)
		evlog_writer_abort(s->log);
	s->log = NULL;
	close_store(s);
}

/* The source whose row counts a dropped event of this type. */
static uint32_t type_evsrc(uint32_t type)
{
	switch (type) {
	case EV_SYSCALL: return EVSRC_SYSCALL;
	case EV_CPU_SAMPLE: return EVSRC_CPU;
	case EV_PY_ENTER: case EV_PY_EXIT: return EVSRC_PYTHON;
	case EV_PY_SAMPLE: return EVSRC_PYSAMPLE;
	case EV_LIB_CALL: return EVSRC_CUDA_LIB;
	case EV_GPU_KERNEL: case EV_GPU_MEMCPY: case EV_GPU_MEMSET: case EV_GPU_API:
	case EV_GPU_DEVICE: case EV_GPU_SYNC: case EV_CUPTI_OVERHEAD: return EVSRC_CUPTI;
	case EV_PROCESS: case EV_PROCESS_EXIT: case EV_THREAD: case EV_THREAD_EXIT: return EVSRC_PROC;
	default: return EVSRC_OTHER;
	}
}

/* Events the store could not take, by source. */
static void dropped_by_src(const struct evlog_writer_stats *ws, uint64_t out[EVSRC_MAX + 1])
{
	memset(out, 0, sizeof(uint64_t) * (EVSRC_MAX + 1));
	for (uint32_t t = 0; t <= EV_TYPE_MAX; t++)
		out[type_evsrc(t)] += ws->dropped_by_type[t];
}

/* The drops not yet in the log, as EV_LOST in a chunk the store keeps
 * (without it, the log would not say what it lacks). */
static int emit_lost(struct lt_session *s);

/* with_bpf: the BPF sources' losses too (the profile's end). */
static void emit_store_lost(struct lt_session *s, bool with_bpf)
{
	struct lt_priv *p = P(s);
	struct evlog_writer_stats ws;
	uint64_t dropped[EVSRC_MAX + 1];
	bool any = false;

	if (!s->log || !p->store)
		return;
	evlog_writer_flush(s->log); /* what is in the chunk now is dropped or kept first */
	if (with_bpf)
		any = emit_lost(s) > 0;
	evlog_writer_stats(s->log, &ws);
	dropped_by_src(&ws, dropped);
	for (uint32_t k = 0; k <= EVSRC_MAX; k++) {
		struct evlog_event ev = { .type = EV_LOST, .ts = lt_now_ns() };

		if (dropped[k] == p->store_lost_logged[k])
			continue;
		ev.u.lost.source = k;
		ev.u.lost.count = dropped[k] - p->store_lost_logged[k];
		if (lt_session_emit(s, &ev) == 0)
			any = true;
		p->store_lost_logged[k] = dropped[k];
	}
	if (any)
		evlog_writer_flush_keep(s->log);
}

void lt_session_store_tick(struct lt_session *s, bool count_lost)
{
	struct lt_priv *p = P(s);
	struct lt_store_state st;

	if (!p->store)
		return;
	lt_store_state(p->store, &st);
	if (st.failed && !s->stopping) {
		LT_ERR("cannot write the event log %s: %s; stopping", s->opt.output, st.msg);
		s->stopping = 1;
	}
	if (!p->stall_warned && st.busy_ns >= 2000000000ull) {
		LT_WARN("the output store has not answered for %.0f s: the log waits in memory (up to "
			"%.0f MiB), then events are dropped and counted as lost", st.busy_ns / 1e9,
			st.cap / 1048576.0);
		p->stall_warned = true;
	} else if (p->stall_warned && !st.busy_ns) {
		LT_WARN("the output store answers again (its longest call took %.1f s)",
			st.longest_ns / 1e9);
		p->stall_warned = false;
	}
	if (count_lost)
		emit_store_lost(s, false);
}

/* ------------------------------------------------------------ shared maps */

static unsigned long ringbuf_bytes(unsigned mb_per_cpu)
{
	int ncpu = libbpf_num_possible_cpus();
	unsigned long want = (unsigned long)mb_per_cpu << 20, sz = 1ul << 20;

	want *= ncpu > 0 ? ncpu : 1;
	while (sz < want && sz < (1ul << 30))
		sz <<= 1;
	return sz;
}

int lt_session_create_maps(struct lt_session *s)
{
	unsigned long rb = ringbuf_bytes(s->opt.cpu_buffer_mb);

	s->targets_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "targets", 4, 1, 65536, NULL);
	if (s->targets_fd < 0)
		goto fail;
	s->lost_fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "lost", 4, 8, LT_LOST_SLOTS, NULL);
	if (s->lost_fd < 0)
		goto fail;
	s->events_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "events", 0, 0, rb, NULL);
	if (s->events_fd < 0)
		goto fail;
	/* The interpreters' layouts and threads (bpf/pywalk.bpf.h): one pair
	 * for pysample's walk and the cpu sampler's, which merges Python frames
	 * into native stacks when both run. */
	if (s->opt.types & LT_T_PYSAMPLE) {
		s->pys_procs_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "pys_procs", 4,
						 sizeof(struct lt_pys_proc), LT_PYS_PROCS, NULL);
		if (s->pys_procs_fd < 0)
			goto fail;
		s->pys_threads_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "pys_threads", 4,
						   sizeof(struct lt_pys_thread), LT_PYS_TIDS, NULL);
		if (s->pys_threads_fd < 0)
			goto fail;
	}
	LT_INFO(1, "ring buffer: %lu MiB (%u MiB per CPU x %d CPUs, power of two)", rb >> 20,
		s->opt.cpu_buffer_mb, libbpf_num_possible_cpus());
	return 0;
fail:
	return lt_session_errorf(s, "cannot create BPF maps: %s%s", strerror(errno),
				 errno == EPERM ? " (needs root or CAP_BPF + CAP_PERFMON)" : "");
}

int lt_session_share_maps(struct lt_session *s, struct bpf_object *obj)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		int fd = !strcmp(n, "targets") ? s->targets_fd :
			 !strcmp(n, "events") ? s->events_fd :
			 !strcmp(n, "lost") ? s->lost_fd :
			 !strcmp(n, "pys_procs") ? s->pys_procs_fd :
			 !strcmp(n, "pys_threads") ? s->pys_threads_fd : -1;
		int err;

		if (fd < 0)
			continue;
		err = bpf_map__reuse_fd(m, fd);
		if (err)
			return lt_session_errorf(s, "cannot share map %s with %s: %s", n,
						 bpf_object__name(obj), strerror(-err));
	}
	return 0;
}

/* --------------------------------------------------------------- sources */

static bool slot_wanted(const struct lt_session *s, const struct lt_source_row *src)
{
	return src->type_bit == 0 || (s->opt.types & src->type_bit);
}

static void map_kinds(struct lt_priv *p, int idx)
{
	const struct lt_source *src = p->slots[idx].src->ops;

	for (uint32_t k = src->kind_lo; k <= src->kind_hi && k <= LT_REC_KIND_MAX; k++)
		p->kind_slot[k] = (signed char)idx;
}

int lt_session_start_sources(struct lt_session *s)
{
	struct lt_priv *p = P(s);
	int n_optional = 0;

	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		struct lt_slot *sl = &p->slots[i];

		if (!slot_wanted(s, sl->src))
			continue;
		sl->attempted = true;
		s->err[0] = 0;
		if (sl->src->ops->start(s, &sl->state)) {
			if (sl->src->type_bit == LT_T_CUDA && s->opt.cuda_launches_only) {
				LT_WARN("kernels are recorded without their launch calls: cannot probe "
					"them: %s", s->err[0] ? s->err : "unknown error");
				lt_session_not_recorded(s, sl->src->name, "%s", s->err[0] ? s->err : "cannot start");
				continue;
			}
			if (sl->src->type_bit && s->opt.types_all) {
				LT_WARN("-t all: cannot record %s on this host: %s; recording the rest",
					sl->src->name, s->err[0] ? s->err : "unknown error");
				lt_session_not_recorded(s, sl->src->name, "%s", s->err[0] ? s->err : "cannot start");
				continue;
			}
			return lt_session_errorf(s, "cannot start %s: %s", sl->src->name,
						 s->err[0] ? s->err : "unknown error");
		}
		sl->started = true;
		n_optional += sl->src->type_bit != 0;
		map_kinds(p, (int)i);
		LT_INFO(1, "source %s attached", sl->src->name);
	}
	if (!n_optional)
		return lt_session_errorf(s, "none of the requested sources could be started");
	return 0;
}

static int dispatch(void *ctx, void *data, size_t size)
{
	struct lt_session *s = ctx;
	struct lt_priv *p = P(s);
	const struct lt_rec_hdr *h = data;
	struct lt_slot *sl;

	if (size < sizeof(*h) || h->kind > LT_REC_KIND_MAX || p->kind_slot[h->kind] < 0) {
		p->unknown_records++;
		return 0;
	}
	sl = &p->slots[(int)p->kind_slot[h->kind]];
	if (!sl->started || !sl->state)
		return 0; /* its source is stopped: nothing to hand the record to */
	uint64_t before = p->emitted;

	sl->src->ops->handle(s, sl->state, h, size);
	sl->events += p->emitted - before;
	return 0; /* one bad record never stops the others */
}

int lt_session_watch_fd(struct lt_session *s, int fd, void (*ready)(struct lt_session *s, void *arg),
			void *arg)
{
	struct lt_priv *p = P(s);

	if (p->n_watch == LT_MAX_WATCH)
		return -E2BIG;
	p->watch[p->n_watch++] = (struct lt_watch){ fd, ready, arg };
	return 0;
}

void lt_session_unwatch_fd(struct lt_session *s, int fd)
{
	struct lt_priv *p = P(s);
	int k = 0;

	for (int i = 0; i < p->n_watch; i++)
		if (p->watch[i].fd != fd)
			p->watch[k++] = p->watch[i];
	p->n_watch = k;
}

/* The ring buffer's epoll fd and the watched fds; the ready ones' handlers
 * run here, the ring is read by the caller. */
static int poll_watched(struct lt_session *s, int timeout_ms)
{
	struct lt_priv *p = P(s);
	struct pollfd f[LT_MAX_WATCH + 1];
	int n = p->n_watch, r;

	f[0] = (struct pollfd){ ring_buffer__epoll_fd(s->rb), POLLIN, 0 };
	for (int i = 0; i < n; i++)
		f[i + 1] = (struct pollfd){ p->watch[i].fd, POLLIN, 0 };
	r = poll(f, (nfds_t)n + 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n && i < p->n_watch; i++)
		if (f[i + 1].revents & POLLIN)
			p->watch[i].ready(s, p->watch[i].arg);
	return 0;
}

int lt_session_poll(struct lt_session *s, int timeout_ms)
{
	int n, c;

	if (!s->rb) {
		s->rb = ring_buffer__new(s->events_fd, dispatch, s, NULL);
		if (!s->rb)
			return lt_session_errorf(s, "cannot read the ring buffer: %s", strerror(errno));
	}
	n = P(s)->n_watch ? poll_watched(s, timeout_ms) : ring_buffer__poll(s->rb, timeout_ms);
	if (n == -EINTR)
		n = 0;
	if (n < 0)
		return lt_session_errorf(s, "ring buffer poll: %s", strerror(-n));
	/* Sources submit without waking us below a fill level (a wakeup per
	 * record costs more than the record): read what is there anyway. */
	c = ring_buffer__consume(s->rb);
	return c > 0 ? n + c : n;
}

void lt_session_notify_target(struct lt_session *s, int pid)
{
	struct lt_priv *p = P(s);

	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		struct lt_slot *sl = &p->slots[i];

		if (sl->started && sl->src->ops->add_target && sl->src->ops->add_target(s, sl->state, pid))
			LT_INFO(1, "%s: cannot add pid %d: %s", sl->src->name, pid, s->err);
	}
}

void lt_session_drop_target(struct lt_session *s, int pid)
{
	struct lt_priv *p = P(s);

	for (size_t i = 0; i < LT_N_SOURCES; i++)
		if (p->slots[i].started && p->slots[i].src->ops->drop_target)
			p->slots[i].src->ops->drop_target(s, p->slots[i].state, pid);
}

void lt_session_prepare_exec(struct lt_session *s, int pid, const char *path)
{
	struct lt_priv *p = P(s);

	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		struct lt_slot *sl = &p->slots[i];

		if (sl->started && sl->src->ops->prepare_exec &&
		    sl->src->ops->prepare_exec(s, sl->state, pid, path))
			LT_INFO(1, "%s: cannot prepare pid %d: %s", sl->src->name, pid, s->err);
	}
}

int lt_session_add_target(struct lt_session *s, int pid)
{
	uint32_t key = pid;
	uint8_t one = 1;

	if (bpf_map_update_elem(s->targets_fd, &key, &one, BPF_ANY))
		return lt_session_errorf(s, "cannot add pid %d to the targets: %s", pid, strerror(errno));
	lt_session_notify_target(s, pid);
	return 0;
}

/* ------------------------------------------------------------ lost events */

static void read_lost(struct lt_session *s)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *v;

	if (s->lost_fd < 0 || ncpu <= 0 || !(v = calloc(ncpu, sizeof(*v))))
		return;
	for (uint32_t k = 0; k < LT_LOST_SLOTS; k++) {
		P(s)->lost[k] = 0;
		if (bpf_map_lookup_elem(s->lost_fd, &k, v))
			continue;
		for (int c = 0; c < ncpu; c++)
			P(s)->lost[k] += v[c];
	}
	free(v);
}

/* The BPF sources' losses (the profile's end): how many records. */
static int emit_lost(struct lt_session *s)
{
	int n = 0;

	read_lost(s);
	for (uint32_t k = 0; k < LT_LOST_SLOTS; k++) {
		struct evlog_event ev = { .type = EV_LOST, .ts = lt_now_ns() };

		if (!P(s)->lost[k])
			continue;
		ev.u.lost.source = k;
		ev.u.lost.count = P(s)->lost[k];
		n += lt_session_emit(s, &ev) == 0;
	}
	return n;
}

void lt_session_finish(struct lt_session *s)
{
	struct lt_priv *p = P(s);
	uint64_t t0 = lt_now_ns();

	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		struct lt_slot *sl = &p->slots[i];

		if (sl->started && sl->src->ops->quiesce)
			sl->src->ops->quiesce(s, sl->state);
	}
	LT_INFO(1, "sources quiesced (probes off) in %.1f ms", (double)(lt_now_ns() - t0) / 1e6);
	if (s->rb)
		ring_buffer__consume(s->rb);
	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		struct lt_slot *sl = &p->slots[i];

		if (sl->started && sl->src->ops->finish && sl->src->ops->finish(s, sl->state))
			LT_WARN("%s: %s", sl->src->name, s->err);
	}
	if (s->rb)
		ring_buffer__consume(s->rb);
}

void lt_session_stop(struct lt_session *s)
{
	struct lt_priv *p = P(s);

	if (!p)
		return;
	/* Records submitted between finish and detach, while every source can
	 * still take them. */
	if (s->rb)
		ring_buffer__consume(s->rb);
	for (size_t i = LT_N_SOURCES; i-- > 0;) {
		struct lt_slot *sl = &p->slots[i];

		if (!sl->attempted)
			continue;
		sl->src->ops->stop(s, sl->state);
		sl->attempted = sl->started = false;
		sl->state = NULL;
	}
	if (s->log) {
		if (P(s)->store)
			lt_store_final(P(s)->store);
		emit_store_lost(s, true);
	}
	ring_buffer__free(s->rb);
	s->rb = NULL;
	if (s->targets_fd >= 0)
		close(s->targets_fd);
	if (s->events_fd >= 0)
		close(s->events_fd);
	if (s->lost_fd >= 0)
		close(s->lost_fd);
	if (s->pys_procs_fd >= 0)
		close(s->pys_procs_fd);
	if (s->pys_threads_fd >= 0)
		close(s->pys_threads_fd);
	s->targets_fd = s->events_fd = s->lost_fd = -1;
	s->pys_procs_fd = s->pys_threads_fd = -1;
}

int lt_session_status(struct lt_session *s, char *buf, size_t n)
{
	struct lt_priv *p = P(s);
	struct evlog_writer_stats ws = { 0 };
	uint64_t lost = 0;
	size_t k;
	bool first = true;

	if (s->log)
		evlog_writer_stats(s->log, &ws);
	read_lost(s);
	for (uint32_t i = 0; i < LT_LOST_SLOTS; i++)
		lost += p->lost[i];
	/* The injected libraries write their own logs: their flushed events. */
	struct lt_im_so_far lib;
	lt_im_so_far(s->inject, &lib);
	k = (size_t)snprintf(buf, n, "%llu events (",
			     (unsigned long long)(p->emitted + lib.cuda_events + lib.python_events));
	for (size_t i = 0; i < LT_N_SOURCES && k < n; i++) {
		const char *name = p->slots[i].src->name;

		if (!p->slots[i].started)
			continue;
		k += (size_t)snprintf(buf + k, n - k, "%s%s %llu", first ? "" : ", ", name,
				      (unsigned long long)(p->slots[i].events + (!strcmp(name, "gpu") ? lib.cuda_events :
						!strcmp(name, "python") ? lib.python_events : 0)));
		first = false;
	}
	struct lt_store_state st = { 0 };

	if (p->store)
		lt_store_state(p->store, &st);
	lost += ws.dropped_events;
	if (k < n)
		k += (size_t)snprintf(buf + k, n - k, "), %.1f MB written, %llu lost",
				      st.written / 1e6 + lib.bytes / 1e6, (unsigned long long)lost);
	if (k < n && st.busy_ns >= 1000000000ull)
		k += (size_t)snprintf(buf + k, n - k, " (the output store has not answered for %.0f s: "
				      "%.1f MB waiting)", st.busy_ns / 1e9, st.queued / 1e6);
	return k < n ? 0 : -1;
}

/* The store's part of the summary: a stall, and what it cost. */
static void summary_store(struct lt_session *s)
{
	struct lt_priv *p = P(s);
	const struct lt_store_state *st = &p->store_end;
	double mib = (p->wstats.dropped_bytes + (p->store_rc > 0 ? st->queued : 0)) / 1048576.0;

	if (!p->store_closed || (!p->wstats.dropped_events && p->store_rc <= 0 &&
				 st->longest_ns < 5000000000ull))
		return;
	fprintf(stderr, "llmtracker: the output store stalled for %.1f s; %.1f MiB not written "
		"(%llu events dropped, counted as lost)\n", st->longest_ns / 1e9, mib,
		(unsigned long long)p->wstats.dropped_events);
}

void lt_session_summary(struct lt_session *s, double seconds, const char *extra)
{
	struct lt_priv *p = P(s);
	uint64_t dropped[EVSRC_MAX + 1];

	fprintf(stderr, "llmtracker: profiled %.1f s%s%s\n", seconds, extra && *extra ? "; " : "",
		extra ? extra : "");
	dropped_by_src(&p->wstats, dropped);
	summary_store(s);
	fprintf(stderr, "  %-10s %12s %10s\n", "source", "events", "lost");
	for (size_t i = 0; i < LT_N_SOURCES; i++) {
		const struct lt_source_row *src = p->slots[i].src;

		if (!slot_wanted(s, src))
			continue;
		bool any_unseen = false;
		for (unsigned k = 0; k < p->n_unseen; k++)
			any_unseen |= !strcmp(p->unseen[k].src, src->name);
		/* Nothing recorded is never shown as a success: with its reason,
		 * or said plainly. */
		fprintf(stderr, "  %-10s %12llu %10llu%s%s\n", src->name,
			(unsigned long long)p->slots[i].events,
			(unsigned long long)((src->evsrc < LT_LOST_SLOTS ? p->lost[src->evsrc] : 0) +
					     p->slots[i].lost +
					     (src->evsrc <= EVSRC_MAX ? dropped[src->evsrc] : 0)),
			p->slots[i].not_recorded[0] ?
				(p->slots[i].events ? "  partly not recorded: " : "  not recorded: ") :
			!p->slots[i].events && !any_unseen ? "  recorded nothing" : "",
			p->slots[i].not_recorded);
		if (p->slots[i].note[0])
			fprintf(stderr, "    %s\n", p->slots[i].note);
		summary_unseen(p, src->name);
	}
	if (p->unseen_dropped)
		fprintf(stderr, "    (%u more processes not seen, for other reasons: see the W lines above)\n",
			p->unseen_dropped);
	summary_kept(p);
	summary_unpublished(p);
	/* "wrote" only for a log that is there under its name. */
	if (p->have_wstats && p->published)
		fprintf(stderr, "  wrote %s: %llu bytes, %llu events in %llu chunks, %u segment%s\n",
			s->opt.output, (unsigned long long)p->wstats.file_bytes,
			(unsigned long long)(p->wstats.events - p->wstats.dropped_events),
			(unsigned long long)p->wstats.chunks, p->wstats.segments,
			p->wstats.segments == 1 ? "" : "s");
	else if (p->have_wstats)
		fprintf(stderr, "  NOT published: %s; its partial file keeps what was written (see above)\n",
			s->opt.output);
	if (p->write_errors)
		fprintf(stderr, "  %llu events could not be written\n", (unsigned long long)p->write_errors);
}

void lt_session_free(struct lt_session *s)
{
	lt_session_stop(s);
	lt_session_abort_log(s);
	free(s->priv);
	s->priv = NULL;
}
