/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA correlation in the converter (see cudacorr.h). */
#include "converter/pairing/cudacorr.h"
#include "converter/conv_int.h"
#include "converter/output/jsonw.h"

#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

#define CORR_PAGE_BITS 12
#define CORR_PAGE (1u << CORR_PAGE_BITS)
/* Correlation ids are dense per process; random ids (corrupt logs) must not
 * eat memory: past this many 4 KiB pages, new ids stay unbound. */
#define CORR_PAGES_MAX 32768u

/* ----------------------------------------------------------------- names */

/* CUpti_ActivityMemoryKind, as Kineto (trace JSON) and xprof's CUPTI
 * collector (XPlane) spell it. */
static const struct {
	const char *kineto, *xprof;
} memory_kinds[] = {
	{ "Unknown", "unknown" },
	{ "Pageable", "pageable" },
	{ "Pinned", "pinned" },
	{ "Device", "device" },
	{ "Array", "array" },
	{ "Managed", "managed" },
	{ "Device Static", "device_static" },
	{ "Managed Static", "managed_static" },
};

/* CUpti_ActivityMemcpyKind, as Kineto spells it. */
static const char *const copy_kinds[] = { "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					  "AtoD", "DtoA", "DtoD", "HtoH", "PtoP" };

/* CUpti_ActivitySynchronizationType: Kineto's name (category "cuda_sync"). */
static const char *const sync_types[] = { "Unknown", "Event Sync", "Stream Wait Event",
					  "Stream Sync", "Context Sync" };

const char *cv_memory_kind_xprof(unsigned kind)
{
	return memory_kinds[kind < N_OF(memory_kinds) ? kind : 0].xprof;
}

const char *cv_memcpy_name(uint8_t kind, uint8_t src, uint8_t dst, char *buf, size_t bufsz)
{
	const char *parts[] = { "Memcpy ", copy_kinds[kind < N_OF(copy_kinds) ? kind : 0],
				" (", memory_kinds[src < N_OF(memory_kinds) ? src : 0].kineto,
				" -> ", memory_kinds[dst < N_OF(memory_kinds) ? dst : 0].kineto, ")" };
	size_t len = 0;

	/* "Memcpy %s (%s -> %s)" by hand: one per copy, printf was a hot spot. */
	if (!bufsz)
		return "";
	for (size_t i = 0; i < N_OF(parts); i++)
		for (const char *q = parts[i]; *q && len + 1 < bufsz; q++)
			buf[len++] = *q;
	buf[len] = 0;
	return buf;
}

const char *cv_sync_name(uint8_t kind)
{
	return sync_types[kind < N_OF(sync_types) ? kind : 0];
}

/* ... and CUPTI's own overhead by its kind, under category "overhead". */
const char *cv_overhead_name(uint32_t kind)
{
	switch (kind) {
	case 0: return "Unknown";
	case 1: return "Driver Compiler";
	case 1u << 16: return "Buffer Flush";
	case 2u << 16: return "Instrumentation";
	case 3u << 16: return "Resource";
	default: return "Unrecognized";
	}
}

/* The text being written into buf: what passes n - 1 bytes is cut. */
struct txt {
	char *buf;
	size_t n, len;
};

static void t_put(struct txt *t, const char *s, size_t len)
{
	if (len > t->n - 1 - t->len)
		len = t->n - 1 - t->len;
	memcpy(t->buf + t->len, s, len);
	t->len += len;
}

/* " key=" (no space first) */
static void t_key(struct txt *t, const char *key)
{
	if (t->len)
		t_put(t, " ", 1);
	t_put(t, key, strlen(key));
}

static void t_dec(struct txt *t, uint64_t v)
{
	char d[24];

	t_put(t, d, cv_dec_u64(d, v));
}

static void t_hex(struct txt *t, uint64_t v)
{
	char d[18];
	size_t i = sizeof(d);

	do
		d[--i] = "0123456789abcdef"[v & 15];
	while (v >>= 4);
	d[--i] = 'x';
	d[--i] = '0';
	t_put(t, d + i, sizeof(d) - i);
}

static void t_dims(struct txt *t, const char *key, const uint32_t v[3])
{
	t_key(t, key);
	for (int i = 0; i < 3; i++) {
		if (i)
			t_put(t, ",", 1);
		t_dec(t, v[i]);
	}
}

size_t cv_call_args(const struct evlog_event *e, char *buf, size_t n)
{
	const typeof(e->u.lib_call) *c = &e->u.lib_call;
	struct txt t = { buf, n, 0 };

	if (!n)
		return 0;
	if (c->kernel.len) {
		t_key(&t, "kernel=");
		t_put(&t, c->kernel.ptr, c->kernel.len);
	} else if (c->func) {
		t_key(&t, "func=");
		t_hex(&t, c->func);
	}
	if (c->grid[0]) { /* dims known: a launch, which names its stream */
		t_dims(&t, "grid=", c->grid);
		t_dims(&t, "block=", c->block);
		t_key(&t, "smem=");
		t_dec(&t, c->dynamic_smem);
	}
	if (c->bytes) {
		t_key(&t, "bytes=");
		t_dec(&t, c->bytes);
	}
	if (c->copy_kind) {
		t_key(&t, "kind=");
		if (c->copy_kind < N_OF(copy_kinds))
			t_put(&t, copy_kinds[c->copy_kind], strlen(copy_kinds[c->copy_kind]));
		else
			t_dec(&t, c->copy_kind);
	}
	if (c->detail.len) {
		t_key(&t, "");
		t_put(&t, c->detail.ptr, c->detail.len);
	}
	if (c->stream || c->grid[0]) {
		t_key(&t, "stream=");
		t_hex(&t, c->stream);
	}
	buf[t.len] = 0;
	return t.len;
}

/* ------------------------------------------------------ correlation table */

int cv_corr_mark(struct cv_core *c, uint32_t host, uint32_t pid, uint64_t corr, uint8_t f)
{
	struct cv_corr *t = &c->corr;
	int is_new;
	uint64_t *v;

	if (!corr)
		return 0;
	uint64_t k1 = ((uint64_t)host << 32) | pid, k2 = corr >> CORR_PAGE_BITS;

	/* Ids of one process rise: most land on the page used last. */
	if (t->memo_page && t->memo_k1 == k1 && t->memo_k2 == k2) {
		t->memo_page[corr & (CORR_PAGE - 1)] |= f;
		return 0;
	}
	if (!cv_map_get(&t->pages, k1, k2) && t->n_pages >= CORR_PAGES_MAX)
		return 0;
	v = cv_map_put(&t->pages, k1, k2, &is_new);
	if (!v)
		return -1;
	if (is_new) {
		if (t->n_pages == t->cap_pages) {
			size_t nc = t->cap_pages ? t->cap_pages * 2 : 64;
			uint8_t **np = realloc(t->page_v, nc * sizeof(*np));

			if (!np)
				return -1;
			t->page_v = np;
			t->cap_pages = nc;
		}
		if (!(t->page_v[t->n_pages] = calloc(1, CORR_PAGE)))
			return -1;
		*v = ++t->n_pages;
	}
	t->page_v[*v - 1][corr & (CORR_PAGE - 1)] |= f;
	t->memo_k1 = k1;
	t->memo_k2 = k2;
	t->memo_page = t->page_v[*v - 1];
	return 0;
}

uint8_t cv_corr_flags(const struct cv_core *c, uint32_t host, uint32_t pid, uint64_t corr)
{
	const struct cv_corr *t = &c->corr;
	const uint64_t *v;

	if (!corr)
		return 0;
	v = cv_map_get(&t->pages, ((uint64_t)host << 32) | pid, corr >> CORR_PAGE_BITS);
	return v ? t->page_v[*v - 1][corr & (CORR_PAGE - 1)] : 0;
}

void cv_corr_free(struct cv_corr *t)
{
	for (size_t i = 0; i < t->n_pages; i++)
		free(t->page_v[i]);
	free(t->page_v);
	cv_map_free(&t->pages);
	free(t->proc_first);
	memset(t, 0, sizeof(*t));
}

/* ----------------------------------------------------------- sync binding */

void cv_sync_init(struct cv_sync_bind *b, cv_sync_emit_fn emit, void *ctx)
{
	memset(b, 0, sizeof(*b));
	b->emit = emit;
	b->ctx = ctx;
}

/* A synchronization CUPTI recorded without its thread: bound to the thread
 * of the API call with its correlation id. */
static int is_unbound_sync(const struct evlog_event *e)
{
	return e->type == EV_GPU_SYNC && !e->tid && e->u.gpu_sync.correlation_id;
}

/* Emit the held synchronization on thread tid (0: the process's main thread). */
static int sync_release(struct cv_sync_bind *b, uint32_t tid)
{
	if (!b->held)
		return 0;
	b->held = 0;
	b->ev.tid = tid ? tid : b->ev.pid;
	return b->emit(b->ctx, b->log, &b->ev);
}

static int sync_hold(struct cv_sync_bind *b, uint32_t li, const struct evlog_event *e)
{
	uint64_t corr = e->u.gpu_sync.correlation_id;
	const struct cv_sync_call *a = &b->recent[corr % CV_SYNC_RECENT];

	if (a->corr == corr && a->pid == e->pid) {
		struct evlog_event copy = *e;

		copy.tid = a->tid ? a->tid : e->pid;
		return b->emit(b->ctx, li, &copy);
	}
	if (sync_release(b, 0))
		return -1;
	b->ev = *e;
	b->log = li;
	b->held = 1;
	return 0;
}

int cv_sync_feed(struct cv_sync_bind *b, uint32_t li, const struct evlog_event *e)
{
	if (is_unbound_sync(e))
		return sync_hold(b, li, e);
	if (e->type == EV_GPU_API && e->u.gpu_api.correlation_id) {
		uint64_t corr = e->u.gpu_api.correlation_id;

		b->recent[corr % CV_SYNC_RECENT] = (struct cv_sync_call){ corr, e->pid, e->tid };
		if (b->held && b->log == li && b->ev.pid == e->pid &&
		    b->ev.u.gpu_sync.correlation_id == corr && sync_release(b, e->tid))
			return -1;
	}
	if (b->held && (b->log != li || e->type == EV_GPU_API) && sync_release(b, 0))
		return -1;
	return b->emit(b->ctx, li, e);
}

int cv_sync_flush(struct cv_sync_bind *b)
{
	return sync_release(b, 0);
}

/* ------------------------------------------------------------------ flows */

int cv_flow_prepare(struct cv_core *c)
{
	uint32_t *v = calloc(c->n_hosts + 1, sizeof(*v));

	if (!v)
		return -1;
	for (size_t i = 0; i < c->n_hosts; i++)
		v[i + 1] = v[i] + (uint32_t)c->hosts[i].n_proc;
	free(c->corr.proc_first);
	c->corr.proc_first = v;
	return 0;
}

static uint64_t flow_id(const struct cv_core *c, uint32_t host, uint32_t pid, uint64_t corr)
{
	const uint64_t *v = cv_map_get(&c->hosts[host].procs, pid, 0);
	uint64_t ord = c->corr.proc_first[host] + (v ? *v - 1 : 0);

	return ((ord + 1) << 40) | (corr & ((1ULL << 40) - 1));
}

void cv_flow_launch(struct cv_core *c, uint32_t host, struct conv_item *it, uint64_t corr,
		    int is_api)
{
	uint8_t f = cv_corr_flags(c, host, it->pid, corr);

	if (!(f & CV_CORR_GPU) || (!is_api && (f & CV_CORR_API)))
		return;
	it->flow_id = flow_id(c, host, it->pid, corr);
	it->flow_start = 1;
}

void cv_flow_gpu(struct cv_core *c, uint32_t host, struct conv_item *it, uint32_t pid,
		 uint64_t corr)
{
	uint8_t f = cv_corr_flags(c, host, pid, corr);

	if (!corr)
		return;
	if (!(f & (CV_CORR_API | CV_CORR_LIB))) {
		c->st.unbound_flows++;
		return;
	}
	it->flow_id = flow_id(c, host, pid, corr);
	it->flow_start = 0;
}
