/* SPDX-License-Identifier: Apache-2.0 */
/*
 * XPlane writer (see xplane.h).
 *
 * Streaming: the core hands us items track by track (sink.h), host threads
 * first, then GPU streams by device, so planes and lines come one after
 * another and each item becomes one XEvent, hand-encoded straight into the
 * output. A plane or line is opened with a 5-byte length slot (a valid,
 * not minimal, varint) that is patched when it closes, in the write buffer
 * or with pwrite, as Perfetto's protozero does; fields a line knows only at
 * its end (name, duration) follow its events, which protobuf allows. Only
 * line headers and interned names stay in memory, and every byte is written
 * once. An item for a line or plane already closed is dropped and counted,
 * as an item that goes back in time within a line is.
 *
 * Conventions follow what xprof writes itself:
 * line timestamps in ns relative to the profile start, event offset_ps from
 * the line's timestamp_ns, absolute wall times only in "Task Environment",
 * one XEventMetadata per name (per function and file:line for Python), only
 * what varies per call as event stats, repeating strings as ref_values.
 */
#include "converter/output/xplane.h"
#include "converter/output/jsonw.h"
#include "converter/cv_util.h"
#include "converter/pairing/cudacorr.h"
#include "converter/output/evview.h"
#include "converter/output/pbwire.h"
#include "common/grow.h"
#include "common/hmap.h"
#include "common/varint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xplane.pb-c.h"
#include "tb_layout/tb_layout.h"
#include "tb_layout/tb_seq.h"

#define HOST_PLANE_ID 49      /* TensorFlow's kHostPlaneId */
#define TASK_ENV_PLANE_ID 500 /* first id xprof leaves to custom planes */
#define RESERVED_LINE_LO 0xdeadbeefLL
#define RESERVED_LINE_HI (0xdeadbeefLL + 289)

typedef Tensorflow__Profiler__XStat XStat;

/* ------------------------------------------------------------ string map */

/*
 * Interns byte strings to dense ids 1..n (an lt_hmap of their hashes). Keys
 * may hold NULs: an event metadata key is "name\0source", so one Python
 * function (name plus file:line) gets one XEventMetadata.
 */
struct strmap {
	char **names;      /* names[id - 1], NUL-terminated copies */
	uint32_t *lens;    /* key length of names[id - 1] */
	size_t n, cap;     /* n names; room for cap */
	struct lt_hmap ix; /* lt_hash_bytes of a key -> id - 1 */
};

/* Room for one more name: 0, or -1. */
static int strmap_grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 128;
	char **names = realloc(m->names, cap * sizeof(*names));
	uint32_t *lens;

	if (!names)
		return -1;
	m->names = names;
	if (!(lens = realloc(m->lens, cap * sizeof(*lens))))
		return -1;
	m->lens = lens;
	m->cap = cap;
	return 0;
}

/* Id of the n-byte key s, added if new; 0 on allocation failure. */
static int64_t strmap_idn(struct strmap *m, const char *s, size_t n)
{
	struct lt_hmap_pos p = lt_hmap_probe(&m->ix, lt_hash_bytes(s, n));
	uint32_t i;
	char *copy;

	while (lt_hmap_next(&m->ix, &p, &i))
		if (m->lens[i] == n && !memcmp(m->names[i], s, n))
			return (int64_t)i + 1;
	if (n > UINT32_MAX || (m->n == m->cap && strmap_grow(m)))
		return 0;
	copy = malloc(n + 1);
	if (!copy)
		return 0;
	memcpy(copy, s, n);
	copy[n] = 0;
	if (lt_hmap_add(&m->ix, &p, (uint32_t)m->n)) {
		free(copy);
		return 0;
	}
	m->names[m->n] = copy;
	m->lens[m->n] = (uint32_t)n;
	return (int64_t)++m->n;
}

static int64_t strmap_id(struct strmap *m, const char *s)
{
	return strmap_idn(m, s, strlen(s));
}

/*
 * Most names and values reach the sink as pointers that stay the same for
 * the same string (syscall names, demangled names, interned stacks): a
 * direct-mapped cache by address skips hashing them again. A hit is checked
 * against the interned copy, so a reused buffer with new contents only
 * misses.
 */
#define PTR_CACHE 256
struct ptr_cache {
	const char *ptr;
	uint32_t id;
};

static int64_t strmap_id_cached(struct strmap *m, struct ptr_cache *cache, const char *s)
{
	struct ptr_cache *c = &cache[((uintptr_t)s >> 3) & (PTR_CACHE - 1)];
	int64_t id;

	if (c->ptr == s && c->id && !strcmp(m->names[c->id - 1], s))
		return c->id;
	id = strmap_id(m, s);
	c->ptr = s;
	c->id = (uint32_t)id;
	return id;
}

static void strmap_free(struct strmap *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->names[i]);
	free(m->names);
	free(m->lens);
	lt_hmap_free(&m->ix);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------ the model */

struct xline {
	int plane;             /* index into planes */
	int kind;              /* enum conv_track_kind */
	uint32_t a, b;         /* pid/tid or device/stream */
	int64_t id;
	char *name, *display_name;
	int64_t ts_ns;         /* relative to the profile start */
	int64_t end_ns;        /* latest end seen (relative) */
	uint64_t last_start;   /* mono ns of the last event, for order checks */
	uint64_t *stack;       /* ends (mono ns) of the open events */
	size_t depth, stack_cap;
	unsigned kinds;        /* CV_XLINE_* seen on a stream */
	uint64_t events;
	uint64_t len_at;       /* file offset of its length slot */
};

struct gpu_props {
	int have;
	uint32_t max_threads_per_sm, max_regs_per_sm, max_smem_per_sm;
};

enum { PLANE_UNWRITTEN, PLANE_OPEN, PLANE_WRITTEN };

struct xplane_p {
	int64_t id;
	char name[64];
	uint32_t device;          /* GPU planes */
	struct strmap events;     /* event metadata names */
	struct strmap stats;      /* stat metadata names (also ref_value strings) */
	XStat *plane_stats;
	char **plane_str;         /* strings owned by plane_stats */
	size_t n_plane_stats;
	struct gpu_props props;
	int64_t source_sid;       /* stat metadata id of "source", once used */
	struct ptr_cache event_cache[PTR_CACHE], ref_cache[PTR_CACHE];
	int state;                /* PLANE_* */
	uint64_t len_at;          /* file offset of its length slot */
	struct stat_name {        /* stat name literal -> id */
		const char *name;
		int64_t id;
	} *stat_names;
	size_t n_stat_names, cap_stat_names;
	struct lt_hmap stat_name_ix; /* a literal's address -> stat_names index */
	struct occ_memo {         /* the last kernel shape's occupancy (kernel_stats) */
		uint64_t key;     /* threads, registers, shared memory; 0: none yet */
		double pct;
		char text[32];
	} occ;
};

/* Stats of the event being encoded (see write_event). */
struct evstats {
	struct xplane_p *p;
	unsigned char *buf;
	size_t n, cap;
	int oom;
	char strs[3][512];
	size_t nstr;
};

struct pending {                  /* a written file waiting for finish() */
	struct tb_tmpfile tmp;
};

