// SPDX-License-Identifier: Apache-2.0
/*
 * cudaprobe: `-t cuda`, library calls by uprobes (CUDA runtime and driver,
 * NCCL, cuBLAS, or whatever the probe file names).
 *
 * For each target process the libraries it has mapped are matched against
 * the probe file (a soname matches the copy the process actually loaded,
 * e.g. site-packages/nvidia/.../libcudart.so.13); every selected function
 * gets an entry and a return uprobe (uprobe.bpf.c) bound to that process.
 * Libraries loaded later are found when the target maps an executable file
 * (a record from the BPF side) and the maps are rescanned. Each returned
 * call becomes one EV_LIB_CALL with its decoded arguments (cudadecode.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/uprobe.skel.h"
#include "bpf/uprobe.h"
#include "cudadecode.h"
#include "collector/target/elfsym.h"
#include "collector/target/ldsearch.h"
#include "common/grow.h"
#include "collector/target/libfind.h"
#include "linkclose.h"
#include "probefile.h"
#include "probe_cost.h"
#include "uprobe_multi.h"
#include "collector/session/session.h"
#include "collector/session/launch.h"
#include "collector/target/targets.h"
#include "collector/target/tfile.h"

#define CP_NAME_CACHE 4096    /* launch address -> kernel name, per session */
#define CP_MAX_ELVES 64       /* objects whose symbols are kept for naming */
#define CP_LATE_NAMED 8       /* late-armed processes named in the closing line */

struct cp_probe {             /* a probed function; its index is the cookie id */
	const char *lib;      /* path as the target sees it (interned) */
	char *symbol;
	int lib_class;
	const struct lt_decoder *dec;
	uint8_t nargs, argidx[LT_PROBE_MAX_ARGS];
	uint8_t copy;         /* the cookie's low byte: stack arguments to copy, LT_UCOOKIE_CFG */
	uint64_t dev, ino, offset;
	uint64_t calls;       /* recorded (the summary's cost per function) */
};

struct cp_link {
	int pid;
	uint64_t start;         /* the process's start time: a reused pid is another */
	struct bpf_link *link;  /* a perf-event attachment, or */
	int fd;                 /* a uprobe_multi link (-1 if none) */
};

struct cp_seen {              /* a (pid, file) already looked at */
	int pid;
	uint64_t start, dev, ino;
	uint64_t at;          /* when (CLOCK_MONOTONIC): its links were in from then on */
};

struct cp_name {              /* launch-address cache */
	int pid;
	uint64_t addr;
	char *name;           /* NULL: could not be named */
};

struct cp_state {
	struct uprobe_bpf *skel;
	struct bpf_link *umap_link;
	struct bpf_link **klinks;
	size_t n_klinks, cap_klinks;
	struct lt_probefile *pf;
	struct cp_probe *probes;
	size_t n_probes, cap_probes;
	struct cp_link *links;
	size_t n_links, cap_links;
	struct cp_seen *seen;
	size_t n_seen, cap_seen;
	char **libs;          /* interned library paths */
	size_t n_libs;
	struct cp_elf {           /* symbol tables of objects holding kernel stubs */
		uint64_t dev, ino;
		struct lt_elf *e;     /* NULL: unreadable */
	} elves[CP_MAX_ELVES];
	size_t n_elves;
	bool multi;           /* uprobe_multi links (kernel 6.6+) */
	bool launches_only;   /* lt_options.cuda_launches_only */
	int launch_layer;     /* launches probed at this layer only (work_layer()), 0: any */
	int set_layer;        /* memsets, the same */
	struct cp_name names[CP_NAME_CACHE];
	uint64_t calls, attach_errors;
	uint64_t cur_start;   /* start time of the process being attached to */
	bool mapped;          /* a target mapped (or opened) a file the probe file names */
	bool count_late;      /* scanning a new image or a new mapping (not a fork's inherited ones) */
	struct cp_late {      /* processes new to the profile, a probed file mapped before its links */
		uint64_t n;
		int pid[CP_LATE_NAMED];
		char lib[CP_LATE_NAMED][64];
		bool said;
	} late;
	struct cp_sel {       /* the probes a file's entries select, read once per file */
		uint64_t dev, ino, key;
		int *ids;
		size_t n;
	} *sels;
	size_t n_sels, cap_sels;
	double call_ns;       /* one probed call's cost, measured at start (probe_cost.h) */
};

/* ------------------------------------------------------------ helpers */

