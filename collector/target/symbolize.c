// SPDX-License-Identifier: Apache-2.0
/*
 * symbolize: process mappings, mapped objects and the set of sampled
 * addresses; see symbolize.h for the contract.
 */
#include "symbolize.h"
#include "tfile.h"
#include "elfsym.h"
#include "sym_table.h"
#include "debuginfod.h"
#include "collector/injection/injector.h"
#include "common/hmap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REFRESH_NS (100ull * 1000 * 1000) /* re-read maps at most this often */
/* ... except just after an exec, while the loader maps the libraries: the
 * first EARLY_READS re-reads may come EARLY_NS apart. */
#define EARLY_READS 16
#define EARLY_NS (1000ull * 1000)

enum addr_kind { AK_FILE, AK_ANON, AK_UNKNOWN, AK_KERNEL };

struct sym_obj {           /* one mapped file, by device + inode */
	uint64_t dev, ino;
	char *path;            /* as the process sees it, " (deleted)" removed */
	int fd;                /* -1: could not be opened */
	int proc;              /* the process it was opened for: debug files are
				* looked up inside that process's root */
	int table;             /* index in tables, -1 none, -2 not tried yet */
};

struct sym_tab {           /* a loaded table, shared by build-id */
	char build_id[41];
	struct sym_table *t;
	int dbgd_tried;        /* its debug file was asked of debuginfod */
};

struct sym_map {
	uint64_t start, end, pgoff;
	int obj;               /* index in objs, or -1 (anonymous) */
	int anon;              /* index in anon names when obj < 0 */
};

struct sym_proc {
	int pid;
	uint32_t exec_id;
	int have_exec_id, gone;
	uint64_t read_ns;      /* when maps were last read */
	uint64_t generation;   /* names that reading (lt_sym_mappings) */
	unsigned early_reads;  /* re-reads since the exec_id last changed */
	struct sym_map *maps;
	size_t n_maps;
	/* JIT code: the process's /tmp/perf-<pid in its namespace>.map, read
	 * at the end through its root (kept open: the process may be gone). */
	int root_state;        /* 0 not tried, 1 root_fd open, -1 unavailable */
	int root_fd, nspid;
	int perfmap_tried;
	struct sym_table *perfmap;
};

struct sym_addr {
	int pid;
	uint8_t kind;          /* enum addr_kind */
	uint8_t is_ret;        /* return address: look up addr - 1 */
	int obj, anon;
	uint64_t addr, rel;    /* rel: file offset (AK_FILE) or mapping offset (AK_ANON) */
};

struct lt_sym {
	char **debug_roots;
	char *kallsyms_path, *proc_root;
	struct sym_obj *objs;
	size_t n_objs, cap_objs;
	struct lt_hmap obj_h;  /* (dev, ino) -> objs index */
	struct sym_tab *tabs;
	size_t n_tabs;
	struct sym_proc *procs;
	size_t n_procs, cap_procs;
	struct lt_hmap proc_h; /* pid -> procs index */
	struct sym_addr *addrs;
	size_t n_addrs, cap_addrs;
	struct lt_hmap addr_h; /* (pid, addr) -> addrs index */
	char **anon_names;
	size_t n_anon;
	struct sym_table *kernel;
	int kernel_tried;
	char kernel_err[256];
	struct lt_dbgd *dbgd;  /* NULL: debuginfod not configured */
	int late;              /* the profile is over: debuginfod may be asked */
	char *(*demangle)(const char *, char *, size_t *, int *);
	int demangle_tried;
	char *demangled;
	uint64_t resolved;
	uint64_t generations;  /* maps readings so far */
};

/* --------------------------------------------------------------- helpers */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s ? s : dflt);
}