struct xsink {
	struct conv_sink sink;
	/* where */
	char *final_path;         /* fixed-path mode */
	char *logdir, *run;       /* logdir mode */
	int overwrite;
	/* per host */
	int in_host;
	int hosts;
	char *host;
	uint64_t start_mono, stop_mono, base_mono, base_real;
	int64_t single_device;    /* device of the host's only GPU, or -1 */
	const struct conv_host_meta *meta;
	struct xplane_p *planes;
	size_t n_planes;
	struct xline *lines;
	size_t n_lines, cap_lines;
	struct cv_map line_ix;    /* (kind << 32 | pid or device, tid or stream) -> index + 1 */
	struct xline *cur;        /* the open line, or NULL */
	int open_plane;           /* index of the open plane, or -1 */
	struct pbw *w;           /* the output */
	struct tb_tmpfile out;
	struct xplane_stats st;
	struct evstats es;        /* the event being encoded (buffer reused) */
	struct cv_gpumem mem;     /* the GPU memory track's totals (xs_memory) */
	/* outputs written, published on finish */
	struct pending *pend;
	size_t n_pend;
};

static int xerr(struct xsink *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int xerr(struct xsink *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->sink.err, sizeof(x->sink.err), fmt, ap);
	va_end(ap);
	return -1;
}

/* ------------------------------------------------------------- occupancy */

double xplane_occupancy_pct(uint32_t block_threads, uint32_t regs_per_thread,
			    uint32_t smem_per_block, uint32_t max_threads_per_sm,
			    uint32_t max_regs_per_sm, uint32_t max_smem_per_sm)
{
	uint32_t warps, threads, blocks = 32; /* blocks per SM cap (sm_80+) */

	if (!block_threads || !max_threads_per_sm || !max_regs_per_sm || !max_smem_per_sm)
		return 0;
	warps = (block_threads + 31) / 32;
	threads = warps * 32;
	if (threads > max_threads_per_sm)
		return 0;
	if (max_threads_per_sm / threads < blocks)
		blocks = max_threads_per_sm / threads;
	if (regs_per_thread && max_regs_per_sm / (regs_per_thread * threads) < blocks)
		blocks = max_regs_per_sm / (regs_per_thread * threads);
	if (smem_per_block && max_smem_per_sm / smem_per_block < blocks)
		blocks = max_smem_per_sm / smem_per_block;
	return 100.0 * blocks * threads / max_threads_per_sm;
}

/* ---------------------------------------------------------------- planes */

static struct xplane_p *plane_add(struct xsink *x, int64_t id, const char *name)
{
	size_t n = x->n_planes;
	struct xplane_p *planes = realloc(x->planes, (n + 1) * sizeof(*planes));

	if (!planes)
		return NULL;
	x->planes = planes;
	x->n_planes = n + 1;
	/* Filled in a local first: GCC's -O3 array-bounds check under
	 * sanitizers misreads a copy straight into the grown array. */
	struct xplane_p np;
	memset(&np, 0, sizeof(np));
	np.id = id;
	snprintf(np.name, sizeof(np.name), "%s", name);
	planes[n] = np;
	return &planes[n];
}

static void plane_free(struct xplane_p *p)
{
	strmap_free(&p->events);
	strmap_free(&p->stats);
	free(p->stat_names);
	lt_hmap_free(&p->stat_name_ix);
	for (size_t i = 0; i < p->n_plane_stats; i++)
		free(p->plane_str[i]);
	free(p->plane_stats);
	free(p->plane_str);
}

/* Add a plane-level stat; str is copied (NULL for numbers). */
static int plane_stat(struct xplane_p *p, const char *name, int vcase,
		      int64_t i, uint64_t u, const char *str)
{
	XStat *s = realloc(p->plane_stats, (p->n_plane_stats + 1) * sizeof(*s));
	char **strs;

	if (!s)
		return -1;
	p->plane_stats = s;
	strs = realloc(p->plane_str, (p->n_plane_stats + 1) * sizeof(*strs));
	if (!strs)
		return -1;
	p->plane_str = strs;
	s = &p->plane_stats[p->n_plane_stats];
	tensorflow__profiler__xstat__init(s);
	s->metadata_id = strmap_id(&p->stats, name);
	s->value_case = vcase;
	strs[p->n_plane_stats] = NULL;
	if (vcase == TENSORFLOW__PROFILER__XSTAT__VALUE_STR_VALUE) {
		strs[p->n_plane_stats] = pbw_utf8_dup(str ? str : "");
		if (!strs[p->n_plane_stats])
			return -1;
		s->str_value = strs[p->n_plane_stats];
	} else if (vcase == TENSORFLOW__PROFILER__XSTAT__VALUE_UINT64_VALUE) {
		s->uint64_value = u;
	} else {
		s->int64_value = i;
	}
	p->n_plane_stats++;
	return s->metadata_id ? 0 : -1;
}

#define STAT_I(p, n, v) plane_stat(p, n, TENSORFLOW__PROFILER__XSTAT__VALUE_INT64_VALUE, (int64_t)(v), 0, NULL)
#define STAT_U(p, n, v) plane_stat(p, n, TENSORFLOW__PROFILER__XSTAT__VALUE_UINT64_VALUE, 0, (uint64_t)(v), NULL)
#define STAT_S(p, n, v) plane_stat(p, n, TENSORFLOW__PROFILER__XSTAT__VALUE_STR_VALUE, 0, 0, v)

static int gpu_plane_props(struct xplane_p *p, const struct evlog_event *ev)
{
	char name[256];
	int rc = 0;

	if (!ev || ev->type != EV_GPU_DEVICE)
		return 0;
	snprintf(name, sizeof(name), "%.*s", (int)ev->u.gpu_device.name.len,
		 ev->u.gpu_device.name.ptr ? ev->u.gpu_device.name.ptr : "");
	rc |= STAT_S(p, "device_vendor", "Nvidia");
	rc |= STAT_S(p, "gpu_device_name", name);
	rc |= STAT_I(p, "clock_rate", ev->u.gpu_device.clock_khz);       /* kHz */
	rc |= STAT_I(p, "core_count", ev->u.gpu_device.sm_count);
	rc |= STAT_U(p, "memory_bandwidth", ev->u.gpu_device.memory_bandwidth); /* B/s */
	rc |= STAT_U(p, "memory_size", ev->u.gpu_device.memory_bytes);
	rc |= STAT_I(p, "compute_cap_major", ev->u.gpu_device.cc_major);
	rc |= STAT_I(p, "compute_cap_minor", ev->u.gpu_device.cc_minor);
	p->props.have = 1;
	p->props.max_threads_per_sm = ev->u.gpu_device.max_threads_per_sm;
	p->props.max_regs_per_sm = ev->u.gpu_device.max_regs_per_sm;
	p->props.max_smem_per_sm = ev->u.gpu_device.max_smem_per_sm;
	p->occ.key = 0; /* computed with other properties */
	return rc;
}

static struct xplane_p *gpu_plane(struct xsink *x, uint32_t device)
{
	char name[64];

	for (size_t i = 1; i < x->n_planes; i++)
		if (x->planes[i].id == (int64_t)device && !strncmp(x->planes[i].name, "/device:GPU:", 12))
			return &x->planes[i];
	snprintf(name, sizeof(name), "/device:GPU:%u", device);
	struct xplane_p *p = plane_add(x, device, name);