static const char *intern_lib(struct cp_state *st, const char *path)
{
	char **v;
	size_t i;

	for (i = 0; i < st->n_libs; i++)
		if (!strcmp(st->libs[i], path))
			return st->libs[i];
	v = realloc(st->libs, (st->n_libs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	st->libs = v;
	v[st->n_libs] = strdup(path);
	return v[st->n_libs] ? v[st->n_libs++] : NULL;
}

static int load_probe_file(struct lt_session *s, struct cp_state *st)
{
	char path[PATH_MAX] = "", err[512];
	const char *p = s->opt.probe_file;

	if (!p) {
		if (lt_probefile_default_path(path, sizeof(path)) || access(path, R_OK))
			return lt_session_errorf(s, "no probe file: pass --probe-file FILE, or install the default "
						 "one at <bindir>/../share/llmtracker/probes.json (looked for %s)", path);
		p = path;
	}
	if (lt_probefile_load(p, &st->pf, err, sizeof(err)))
		return lt_session_errorf(s, "%s", err);
	LT_INFO(1, "cuda: probe file %s: %zu libraries, %zu kernel functions", p, st->pf->n_libs,
		st->pf->n_kprobes);
	return 0;
}

/* A file naming kernel launches (or memsets) at both layers (the default
 * one does) has them probed at one, never both (a runtime call reaches the
 * driver's): with kernels recorded at the driver's, which every runtime
 * reaches (those cuBLAS and cuBLASLt carry inside them too), so each
 * kernel and memset is linked to its call; else at the runtime's, whose
 * launch's host stub names the kernel. A file naming one layer keeps it. */
static int work_layer(const struct lt_probefile *pf, bool kernels, const char *runtime_fn,
		      const char *driver_fn)
{
	bool rt = false, drv = false;

	for (size_t i = 0; i < pf->n_libs; i++) {
		rt = rt || lt_plib_select(&pf->libs[i], runtime_fn, true);
		drv = drv || lt_plib_select(&pf->libs[i], driver_fn, true);
	}
	if (!rt || !drv)
		return 0;
	return kernels ? LT_LAYER_DRIVER : LT_LAYER_RUNTIME;
}

/* ------------------------------------------------------------ kprobes */

static bool have_kprobes(void)
{
	return access("/sys/bus/event_source/devices/kprobe", F_OK) == 0;
}

/* Kernel functions run through the same entry/return pair; the per-thread
 * stack and target filter apply as for library calls. */
static void attach_kprobes(struct cp_state *st)
{
	size_t i;

	for (i = 0; i < st->pf->n_kprobes; i++) {
		const char *fn = st->pf->kprobes[i];
		LIBBPF_OPTS(bpf_kprobe_opts, o);
		struct bpf_link *l[2];
		struct cp_probe *p;
		int k;

		if (!have_kprobes()) {
			LT_WARN("kprobe %s skipped: this kernel has no kprobe support (CONFIG_KPROBES unset; "
				"no /sys/bus/event_source/devices/kprobe)", fn);
			continue;
		}
		if (lt_grow((void **)&st->probes, &st->cap_probes, st->n_probes + 1, sizeof(*p), 64) ||
		    lt_grow((void **)&st->klinks, &st->cap_klinks, st->n_klinks + 2, sizeof(*st->klinks), 64))
			return;
		p = &st->probes[st->n_probes];
		memset(p, 0, sizeof(*p));
		p->lib = intern_lib(st, "[kernel]");
		p->symbol = strdup(fn);
		p->lib_class = EVLIB_OTHER;
		p->nargs = LT_UCALL_REG_ARGS;
		for (k = 0; k < LT_UCALL_REG_ARGS; k++)
			p->argidx[k] = (uint8_t)k;
		o.bpf_cookie = LT_UCOOKIE(st->n_probes, 0);
		l[0] = bpf_program__attach_kprobe_opts(st->skel->progs.lt_uentry, fn, &o);
		o.retprobe = true;
		l[1] = l[0] ? bpf_program__attach_kprobe_opts(st->skel->progs.lt_uret, fn, &o) : NULL;
		if (!l[0] || !l[1]) {
			LT_WARN("kprobe %s skipped: cannot attach: %s", fn, strerror(errno));
			bpf_link__destroy(l[0]);
			free(p->symbol);
			continue;
		}
		st->klinks[st->n_klinks++] = l[0];
		st->klinks[st->n_klinks++] = l[1];
		st->n_probes++;
	}
}

/* ------------------------------------------------------------ start/stop */



/* Open and load the BPF object; `multi` loads the *_multi programs for
 * uprobe_multi links, else leaves them out. */
static void say_late(struct cp_state *st);

static int open_and_load(struct lt_session *s, struct cp_state *st, bool multi)
{
	int err;

	uprobe_bpf__destroy(st->skel);
	st->skel = uprobe_bpf__open();
	if (!st->skel)
		return lt_session_errorf(s, "cannot open the uprobe BPF object: %s", strerror(errno)),
		       -ENOENT;
	if (lt_session_share_maps(s, st->skel->obj))
		return -ENOENT;
	st->skel->rodata->wakeup_bytes = bpf_map__max_entries(st->skel->maps.events) / 8;
	if (multi) {
		bpf_program__set_expected_attach_type(st->skel->progs.lt_uentry_multi,
						      LT_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(st->skel->progs.lt_uret_multi,
						      LT_BPF_TRACE_UPROBE_MULTI);
	} else {
		bpf_program__set_autoload(st->skel->progs.lt_uentry_multi, false);
		bpf_program__set_autoload(st->skel->progs.lt_uret_multi, false);
	}
	err = uprobe_bpf__load(st->skel);
	if (err)
		lt_session_errorf(s, "cannot load the uprobe BPF programs: %s", strerror(-err));
	st->multi = multi && !err;
	return err;
}

static int cp_start(struct lt_session *s, void **state)
{
	struct cp_state *st = calloc(1, sizeof(*st));
	int err;

	*state = st;
	if (!st)
		return lt_session_errorf(s, "out of memory");
	st->launches_only = s->opt.cuda_launches_only;
	if (load_probe_file(s, st))
		return -1;
	st->launch_layer = work_layer(st->pf, s->opt.cuda_kernel, "cudaLaunchKernel", "cuLaunchKernel");
	st->set_layer = work_layer(st->pf, s->opt.cuda_kernel, "cudaMemsetAsync", "cuMemsetD8Async");
	err = open_and_load(s, st, true);
	if (err == -EINVAL || err == -EOPNOTSUPP || err == -E2BIG) {
		LT_INFO(1, "cuda: no uprobe_multi on this kernel (%s): one perf event per function",
			strerror(-err));
		err = open_and_load(s, st, false);
	}
	if (err)
		return -1;
	st->umap_link = bpf_program__attach(st->skel->progs.lt_umap);
	if (!st->umap_link)
		LT_WARN("cuda: libraries loaded after start will not be probed: cannot watch mmap: %s",
			strerror(errno));
	if (!st->launches_only)
		attach_kprobes(st);
	st->call_ns = st->multi ? lt_probe_cost_ns(st->skel->progs.lt_uentry_multi, st->skel->progs.lt_uret_multi, true)
				: lt_probe_cost_ns(st->skel->progs.lt_uentry, st->skel->progs.lt_uret, false);
	return 0;
}

static void link_close(struct cp_link *l)
{
	lt_close_later(l->link, l->fd);
	l->link = NULL;
	l->fd = -1;
}

/* Drop the links and files of an earlier process that had this pid (start
 * differs). Those of the same process stay, across exec too: a link is bound
 * to the process and the kernel checks the mm it runs in at each mapping
 * and call, so a link made before an exec (a launched command armed before
 * it runs) serves the new image, and one on a file the new image does not
 * map costs nothing. */
static void forget_earlier(struct cp_state *st, int pid, uint64_t start) /* UINT64_MAX: all */
{
	size_t i, k = 0;

	for (i = 0; i < st->n_links; i++) {
		if (st->links[i].pid == pid && st->links[i].start != start)
			link_close(&st->links[i]);
		else
			st->links[k++] = st->links[i];
	}
	st->n_links = k;
	for (i = 0, k = 0; i < st->n_seen; i++)
		if (st->seen[i].pid != pid || st->seen[i].start == start)
			st->seen[k++] = st->seen[i];
	st->n_seen = k;
}

/* Probes off; the links' count stays for the closing line. */
static void cp_quiesce(struct lt_session *s, void *state)
{
	struct cp_state *st = state;

	(void)s;
	say_late(st);
	for (size_t i = 0; i < st->n_links; i++)
		link_close(&st->links[i]);
	for (size_t i = 0; i < st->n_klinks; i++) {
		bpf_link__destroy(st->klinks[i]);
		st->klinks[i] = NULL;
	}
	bpf_link__destroy(st->umap_link);
	st->umap_link = NULL;
	lt_close_drain(); /* off before the other sources finish */
}

static void cp_stop(struct lt_session *s, void *state)
{
	struct cp_state *st = state;
	size_t i;

	if (!st)
		return;
	cp_quiesce(s, st);
	uprobe_bpf__destroy(st->skel);
	for (i = 0; i < st->n_probes; i++)
		free(st->probes[i].symbol);
	for (i = 0; i < st->n_libs; i++)
		free(st->libs[i]);
	for (i = 0; i < CP_NAME_CACHE; i++)
		free(st->names[i].name);
	for (i = 0; i < st->n_elves; i++)
		lt_elf_free(st->elves[i].e);
	for (i = 0; i < st->n_sels; i++)
		free(st->sels[i].ids);
	free(st->sels);
	lt_probefile_free(st->pf);
	free(st->libs);
	free(st->probes);
	free(st->links);
	free(st->klinks);
	free(st->seen);
	free(st);
}

/* ------------------------------------------------------------ attaching */

/* Probe id for (file, offset), shared by every process mapping the file. */
static int probe_for(struct cp_state *st, const char *lib, const struct lt_plib *pl,
		     const struct lt_psym *ps, const char *name, uint64_t dev, uint64_t ino,
		     uint64_t off)
{
	struct cp_probe *p;
	unsigned need = 0;
	size_t i;
	int k;

	for (i = 0; i < st->n_probes; i++)
		if (st->probes[i].dev == dev && st->probes[i].ino == ino && st->probes[i].offset == off &&
		    st->probes[i].lib)
			return (int)i;
	if (lt_grow((void **)&st->probes, &st->cap_probes, st->n_probes + 1, sizeof(*p), 64))
		return -ENOMEM;
	p = &st->probes[st->n_probes];
	memset(p, 0, sizeof(*p));
	p->symbol = strdup(name);
	p->lib = intern_lib(st, lib);
	if (!p->symbol || !p->lib) {
		free(p->symbol);
		return -ENOMEM;
	}
	p->dev = dev;
	p->ino = ino;
	p->offset = off;
	p->lib_class = ps->lib_class >= 0 ? ps->lib_class : pl->lib_class;
	p->dec = lt_cuda_decoder(name);
	if (p->dec)
		need = lt_cuda_decoder_nstack(p->dec);
	if (ps->nargs >= 0) {
		p->nargs = (uint8_t)ps->nargs;
		memcpy(p->argidx, ps->argidx, sizeof(p->argidx));
	} else {
		p->nargs = LT_UCALL_REG_ARGS + need > LT_PROBE_MAX_ARGS ? LT_PROBE_MAX_ARGS
									  : LT_UCALL_REG_ARGS + need;
		for (k = 0; k < p->nargs; k++)
			p->argidx[k] = (uint8_t)k;
	}
	for (k = 0; k < p->nargs; k++)
		if (p->argidx[k] >= LT_UCALL_REG_ARGS && p->argidx[k] + 1u - LT_UCALL_REG_ARGS > need)
			need = p->argidx[k] + 1u - LT_UCALL_REG_ARGS;
	p->copy = (uint8_t)need;
	if (p->dec && lt_cuda_decoder_cfg(p->dec))
		p->copy |= LT_UCOOKIE_CFG;
	return (int)st->n_probes++;
}

static int attach_one(struct cp_state *st, int pid, const char *file, int id)
{
	const struct cp_probe *p = &st->probes[id];
	LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = LT_UCOOKIE(id, p->copy));
	struct bpf_link *l[2];
	int i;

	if (lt_grow((void **)&st->links, &st->cap_links, st->n_links + 2, sizeof(*st->links), 64))
		return -ENOMEM;
	l[0] = bpf_program__attach_uprobe_opts(st->skel->progs.lt_uentry, pid, file, p->offset, &o);
	if (!l[0])
		return -errno;
	o.retprobe = true;
	l[1] = bpf_program__attach_uprobe_opts(st->skel->progs.lt_uret, pid, file, p->offset, &o);
	if (!l[1]) {
		int e = -errno;

		lt_close_later(l[0], -1);
		return e;
	}
	for (i = 0; i < 2; i++)
		st->links[st->n_links++] = (struct cp_link){ pid, st->cur_start, l[i], -1 };
	return 0;
}

/* One uprobe_multi link for every function in ids (entry or return). */
static int multi_link(struct cp_state *st, int pid, const char *file, const int *ids, size_t n,
		      bool ret)
{
	uint64_t *offs = calloc(n, sizeof(*offs)), *cookies = calloc(n, sizeof(*cookies));
	int fd = -ENOMEM;
	size_t i;

	if (offs && cookies) {
		for (i = 0; i < n; i++) {
			offs[i] = st->probes[ids[i]].offset;
			cookies[i] = LT_UCOOKIE(ids[i], st->probes[ids[i]].copy);
		}
		fd = lt_uprobe_multi_link(bpf_program__fd(ret ? st->skel->progs.lt_uret_multi
							      : st->skel->progs.lt_uentry_multi),
					  file, offs, cookies, n, ret, pid);
	}
	free(offs);
	free(cookies);
	return fd;
}

#define LT_ENOTSUPP 524 /* kernel-internal: an instruction uprobes cannot handle */

static const char *probe_strerror(int err)
{
	return err == -LT_ENOTSUPP ? "the kernel cannot probe the first instruction there (ENOTSUPP)"
				   : strerror(-err);
}

/* Entry and return links for ids[0..n): returns first, so a call caught by
 * its entry is then always completed. */
static int multi_pair(struct cp_state *st, int pid, const char *file, const int *ids, size_t n)
{
	int fd[2], i;

	if (lt_grow((void **)&st->links, &st->cap_links, st->n_links + 2, sizeof(*st->links), 64))
		return -ENOMEM;
	fd[0] = multi_link(st, pid, file, ids, n, true);
	if (fd[0] < 0)
		return fd[0];
	fd[1] = multi_link(st, pid, file, ids, n, false);
	if (fd[1] < 0) {
		lt_close_later(NULL, fd[0]);
		return fd[1];
	}
	for (i = 0; i < 2; i++)
		st->links[st->n_links++] = (struct cp_link){ pid, st->cur_start, NULL, fd[i] };
	return 0;
}

/* One link pair for ids[0..n) if the kernel takes every offset; else the
 * halves, recursively: one function the kernel cannot probe (libc has
 * some: ENOTSUPP) must not send the rest to one perf event each, whose
 * detach costs a grace period apiece (2,200 libc functions: 8 minutes).
 * k bad offsets cost O(k log n) refused links. Returns the functions left
 * unprobed; *first_err the first error. */
static size_t attach_multi(struct cp_state *st, int pid, const char *file, const int *ids,
			   size_t n, int *first_err)
{
	int rc = multi_pair(st, pid, file, ids, n);

	if (!rc)
		return 0;
	if (!*first_err)
		*first_err = rc;
	if (n == 1)
		LT_INFO(1, "cuda: %s: %s not probed: %s", file, st->probes[ids[0]].symbol,
			probe_strerror(rc));
	if (n == 1 || rc == -ENOMEM || rc == -EINVAL || rc == -EPERM || rc == -ESRCH)
		return n; /* a single bad offset, or nothing would work (ESRCH: the process is gone) */
	return attach_multi(st, pid, file, ids, n / 2, first_err) +
	       attach_multi(st, pid, file, ids + n / 2, n - n / 2, first_err);
}

/* Is the function left out by the profile's kind (launches only) or by the
 * layer its kind of work is probed at? */
static bool left_out(const struct cp_state *st, const char *symbol)
{
	const struct lt_decoder *d = lt_cuda_decoder(symbol);
	int is_set = 0, layer = d ? lt_cuda_decoder_layer(d, &is_set) : 0;
	int chosen = is_set ? st->set_layer : st->launch_layer;

	if (st->launches_only && !(d && lt_cuda_decoder_queues_work(d)))
		return true;
	return chosen && layer && layer != chosen;
}

/* The probes `pl` selects in ELF e (mapped as path); ids gets their ids. */
static size_t select_probes(struct cp_state *st, const struct lt_elf *e, const char *path,
			    const struct lt_plib *pl, uint64_t dev, uint64_t ino, int *ids)
{
	uint64_t last = UINT64_MAX;
	size_t i, n = 0;

	for (i = 0; i < e->n_syms; i++) {
		const struct lt_elfsym *sy = &e->syms[i];
		const struct lt_psym *ps;
		uint64_t off;
		int id;

		if (sy->vaddr == last) /* an alias of a function already selected */
			continue;
		ps = lt_plib_select(pl, sy->name, sy->exported);
		if (!ps || lt_elf_vaddr_to_offset(e, sy->vaddr, &off))
			continue;
		if (left_out(st, sy->name))
			continue;
		last = sy->vaddr;
		id = probe_for(st, path, pl, ps, sy->name, dev, ino, off);
		if (id >= 0)
			ids[n++] = id;
	}
	return n;
}

static int id_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Undo the probes made since `before` (a library refused). */
static void probes_drop(struct cp_state *st, size_t before)
{
	while (st->n_probes > before)
		free(st->probes[--st->n_probes].symbol);
}

/* The probes the matching entries select in e, each once; NULL on ENOMEM. */
static int *select_all(struct cp_state *st, const struct lt_elf *e, const char *path,
		       const struct lt_plib *const *pls, size_t n_pls, uint64_t dev, uint64_t ino,
		       size_t *n)
{
	int *ids = calloc((e->n_syms ? e->n_syms : 1) * n_pls, sizeof(*ids));
	size_t i, k;

	*n = 0;
	for (k = 0; ids && k < n_pls; k++)
		*n += select_probes(st, e, path, pls[k], dev, ino, ids + *n);
	if (n_pls > 1 && *n) { /* probe ids are per (file, offset): drop repeats */
		qsort(ids, *n, sizeof(*ids), id_cmp);
		for (i = 1, k = 1; i < *n; i++)
			if (ids[i] != ids[k - 1])
				ids[k++] = ids[i];
		*n = k;
	}
	return ids;
}

static uint64_t sel_key(const struct lt_plib *const *pls, size_t n_pls)
{
	uint64_t k = n_pls;

	for (size_t i = 0; i < n_pls; i++)
		k = k * 0x100000001b3ull ^ (uint64_t)(uintptr_t)pls[i];
	return k;
}

/* A copy of the ids selected before in this file by these entries, or NULL. */
static int *sel_cached(const struct cp_state *st, uint64_t dev, uint64_t ino,
		       const struct lt_plib *const *pls, size_t n_pls, size_t *n)
{
	uint64_t key = sel_key(pls, n_pls);
	int *ids;

	for (size_t i = 0; i < st->n_sels; i++) {
		const struct cp_sel *c = &st->sels[i];

		if (c->dev != dev || c->ino != ino || c->key != key)
			continue;
		if (!(ids = malloc((c->n ? c->n : 1) * sizeof(*ids))))
			return NULL;
		memcpy(ids, c->ids, c->n * sizeof(*ids));
		*n = c->n;
		return ids;
	}
	return NULL;
}

static void sel_keep(struct cp_state *st, uint64_t dev, uint64_t ino,
		     const struct lt_plib *const *pls, size_t n_pls, const int *ids, size_t n)
{
	int *copy;

	if (lt_grow((void **)&st->sels, &st->cap_sels, st->n_sels + 1, sizeof(*st->sels), 64) ||
	    !(copy = malloc((n ? n : 1) * sizeof(*copy))))
		return;
	memcpy(copy, ids, n * sizeof(*copy));
	st->sels[st->n_sels++] = (struct cp_sel){ dev, ino, sel_key(pls, n_pls), copy, n };
}

/* Probe every function the matching entries of the probe file select in
 * the file open as fd (path: as the target names it), each function once,
 * whatever selects it. The uprobes are placed through our fd of it, so the
 * kernel probes the very inode whose symbols we read; they are bound to pid
 * and take effect whenever that process maps the file, now or later. A
 * `speculative` file (found on the search path, perhaps never loaded) that
 * would pass the probe limit is skipped with a note, never refused. */
static bool attach_file(struct lt_session *s, struct cp_state *st, int pid, int fd, const char *path,
			uint64_t dev, uint64_t ino, const struct lt_plib *const *pls, size_t n_pls,
			bool speculative)
{
	char file[64], err[512];
	size_t i, n = 0, failed = 0, before = st->n_probes;
	size_t limit = s->opt.max_probes ? s->opt.max_probes : LT_MAX_PROBES;
	int first_err = 0, *ids;
	struct lt_elf *e;

	lt_tf_fd_path(fd, file, sizeof(file));
	if ((ids = sel_cached(st, dev, ino, pls, n_pls, &n)))
		goto attach; /* another process's file: its symbols were read already */
	if (lt_elf_open_fd(fd, path, &e, err, sizeof(err))) {
		LT_WARN("cuda: pid %d: cannot read %s: %s", pid, path, err);
		lt_session_unseen(s, "cuda", pid, "cannot read %s: %s", path, err);
		return false;
	}
	ids = select_all(st, e, path, pls, n_pls, dev, ino, &n);
	lt_elf_free(e);
	if (st->n_probes > limit) {
		if (speculative)
			LT_INFO(1, "cuda: pid %d: not arming %s before it is loaded: its %zu functions with "
				"the %zu already probed pass the limit of %zu probes", pid, path, n, before,
				limit);
		else
			lt_session_refuse(s, "cuda: pid %d: the probe file's entry \"%s\" selects %zu functions in "
					  "%s; with the %zu already probed that passes the limit of %zu probes "
					  "per profile: not probing it (narrow its globs, or raise the limit with "
					  "--max-probes N, at most %d)", pid, pls[0]->spec, n, path, before,
					  limit, LT_MAX_PROBES_FORCED);
		probes_drop(st, before);
		free(ids);
		return false;
	}
	sel_keep(st, dev, ino, pls, n_pls, ids, n);
attach:
	if (n && st->multi) {
		failed = attach_multi(st, pid, file, ids, n, &first_err);
		if (failed == n)
			LT_INFO(1, "cuda: uprobe_multi on %s: %s; one perf event per function", path,
				probe_strerror(first_err));
	}
	if (n && (!st->multi || (failed == n && first_err != -ESRCH))) {
		first_err = 0;
		failed = 0;
		for (i = 0; i < n; i++) {
			int rc = attach_one(st, pid, file, ids[i]);

			if (rc && !failed++)
				first_err = rc;
			if (rc == -ESRCH) { /* the process is gone: so is every other probe */
				failed += n - i - 1;
				break;
			}
		}
	}
	if (failed && first_err == -ESRCH) {
		LT_INFO(1, "cuda: pid %d exited before %s could be probed", pid, path);
		free(ids);
		return false;
	}
	if (failed) {
		st->attach_errors += failed;
		LT_WARN("cuda: pid %d: %zu functions of %s could not be probed: %s", pid, failed, path,
			probe_strerror(first_err));
		lt_session_unseen(s, "cuda", pid, "functions of %s not probed: %s", path,
				  probe_strerror(first_err));
	}
	LT_INFO(1, "cuda: pid %d: %s: %zu functions probed%s (%s)", pid, path, n - failed,
		speculative ? " before it is loaded" : "", lt_probefile_class_name(pls[0]->lib_class));
	free(ids);
	return n > failed;
}

/* The same for the file mapped at m. */
static void attach_lib(struct lt_session *s, struct cp_state *st, int pid, int root_fd,
		       const struct lt_tf_map *m, const struct lt_plib *const *pls, size_t n_pls)
{
	char err[512];
	int fd = lt_tf_open_mapped(LT_TF_PROC, pid, root_fd, m, err, sizeof(err));

	if (fd < 0) {
		LT_WARN("cuda: pid %d: cannot read %s: %s", pid, m->path, err);
		return;
	}
	attach_file(s, st, pid, fd, m->path, m->id.dev, m->id.ino, pls, n_pls, false);
	close(fd); /* the kernel holds the probed inode from here */
}

static const struct cp_seen *find_seen(const struct cp_state *st, int pid, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < st->n_seen; i++)
		if (st->seen[i].pid == pid && st->seen[i].dev == dev && st->seen[i].ino == ino)
			return &st->seen[i];
	return NULL;
}

static bool seen_file(struct cp_state *st, int pid, uint64_t dev, uint64_t ino)
{
	if (find_seen(st, pid, dev, ino))
		return true;
	if (!lt_grow((void **)&st->seen, &st->cap_seen, st->n_seen + 1, sizeof(*st->seen), 64))
		st->seen[st->n_seen++] = (struct cp_seen){ pid, st->cur_start, dev, ino, lt_now_ns() };
	return false;
}

static bool probed_file(const struct cp_state *st, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < st->n_probes; i++)
		if (st->probes[i].dev == dev && st->probes[i].ino == ino)
			return true;
	return false;
}