int lt_sym_new(struct lt_sym **out, const struct lt_sym_opts *opts)
{
	static const char *const dflt_roots[] = { "/usr/lib/debug", NULL };
	const char *const *roots = opts && opts->debug_roots ? opts->debug_roots : dflt_roots;
	struct lt_sym *s = calloc(1, sizeof(*s));
	size_t n = 0, i;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	while (roots[n])
		n++;
	s->debug_roots = calloc(n + 1, sizeof(char *));
	s->kallsyms_path = dup_or(opts ? opts->kallsyms : NULL, "/proc/kallsyms");
	s->proc_root = dup_or(opts ? opts->proc_root : NULL, "/proc");
	if (!s->debug_roots || !s->kallsyms_path || !s->proc_root)
		goto nomem;
	for (i = 0; i < n; i++)
		if (!(s->debug_roots[i] = strdup(roots[i])))
			goto nomem;
	s->dbgd = lt_dbgd_new();
	*out = s;
	return 0;
nomem:
	lt_sym_free(s);
	return -ENOMEM;
}

void lt_sym_free(struct lt_sym *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; s->debug_roots && s->debug_roots[i]; i++)
		free(s->debug_roots[i]);
	free(s->debug_roots);
	free(s->kallsyms_path);
	free(s->proc_root);
	for (i = 0; i < s->n_objs; i++) {
		free(s->objs[i].path);
		if (s->objs[i].fd >= 0)
			close(s->objs[i].fd);
	}
	free(s->objs);
	lt_hmap_free(&s->obj_h);
	for (i = 0; i < s->n_tabs; i++)
		sym_table_free(s->tabs[i].t);
	free(s->tabs);
	for (i = 0; i < s->n_procs; i++) {
		free(s->procs[i].maps);
		if (s->procs[i].root_state == 1)
			close(s->procs[i].root_fd);
		sym_table_free(s->procs[i].perfmap);
	}
	free(s->procs);
	lt_hmap_free(&s->proc_h);
	free(s->addrs);
	lt_hmap_free(&s->addr_h);
	for (i = 0; i < s->n_anon; i++)
		free(s->anon_names[i]);
	free(s->anon_names);
	sym_table_free(s->kernel);
	lt_dbgd_free(s->dbgd);
	free(s->demangled);
	free(s);
}

/* -------------------------------------------------------------- objects */

/* The objs index of (dev, ino), or -1 with *p where it goes. */
static long obj_find(const struct lt_sym *s, struct lt_hmap_pos *p, uint64_t dev, uint64_t ino)
{
	uint32_t i;

	*p = lt_hmap_probe(&s->obj_h, lt_hash_pair(dev, ino));
	while (lt_hmap_next(&s->obj_h, p, &i))
		if (s->objs[i].dev == dev && s->objs[i].ino == ino)
			return i;
	return -1;
}

/* The object behind a mapping, opened through map_files or inside the
 * process's root (tfile.h): never a node file, never a FIFO or device. */
static int obj_get(struct lt_sym *s, struct sym_proc *p, const struct lt_tf_map *tm,
		   uint64_t dev, uint64_t ino, const char *path)
{
	char err[512];
	struct lt_hmap_pos pos;
	struct sym_obj *o;
	long idx = obj_find(s, &pos, dev, ino);

	if (idx >= 0)
		return (int)idx;
	if (grow((void **)&s->objs, &s->cap_objs, s->n_objs + 1, sizeof(*s->objs)))
		return -ENOMEM;
	o = &s->objs[s->n_objs];
	o->dev = dev;
	o->ino = ino;
	o->table = -2;
	o->path = strdup(path);
	if (!o->path)
		return -ENOMEM;
	o->proc = (int)(p - s->procs);
	o->fd = lt_tf_open_mapped(s->proc_root, p->pid, p->root_state == 1 ? p->root_fd : -1, tm,
				  err, sizeof(err));
	if (lt_hmap_add(&s->obj_h, &pos, (uint32_t)s->n_objs)) {
		free(o->path);
		if (o->fd >= 0)
			close(o->fd);
		return -ENOMEM;
	}
	return (int)s->n_objs++;
}