	if (p)
		p->device = device;
	return p;
}

static int planes_init(struct xsink *x, const struct conv_host_meta *m)
{
	if (!plane_add(x, HOST_PLANE_ID, "/host:CPU"))
		return -1;
	for (uint32_t i = 0; i < m->n_gpus; i++) {
		struct xplane_p *p = gpu_plane(x, m->gpus[i].device);

		if (!p || gpu_plane_props(p, m->gpus[i].props) < 0)
			return -1;
	}
	x->single_device = m->n_gpus == 1 ? (int64_t)m->gpus[0].device : -1;
	return 0;
}

/* ----------------------------------------------------------------- lines */

/* Line ids must avoid the range xprof reserves for its derived lines. */
static int64_t safe_line_id(int64_t id)
{
	if (id >= RESERVED_LINE_LO && id <= RESERVED_LINE_HI)
		return id | (1LL << 40);
	return id;
}

/* Binary searches: the core hands threads sorted by (pid, tid) and
 * processes by pid (meta.c), and a host may have hundreds of thousands of
 * threads, one line each. */
static const char *thread_name(const struct conv_host_meta *m, uint32_t pid, uint32_t tid,
			       const struct conv_process **proc)
{
	const struct conv_thread *t = conv_meta_thread(m, pid, tid);

	*proc = conv_meta_process(m, pid);
	return t ? t->name : NULL;
}

static int line_names(struct xsink *x, struct xline *l)
{
	char buf[512];
	const struct conv_process *proc;
	const char *tn;

	if (l->kind == CONV_TRACK_THREAD) {
		tn = thread_name(x->meta, l->a, l->b, &proc);
		snprintf(buf, sizeof(buf), "%s", tn && *tn ? tn : "thread");
		l->name = strdup(buf);
		if (conv_is_device_tid(l->b) && proc && *proc->label) /* "GPU 0 of rank 0 (pid 7)" */
			snprintf(buf, sizeof(buf), "%s of %s", tn && *tn ? tn : "GPU", proc->label);
		else if (conv_is_device_tid(l->b)) /* "GPU 0 (python3 7)" */
			snprintf(buf, sizeof(buf), "%s (%s %u)", tn && *tn ? tn : "GPU",
				 proc && *proc->name ? proc->name : "pid", l->a);
		else if (proc && *proc->label) /* "MainThread 7 of rank 0 (pid 7)" */
			snprintf(buf, sizeof(buf), "%s %u of %s", tn && *tn ? tn : "thread", l->b,
				 proc->label);
		else
			snprintf(buf, sizeof(buf), "%s %u (%s %u)", tn && *tn ? tn : "thread", l->b,
				 proc && *proc->name ? proc->name : "pid", l->a);
		l->display_name = strdup(buf);
	} else {
		/* Completed at assembly, once the stream's activity kinds are known. */
		l->name = NULL;
		l->display_name = NULL;
		return 0;
	}
	return l->name && l->display_name ? 0 : -1;
}

static void line_free(struct xline *l);

/* Lines are found by hash, not by scanning: every new track looks its line
 * up (to catch one already closed), so a scan was quadratic in the threads
 * (docs/MEASUREMENTS.md, converter throughput and memory). */
static uint64_t line_key(int kind, uint32_t a)
{
	return (uint64_t)(uint32_t)kind << 32 | a;
}

static struct xline *line_find(struct xsink *x, const struct conv_item *it)
{
	uint32_t a = it->track == CONV_TRACK_THREAD ? it->pid : it->device;
	uint32_t b = it->track == CONV_TRACK_THREAD ? it->tid : it->stream;
	uint64_t *ix;

	if (x->cur && x->cur->kind == (int)it->track && x->cur->a == a && x->cur->b == b)
		return x->cur;
	ix = cv_map_get(&x->line_ix, line_key((int)it->track, a), b);
	return ix ? &x->lines[*ix - 1] : NULL;
}

static struct xline *line_new(struct xsink *x, const struct conv_item *it, int plane)
{
	struct xline *l;
	uint64_t *ix;

	if (x->n_lines == x->cap_lines) {
		size_t cap = x->cap_lines ? x->cap_lines * 2 : 64;

		l = realloc(x->lines, cap * sizeof(*l));
		if (!l)
			return NULL;
		x->lines = l;
		x->cap_lines = cap;
		x->cur = NULL; /* the array moved */
	}
	l = &x->lines[x->n_lines];
	memset(l, 0, sizeof(*l));
	l->kind = it->track;
	l->plane = plane;
	if (it->track == CONV_TRACK_THREAD) {
		l->a = it->pid;
		l->b = it->tid;
		l->id = safe_line_id(it->tid);
	} else {
		l->a = it->device;
		l->b = it->stream;
		l->id = safe_line_id(it->stream);
	}
	l->ts_ns = (int64_t)(it->start_ns - x->start_mono);
	l->end_ns = l->ts_ns;
	if (line_names(x, l) < 0) {
		line_free(l);
		return NULL;
	}
	ix = cv_map_put(&x->line_ix, line_key(l->kind, l->a), l->b, NULL);
	if (!ix) {
		line_free(l);
		return NULL;
	}
	*ix = ++x->n_lines;
	x->st.lines++;
	return l;
}

/* ------------------------------------------------- planes and lines, open */

static void plane_open(struct xsink *x, size_t pi)
{
	struct xplane_p *p = &x->planes[pi];

	p->len_at = pbw_open_field(x->w, 1);
	pbw_int_field(x->w, 1, p->id);
	pbw_str_field(x->w, 2, p->name);
	p->state = PLANE_OPEN;
	x->open_plane = (int)pi;
}

static void emit_metadata(struct pbw *w, unsigned field, const struct strmap *m, int64_t sid);

/* The plane's metadata and stats follow its lines; then its length. */
static int plane_close(struct xsink *x, size_t pi)
{
	struct xplane_p *p = &x->planes[pi];

	emit_metadata(x->w, 4, &p->events, p->source_sid);
	emit_metadata(x->w, 5, &p->stats, 0);
	for (size_t i = 0; i < p->n_plane_stats; i++)
		if (pbw_msg_field(x->w, 6, &p->plane_stats[i].base) < 0)
			return xerr(x, "xplane: out of memory");
	pbw_close_field(x->w, p->len_at);
	p->state = PLANE_WRITTEN;
	x->open_plane = -1;
	return 0;
}

/* Write the planes that got no line (GPUs that ran nothing, the task
 * environment) at the end: each plane is written once, whole. */
static int planes_unwritten(struct xsink *x)
{
	for (size_t i = 0; i < x->n_planes; i++)
		if (x->planes[i].state == PLANE_UNWRITTEN) {
			plane_open(x, i);
			if (plane_close(x, i) < 0)
				return -1;
		}
	return 0;
}

static void stream_line_name(struct xline *l);

static void line_open(struct xsink *x, struct xline *l)
{
	l->len_at = pbw_open_field(x->w, 3);
	pbw_int_field(x->w, 1, l->id);
	pbw_int_field(x->w, 3, l->ts_ns);
	x->cur = l;
}