/* One mapping: an executable file mapping we have not seen? */
/* A process that came into the profile while recording (a child, an exec,
 * a library loaded by a path nothing armed) had a probed file mapped before
 * its links were in: nothing held it, so its calls in between went
 * unrecorded. Counted and named at the end, never waited for. */
static void note_late(struct cp_state *st, int pid, const char *path)
{
	struct cp_late *l = &st->late;
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (uint64_t i = 0; i < l->n && i < CP_LATE_NAMED; i++)
		if (l->pid[i] == pid && !strncmp(l->lib[i], base, sizeof(l->lib[i]) - 1))
			return;
	if (l->n < CP_LATE_NAMED) {
		l->pid[l->n] = pid;
		snprintf(l->lib[l->n], sizeof(l->lib[0]), "%.63s", base);
	}
	l->n++;
}

static void say_late(struct cp_state *st)
{
	char names[CP_LATE_NAMED * 80] = "";
	size_t used = 0;

	if (!st->late.n || st->late.said)
		return;
	st->late.said = true;
	for (uint64_t i = 0; i < st->late.n && i < CP_LATE_NAMED && used < sizeof(names); i++)
		used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%d (%s)", i ? ", " : "",
					 st->late.pid[i], st->late.lib[i]);
	LT_WARN("cuda: %" PRIu64 " probed librar%s mapped before %s probes were in, %s%s: calls made "
		"in between are missing", st->late.n, st->late.n == 1 ? "y was" : "ies were",
		st->late.n == 1 ? "its" : "their", names, st->late.n > CP_LATE_NAMED ? ", ..." : "");
}

