// SPDX-License-Identifier: Apache-2.0
/*
 * pysample: `-t pysample`, sampled Python stacks without interpreter
 * support. One software cpu-clock perf event per CPU at --freq runs
 * pysample.bpf.c, which walks the interrupted target thread's CPython
 * frames and sends their code-object addresses. Here each address becomes
 * "qualname (file:first line)" the first time a process shows it, read
 * from the target's memory (process_vm_readv) and kept per process; every
 * sample is written as an EV_PY_SAMPLE, leaf first.
 *
 * A target is looked at when it is added, when it execs, and when BPF
 * reports a sample of a target it has no layout for (a launcher that
 * became Python, a libpython mapped after exec). A target whose Python is
 * not supported is named once, with the reason; the others go on.
 */
#include <errno.h>
#include <stddef.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/grow.h"
#include "common/hmap.h"
#include "collector/session/session.h"
#include "cpu_perf.h"
#include "pyoffsets.h"
#include "bpf/pysample.h"
#include "bpf/pysample.skel.h"

#define PYS_STR_MAX 256          /* characters kept of a name or file */

struct pys_code {
	uint64_t addr;
	uint64_t qual;               /* co_qualname pointer when named for the
				      * cpu sampler (0: not known) */
	char *text;                  /* "qualname (file:line)" */
	uint32_t len;
};

struct pys_proc {
	int pid;
	int ok;                      /* interpreter found and supported */
	int explained;               /* said why it cannot be sampled */
	uint64_t maps_key;           /* mappings when last looked at */
	struct lt_pyinterp in;
	struct pys_code *codes;      /* in the order read */
	size_t n_codes, cap_codes;
	struct lt_hmap code_ix;      /* addr -> codes index */
};

struct pys_state {
	struct pysample_bpf *skel;
	struct lt_cpu_perf perf;   /* the per-CPU sampling events */
	struct pys_proc *procs;
	size_t n_procs, cap_procs;
	uint64_t samples, codes, unreadable;
};

/* ------------------------------------------------------------ processes */

static struct pys_proc *pys_find(struct pys_state *st, int pid)
{
	for (size_t i = 0; i < st->n_procs; i++)
		if (st->procs[i].pid == pid)
			return &st->procs[i];
	return NULL;
}

static struct pys_proc *pys_slot(struct pys_state *st, int pid)
{
	struct pys_proc *p = pys_find(st, pid);