static int anon_intern(struct lt_sym *s, const char *name)
{
	char **p;
	size_t i;

	for (i = 0; i < s->n_anon; i++)
		if (!strcmp(s->anon_names[i], name))
			return (int)i;
	p = realloc(s->anon_names, (s->n_anon + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	s->anon_names = p;
	if (!(p[s->n_anon] = strdup(name)))
		return -ENOMEM;
	return (int)s->n_anon++;
}

/* ------------------------------------------------------------ processes */

/* The procs index of pid, or -1 with *p where it goes. */
static long proc_find_ix(const struct lt_sym *s, struct lt_hmap_pos *p, int pid)
{
	uint32_t i;

	*p = lt_hmap_probe(&s->proc_h, lt_mix64((uint64_t)(uint32_t)pid));
	while (lt_hmap_next(&s->proc_h, p, &i))
		if (s->procs[i].pid == pid)
			return i;
	return -1;
}

static struct sym_proc *proc_find(struct lt_sym *s, int pid)
{
	struct lt_hmap_pos p;
	long i = proc_find_ix(s, &p, pid);

	return i >= 0 ? &s->procs[i] : NULL;
}

/* Anonymous-like mappings: no path, [heap]/[stack]/..., memfd (JIT code),
 * shared anonymous memory. Their frames stay as name+offset. The memfd
 * our injected library is loaded from is the library: read as any object
 * (through map_files, its identity checked), its frames get their names. */
static const char *anon_name(const char *path)
{
	static const char ours[] = "/memfd:" LT_INJ_MEMFD_NAME;

	if (!strcmp(path, ours))
		return NULL;
	if (!*path || !strncmp(path, "/memfd:", 7) || !strncmp(path, "/dev/zero", 9) ||
	    !strncmp(path, "/SYSV", 5) || !strncmp(path, "[anon", 5))
		return "[anon]";
	if (path[0] == '[')
		return path;
	return NULL;
}

static int map_fill(struct lt_sym *s, struct sym_proc *p, struct sym_map *m,
		    const struct lt_tf_map *tm)
{
	char path[PATH_MAX];
	size_t len;
	const char *an;
	int r;

	snprintf(path, sizeof(path), "%s", tm->path);
	len = strlen(path);
	if (tm->deleted)
		path[len - 10] = 0;
	an = anon_name(path);
	if (an || path[0] != '/' || tm->id.ino == 0) {
		r = anon_intern(s, an ? an : "[anon]");
		m->obj = -1;
		m->anon = r;
		return r < 0 ? r : 0;
	}
	r = obj_get(s, p, tm, tm->id.dev, tm->id.ino, path);
	m->obj = r;
	m->anon = -1;
	return r < 0 ? r : 0;
}

/* One maps line; only executable mappings are kept. */
static int maps_entry(struct lt_sym *s, struct sym_proc *p, size_t *cap, const struct lt_tf_map *tm)
{
	struct sym_map *m;

	if (grow((void **)&p->maps, cap, p->n_maps + 1, sizeof(*p->maps)))
		return -ENOMEM;
	m = &p->maps[p->n_maps];
	m->start = tm->start;
	m->end = tm->end;
	m->pgoff = tm->pgoff;
	if (map_fill(s, p, m, tm))
		return -ENOMEM;
	p->n_maps++;
	return 0;
}

struct maps_ctx {
	struct lt_sym *s;
	struct sym_proc *p;
	size_t cap;
	int rc;       /* a line's: -ENOMEM ends the walk */
};

static int maps_one(const struct lt_tf_map *tm, void *ctx)
{
	struct maps_ctx *c = ctx;

	if (tm->perms[2] == 'x')
		c->rc = maps_entry(c->s, c->p, &c->cap, tm);
	return c->rc;
}

static int proc_read_maps(struct lt_sym *s, struct sym_proc *p)
{
	struct maps_ctx c = { s, p, 0, 0 };
	int fd;

	p->read_ns = now_ns();
	p->generation = ++s->generations;
	if (!p->root_state) { /* once: it stays valid after the process exits */
		p->root_fd = lt_tf_root_open(s->proc_root, p->pid);
		p->root_state = p->root_fd >= 0 ? 1 : -1;
	}
	fd = lt_tf_maps_open(s->proc_root, p->pid);
	if (fd < 0) {
		p->gone = 1;
		return fd;
	}
	free(p->maps);
	p->maps = NULL;
	p->n_maps = 0;
	lt_tf_maps_each_fd(fd, maps_one, &c); /* read partly: what was read stands */
	close(fd);
	if (!c.rc && p->n_maps == 0) /* a kernel thread, or the process is exiting */
		p->gone = 1;
	return c.rc;
}

static int proc_get(struct lt_sym *s, int pid, struct sym_proc **out, int *is_new)
{
	struct lt_hmap_pos pos;
	struct sym_proc *p;
	long idx = proc_find_ix(s, &pos, pid);
	int r;

	*out = NULL;
	*is_new = 0;
	if (idx >= 0) {
		*out = &s->procs[idx];
		return 0;
	}
	if (grow((void **)&s->procs, &s->cap_procs, s->n_procs + 1, sizeof(*s->procs)) ||
	    lt_hmap_add(&s->proc_h, &pos, (uint32_t)s->n_procs))
		return -ENOMEM;
	p = &s->procs[s->n_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	r = proc_read_maps(s, p);
	*out = p;
	*is_new = 1;
	return r == -ENOMEM ? r : 0;
}

int lt_sym_add_pid(struct lt_sym *s, int pid)
{
	struct sym_proc *p;
	int is_new, r = proc_get(s, pid, &p, &is_new);

	if (r)
		return r;
	if (!is_new) {
		p->gone = 0;
		r = proc_read_maps(s, p);
		if (r == -ENOMEM)
			return r;
	}
	return p->gone ? -ESRCH : 0;
}

static const struct sym_map *proc_find_map(const struct sym_proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n_maps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->n_maps && p->maps[lo].start <= addr)
		return &p->maps[lo];
	return NULL;
}

/* The pid a process has in its own namespace (NSpid's last field). */
static int proc_nspid(const struct lt_sym *s, int pid)
{
	char path[256], line[256];
	int nspid = pid;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/status", s->proc_root, pid);
	f = fopen(path, "re");
	if (!f)
		return pid;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "NSpid:", 6)) {
			char *p = strrchr(line, '\t');

			nspid = p ? atoi(p + 1) : pid;
			break;
		}
	fclose(f);
	return nspid > 0 ? nspid : pid;
}