static void scan_map(struct lt_session *s, struct cp_state *st, int pid, int root_fd,
		     const struct lt_tf_map *m)
{
	const struct lt_plib **pls;
	size_t i, n = 0;

	if (m->perms[2] != 'x' || m->path[0] != '/' || !m->id.ino)
		return;
	if (seen_file(st, pid, m->id.dev, m->id.ino)) {
		if (!st->mapped && probed_file(st, m->id.dev, m->id.ino))
			st->mapped = true; /* armed before, mapped now */
		return;
	}
	pls = calloc(st->pf->n_libs ? st->pf->n_libs : 1, sizeof(*pls));
	for (i = 0; pls && i < st->pf->n_libs; i++)
		if (lt_plib_matches(&st->pf->libs[i], m->path, NULL))
			pls[n++] = &st->pf->libs[i];
	if (n) {
		st->mapped = true;
		if (st->count_late)
			note_late(st, pid, m->path);
		attach_lib(s, st, pid, root_fd, m, pls, n);
	}
	free(pls);
}

struct scan_ctx {
	struct lt_session *s;
	struct cp_state *st;
	int pid, root_fd;
};

static int scan_one(const struct lt_tf_map *m, void *ctx)
{
	struct scan_ctx *c = ctx;

	scan_map(c->s, c->st, c->pid, c->root_fd, m);
	return 0;
}