	if (p)
		return p;
	if (lt_grow((void **)&st->procs, &st->cap_procs, st->n_procs + 1, sizeof(*st->procs), 16))
		return NULL;
	p = &st->procs[st->n_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

static void pys_codes_clear(struct pys_proc *p)
{
	for (size_t i = 0; i < p->n_codes; i++)
		free(p->codes[i].text);
	free(p->codes);
	p->codes = NULL;
	p->n_codes = p->cap_codes = 0;
	lt_hmap_free(&p->code_ix);
}

/* Look at pid's interpreter (again: `force` after an exec or when added). */
static void pys_detect(struct lt_session *s, struct pys_state *st, int pid, int force)
{
	struct pys_proc *p = pys_slot(st, pid);
	struct lt_pys_proc none = { 0 };
	uint32_t key = (uint32_t)pid;
	char why[4400];
	uint64_t mk;
	int r;

	(void)s;
	if (!p)
		return;
	mk = lt_pyoff_maps_key(pid);
	if (!force && mk == p->maps_key)
		return; /* nothing new mapped since we last looked */
	p->maps_key = mk;
	pys_codes_clear(p);
	p->ok = 0;
	r = lt_pyoff_detect(pid, &p->in, why, sizeof(why));
	if (!r) {
		p->ok = 1;
		bpf_map_update_elem(bpf_map__fd(st->skel->maps.pys_procs), &key, &p->in.bpf, BPF_ANY);
		LT_INFO(1, "pysample: pid %d: sampling Python stacks of %s", pid, why);
		return;
	}
	if (r == -ENOTSUP) {
		/* runtime 0: known, not sampled; BPF stops asking about it. */
		bpf_map_update_elem(bpf_map__fd(st->skel->maps.pys_procs), &key, &none, BPF_ANY);
		if (!p->explained++) {
			LT_WARN("pysample: pid %d: cannot sample Python stacks: %s", pid, why);
			lt_session_unseen(s, "pysample", pid, "%s", why);
		}
		return;
	}
	bpf_map_delete_elem(bpf_map__fd(st->skel->maps.pys_procs), &key);
	LT_INFO(1, "pysample: pid %d: %s (yet); looking again when it runs", pid, why);
}

/* ------------------------------------------------------- target memory */

static int pys_read(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static size_t put_utf8(char *o, uint32_t c)
{
	if (c < 0x80)
		return o[0] = (char)c, 1;
	if (c < 0x800)
		return o[0] = (char)(0xc0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3f)), 2;
	if (c < 0x10000 && (c < 0xd800 || c > 0xdfff)) {
		o[0] = (char)(0xe0 | c >> 12);
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	if (c >= 0x10000 && c <= 0x10ffff) {
		o[0] = (char)(0xf0 | c >> 18);
		o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[3] = (char)(0x80 | (c & 0x3f));
		return 4;
	}
	return o[0] = '?', 1;
}

/* A compact str object (every name and file name CPython makes) as UTF-8
 * in out (4 * PYS_STR_MAX + 1 bytes). Returns 0, or -1 if unreadable. */
static int pys_read_str(int pid, const struct lt_pyoff_obj *o, uint64_t addr, char *out)
{
	unsigned char hdr[128], data[PYS_STR_MAX * 4];
	int64_t length;
	uint32_t state, kind, n;
	size_t w = 0;

	/* The ASCII header only: a short str ends soon after it. */
	if (!addr || o->str_ascii_data > sizeof(hdr) || pys_read(pid, addr, hdr, o->str_ascii_data))
		return -1;
	memcpy(&length, hdr + o->str_length, 8);
	memcpy(&state, hdr + o->str_state, 4);
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || length < 0)
		return -1; /* not compact: never the case for code names */
	n = length > PYS_STR_MAX ? PYS_STR_MAX : (uint32_t)length;
	if (n && pys_read(pid, addr + ((state >> 6) & 1 ? o->str_ascii_data : o->str_compact_data),
			  data, (size_t)n * kind))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = kind == 1 ? data[i] : kind == 2 ? ((uint16_t *)(void *)data)[i]
							      : ((uint32_t *)(void *)data)[i];

		w += put_utf8(out + w, c);
	}
	out[w] = 0;
	return 0;
}

/* "qualname (file:firstline)" of the code object at addr, or a bracketed
 * note when it cannot be read. Returns a malloc'd string. */
static char *pys_describe(struct pys_state *st, struct pys_proc *p, uint64_t addr)
{
	const struct lt_pyoff_obj *o = &p->in.obj;
	char name[PYS_STR_MAX * 4 + 1], file[PYS_STR_MAX * 4 + 1], *out = NULL;
	unsigned char co[256];
	uint64_t type, qual, nm, fn;
	int32_t line;

	if (pys_read(p->pid, addr, co, o->co_qualname + 8)) {
		st->unreadable++;
		return asprintf(&out, "[unreadable code 0x%llx]", (unsigned long long)addr) < 0 ? NULL : out;
	}
	memcpy(&type, co + o->ob_type, 8);
	if (p->in.code_type && type != p->in.code_type) {
		st->unreadable++;
		return asprintf(&out, "[not a code object 0x%llx]", (unsigned long long)addr) < 0 ? NULL : out;
	}
	memcpy(&qual, co + o->co_qualname, 8);
	memcpy(&nm, co + o->co_name, 8);
	memcpy(&fn, co + o->co_filename, 8);
	memcpy(&line, co + o->co_firstlineno, 4);
	if (pys_read_str(p->pid, o, qual, name) && pys_read_str(p->pid, o, nm, name))
		snprintf(name, sizeof(name), "?");
	if (pys_read_str(p->pid, o, fn, file))
		snprintf(file, sizeof(file), "?");
	return asprintf(&out, "%s (%s:%d)", name, file, line) < 0 ? NULL : out;
}

/* The name of the code object at addr, read once. With qual (its
 * co_qualname pointer as sampled, 0: not known) a name cached for another
 * object made at the same address is read again. */
static const struct pys_code *pys_code(struct pys_state *st, struct pys_proc *p, uint64_t addr,
				       uint64_t qual)
{
	struct lt_hmap_pos pos = lt_hmap_probe(&p->code_ix, lt_mix64(addr));
	struct pys_code *c = NULL;
	char *text;
	uint32_t i;

	while (!c && lt_hmap_next(&p->code_ix, &pos, &i))
		if (p->codes[i].addr == addr) {
			c = &p->codes[i];
			if (!qual || c->qual == qual)
				return c;
		}
	if (!c && lt_grow((void **)&p->codes, &p->cap_codes, p->n_codes + 1, sizeof(*c), 256))
		return NULL;
	text = pys_describe(st, p, addr);
	if (!text)
		return NULL;
	if (!c) {
		if (lt_hmap_add(&p->code_ix, &pos, (uint32_t)p->n_codes)) {
			free(text);
			return NULL;
		}
		c = &p->codes[p->n_codes++];
		c->text = NULL;
		st->codes++;
	}
	free(c->text);
	c->text = text;
	c->addr = addr;
	c->qual = qual;
	c->len = (uint32_t)strlen(c->text);
	return c;
}

/* The session's py_code_name (session.h): names for the cpu sampler. */
static const char *pys_code_name(void *arg, int pid, uint64_t code, uint64_t qual)
{
	struct pys_state *st = arg;
	struct pys_proc *p = pys_find(st, pid);
	const struct pys_code *c = p && p->ok ? pys_code(st, p, code, qual) : NULL;

	return c ? c->text : NULL;
}

/* -------------------------------------------------------------- records */

static int pys_handle(struct lt_session *s, void *state, const struct lt_rec_hdr *h, size_t size)
{
	const struct lt_rec_py_sample *r = (const void *)h;
	struct evlog_str frames[LT_PYS_FRAMES + 1];
	struct evlog_event ev = { .type = EV_PY_SAMPLE, .ts = h->ts, .pid = h->pid, .tid = h->tid };
	struct pys_state *st = state;
	size_t head = offsetof(struct lt_rec_py_sample, codes);
	struct pys_proc *p;
	uint32_t n = 0, have;

	if (!st || h->kind != LT_REC_PY_SAMPLE || size < head)
		return 0; /* !st: a record drained after stop() */
	if (r->flags & LT_PYS_F_UNKNOWN) {
		pys_detect(s, st, (int)h->pid, 0);
		return 0;
	}
	p = pys_find(st, (int)h->pid);
	if (!p || !p->ok)
		return 0; /* exec'd since: the old image's frames mean nothing now */
	have = (uint32_t)((size - head) / 8);
	for (uint32_t i = 0; i < r->n && i < have && i < LT_PYS_FRAMES; i++) {
		const struct pys_code *c = pys_code(st, p, r->codes[i], 0);

		if (!c)
			return lt_session_errorf(s, "pysample: out of memory");
		frames[n++] = (struct evlog_str){ .ptr = c->text, .len = c->len };
	}
	if (r->flags & LT_PYS_F_TRUNCATED)
		frames[n++] = evlog_s("[more frames]");
	ev.u.py_sample.stack.n = n;
	ev.u.py_sample.stack.frames = frames;
	st->samples++;
	return lt_session_emit(s, &ev);
}

static int pys_add_target(struct lt_session *s, void *state, int pid)
{
	pys_detect(s, state, pid, 1);
	return 0;
}

/* ---------------------------------------------------------- attachment */

static int pys_start(struct lt_session *s, void **state)
{
	struct pys_state *st = calloc(1, sizeof(*st));
	int err;

	*state = st;
	if (!st)
		return lt_session_errorf(s, "pysample: out of memory");
	if (lt_cpu_perf_init(s, &st->perf, "pysample"))
		return -1;
	st->skel = pysample_bpf__open();
	if (!st->skel)
		return lt_session_errorf(s, "cannot open the Python sampling BPF object: %s",
					 strerror(errno));
	if (lt_session_share_maps(s, st->skel->obj))
		return -1;
	err = pysample_bpf__load(st->skel);
	if (err)
		return lt_session_errorf(s, "cannot load the Python sampling BPF program: %s",
					 strerror(-err));
	s->py_code_name = pys_code_name;
	s->py_code_arg = st;
	return lt_cpu_perf_attach(s, &st->perf, st->skel->progs.lt_py_sample,
				  s->opt.freq_hz ? s->opt.freq_hz : 99, "pysample");
}

static void pys_detach(struct pys_state *st)
{
	lt_cpu_perf_detach(&st->perf);
}

static void pys_quiesce(struct lt_session *s, void *state)
{
	(void)s;
	pys_detach(state);
}

static int pys_finish(struct lt_session *s, void *state)
{
	struct pys_state *st = state;
	size_t ok = 0;

	(void)s;
	for (size_t i = 0; i < st->n_procs; i++) /* pys_quiesce stopped the sampling */
		ok += st->procs[i].ok;
	LT_INFO(1, "pysample: %llu samples, %llu code objects named, %zu of %zu processes sampled",
		(unsigned long long)st->samples, (unsigned long long)st->codes, ok, st->n_procs);
	if (st->unreadable)
		LT_WARN("pysample: %llu code objects could not be read (process gone, or not CPython's layout)",
			(unsigned long long)st->unreadable);
	return 0;
}

static void pys_stop(struct lt_session *s, void *state)
{
	struct pys_state *st = state;

	if (!st)
		return;
	if (s->py_code_arg == st) {
		s->py_code_name = NULL;
		s->py_code_arg = NULL;
	}
	pys_detach(st);
	pysample_bpf__destroy(st->skel);
	for (size_t i = 0; i < st->n_procs; i++)
		pys_codes_clear(&st->procs[i]);
	free(st->procs);
	lt_cpu_perf_free(&st->perf);
	free(st);
}

const struct lt_source lt_source_pysample = {
	.kind_lo = LT_REC_PY_SAMPLE,
	.kind_hi = LT_REC_PY_SAMPLE + 15,
	.start = pys_start,
	.add_target = pys_add_target,
	.handle = pys_handle,
	.quiesce = pys_quiesce,
	.finish = pys_finish,
	.stop = pys_stop,
};