/* Keep a handle on the process's root for its perf map (JIT frames). */
static void proc_open_root(struct lt_sym *s, int pid)
{
	struct sym_proc *p = proc_find(s, pid);

	if (!p || p->nspid)
		return;
	if (!p->root_state) {
		p->root_fd = lt_tf_root_open(s->proc_root, pid);
		p->root_state = p->root_fd >= 0 ? 1 : -1;
	}
	p->nspid = proc_nspid(s, pid);
}

static const char *perfmap_lookup(struct lt_sym *s, int pid, uint64_t addr, uint64_t *off)
{
	char path[64], err[512];
	struct sym_proc *p = proc_find(s, pid);
	int fd;

	if (!p || p->root_state != 1)
		return NULL;
	if (!p->perfmap_tried) {
		p->perfmap_tried = 1;
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", p->nspid);
		fd = lt_tf_open(p->root_fd, path, NULL, err, sizeof(err)); /* the target's own /tmp */
		if (fd >= 0) {
			p->perfmap = sym_table_load_perfmap(fd, err, sizeof(err));
			close(fd);
		}
	}
	return p->perfmap ? sym_table_lookup(p->perfmap, addr, off, NULL) : NULL;
}

/* ------------------------------------------------------------ addresses */

/* The addrs index of (pid, addr), or -1 with *p where it goes. */
static long addr_find(const struct lt_sym *s, struct lt_hmap_pos *p, int pid, uint64_t addr)
{
	uint32_t i;

	*p = lt_hmap_probe(&s->addr_h, lt_hash_pair((uint32_t)pid, addr));
	while (lt_hmap_next(&s->addr_h, p, &i))
		if (s->addrs[i].addr == addr && s->addrs[i].pid == pid)
			return i;
	return -1;
}