static int scan_maps(struct lt_session *s, struct cp_state *st, int pid)
{
	struct scan_ctx c = { s, st, pid, -1 };
	int fd = lt_tf_maps_open(LT_TF_PROC, pid), rc;

	st->cur_start = lt_proc_read_start(pid);
	if (fd < 0)
		return lt_session_errorf(s, "cannot read /proc/%d/maps: %s", pid, strerror(-fd));
	c.root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	rc = lt_tf_maps_each_fd(fd, scan_one, &c);
	if (rc && rc != -ENOMEM)
		LT_WARN("cuda: pid %d: /proc/%d/maps read partly: %s", pid, pid,
			rc == -E2BIG ? "too long" : strerror(-rc));
	close(fd);
	if (c.root_fd >= 0)
		close(c.root_fd);
	return rc == -ENOMEM ? rc : 0;
}

/* The probe-file entries naming a file (path as the target names it). */
static size_t matching_libs(const struct cp_state *st, const char *path, const char *soname,
			    const struct lt_plib **pls)
{
	size_t n = 0;

	for (size_t i = 0; i < st->pf->n_libs; i++)
		if (lt_plib_matches(&st->pf->libs[i], path, soname))
			pls[n++] = &st->pf->libs[i];
	return n;
}

struct arm_ctx {
	struct lt_session *s;
	struct cp_state *st;
	int pid;
};