/* Nanoseconds as the picoseconds XPlane counts in, saturated: a log whose
 * clock jumps by more than 106 days (damaged, or hostile) must not
 * overflow. */
static int64_t ps_of(int64_t ns)
{
	int64_t ps;

	if (__builtin_mul_overflow(ns, 1000, &ps))
		return ns < 0 ? INT64_MIN : INT64_MAX;
	return ps;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* What a line knows only at its end, after its events; then its length. */
static int line_close(struct xsink *x, struct xline *l)
{
	if (l->kind == CONV_TRACK_STREAM) {
		stream_line_name(l);
		if (!l->name)
			return xerr(x, "xplane: out of memory");
	}
	pbw_str_field(x->w, 2, l->name);
	pbw_int_field(x->w, 9, ps_of(sat_sub(l->end_ns, l->ts_ns)));
	pbw_str_field(x->w, 11, l->display_name);
	pbw_close_field(x->w, l->len_at);
	x->cur = NULL;
	return 0;
}

/*
 * The line of an item, opened in the output when the item starts a new
 * track (closing the previous line, and its plane when the new line is on
 * another). NULL with *late set when its line or plane was already closed:
 * the item is dropped, as the sink contract rules that out. NULL alone: out
 * of memory (x->sink.err says).
 */
static struct xline *line_enter(struct xsink *x, const struct conv_item *it, int *late)
{
	struct xline *l = line_find(x, it);
	struct xplane_p *p = &x->planes[0];
	size_t pi;

	*late = 0;
	if (l) {
		*late = l != x->cur;
		return l == x->cur ? l : NULL;
	}
	if (it->track == CONV_TRACK_STREAM && !(p = gpu_plane(x, it->device))) {
		xerr(x, "xplane: out of memory adding a plane");
		return NULL;
	}
	pi = (size_t)(p - x->planes);
	if (p->state == PLANE_WRITTEN) {
		*late = 1;
		return NULL;
	}
	if (x->cur && line_close(x, x->cur) < 0)
		return NULL;
	if ((int)pi != x->open_plane) {
		if (x->open_plane >= 0 && plane_close(x, (size_t)x->open_plane) < 0)
			return NULL;
		plane_open(x, pi);
	}
	l = line_new(x, it, (int)pi);
	if (!l) {
		xerr(x, "xplane: out of memory adding a line");
		return NULL;
	}
	line_open(x, l);
	return l;
}

static void line_free(struct xline *l)
{
	free(l->name);
	free(l->display_name);
	free(l->stack);
}

/*
 * Keep the line sorted and nested, whatever we are given: an event that
 * starts before its predecessor is dropped (a line must be sorted and we
 * stream); one that ends after its enclosing event is cut to fit. Returns
 * the (possibly shortened) duration, or -1 to drop.
 */
static int64_t line_nest(struct xsink *x, struct xline *l, uint64_t start, uint64_t dur)
{
	uint64_t end = start + dur;

	if (l->events && start < l->last_start) {
		x->st.dropped++;
		return -1;
	}
	l->last_start = start;
	while (l->depth && l->stack[l->depth - 1] <= start)
		l->depth--;
	if (l->depth && end > l->stack[l->depth - 1]) {
		end = l->stack[l->depth - 1];
		x->st.repaired++;
	}
	if (end > start) {
		if (l->depth == l->stack_cap) {
			size_t cap = l->stack_cap ? l->stack_cap * 2 : 16;
			uint64_t *s = realloc(l->stack, cap * sizeof(*s));

			if (!s)
				return -2;
			l->stack = s;
			l->stack_cap = cap;
		}
		l->stack[l->depth++] = end;
	}
	return (int64_t)(end - start);
}

/* ---------------------------------------------------------- event stats */

/*
 * Events are hand-encoded: an XEvent is three varints plus a few stats, and
 * building protobuf-c structs only to pack them again cost more than the
 * rest of the sink. Each stat is an XEvent.stats entry (field 4) holding
 * {1: metadata_id, <value field>}, appended to a buffer reused across
 * events.
 */
#define STAT_INTERN_MAX (1u << 18) /* distinct interned values per plane, then str_value */

static int es_reserve(struct evstats *e, size_t more)
{
	unsigned char *nb;
	size_t cap;

	if (e->oom)
		return -1;
	if (e->n + more <= e->cap)
		return 0;
	cap = e->cap ? e->cap : 256;
	while (cap < e->n + more)
		cap *= 2;
	nb = realloc(e->buf, cap);
	if (!nb) {
		e->oom = 1;
		return -1;
	}
	e->buf = nb;
	e->cap = cap;
	return 0;
}

/* One stat: header and metadata id, then the value's tag; the caller
 * appends vlen bytes of value. 0 when there is room, -1 otherwise. */
/* Id of a stat name. Names are string literals: found by address, so the
 * per-event cost is a probe, not a string hash. (A direct-mapped cache by
 * address missed every time for names whose addresses collided, which
 * depends on how the program happens to be linked.) */
static int64_t stat_name_id(struct xplane_p *p, const char *name)
{
	struct lt_hmap_pos pos = lt_hmap_probe(&p->stat_name_ix, lt_mix64((uintptr_t)name));
	uint32_t i;
	int64_t id;

	while (lt_hmap_next(&p->stat_name_ix, &pos, &i))
		if (p->stat_names[i].name == name)
			return p->stat_names[i].id;
	id = strmap_id(&p->stats, name);
	if (id && !lt_grow((void **)&p->stat_names, &p->cap_stat_names, p->n_stat_names + 1,
			   sizeof(*p->stat_names), 32) &&
	    !lt_hmap_add(&p->stat_name_ix, &pos, (uint32_t)p->n_stat_names))
		p->stat_names[p->n_stat_names++] = (struct stat_name){ name, id };
	return id;
}

static int es_head(struct evstats *e, const char *name, unsigned vtag, uint64_t vlen)
{
	int64_t mid = stat_name_id(e->p, name);
	uint64_t body;

	if (!mid) {
		e->oom = 1;
		return -1;
	}
	body = 1 + lt_varint_len((uint64_t)mid) + 1 + vlen;
	if (es_reserve(e, 1 + 10 + 1 + 10 + 1 + vlen) < 0)
		return -1;
	e->buf[e->n++] = 4 << 3 | 2;
	e->n = (size_t)(lt_varint_put(e->buf + e->n, body) - e->buf);
	e->buf[e->n++] = 1 << 3;
	e->n = (size_t)(lt_varint_put(e->buf + e->n, (uint64_t)mid) - e->buf);
	e->buf[e->n++] = (unsigned char)vtag;
	return 0;
}

static void es_varint(struct evstats *e, const char *name, unsigned field, uint64_t v)
{
	if (es_head(e, name, field << 3, lt_varint_len(v)) == 0)
		e->n = (size_t)(lt_varint_put(e->buf + e->n, v) - e->buf);
}

static void es_u64(struct evstats *e, const char *name, uint64_t v)
{
	es_varint(e, name, 3, v);
}

static void es_i64(struct evstats *e, const char *name, int64_t v)
{
	es_varint(e, name, 4, (uint64_t)v);
}

static void es_dbl(struct evstats *e, const char *name, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	if (es_head(e, name, 2 << 3 | 1, 8) < 0)
		return;
	for (int i = 0; i < 8; i++)
		e->buf[e->n++] = (unsigned char)(u >> (8 * i)); /* fixed64, little-endian */
}

/* A string stat (str_value), cleaned to UTF-8. */
static void es_str(struct evstats *e, const char *name, const char *v)
{
	char *owned;
	const char *s = pbw_utf8_ok(v, &owned);
	size_t n = strlen(s);

	if (es_head(e, name, 5 << 3 | 2, lt_varint_len(n) + n) == 0) {
		e->n = (size_t)(lt_varint_put(e->buf + e->n, n) - e->buf);
		memcpy(e->buf + e->n, s, n);
		e->n += n;
	}
	free(owned);
}

/* A value that repeats across events (kernel details, stacks): interned in
 * the plane's stat metadata and written as its id (ref_value), as xprof's
 * own writers do. Past STAT_INTERN_MAX distinct values, str_value. */
static void es_ref(struct evstats *e, const char *name, const char *v)
{
	int64_t ref;

	if (e->p->stats.n >= STAT_INTERN_MAX) {
		es_str(e, name, v);
		return;
	}
	ref = strmap_id_cached(&e->p->stats, e->p->ref_cache, v);
	if (!ref) {
		e->oom = 1;
		return;
	}
	es_varint(e, name, 7, (uint64_t)ref);
}

static char *es_buf(struct evstats *e)
{
	return e->nstr < 3 ? e->strs[e->nstr++] : NULL;
}

/* Detail strings for every GPU activity, built by hand (printf was the
 * sink's top cost); truncated at the buffer's end like snprintf. */
struct sbuf {
	char *p, *end;          /* end: room for the NUL */
};

static void sb_s(struct sbuf *b, const char *s)
{
	while (*s && b->p < b->end)
		*b->p++ = *s++;
	*b->p = 0;
}

static void sb_u(struct sbuf *b, uint64_t v)
{
	char t[20];
	size_t n = cv_dec_u64(t, v);

	for (size_t i = 0; i < n && b->p < b->end; i++)
		*b->p++ = t[i];
	*b->p = 0;
}

static struct sbuf sb_at(char *buf)
{
	return (struct sbuf){ buf, buf + 511 };
}

static void context_stat(struct evstats *e, char *ctx, uint32_t context)
{
	struct sbuf b = sb_at(ctx);

	sb_s(&b, "$$");
	sb_u(&b, context);
	es_str(e, "context_id", ctx);
}

static void kernel_stats(struct evstats *e, struct xplane_p *p, const struct evlog_event *ev)
{
	char *kd = es_buf(e), *ctx = es_buf(e);
	const uint32_t *g = ev->u.gpu_kernel.grid, *bl = ev->u.gpu_kernel.block;
	uint32_t bt = bl[0] * bl[1] * bl[2];
	uint32_t smem = ev->u.gpu_kernel.static_smem + ev->u.gpu_kernel.dynamic_smem;
	uint32_t regs = ev->u.gpu_kernel.registers;
	struct occ_memo *m = &p->occ;
	/* Kernels repeat their shape: the occupancy and its text (snprintf of a
	 * double, measurable in a conversion: docs/MEASUREMENTS.md, converter
	 * throughput and memory) are kept for the last one. A shape that
	 * does not fit the key (never on real GPUs) is computed every time. */
	uint64_t key = bt <= 0xffff && regs <= 0xffff && smem <= 0x7fffffff ?
		       1ull << 63 | (uint64_t)smem << 32 | (uint64_t)regs << 16 | bt : 0;
	const char *occ;
	double pct;
	struct sbuf b = sb_at(kd);

	if (!key || key != m->key) {
		m->pct = 0;
		m->text[0] = 0;
		if (p->props.have)
			m->pct = xplane_occupancy_pct(bt, regs, smem,
						      p->props.max_threads_per_sm,
						      p->props.max_regs_per_sm,
						      p->props.max_smem_per_sm);
		if (m->pct > 0)
			snprintf(m->text, sizeof(m->text), " occ_pct:%.4g", m->pct);
		m->key = key;
	}
	pct = m->pct;
	occ = m->text;
	/* "regs:R static_shared:S dynamic_shared:D grid:X,Y,Z block:X,Y,Z[ occ_pct:P]" */
	sb_s(&b, "regs:");
	sb_u(&b, ev->u.gpu_kernel.registers);
	sb_s(&b, " static_shared:");
	sb_u(&b, ev->u.gpu_kernel.static_smem);
	sb_s(&b, " dynamic_shared:");
	sb_u(&b, ev->u.gpu_kernel.dynamic_smem);
	sb_s(&b, " grid:");
	for (int i = 0; i < 3; i++) {
		if (i)
			sb_s(&b, ",");
		sb_u(&b, g[i]);
	}
	sb_s(&b, " block:");
	for (int i = 0; i < 3; i++) {
		if (i)
			sb_s(&b, ",");
		sb_u(&b, bl[i]);
	}
	sb_s(&b, occ);
	es_ref(e, "kernel_details", kd);
	context_stat(e, ctx, ev->u.gpu_kernel.context);
	if (pct > 0)
		es_dbl(e, "theoretical_occupancy_pct", pct);
}

static void xs_kernel(struct xsink *x, struct evstats *e, struct xplane_p *p,
		      const struct conv_item *it)
{
	(void)x;
	kernel_stats(e, p, it->ev);
}

static void xs_memcpy(struct xsink *x, struct evstats *e, struct xplane_p *p,
		      const struct conv_item *it)
{
	const struct evlog_event *ev = it->ev;
	char *d = es_buf(e), *ctx = es_buf(e);
	struct sbuf b = sb_at(d);

	(void)x, (void)p;
	/* "kind_src:S kind_dst:D size:N dest:DEV async:1" */
	sb_s(&b, "kind_src:");
	sb_s(&b, cv_memory_kind_xprof(ev->u.gpu_memcpy.src_kind));
	sb_s(&b, " kind_dst:");
	sb_s(&b, cv_memory_kind_xprof(ev->u.gpu_memcpy.dst_kind));
	sb_s(&b, " size:");
	sb_u(&b, ev->u.gpu_memcpy.bytes);
	sb_s(&b, " dest:");
	sb_u(&b, ev->u.gpu_memcpy.device);
	sb_s(&b, " async:1");
	es_ref(e, "memcpy_details", d);
	context_stat(e, ctx, ev->u.gpu_memcpy.context);
}

static void xs_memset(struct xsink *x, struct evstats *e, struct xplane_p *p,
		      const struct conv_item *it)
{
	const struct evlog_event *ev = it->ev;
	char *d = es_buf(e), *ctx = es_buf(e);
	struct sbuf b = sb_at(d);

	(void)x, (void)p;
	/* "num_bytes:N value:V" */
	sb_s(&b, "num_bytes:");
	sb_u(&b, ev->u.gpu_memset.bytes);
	sb_s(&b, " value:");
	sb_u(&b, ev->u.gpu_memset.value);
	es_ref(e, "memset_details", d);
	context_stat(e, ctx, ev->u.gpu_memset.context);
}

/* A CUDA synchronization on the thread that waited: its kind by Kineto's
 * name (as its trace JSON arg), the call's correlation id, its context and
 * stream (-1: none). */
static void xs_sync(struct xsink *x, struct evstats *e, struct xplane_p *p,
		    const struct conv_item *it)
{
	const struct evlog_event *ev = it->ev;

	(void)x, (void)p;
	es_ref(e, "cuda_sync_kind", it->name);
	if (!(it->flow_id && it->flow_start))
		es_u64(e, "correlation_id", ev->u.gpu_sync.correlation_id);
	context_stat(e, es_buf(e), ev->u.gpu_sync.context);
	es_i64(e, "stream_id", (int32_t)ev->u.gpu_sync.stream);
}

static void xs_syscall(struct xsink *x, struct evstats *e, struct xplane_p *p,
		       const struct conv_item *it)
{
	(void)x, (void)p;
	es_i64(e, "ret", it->ev->u.syscall.ret);
}

static void xs_overhead(struct xsink *x, struct evstats *e, struct xplane_p *p,
			const struct conv_item *it)
{
	(void)x, (void)p;
	es_ref(e, "overhead_kind", it->name);
}

static void xs_lib_call(struct xsink *x, struct evstats *e, struct xplane_p *p,
			const struct conv_item *it)
{
	char *s = es_buf(e);

	(void)x, (void)p;
	if (s && cv_call_args(it->ev, s, sizeof(e->strs[0])))
		es_ref(e, "args", s); /* calls repeat their arguments */
}

/*
 * GPU memory as xprof's memory profile reads it (xprof's
 * convert/xplane_to_memory_profile.cc): an event named MemoryAllocation or
 * MemoryDeallocation (evview.h) on the host plane, with its allocator
 * ("allocator_name": one per process and GPU, host memory apart), the bytes
 * that allocator holds after it ("bytes_allocated") and held at most
 * ("peak_bytes_in_use"), the allocation's size ("requested_bytes",
 * "allocation_bytes"), address ("addr") and memory kind ("region_type");
 * its numbers as int64, which xprof reads.
 */
static void xs_memory(struct xsink *x, struct evstats *e, struct xplane_p *p,
		      const struct conv_item *it)
{
	const struct evlog_event *ev = it->ev;
	int cls = cv_gpumem_class(ev);
	char *name = es_buf(e);

	(void)p;
	if (!name || cv_gpumem_add(&x->mem, it)) {
		e->oom = 1;
		return;
	}
	snprintf(name, sizeof(e->strs[0]), "GPU %u%s (pid %u)", ev->u.gpu_memory.device,
		 cls == CV_GPUMEM_HOST ? " host" : "", it->pid);
	es_ref(e, "allocator_name", name);
	es_i64(e, "bytes_allocated", (int64_t)x->mem.total[cls]);
	es_i64(e, "peak_bytes_in_use", (int64_t)x->mem.peak[cls]);
	es_i64(e, "requested_bytes", (int64_t)ev->u.gpu_memory.bytes);
	es_i64(e, "allocation_bytes", (int64_t)ev->u.gpu_memory.bytes);
	es_i64(e, "addr", (int64_t)ev->u.gpu_memory.address);
	es_ref(e, "region_type", cv_memory_kind_xprof(ev->u.gpu_memory.memory_kind));
	if (ev->u.gpu_memory.correlation_id)
		es_u64(e, "correlation_id", ev->u.gpu_memory.correlation_id);
}

/* The stats of the item's type, as its view says (evview.h). */
#define ITEM_XS_NOXS
#define ITEM_XS_XS(fn) fn(x, e, p, it);
#define ITEM_XS_VIEW(m, cat, nm, flow, shape, fold, xline, xs) ITEM_XS_##xs
#define ITEM_XS_CASE(N, num, m, track, dur, corr) \
	case EV_##N: \
		EVVIEW_##m(ITEM_XS_VIEW) break;

static void type_stats(struct xsink *x, struct evstats *e, struct xplane_p *p,
		       const struct conv_item *it)
{
	switch (it->ev->type) {
		EVLOG_TYPES(ITEM_XS_CASE)
	default:
		break;
	}
}

static unsigned gpu_item_stats(struct xsink *x, struct evstats *e, struct xplane_p *p,
			       const struct conv_item *it)
{
	const struct evlog_event *ev = it->ev;
	uint64_t corr = it->flow_id;

	if (!ev)
		return CV_XLINE_OTHER;
	if (!corr)
		corr = evlog_corr(ev);
	if (corr)
		es_u64(e, "correlation_id", corr);
	type_stats(x, e, p, it);
	return cv_view_of(ev->type)->xline;
}

/* Per-event stats of a host event: only what varies from one call to the
 * next. What a function always has (its file:line) is in its metadata. */
static void host_item_stats(struct xsink *x, struct evstats *e, struct xplane_p *p,
			    const struct conv_item *it)
{
	if (it->flow_id && it->flow_start) {
		es_u64(e, "correlation_id", it->flow_id);
		if (x->single_device >= 0)
			es_u64(e, "device_id", (uint64_t)x->single_device);
	}
	if (it->step) {
		es_i64(e, "_r", 1);
		es_i64(e, "step_num", (int64_t)it->step - 1);
	}
	if (it->stack_folded && *it->stack_folded)
		es_ref(e, "stack", it->stack_folded); /* samples repeat their stacks */
	if (it->ev)
		type_stats(x, e, p, it);
}

/* ------------------------------------------------------------ the items */

/*
 * The event's XEventMetadata id: one per distinct name, and for Python
 * functions one per (name, file:line), the source going into the
 * metadata's stats (key "name\0file:line", split again when emitted).
 */
static int64_t event_meta_id(struct xplane_p *p, const struct conv_item *it)
{
	const char *name = it->name && *it->name ? it->name : "<unknown>";
	const struct evlog_event *ev = it->ev;
	char key[1024];
	size_t n;
	int m;

	if (!ev || ev->type != EV_PY_ENTER || !ev->u.py_enter.file.len)
		return strmap_id_cached(&p->events, p->event_cache, name);
	n = strlen(name);
	if (n > 512)
		n = 512;
	memcpy(key, name, n);
	key[n++] = 0;
	/* "file:line", by hand: this runs for every Python call. */
	size_t room = sizeof(key) - n - 12; /* ':', 10 digits, NUL */

	m = (int)(ev->u.py_enter.file.len < room ? ev->u.py_enter.file.len : room);
	memcpy(key + n, ev->u.py_enter.file.ptr, (size_t)m);
	n += (size_t)m;
	key[n++] = ':';
	n += cv_dec_u64(key + n, ev->u.py_enter.line);
	if (!p->source_sid && !(p->source_sid = strmap_id(&p->stats, "source")))
		return 0;
	return strmap_idn(&p->events, key, n);
}

/* XEvent {1: metadata_id, 2: offset_ps (oneof: written even when 0),
 * 3: duration_ps, 4: stats} as an XLine.events entry (field 4). */
static void xevent_write(struct pbw *w, int64_t mid, int64_t off_ps, int64_t dur_ps,
		       const struct evstats *e)
{
	unsigned char h[40], pre[12];
	size_t n = 0, hn;

	h[n++] = 1 << 3;
	n = (size_t)(lt_varint_put(h + n, (uint64_t)mid) - h);
	h[n++] = 2 << 3;
	n = (size_t)(lt_varint_put(h + n, (uint64_t)off_ps) - h);
	if (dur_ps) {
		h[n++] = 3 << 3;
		n = (size_t)(lt_varint_put(h + n, (uint64_t)dur_ps) - h);
	}
	pre[0] = 4 << 3 | 2;
	hn = (size_t)(lt_varint_put(pre + 1, n + e->n) - pre);
	pbw_bytes(w, pre, hn);
	pbw_bytes(w, h, n);
	if (e->n)
		pbw_bytes(w, e->buf, e->n);
}

static int write_event(struct xsink *x, struct xline *l, const struct conv_item *it, int64_t dur)
{
	struct xplane_p *p = &x->planes[l->plane];
	struct evstats *es = &x->es;
	int64_t mid, end;

	es->p = p;
	es->n = es->nstr = 0;
	mid = event_meta_id(p, it);
	if (!mid)
		return xerr(x, "xplane: out of memory interning event names");
	if (l->kind == CONV_TRACK_STREAM)
		l->kinds |= gpu_item_stats(x, es, p, it);
	else
		host_item_stats(x, es, p, it);
	if (es->oom)
		return xerr(x, "xplane: out of memory encoding an event");
	xevent_write(x->w, mid, ps_of(sat_sub((int64_t)(it->start_ns - x->start_mono), l->ts_ns)),
		     ps_of(dur), es);
	end = sat_add((int64_t)(it->start_ns - x->start_mono), dur);
	if (end > l->end_ns)
		l->end_ns = end;
	l->events++;
	x->st.events++;
	return 0;
}

static int write_failed(struct xsink *x)
{
	if (x->w->failed == EFBIG)
		return xerr(x, "xplane: writing %s: a plane or line over 32 GiB", x->out.final);
	return xerr(x, "xplane: writing %s: %s", x->out.final, strerror(x->w->failed));
}

static int xs_item(void *ctx, const struct conv_item *it)
{
	struct xsink *x = ctx;
	struct xline *l;
	int64_t dur;
	int late;

	if (!x->in_host)
		return xerr(x, "xplane: item outside begin_host/end_host");
	if (it->track != CONV_TRACK_THREAD && it->track != CONV_TRACK_STREAM) {
		x->st.dropped++;
		return 0;
	}
	l = line_enter(x, it, &late);
	if (!l) {
		if (!late)
			return -1;
		x->st.dropped++;
		return 0;
	}
	dur = line_nest(x, l, it->start_ns, it->dur_ns);
	if (dur == -2)
		return xerr(x, "xplane: out of memory");
	if (dur < 0)
		return 0;
	if (write_event(x, l, it, dur) < 0)
		return -1;
	if (x->w->failed)
		return write_failed(x);
	return 0;
}

/* -------------------------------------------------------------- assembly */

static void stream_line_name(struct xline *l)
{
	char kinds[64] = "", buf[96];

	if (l->kinds & CV_XLINE_Compute)
		strcat(kinds, "Compute");
	if (l->kinds & CV_XLINE_Memcpy)
		strcat(kinds, *kinds ? ",Memcpy" : "Memcpy");
	if (l->kinds & CV_XLINE_Memset)
		strcat(kinds, *kinds ? ",Memset" : "Memset");
	if (*kinds)
		snprintf(buf, sizeof(buf), "Stream #%u(%s)", l->b, kinds);
	else
		snprintf(buf, sizeof(buf), "Stream #%u", l->b);
	free(l->name);
	l->name = strdup(buf);
}

/* One metadata map entry {1: key, 2: {1: id, 2: name[, 5: {1: sid, 5: src}]}};
 * src (may be NULL) becomes a "source" stat of an XEventMetadata. */
static void emit_meta_entry(struct pbw *w, unsigned field, int64_t id, const char *name,
			    int64_t sid, const char *src)
{
	char *owned, *owned_src = NULL;
	size_t nlen = strlen(pbw_utf8_ok(name, &owned)), slen = 0;
	uint64_t stat = 0, val, entry;

	if (src) {
		slen = strlen(pbw_utf8_ok(src, &owned_src));
		stat = lt_varint_len(1 << 3) + lt_varint_len((uint64_t)sid) + pbw_len_field_size(5, slen);
	}
	val = lt_varint_len(1 << 3) + lt_varint_len((uint64_t)id) +
	      (nlen ? pbw_len_field_size(2, nlen) : 0) + (src ? pbw_len_field_size(5, stat) : 0);
	entry = lt_varint_len(1 << 3) + lt_varint_len((uint64_t)id) + pbw_len_field_size(2, val);
	pbw_len_header(w, field, entry);
	pbw_int_field(w, 1, id);
	pbw_len_header(w, 2, val);
	pbw_int_field(w, 1, id);
	pbw_str_field(w, 2, name);
	if (src) {
		pbw_len_header(w, 5, stat);
		pbw_int_field(w, 1, sid);
		pbw_len_header(w, 5, slen);
		pbw_bytes(w, owned_src ? owned_src : src, slen);
	}
	free(owned);
	free(owned_src);
}

/* XEventMetadata / XStatMetadata map entries; event keys "name\0source"
 * (Python functions) carry their source as a metadata stat. */
static void emit_metadata(struct pbw *w, unsigned field, const struct strmap *m, int64_t sid)
{
	for (size_t i = 0; i < m->n; i++) {
		size_t nlen = strlen(m->names[i]);
		const char *src = nlen < m->lens[i] ? m->names[i] + nlen + 1 : NULL;

		emit_meta_entry(w, field, (int64_t)i + 1, m->names[i], sid, src);
	}
}

static int add_task_env(struct xsink *x)
{
	struct xplane_p *p = plane_add(x, TASK_ENV_PLANE_ID, "Task Environment");
	int64_t d0 = (int64_t)(x->start_mono - x->base_mono);
	int64_t d1 = (int64_t)(x->stop_mono - x->base_mono);

	if (!p)
		return -1;
	if (STAT_U(p, "profile_start_time", (uint64_t)((int64_t)x->base_real + d0)) < 0 ||
	    STAT_U(p, "profile_stop_time", (uint64_t)((int64_t)x->base_real + d1)) < 0)
		return -1;
	return 0;
}

/* ----------------------------------------------------------- host state */

static void host_free(struct xsink *x)
{
	for (size_t i = 0; i < x->n_planes; i++)
		plane_free(&x->planes[i]);
	free(x->planes);
	x->planes = NULL;
	x->n_planes = 0;
	for (size_t i = 0; i < x->n_lines; i++)
		line_free(&x->lines[i]);
	free(x->lines);
	x->lines = NULL;
	x->n_lines = x->cap_lines = 0;
	cv_map_free(&x->line_ix);
	x->cur = NULL;
	x->open_plane = -1;
	if (x->w)
		tb_seq_free(&x->w->seq);
	free(x->w);
	x->w = NULL;
	free(x->host);
	x->host = NULL;
	x->in_host = 0;
}

static int open_output(struct xsink *x, const struct conv_host_meta *m)
{
	char name[TB_NAME_MAX + 32], run[TB_NAME_MAX + 1];
	int dfd, rc;

	if (x->final_path)
		return tb_tmp_open_path(&x->out, x->final_path, x->overwrite, x->sink.err,
					sizeof(x->sink.err));
	if (!x->run) {
		/* One run for all hosts: named after the earliest start among them. */
		uint64_t wall = m->run_base_realtime_ns ? m->run_base_realtime_ns
				: m->base_realtime_ns + (m->start_ns - m->base_mono_ns);

		if (tb_run_name(wall, run, sizeof(run)) < 0 || !(x->run = strdup(run)))
			return xerr(x, "xplane: cannot name the run from its start time");
	}
	tb_host_filename(m->host, name, sizeof(name) - 16);
	strcat(name, ".xplane.pb");
	dfd = tb_open_run_dir(x->logdir, x->run, 1, x->sink.err, sizeof(x->sink.err));
	if (dfd < 0)
		return -1;
	rc = tb_tmp_open(&x->out, dfd, name, x->overwrite, x->sink.err, sizeof(x->sink.err));
	close(dfd);
	return rc;
}

static int xs_begin_host(void *ctx, const struct conv_host_meta *m)
{
	struct xsink *x = ctx;

	if (x->in_host)
		return xerr(x, "xplane: begin_host twice without end_host");
	if (x->final_path && x->hosts > 0)
		return xerr(x, "xplane: %s holds one host; got a second host '%s' (use --logdir "
			    "for several hosts)", x->final_path, m->host ? m->host : "");
	memset(&x->st, 0, sizeof(x->st));
	cv_gpumem_free(&x->mem); /* the same pid and tid on another host: another track */
	x->meta = m;
	x->start_mono = m->start_ns;
	x->stop_mono = m->stop_ns > m->start_ns ? m->stop_ns : m->start_ns;
	x->base_mono = m->base_mono_ns;
	x->base_real = m->base_realtime_ns;
	x->host = strdup(m->host ? m->host : "");
	x->in_host = 1;
	if (!x->host || planes_init(x, m) < 0) {
		host_free(x);
		return xerr(x, "xplane: out of memory");
	}
	if (open_output(x, m) < 0) {
		host_free(x);
		return -1;
	}
	x->w = pbw_new(x->out.fd);
	if (!x->w) {
		tb_tmp_discard(&x->out);
		host_free(x);
		return xerr(x, "xplane: out of memory");
	}
	x->hosts++;
	return 0;
}

/* Close what is open, write the planes that got no line, then the
 * space's own fields. */
static int write_output(struct xsink *x)
{
	char warn[256];

	if (x->cur && line_close(x, x->cur) < 0)
		return -1;
	if (x->open_plane >= 0 && plane_close(x, (size_t)x->open_plane) < 0)
		return -1;
	if (add_task_env(x) < 0)
		return xerr(x, "xplane: out of memory");
	if (planes_unwritten(x) < 0)
		return -1;
	if (x->st.repaired || x->st.dropped) {
		snprintf(warn, sizeof(warn), "%llu events were cut to nest in their parent and "
			 "%llu out-of-order events were dropped while writing this file",
			 (unsigned long long)x->st.repaired, (unsigned long long)x->st.dropped);
		pbw_str_field(x->w, 3, warn);
	}
	pbw_str_field(x->w, 4, x->host);
	pbw_flush(x->w);
	if (!x->w->failed && tb_seq_finish(&x->w->seq) < 0)
		x->w->failed = errno ? errno : EIO;
	if (x->w->failed)
		return write_failed(x);
	x->st.bytes = x->w->pos;
	return 0;
}

static int xs_end_host(void *ctx)
{
	struct xsink *x = ctx;
	struct pending *p;
	int rc;

	if (!x->in_host)
		return xerr(x, "xplane: end_host without begin_host");
	rc = write_output(x);
	host_free(x);
	if (rc < 0) {
		tb_tmp_discard(&x->out);
		return -1;
	}
	p = realloc(x->pend, (x->n_pend + 1) * sizeof(*p));
	if (!p) {
		tb_tmp_discard(&x->out);
		return xerr(x, "xplane: out of memory");
	}
	x->pend = p;
	x->pend[x->n_pend++].tmp = x->out;
	x->out.fd = x->out.dirfd = -1;
	return 0;
}

static int xs_finish(void *ctx, int ok)
{
	struct xsink *x = ctx;
	int rc = 0;

	if (x->in_host) {
		host_free(x);
		tb_tmp_discard(&x->out);
		ok = 0;
	}
	for (size_t i = 0; i < x->n_pend; i++) {
		if (ok && rc == 0)
			rc = tb_tmp_publish(&x->pend[i].tmp, x->overwrite, x->sink.err,
					    sizeof(x->sink.err));
		else
			tb_tmp_discard(&x->pend[i].tmp);
	}
	x->n_pend = 0;
	return ok ? rc : 0;
}

/* ------------------------------------------------------------ lifecycle */

static struct xsink *xs_alloc(int overwrite)
{
	struct xsink *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->sink.name = "xplane";
	x->sink.ctx = x;
	x->sink.begin_host = xs_begin_host;
	x->sink.item = xs_item;
	x->sink.end_host = xs_end_host;
	x->sink.finish = xs_finish;
	x->overwrite = overwrite;
	x->open_plane = -1;
	x->out.fd = x->out.dirfd = -1;
	return x;
}

struct conv_sink *xplane_sink_new(const char *final_path, int overwrite, char *err, size_t errsz)
{
	struct xsink *x;

	if (!final_path || !*final_path) {
		snprintf(err, errsz, "xplane: no output path");
		return NULL;
	}
	x = xs_alloc(overwrite);
	if (x && !(x->final_path = strdup(final_path))) {
		free(x);
		x = NULL;
	}
	if (!x) {
		snprintf(err, errsz, "xplane: out of memory");
		return NULL;
	}
	return &x->sink;
}

struct conv_sink *xplane_sink_new_logdir(const char *logdir, const char *run, int overwrite,
					 char *err, size_t errsz)
{
	struct xsink *x;

	if (!logdir || !*logdir) {
		snprintf(err, errsz, "xplane: no --logdir given");
		return NULL;
	}
	if (run && tb_run_name_check(run, err, errsz) < 0)
		return NULL;
	x = xs_alloc(overwrite);
	if (!x || !(x->logdir = strdup(logdir)) || (run && !(x->run = strdup(run)))) {
		if (x)
			free(x->logdir);
		free(x);
		snprintf(err, errsz, "xplane: out of memory");
		return NULL;
	}
	return &x->sink;
}

void xplane_sink_free(struct conv_sink *s)
{
	struct xsink *x;

	if (!s)
		return;
	x = (struct xsink *)s;
	xs_finish(x, 0);
	free(x->pend);
	free(x->es.buf);
	cv_gpumem_free(&x->mem);
	free(x->final_path);
	free(x->logdir);
	free(x->run);
	free(x);
}

void xplane_sink_stats(const struct conv_sink *s, struct xplane_stats *st)
{
	*st = ((const struct xsink *)s)->st;
}