/* The mapping holding addr; re-reads the maps once (rate-limited) when the
 * process exec'd or the address is outside every known mapping (dlopen). */
static int maps_may_refresh(struct sym_proc *p)
{
	uint64_t since = now_ns() - p->read_ns;

	if (since >= REFRESH_NS)
		return 1;
	if (p->early_reads < EARLY_READS && since >= EARLY_NS) {
		p->early_reads++;
		return 1;
	}
	return 0;
}

static int addr_locate(struct lt_sym *s, int pid, uint32_t exec_id, uint64_t addr,
		       const struct sym_map **out)
{
	struct sym_proc *p;
	int is_new, r = proc_get(s, pid, &p, &is_new);

	*out = NULL;
	if (r)
		return r;
	if (exec_id != LT_SYM_ANY_EXEC) {
		/* Maps read before the first sample (at attach, maybe before the
		 * launched command's exec) or before an exec are stale. */
		if (((p->have_exec_id && p->exec_id != exec_id) || (!p->have_exec_id && !is_new)) &&
		    !p->gone) {
			p->early_reads = 0;
			r = proc_read_maps(s, p);
			if (r == -ENOMEM)
				return r;
		}
		p->exec_id = exec_id;
		p->have_exec_id = 1;
	}
	*out = proc_find_map(p, addr);
	if (!*out && !p->gone && maps_may_refresh(p)) {
		r = proc_read_maps(s, p);
		if (r == -ENOMEM)
			return r;
		*out = proc_find_map(p, addr);
	}
	return 0;
}

static void addr_place(struct lt_sym *s, struct sym_addr *a, const struct sym_map *m)
{
	if (!m) {
		a->kind = AK_UNKNOWN;
	} else if (m->obj >= 0) {
		a->kind = AK_FILE;
		a->obj = m->obj;
		a->rel = a->addr - m->start + m->pgoff;
	} else {
		a->kind = AK_ANON;
		a->anon = m->anon;
		a->rel = a->addr - m->start;
		proc_open_root(s, a->pid);
	}
}

/* An address noted while the maps did not hold it yet (sampled just after
 * an exec or a dlopen, before the maps were read again) is looked for again
 * each time it is noted: the maps are re-read at most every REFRESH_NS
 * (EARLY_NS for the first few after an exec). */
static int addr_relocate(struct lt_sym *s, uint32_t exec_id, struct sym_addr *a)
{
	const struct sym_map *m = NULL;
	int r = addr_locate(s, a->pid, exec_id, a->addr, &m);

	/* addr_locate grows the process table, never the addresses: a holds. */
	if (!r && m)
		addr_place(s, a, m);
	return r;
}

static int addr_add(struct lt_sym *s, int pid, uint32_t exec_id, uint64_t addr, int is_ret,
		    long *idx)
{
	const struct sym_map *m = NULL;
	struct lt_hmap_pos pos;
	struct sym_addr *a;
	int r;

	if ((*idx = addr_find(s, &pos, pid, addr)) >= 0)
		return s->addrs[*idx].kind == AK_UNKNOWN && pid != 0 ?
		       addr_relocate(s, exec_id, &s->addrs[*idx]) : 0;
	if (is_ret && addr == 0)
		is_ret = 0;
	if (pid != 0 && (r = addr_locate(s, pid, exec_id, addr, &m)))
		return r;
	/* addr_locate may have grown other tables, not this one: pos holds. */
	if (grow((void **)&s->addrs, &s->cap_addrs, s->n_addrs + 1, sizeof(*s->addrs)))
		return -ENOMEM;
	a = &s->addrs[s->n_addrs];
	memset(a, 0, sizeof(*a));
	a->pid = pid;
	a->addr = addr;
	a->obj = a->anon = -1;
	a->is_ret = (uint8_t)!!is_ret;
	if (pid == 0)
		a->kind = AK_KERNEL;
	else
		addr_place(s, a, m);
	if (lt_hmap_add(&s->addr_h, &pos, (uint32_t)s->n_addrs))
		return -ENOMEM;
	*idx = (long)s->n_addrs++;
	return 1;
}