/* A file the program loads at start, or may load later by name. */
static void arm_found(void *arg, const struct lt_lf_file *f)
{
	struct arm_ctx *a = arg;
	const struct lt_plib **pls;

	pls = calloc(a->st->pf->n_libs ? a->st->pf->n_libs : 1, sizeof(*pls));
	size_t n = pls ? matching_libs(a->st, f->path, f->soname, pls) : 0;
	if (n && !find_seen(a->st, a->pid, f->dev, f->ino) &&
	    attach_file(a->s, a->st, a->pid, f->fd, f->path, f->dev, f->ino, pls, n, !f->needed))
		seen_file(a->st, a->pid, f->dev, f->ino);
	free(pls);
}

/* Arm, for pid, what the program exe_fd (exe_path in its root) will load,
 * before it maps it (libfind.h). */
static void arm_image(struct lt_session *s, struct cp_state *st, int pid, int root_fd, int exe_fd,
		      const char *exe_path, const char *ld_library_path)
{
	struct arm_ctx a = { s, st, pid };
	uint64_t t0 = lt_now_ns();
	int n;

	st->cur_start = lt_proc_read_start(pid);
	n = lt_libfind(root_fd, exe_fd, exe_path, ld_library_path, st->pf, arm_found, &a);
	LT_INFO(1, "cuda: pid %d: %s: %d libraries looked at before they are loaded, in %.1f ms", pid,
		exe_path, n, (lt_now_ns() - t0) / 1e6);
}


/* A running target's image: its executable and environment from /proc. */
static void arm_running(struct lt_session *s, struct cp_state *st, int pid)
{
	char exe[PATH_MAX], env[LT_LD_ENV_MAX], err[512];
	int root_fd, exe_fd;
	bool has_env;

	if (lt_launch_is_own_fork(pid) || lt_proc_read_exe(pid, exe, sizeof(exe)) || exe[0] != '/')
		return;
	has_env = lt_lds_env_of(pid, env, sizeof(env));
	root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	exe_fd = lt_tf_open_link(LT_TF_PROC, pid, "exe", err, sizeof(err));
	if (root_fd >= 0 && exe_fd >= 0)
		arm_image(s, st, pid, root_fd, exe_fd, exe, has_env ? env : NULL);
	if (exe_fd >= 0)
		close(exe_fd);
	if (root_fd >= 0)
		close(root_fd);
}

static int cp_add_target(struct lt_session *s, void *state, int pid)
{
	struct cp_state *st = state;
	uint64_t start = lt_proc_read_start(pid);
	int rc;

	/* A new process (or one reusing an old pid) or a new image (exec). A
	 * (pid, 0, 0) entry marks a process already added: what its new image
	 * mapped before this scan was loaded unprobed, while a new process's
	 * mappings are its parent's, inherited. */
	if (!start) /* gone already: its links and what they saw stay for its records */
		return 0;
	forget_earlier(st, pid, start);
	st->cur_start = start;
	st->count_late = seen_file(st, pid, 0, 0) && s->attached;
	rc = scan_maps(s, st, pid);
	st->count_late = false;
	arm_running(s, st, pid);
	return rc;
}

/* The leader task our links of pid are bound to is gone (an exec from
 * another thread): drop them; add_target attaches anew. */
static void cp_drop_target(struct lt_session *s, void *state, int pid)
{
	(void)s;
	forget_earlier(state, pid, UINT64_MAX);
}

/* A launched command, held before its execve of path: arm what it will
 * load, so its first call is recorded. It inherits our environment. */
static int cp_prepare_exec(struct lt_session *s, void *state, int pid, const char *path)
{
	struct cp_state *st = state;
	char err[512], abs[PATH_MAX];
	int root_fd = lt_tf_root_open(LT_TF_PROC, pid), exe_fd = -1;

	if (root_fd < 0)
		return 0;
	/* Our fork: our root and working directory. ld.so takes $ORIGIN from
	 * the executable's real path (/proc/self/exe). */
	if (realpath(path, abs))
		exe_fd = lt_tf_open(root_fd, path = abs, NULL, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "%s: %s", path, strerror(errno));
	if (exe_fd >= 0) {
		arm_image(s, st, pid, root_fd, exe_fd, path, getenv("LD_LIBRARY_PATH"));
		close(exe_fd);
	} else {
		LT_INFO(1, "cuda: cannot arm %s before it runs: %s", path, err);
	}
	close(root_fd);
	return 0;
}

/* ------------------------------------------------------------ records */

static struct lt_elf *elf_for(struct cp_state *st, int pid, const struct lt_tf_map *m)
{
	char err[512];
	struct cp_elf *c;
	size_t i;
	int fd, root_fd;

	for (i = 0; i < st->n_elves; i++)
		if (st->elves[i].dev == m->id.dev && st->elves[i].ino == m->id.ino)
			return st->elves[i].e;
	if (st->n_elves == CP_MAX_ELVES)
		return NULL;
	c = &st->elves[st->n_elves++];
	c->dev = m->id.dev;
	c->ino = m->id.ino;
	root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	fd = lt_tf_open_mapped(LT_TF_PROC, pid, root_fd, m, err, sizeof(err));
	if (fd < 0 || lt_elf_open_fd(fd, m->path, &c->e, err, sizeof(err)))
		LT_INFO(1, "cuda: kernels in %s stay unnamed: %s", m->path, err);
	if (fd >= 0)
		close(fd);
	if (root_fd >= 0)
		close(root_fd);
	return c->e;
}

/* Name the code at addr in pid: its mapping, the file offset, the symbol. */
struct name_ctx {
	struct cp_state *st;
	int pid;
	uint64_t addr;
	char *name;
};

/* The mapping holding the address ends the scan, named or not. */
static int name_in_map(const struct lt_tf_map *m, void *ctx)
{
	struct name_ctx *c = ctx;
	const struct lt_elfsym *sy;
	struct lt_elf *e;
	char buf[1024];
	uint64_t va;

	if (c->addr < m->start || c->addr >= m->end)
		return 0;
	if (m->path[0] == '/' && m->id.ino && (e = elf_for(c->st, c->pid, m)) &&
	    !lt_elf_offset_to_vaddr(e, c->addr - m->start + m->pgoff, &va) && (sy = lt_elf_lookup(e, va)))
		c->name = strdup(lt_elf_demangle(sy->name, buf, sizeof(buf)));
	return 1;
}

static char *name_addr(struct cp_state *st, int pid, uint64_t addr)
{
	struct name_ctx c = { st, pid, addr, NULL };

	lt_tf_maps_each(LT_TF_PROC, pid, name_in_map, &c);
	return c.name;
}

static const char *resolve_kernel(void *arg, uint64_t addr, char *buf, size_t n)
{
	struct cp_state *st = ((void **)arg)[0];
	int pid = (int)(intptr_t)((void **)arg)[1];
	struct cp_name *c = &st->names[(addr >> 4 ^ (uint64_t)pid * 0x9e3779b97f4a7c15ull) % CP_NAME_CACHE];

	if (c->pid != pid || c->addr != addr) {
		free(c->name);
		c->pid = pid;
		c->addr = addr;
		c->name = name_addr(st, pid, addr);
	}
	if (!c->name)
		return NULL;
	snprintf(buf, n, "%s", c->name);
	return buf;
}

static bool returns_int(int lib_class)
{
	return lib_class == EVLIB_CUDA_RUNTIME || lib_class == EVLIB_CUDA_DRIVER ||
	       lib_class == EVLIB_NCCL || lib_class == EVLIB_CUBLAS || lib_class == EVLIB_CUDNN;
}