int lt_sym_note(struct lt_sym *s, int pid, uint32_t exec_id, uint64_t addr, int is_ret)
{
	long idx;

	return addr_add(s, pid, exec_id, addr, is_ret, &idx);
}

/* ------------------------------------------------------------ resolving */

static const char *demangle(struct lt_sym *s, const char *name)
{
	int status = -1;
	char *d;

	if (strncmp(name, "_Z", 2))
		return name;
	if (!s->demangle_tried) {
		/* Optional: without a demangler names stay mangled. */
		s->demangle_tried = 1;
		s->demangle = lt_find_demangler();
	}
	if (!s->demangle)
		return name;
	d = s->demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
	free(s->demangled);
	s->demangled = d;
	return d;
}

/* A stripped object without a local debug file: its debug file from
 * debuginfod, once per build-id, only once the profile is over (a lookup
 * can take seconds; tables loaded during the profile get theirs then). */
static struct sym_table *tab_debuginfod(struct lt_sym *s, struct sym_tab *tab)
{
	int fd;

	if (!s->dbgd || !s->late || tab->dbgd_tried || !sym_table_wants_debug_file(tab->t))
		return tab->t;
	tab->dbgd_tried = 1;
	fd = lt_dbgd_find(s->dbgd, tab->build_id);
	if (fd >= 0) {
		sym_table_add_debug_fd(tab->t, fd);
		close(fd);
	}
	return tab->t;
}

static struct sym_table *obj_table(struct lt_sym *s, struct sym_obj *o)
{
	char id[41], err[256];
	struct sym_table *t;
	struct sym_tab *tabs;
	size_t i;

	if (o->table >= -1)
		return o->table >= 0 ? tab_debuginfod(s, &s->tabs[o->table]) : NULL;
	o->table = -1;
	if (o->fd < 0)
		return NULL;
	if (sym_elf_build_id(o->fd, id) == 0)
		for (i = 0; i < s->n_tabs; i++)
			if (!strcmp(s->tabs[i].build_id, id)) {
				o->table = (int)i;
				return tab_debuginfod(s, &s->tabs[i]);
			}
	t = sym_table_load_elf(o->fd, s->procs[o->proc].root_state == 1 ? s->procs[o->proc].root_fd : -1,
			       o->path, (const char *const *)s->debug_roots, err, sizeof(err));
	if (!t)
		return NULL;
	tabs = realloc(s->tabs, (s->n_tabs + 1) * sizeof(*tabs));
	if (!tabs) {
		sym_table_free(t);
		return NULL;
	}
	s->tabs = tabs;
	snprintf(tabs[s->n_tabs].build_id, sizeof(tabs->build_id), "%s", sym_table_build_id(t));
	tabs[s->n_tabs].t = t;
	tabs[s->n_tabs].dbgd_tried = 0;
	o->table = (int)s->n_tabs++;
	return tab_debuginfod(s, &tabs[o->table]);
}

static void resolve_kernel(struct lt_sym *s, const struct sym_addr *a, struct lt_sym_info *out)
{
	const char *mod = NULL, *name = NULL;

	if (!s->kernel_tried) {
		s->kernel_tried = 1;
		s->kernel = sym_table_load_kallsyms(s->kallsyms_path, s->kernel_err,
						    sizeof(s->kernel_err));
	}
	out->module = "[kernel.kallsyms]";
	out->offset = a->addr;
	if (s->kernel)
		name = sym_table_lookup(s->kernel, a->addr - a->is_ret, &out->offset, &mod);
	if (name) {
		out->offset += a->is_ret;
		out->name = name;
		out->module = mod ? mod : out->module;
	} else {
		out->offset = a->addr;
	}
}