_Static_assert(LT_DECODE_ARGS == LT_UCALL_ARGS, "the decoder reads what the probe copies");

static void on_call(struct lt_session *s, struct cp_state *st, const struct lt_rec_ucall *r)
{
	struct evlog_event ev = { .type = EV_LIB_CALL, .ts = r->h.ts, .pid = r->h.pid, .tid = r->h.tid };
	struct cp_probe *p;
	struct lt_decode_buf strs;
	void *rarg[2] = { st, (void *)(intptr_t)r->h.pid };
	struct lt_decode_ctx cx = { resolve_kernel, rarg };
	uint64_t args[LT_UCALL_ARGS];
	unsigned i;

	if (r->probe_id >= st->n_probes)
		return;
	p = &st->probes[r->probe_id];
	st->calls++;
	p->calls++;
	ev.u.lib_call.lib_class = (uint8_t)p->lib_class;
	ev.u.lib_call.lib = evlog_s(p->lib);
	ev.u.lib_call.symbol = evlog_s(p->symbol);
	ev.u.lib_call.dur = r->dur;
	/* These libraries return 32-bit status enums; the upper half of the
	 * return register is undefined. */
	ev.u.lib_call.ret = returns_int(p->lib_class) ? (uint64_t)(int64_t)(int32_t)r->ret : r->ret;
	ev.u.lib_call.depth = r->depth;
	ev.u.lib_call.nargs = p->nargs;
	for (i = 0; i < LT_UCALL_ARGS; i++)
		args[i] = r->args[i];
	for (i = 0; i < p->nargs; i++)
		ev.u.lib_call.args[i] = args[p->argidx[i]];
	if (p->dec)
		lt_cuda_decode(p->dec, args, &cx, &ev, &strs);
	lt_session_emit(s, &ev);
}

/* A target mapped a probed file at u->h.ts: were its links in by then?
 * (Known from the record alone: the process may be gone already.) */
static void check_umap(struct cp_state *st, const struct lt_rec_umap *u)
{
	uint64_t dev = makedev(u->kdev >> 20, u->kdev & 0xfffff);
	const struct cp_seen *x;

	if (!u->ino)
		return;
	for (size_t i = 0; i < st->n_probes; i++) {
		if (st->probes[i].dev != dev || st->probes[i].ino != u->ino)
			continue;
		x = find_seen(st, (int)u->h.pid, dev, u->ino);
		if (!x || x->at > u->h.ts)
			note_late(st, (int)u->h.pid, st->probes[i].lib);
		return;
	}
}

static int cp_handle(struct lt_session *s, void *state, const struct lt_rec_hdr *rec, size_t size)
{
	struct cp_state *st = state;

	if (!st || !st->skel)
		return 0; /* records drained after stop */
	if (rec->kind == LT_REC_UCALL && size >= sizeof(struct lt_rec_ucall)) {
		on_call(s, st, (const struct lt_rec_ucall *)rec);
	} else if (rec->kind == LT_REC_UMAP && size >= sizeof(struct lt_rec_umap)) {
		check_umap(st, (const struct lt_rec_umap *)rec);
		st->count_late = true;
		if (scan_maps(s, st, (int)rec->pid))
			LT_INFO(2, "cuda: %s", s->err);
		st->count_late = false;
	}
	return 0;
}

#define CP_COST_TOP 8      /* functions named in the cost summary */

/* What the probes cost the targets: each of the most called functions'
 * calls times one probed call's cost (measured at start), then the rest. */
static int by_calls_desc(const void *a, const void *b)
{
	const struct cp_probe *x = *(const struct cp_probe *const *)a, *y = *(const struct cp_probe *const *)b;
	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

static void print_costs(const struct cp_state *st)
{
	const struct cp_probe **called = st->calls ? calloc(st->n_probes, sizeof(*called)) : NULL;
	size_t n = 0;
	uint64_t shown = 0;

	if (!called)
		return;
	for (size_t i = 0; i < st->n_probes; i++)
		if (st->probes[i].calls)
			called[n++] = &st->probes[i];
	qsort(called, n, sizeof(*called), by_calls_desc);
	LT_INFO(0, "cuda: probes cost the targets ~%.2f s: %" PRIu64 " calls x %.2f us each "
		"(measured here at start; a lower bound)", (double)st->calls * st->call_ns * 1e-9,
		st->calls, st->call_ns * 1e-3);
	for (size_t k = 0; k < n && k < CP_COST_TOP; k++) {
		LT_INFO(0, "cuda:   %-32s %10" PRIu64 " calls  ~%.3f s", called[k]->symbol, called[k]->calls,
			(double)called[k]->calls * st->call_ns * 1e-9);
		shown += called[k]->calls;
	}
	if (st->calls > shown)
		LT_INFO(0, "cuda:   %-32s %10" PRIu64 " calls  ~%.3f s", "(others)", st->calls - shown,
			(double)(st->calls - shown) * st->call_ns * 1e-9);
	free(called);
}

static int cp_finish(struct lt_session *s, void *state)
{
	struct cp_state *st = state;

	/* Files armed before they are loaded do not count: none may ever be. */
	if (!st->mapped && !st->calls && !st->n_klinks) {
		LT_WARN("cuda: nothing was probed: no library named in %s is loaded by the targets "
			"(see `llmtracker generateProbe -p PID`)", st->pf->path);
		lt_session_not_recorded(s, "cuda", "no library the probe file names was loaded");
	}
	LT_INFO(1, "cuda: %" PRIu64 " calls recorded, %zu functions probed, %zu links, %" PRIu64
		" attach errors", st->calls, st->n_probes, st->n_links, st->attach_errors);
	print_costs(st);
	return 0;
}

const struct lt_source lt_source_cuda = {
	.kind_lo = LT_REC_UCALL,
	.kind_hi = LT_REC_UMAP,
	.start = cp_start,
	.add_target = cp_add_target,
	.prepare_exec = cp_prepare_exec,
	.drop_target = cp_drop_target,
	.handle = cp_handle,
	.quiesce = cp_quiesce,
	.finish = cp_finish,
	.stop = cp_stop,
};