static void resolve_file(struct lt_sym *s, const struct sym_addr *a, struct lt_sym_info *out)
{
	struct sym_obj *o = &s->objs[a->obj];
	struct sym_table *t = obj_table(s, o);
	uint64_t vaddr = t ? sym_table_vaddr(t, a->rel) : a->rel;
	const char *name = t ? sym_table_lookup(t, vaddr - a->is_ret, &out->offset, NULL) : NULL;

	out->module = o->path;
	if (name) {
		out->offset += a->is_ret;
		out->name = demangle(s, name);
	} else {
		out->offset = vaddr;
	}
}

static void resolve_one(struct lt_sym *s, const struct sym_addr *a, struct lt_sym_info *out)
{
	out->name = "";
	out->module = "[unknown]";
	out->offset = a->addr;
	switch (a->kind) {
	case AK_KERNEL:
		resolve_kernel(s, a, out);
		break;
	case AK_FILE:
		resolve_file(s, a, out);
		break;
	case AK_ANON: {
		const char *jit = perfmap_lookup(s, a->pid, a->addr - a->is_ret, &out->offset);

		out->module = s->anon_names[a->anon];
		if (jit) {
			out->name = demangle(s, jit);
			out->offset += a->is_ret;
		} else {
			out->offset = a->rel;
		}
		break;
	}
	default:
		break;
	}
	if (out->name[0])
		s->resolved++;
}

int lt_sym_resolve(struct lt_sym *s, int pid, uint64_t addr, struct lt_sym_info *out)
{
	long idx;
	int r = addr_add(s, pid, LT_SYM_ANY_EXEC, addr, 0, &idx);

	if (r < 0)
		return r;
	resolve_one(s, &s->addrs[idx], out);
	return 0;
}


struct lt_dbgd *lt_sym_debuginfod(struct lt_sym *s)
{
	return s->dbgd;
}

uint64_t lt_sym_generation(struct lt_sym *s, int pid)
{
	struct sym_proc *p = proc_find(s, pid);

	return p ? p->generation : 0;
}

int lt_sym_mappings(struct lt_sym *s, int pid, uint64_t *generation, lt_sym_map_cb cb,
		    void *arg)
{
	struct sym_proc *p = proc_find(s, pid);
	struct lt_sym_mapping m;
	size_t i;
	int r;

	if (!p)
		return -ESRCH;
	if (generation)
		*generation = p->generation;
	for (i = 0; i < p->n_maps; i++) {
		const struct sym_map *sm = &p->maps[i];
		const struct sym_obj *o = sm->obj >= 0 ? &s->objs[sm->obj] : NULL;

		m.start = sm->start;
		m.end = sm->end;
		m.pgoff = sm->pgoff;
		m.dev = o ? o->dev : 0;
		m.ino = o ? o->ino : 0;
		m.fd = o ? o->fd : -1;
		m.root_fd = p->root_state == 1 ? p->root_fd : -1;
		m.name = o ? o->path : s->anon_names[sm->anon];
		if ((r = cb(arg, &m)))
			return r;
	}
	return 0;
}

int lt_sym_foreach(struct lt_sym *s, lt_sym_cb cb, void *arg)
{
	struct lt_sym_info info;
	size_t i;
	int r;

	s->resolved = 0;
	s->late = 1;
	for (i = 0; i < s->n_addrs; i++) {
		resolve_one(s, &s->addrs[i], &info);
		r = cb(arg, s->addrs[i].pid, s->addrs[i].addr, &info);
		if (r)
			return r;
	}
	return 0;
}

void lt_sym_stats(const struct lt_sym *s, struct lt_sym_stats *st)
{
	size_t i;

	memset(st, 0, sizeof(*st));
	st->addrs = s->n_addrs;
	st->procs = s->n_procs;
	st->objects = s->n_objs;
	st->resolved = s->resolved;
	for (i = 0; i < s->n_tabs; i++)
		st->symbols += sym_table_count(s->tabs[i].t);
	if (s->kernel)
		st->symbols += sym_table_count(s->kernel);
	if (s->kernel_tried && !s->kernel)
		st->kernel_error = s->kernel_err;
	st->debuginfod = s->dbgd != NULL;
	if (s->dbgd)
		lt_dbgd_stats(s->dbgd, &st->dbgd);
}
