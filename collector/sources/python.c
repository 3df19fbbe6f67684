// SPDX-License-Identifier: Apache-2.0
/*
 * Python function tracing (-t python): CPython's USDT probes
 * python:function__entry / python:function__return, attached per target.
 *
 * For each target we look for an interpreter that carries the probes: the
 * executable itself or a mapped libpython, opened through the target's own
 * binding of it (/proc/PID/exe, /proc/PID/map_files) or inside its root
 * (tfile.h), and probed through our fd of it, so that the file probed is
 * the one whose notes were read. The EBPF_USDT_PYTHON_PATH environment
 * variable names the interpreter instead (a path inside the target's root,
 * else one on this node: the user's own choice). A target without the
 * probes is named with the reason, once, and the other targets keep going.
 *
 * When a target execs (a launcher or shell starting python), the exec
 * record sends us back to look for probes in the new image.
 *
 * The injected profile hook (inject_mgr.h, LT_IM_PYTHON) costs a fraction of the
 * probes and is used first (see py_add_resolved, --python-method).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "bpf/python.skel.h"
#include "bpf/python.h"
#include "linkclose.h"
#include "collector/injection/inject_gate.h"
#include "collector/injection/inject_mgr.h"
#include "collector/session/session.h"
#include "collector/session/launch.h"
#include "collector/target/tfile.h"

#define PY_ENV_PATH "EBPF_USDT_PYTHON_PATH"
#define PY_NT_STAPSDT 3
#define PY_HOOK_INIT_WAIT_MS 5000

struct py_target {
	int pid;
	dev_t dev;                  /* the probed interpreter file */
	ino_t ino;
	struct bpf_link *entry, *ret;
	struct bpf_link *hold;      /* keeps 3.11's line semaphore raised */
	int waiting;                /* no interpreter mapped yet: wait for exec */
	int explained;              /* said why it cannot be traced */
	int hooked;                 /* traced by the injected hook */
	int launched;               /* the command `profile -- CMD` started */
	int await_exec;             /* followed, exec'd already: its exec record comes */
	uint64_t usdt_events;       /* calls and returns its USDT probes gave */
	int forked_new;             /* forked by a target since we started */
};

struct py_state {
	struct python_bpf *skel;
	struct py_target *t;
	size_t n, cap;
	unsigned n_traced, n_untraced;
	int hook_failed;            /* the hook cannot work here at all (said once) */
	struct py_target *last;     /* py_handle's last target (USDT events come in runs) */
	unsigned long long t0_ticks; /* the source's start, in /proc's start-time ticks */
	struct lt_im *im;           /* the exec catcher's manager (outlives it) */
	struct ring_buffer *catch_rb;
	pthread_t catch_th;
	int catch_on;
	atomic_int catch_stop;
	struct lt_session *s;       /* for what could not be seen (lt_session_unseen) */
};

/* What an ELF file offers: the python provider's probe names, and what
 * CPython 3.11 needs besides (see py_attach_hold). */
struct py_probes {
	int has_entry, has_return;
	int n_python;               /* python:* probes of any name */
	char names[256];            /* "audit, gc__start, ..." for messages */
	int needs_line;             /* 3.11+ (exports Py_Version): entry fires only
				     * while the line probe is enabled */
	uint64_t line_sema;         /* file offset of the line probe's semaphore */
	uint64_t hold_off;          /* file offset of a once-run function */
};

/* Raw facts gathered while walking the file, in virtual addresses. */
struct py_elf_scan {
	uint64_t line_sema_va, note_base, stapsdt_base;
	uint64_t hold_va;
};

/* ------------------------------------------------------------ ELF notes */

static void py_note_add(struct py_probes *p, struct py_elf_scan *sc, const char *prov,
			const char *name, const uint64_t addr[3])
{
	size_t len = strlen(p->names);

	if (strcmp(prov, "python") != 0)
		return;
	p->n_python++;
	if (!strcmp(name, "function__entry"))
		p->has_entry = 1;
	else if (!strcmp(name, "function__return"))
		p->has_return = 1;
	else if (!strcmp(name, "line")) {
		sc->line_sema_va = addr[2];
		sc->note_base = addr[1];
	}
	if (len + strlen(name) + 3 < sizeof(p->names))
		snprintf(p->names + len, sizeof(p->names) - len, "%s%s", len ? ", " : "", name);
}

/* Walk one SHT_NOTE section's stapsdt entries: 3 addresses (pc, base,
 * semaphore), then provider\0name\0args\0. */
static void py_scan_notes(Elf_Data *d, size_t addr_sz, struct py_probes *p, struct py_elf_scan *sc)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const char *desc = (const char *)d->d_buf + desc_off;
		const char *end = desc + nh.n_descsz, *prov, *name;
		uint64_t addr[3] = { 0, 0, 0 };

		if (nh.n_type != PY_NT_STAPSDT || nh.n_namesz != 8 ||
		    memcmp((const char *)d->d_buf + name_off, "stapsdt", 8) != 0 ||
		    nh.n_descsz < 3 * addr_sz + 2)
			continue;
		for (int i = 0; i < 3; i++) {
			if (addr_sz == 8) {
				memcpy(&addr[i], desc + 8 * i, 8);
			} else {
				uint32_t a;

				memcpy(&a, desc + 4 * i, 4);
				addr[i] = a;
			}
		}
		prov = desc + 3 * addr_sz;
		name = memchr(prov, 0, end - prov);
		if (!name || ++name >= end || !memchr(name, 0, end - name))
			continue;
		py_note_add(p, sc, prov, name, addr);
	}
}

/* Py_Version (exported since 3.11) and Py_FinalizeEx, from a symbol table. */
static void py_scan_syms(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct py_probes *p,
			 struct py_elf_scan *sc)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym sym;
		const char *nm;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		nm = elf_strptr(e, sh->sh_link, sym.st_name);
		if (!nm)
			continue;
		if (!strcmp(nm, "Py_Version"))
			p->needs_line = 1;
		else if (!strcmp(nm, "Py_FinalizeEx") && GELF_ST_TYPE(sym.st_info) == STT_FUNC)
			sc->hold_va = sym.st_value;
	}
}

/* Virtual address -> file offset through the PT_LOAD headers; 0 if none. */
static uint64_t py_va_to_off(Elf *e, uint64_t va)
{
	size_t n = 0;
	GElf_Phdr ph;

	if (!va || elf_getphdrnum(e, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (va >= ph.p_vaddr && va < ph.p_vaddr + ph.p_filesz)
			return va - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

static void py_scan_sections(Elf *e, size_t shstrndx, size_t addr_sz, struct py_probes *p,
			     struct py_elf_scan *sc)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *nm;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB) {
			py_scan_syms(e, scn, &sh, p, sc);
			continue;
		}
		nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (nm && !strcmp(nm, ".stapsdt.base"))
			sc->stapsdt_base = sh.sh_addr;
		if (sh.sh_type != SHT_NOTE || !nm || strcmp(nm, ".note.stapsdt") != 0)
			continue;
		d = elf_getdata(scn, NULL);
		if (d && d->d_buf)
			py_scan_notes(d, addr_sz, p, sc);
	}
}

/* Read the USDT notes of the file open as fd. Returns 0, or -errno if it
 * cannot be read as an ELF file. */
static int py_read_probes(int fd, struct py_probes *p)
{
	struct py_elf_scan sc = { 0 };
	size_t shstrndx;
	Elf *e;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	elf_version(EV_CURRENT);
	/* pread as asked, not a mapping: a file cut meanwhile is no SIGBUS */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx) != 0) {
		rc = -ENOEXEC;
		goto out;
	}
	py_scan_sections(e, shstrndx, gelf_getclass(e) == ELFCLASS32 ? 4 : 8, p, &sc);
	/* A prelinked file moved its probes by (.stapsdt.base - note base). */
	if (sc.line_sema_va && sc.stapsdt_base && sc.note_base)
		sc.line_sema_va += sc.stapsdt_base - sc.note_base;
	p->line_sema = py_va_to_off(e, sc.line_sema_va);
	p->hold_off = py_va_to_off(e, sc.hold_va);
out:
	if (e)
		elf_end(e);
	return rc;
}

/* ------------------------------------------------------------ discovery */

static int py_is_candidate(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return strstr(base, "python") != NULL;
}

/* One candidate interpreter: the file's name in the target, our fd of it
 * and the path the kernel resolves to that fd, and what it offers. */
struct py_interp {
	char path[PATH_MAX];        /* as the target names it */
	char host[64];              /* /proc/self/fd/N: what libbpf attaches to */
	int fd;                     /* -1: none */
	char why[512];              /* why it could not be opened */
	struct py_probes probes;
};

static void py_interp_init(struct py_interp *in)
{
	memset(in, 0, sizeof(*in));
	in->fd = -1;
}

static void py_interp_close(struct py_interp *in)
{
	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
}

/* Candidate c (path set, fd open or not) against the best so far. */
/* py_read_probes, once per file (device and inode): every worker of a job
 * maps the same interpreter, and reading its notes and symbols took tens
 * of milliseconds each time, which a new process's hold waited behind. */
#define PY_PROBE_CACHE 32
static int py_read_probes_cached(int fd, struct py_probes *p)
{
	static struct { dev_t dev; ino_t ino; int rc; struct py_probes p; } cache[PY_PROBE_CACHE];
	static unsigned next;
	struct stat sb;

	if (fstat(fd, &sb))
		return py_read_probes(fd, p);
	for (unsigned i = 0; i < PY_PROBE_CACHE; i++)
		if (cache[i].ino == sb.st_ino && cache[i].dev == sb.st_dev && cache[i].ino) {
			*p = cache[i].p;
			return cache[i].rc;
		}
	int rc = py_read_probes(fd, p);
	unsigned k = next++ % PY_PROBE_CACHE;
	cache[k].dev = sb.st_dev;
	cache[k].ino = sb.st_ino;
	cache[k].rc = rc;
	cache[k].p = *p;
	return rc;
}

static int py_consider(struct py_interp *c, struct py_interp *best)
{
	if (c->fd < 0 || py_read_probes_cached(c->fd, &c->probes) != 0) {
		py_interp_close(c);
		return 0;
	}
	lt_tf_fd_path(c->fd, c->host, sizeof(c->host));
	/* prefer probes with function entry, then any python probes */
	if (best->path[0] && (best->probes.has_entry >= c->probes.has_entry) &&
	    (best->probes.has_entry || best->probes.n_python >= c->probes.n_python)) {
		py_interp_close(c);
		return 0;
	}
	py_interp_close(best);
	*best = *c;
	return c->probes.has_entry;
}

/* `path` inside the target's root. */
static int py_try(int root_fd, const char *path, struct py_interp *best)
{
	struct py_interp c;

	py_interp_init(&c);
	snprintf(c.path, sizeof(c.path), "%s", path);
	c.fd = lt_tf_open(root_fd, path, NULL, c.why, sizeof(c.why));
	return py_consider(&c, best);
}

/* The file of mapping m. */
static int py_try_map(int pid, int root_fd, const struct lt_tf_map *m, struct py_interp *best)
{
	struct py_interp c;

	py_interp_init(&c);
	snprintf(c.path, sizeof(c.path), "%s", m->path);
	c.fd = lt_tf_open_mapped(LT_TF_PROC, pid, root_fd, m, c.why, sizeof(c.why));
	return py_consider(&c, best);
}

/* The executable, through the kernel's own link to it. */
static int py_try_exe(int pid, struct py_interp *best)
{
	char link[64];
	struct py_interp c;
	ssize_t n;

	py_interp_init(&c);
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, c.path, sizeof(c.path) - 1);
	if (n <= 0)
		return 0;
	c.path[n] = 0;
	c.fd = lt_tf_open_link(LT_TF_PROC, pid, "exe", c.why, sizeof(c.why));
	return py_consider(&c, best);
}

/* Look at the executable, then at every mapped file named like python
 * (libpython3.x.so). Fills `best` with the best candidate (path[0] == 0 if
 * the process maps nothing python-like); the caller closes best->fd. */
struct py_scan {
	int pid, root_fd;
	struct py_interp *best;
	char prev[PATH_MAX];  /* the last file tried: its mappings follow each other */
};

static int py_scan_map(const struct lt_tf_map *m, void *ctx)
{
	struct py_scan *c = ctx;

	if (m->path[0] != '/' || m->deleted || !strcmp(m->path, c->prev) || !py_is_candidate(m->path))
		return 0;
	snprintf(c->prev, sizeof(c->prev), "%s", m->path);
	return py_try_map(c->pid, c->root_fd, m, c->best) != 0;
}

static void py_discover(int pid, struct py_interp *best)
{
	struct py_scan c = { .pid = pid, .best = best };

	py_interp_init(best);
	if (py_try_exe(pid, best))
		return;
	c.root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	lt_tf_maps_each(LT_TF_PROC, pid, py_scan_map, &c);
	if (c.root_fd >= 0)
		close(c.root_fd);
}

/* The forced interpreter from the environment, if set: inside the target's
 * root, else on this node (the user named it). */
static int py_forced(int pid, struct py_interp *out)
{
	const char *env = getenv(PY_ENV_PATH);
	char why[512];
	int root_fd;

	if (!env || !*env)
		return 0;
	py_interp_init(out);
	snprintf(out->path, sizeof(out->path), "%s", env);
	root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	out->fd = lt_tf_open(root_fd, env, NULL, out->why, sizeof(out->why));
	if (root_fd >= 0)
		close(root_fd);
	if (out->fd < 0 && (out->fd = lt_tf_open_node(env, why, sizeof(why))) < 0)
		snprintf(out->why + strlen(out->why), sizeof(out->why) - strlen(out->why),
			 "; on this node: %s", why);
	if (out->fd < 0 || py_read_probes(out->fd, &out->probes) != 0) {
		py_interp_close(out);
		out->probes.n_python = -1; /* unreadable */
	} else {
		lt_tf_fd_path(out->fd, out->host, sizeof(out->host));
	}
	return 1;
}

/* ----------------------------------------------------------- attachment */

static struct py_target *py_find(struct py_state *st, int pid)
{
	for (size_t i = 0; i < st->n; i++)
		if (st->t[i].pid == pid)
			return &st->t[i];
	return NULL;
}

static struct py_target *py_slot(struct py_state *st, int pid)
{
	struct py_target *t = py_find(st, pid);

	if (t)
		return t;
	if (st->n == st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 16;
		void *p = realloc(st->t, cap * sizeof(*st->t));

		if (!p)
			return NULL;
		st->t = p;
		st->cap = cap;
	}
	st->last = NULL; /* st->t may move */
	t = &st->t[st->n++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	return t;
}

static void py_detach(struct py_target *t)
{
	lt_close_later(t->entry, -1);
	lt_close_later(t->ret, -1);
	lt_close_later(t->hold, -1);
	t->entry = t->ret = t->hold = NULL;
	t->dev = 0;
	t->ino = 0;
}

/* Say, once per target, why it cannot be traced. */
static void py_explain(struct py_state *st, int pid, const struct py_interp *in, int forced)
{
	st->n_untraced++;
	lt_session_unseen(st->s, "python", pid, "%s",
			  forced && in->probes.n_python < 0 ? "the interpreter named by " PY_ENV_PATH
							      " cannot be read as an ELF file" :
			  !in->path[0] ? "no Python interpreter or libpython mapped" :
			  in->probes.n_python == 0 ? "an interpreter without USDT probes (use -t pysample)" :
			  "an interpreter without function probes (use -t pysample)");
	if (forced && in->probes.n_python < 0)
		LT_WARN("python: pid %d: cannot trace Python functions: %s=%s cannot be read as an ELF file "
			"(%s); set it to the interpreter's path inside the target",
			pid, PY_ENV_PATH, in->path, in->why[0] ? in->why : "not an ELF file");
	else if (!in->path[0])
		LT_WARN("python: pid %d: cannot trace Python functions: no Python interpreter or libpython "
			"is mapped (not a CPython process)", pid);
	else if (in->probes.n_python == 0)
		LT_WARN("python: pid %d: cannot trace Python functions: %s has no USDT probes; it needs a "
			"CPython built --with-dtrace (sysconfig WITH_DTRACE=1); use -t pysample instead",
			pid, in->path);
	else
		LT_WARN("python: pid %d: cannot trace Python functions: %s has USDT probes (%s) but no "
			"function__entry/function__return; use -t pysample instead",
			pid, in->path, in->probes.names);
}

/*
 * CPython 3.11 calls the function__entry probe only from its tracing
 * dispatch, which runs while the `line` probe's semaphore is non-zero. We
 * raise it the way a USDT consumer would, through the kernel's uprobe
 * reference counter, but on a function run once (Py_FinalizeEx) instead of
 * on every line, so no line costs a trap; the kernel lowers it again when
 * the link goes, even if we are killed. The interpreter still pays its
 * per-instruction tracing dispatch while attached.
 */
static void py_attach_hold(struct py_state *st, struct py_target *t, const struct py_interp *in)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .ref_ctr_offset = in->probes.line_sema);

	if (!in->probes.line_sema || !in->probes.hold_off) {
		LT_WARN("python: pid %d: %s has no line probe semaphore or Py_FinalizeEx; "
			"function entries will be missing (returns only)", t->pid, in->path);
		return;
	}
	t->hold = bpf_program__attach_uprobe_opts(st->skel->progs.py_hold, t->pid, in->host,
						  in->probes.hold_off, &uo);
	if (!t->hold)
		LT_WARN("python: pid %d: cannot enable the function__entry probe of %s (%s); "
			"function entries will be missing (returns only)",
			t->pid, in->path, strerror(errno));
}

static int py_attach(struct py_state *st, struct py_target *t, const struct py_interp *in)
{
	struct stat sb;
	int err;

	if (in->fd < 0 || fstat(in->fd, &sb) != 0)
		return -EBADF;
	if (t->entry && t->dev == sb.st_dev && t->ino == sb.st_ino)
		return 1; /* already probing this very file */
	py_detach(t);
	/* Returns first: every entry recorded then has its return recorded too
	 * (a return of a frame entered before is told apart by the converter). */
	t->ret = bpf_program__attach_usdt(st->skel->progs.py_return, t->pid, in->host,
					  "python", "function__return", NULL);
	if (!t->ret)
		return -errno;
	t->entry = bpf_program__attach_usdt(st->skel->progs.py_entry, t->pid, in->host,
					    "python", "function__entry", NULL);
	if (!t->entry) {
		err = -errno;
		py_detach(t);
		return err;
	}
	t->dev = sb.st_dev;
	t->ino = sb.st_ino;
	if (in->probes.needs_line)
		py_attach_hold(st, t, in);
	return 0;
}


/* `name` as execvp would find it. */
static int py_which(const char *name, char *out, size_t sz)
{
	const char *path = getenv("PATH");

	if (strchr(name, '/'))
		return snprintf(out, sz, "%s", name), access(out, X_OK) == 0;
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(out, sz, "%.*s/%s", (int)n, p, name);
		if (n && access(out, X_OK) == 0)
			return 1;
		p += n + (p[n] == ':');
	}
	return 0;
}

/* The interpreter a launched command will run: the file itself, or the one
 * its "#!" line names (through /usr/bin/env too). */
static void py_launch_interp(const char *argv0, char *out, size_t sz)
{
	char line[PATH_MAX], *tok, *save = NULL;
	ssize_t n;
	int fd;

	out[0] = 0;
	/* The user's command, on this node: a regular file, one bounded read. */
	if (!py_which(argv0, out, sz) || (fd = lt_tf_open_node(out, line, sizeof(line))) < 0)
		return;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	line[n > 0 ? n : 0] = 0;
	line[strcspn(line, "\n")] = 0;
	if (strncmp(line, "#!", 2) != 0)
		return;
	tok = strtok_r(line + 2, " \t\r\n", &save);
	if (tok && !strcmp(strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok, "env"))
		tok = strtok_r(NULL, " \t\r\n", &save);
	if (!tok || !py_which(tok, out, sz))
		out[0] = 0;
}

/* Find the interpreter of `pid` (returns 1 if EBPF_USDT_PYTHON_PATH forced it). */
static int py_resolve(struct lt_session *s, int pid, struct py_interp *in)
{
	char exe[PATH_MAX];

	if (py_forced(pid, in))
		return 1;
	/* A launched command is made a target before it execs: probe the file
	 * it is about to run, so its first Python call is seen. */
	if (s->opt.launch_argv && s->opt.launch_argv[0] && lt_launch_is_own_fork(pid)) {
		int root_fd = lt_tf_root_open(LT_TF_PROC, pid); /* our fork: our root */

		py_interp_init(in);
		py_launch_interp(s->opt.launch_argv[0], exe, sizeof(exe));
		if (exe[0])
			py_try(root_fd, exe, in);
		if (root_fd >= 0)
			close(root_fd);
		if (in->probes.has_entry || (in->path[0] && py_is_candidate(in->path)))
			return 0; /* the hook is held for its exec; the probes are armed */
		py_interp_close(in); /* not Python (yet): wait for the exec */
		py_interp_init(in);
		return 0;
	}
	py_discover(pid, in);
	return 0;
}

/* --python-method, with LLMT_PYTHON_HOOK=0 as an older way to say usdt. */
static int py_method(const struct lt_session *s)
{
	const char *env = getenv("LLMT_PYTHON_HOOK");

	if (s->opt.python_method == LT_PYM_AUTO && env && !strcmp(env, "0"))
		return LT_PYM_USDT;
	return s->opt.python_method;
}

static int py_given(const struct lt_session *s, int pid)
{
	for (int i = 0; i < s->opt.n_pids; i++)
		if (s->opt.pids[i] == pid)
			return 1;
	return 0;
}

/* Would the hook be refused (traced by a debugger or strace, stopped)?
 * A process a thread of ours holds (the hook going in) is not. */
static int py_hook_refused(int pid, char *why, size_t whysz)
{
	char path[64], buf[2048], task[64];
	const char *p;
	ssize_t n;
	int fd;

	if (!lt_inj_gate(pid, 0, why, whysz))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strstr(buf, "\nTracerPid:");
	snprintf(task, sizeof(task), "/proc/self/task/%d", p ? atoi(p + 11) : 0);
	return !p || atoi(p + 11) <= 0 || access(task, F_OK) != 0;
}

/* Just exec'd a Python by its name (anything else: the main loop looks,
 * no process is held for it), and not one the hook would be refused
 * (traced, stopped: the probes there). */
static int py_exec_holdable(int pid)
{
	char link[64], exe[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	return py_is_candidate(exe) && !py_hook_refused(pid, NULL, 0);
}

/* Inject the profile hook: 0 when it runs, 1 when it goes in later (from
 * a collector thread: a process still starting, or not given by -p), or
 * -errno with the reason in msg. */
static int py_try_hook(struct lt_session *s, struct py_state *st, struct py_target *t, int later,
		       int fresh, char *msg, size_t msgsz)
{
	const char *why;

	if (st->hook_failed)
		return snprintf(msg, msgsz, "the hook cannot be used here (said above)"), -ENOTSUP;
	if (!lt_im_usable(s->inject, LT_IM_PYTHON, &why)) {
		st->hook_failed = 1;
		snprintf(msg, msgsz, "%s", why);
		LT_WARN("python: the function hook cannot be used: %s", msg);
		return -ENOTSUP;
	}
	if (later) {
		int rc = lt_im_attach_later(s->inject, t->pid, LT_IM_PYTHON,
					    fresh ? LT_IM_FRESH : t->forked_new ? LT_IM_FORKED : 0);
		if (rc)
			return snprintf(msg, msgsz, "%s", rc == -E2BIG ? "too many processes waiting" :
					rc == -ECANCELED ? "the profile ended before the hook could go in" :
					strerror(-rc)), rc;
		t->hooked = 1;
		return 1;
	}
	/* Just exec'd: the library waits (bounded) for the interpreter to be
	 * initialized, so that "tracing" means the hook is on. */
	int rc = lt_im_attach(s->inject, t->pid, LT_IM_PYTHON, PY_HOOK_INIT_WAIT_MS, msg, msgsz);
	if (rc)
		return rc;
	t->hooked = 1;
	st->n_traced++;
	const char *busy = strstr(msg, " busy=");
	if (busy && atoi(busy + 6) > 0)
		LT_WARN("python: pid %d: %d thread(s) already run a profiler of their own (cProfile, "
			"sys.setprofile): left alone, their calls are not recorded until it stops",
			t->pid, atoi(busy + 6));
	return 0;
}

static void py_use_usdt(struct lt_session *s, struct py_state *st, struct py_target *t,
			const struct py_interp *in, const char *why)
{
	int err = py_attach(st, t, in), pid = t->pid;

	if (err > 0)
		return;
	if (err == -EACCES || err == -EPERM) {
		/* perf-event uprobes (libbpf 1.1's USDT attach) need CAP_SYS_ADMIN
		 * on this kernel, where CAP_PERFMON is enough for the rest. */
		st->n_untraced++;
		lt_session_unseen(s, "python", pid, "USDT probes need CAP_SYS_ADMIN");
		if (s->opt.types_all) {
			LT_WARN("python: pid %d: cannot attach to the USDT probes of %s: %s (needs "
				"CAP_SYS_ADMIN); -t all records the rest", pid, in->path, strerror(-err));
			lt_session_not_recorded(s, "python", "USDT probes need CAP_SYS_ADMIN");
		} else {
			lt_session_refuse(s, "python: pid %d: cannot attach to the USDT probes of %s: %s: "
					  "the kernel creates them with perf_event_open, which needs CAP_SYS_ADMIN",
					  pid, in->path, strerror(-err));
		}
		return;
	}
	if (err) {
		st->n_untraced++;
		t->explained = 1;
		if (err == -ESRCH)
			lt_session_unseen(s, "python", t->pid, "it exited before its USDT probes were attached");
		else
			lt_session_unseen(s, "python", t->pid, "cannot attach to its USDT probes: %s",
					  strerror(-err));
		LT_WARN("python: pid %d: cannot attach to the USDT probes of %s: %s%s%s",
			t->pid, in->path, strerror(-err), why ? "; and the profile hook could not go in: " : "",
			why ? why : "");
		return;
	}
	st->n_traced++;
	if (why)
		LT_WARN("python: pid %d: tracing functions through the USDT probes of %s (~7 us a call): "
			"the profile hook could not go in: %s", t->pid, in->path, why);
	else
		LT_INFO(1, "python: pid %d: tracing functions through the USDT probes of %s", t->pid, in->path);
}

/*
 * The cheapest exact method (--python-method auto; costs in
 * docs/MEASUREMENTS.md, the Python hook): the injected hook, at once for a running process
 * given by -p, exactly from the start for a process that execs an
 * interpreter (the launched command, a spawned worker: held from its exec
 * to Py_RunMain), inherited by forks (which record into logs of their own
 * from their first call), and later for the rest. A hook refused (an
 * unsupported version, no thread could be stopped safely, ...) falls back
 * to the probes where the interpreter has them, in one line saying why.
 */
static void py_add_resolved(struct lt_session *s, struct py_state *st, struct py_target *t,
			    const struct py_interp *in, int forced, int starting)
{
	int pid = t->pid, usdt = in->probes.has_entry && in->probes.has_return, method = py_method(s);
	int now, rc;
	char msg[1024];

	starting |= t->waiting; /* it ran no Python before: it has just exec'd one */
	now = !starting && py_given(s, pid) && lt_im_ready(pid);

	/* Not a Python process (yet): a launcher or shell may exec one. */
	if (!usdt && !forced && (!in->path[0] || (!in->probes.n_python && !py_is_candidate(in->path)))) {
		t->waiting = 1;
		LT_INFO(1, "python: pid %d runs no Python interpreter yet; waiting for an exec", pid);
		return;
	}
	t->waiting = 0;
	if (t->hooked || t->explained || t->entry)
		return; /* already traced (or said why not); an exec clears t->entry */
	if (forced && in->probes.n_python < 0 && method != LT_PYM_USDT)
		LT_WARN("python: pid %d: %s=%s cannot be read as an ELF file (%s); the interpreter is "
			"found in the process instead", pid, PY_ENV_PATH, in->path,
			in->why[0] ? in->why : "not an ELF file");
	/* auto: the hook, exact everywhere now (held at Py_RunMain from an
	 * exec on, inherited by forks); the probes where it cannot go in. */
	if (method == LT_PYM_USDT) {
		if (usdt)
			py_use_usdt(s, st, t, in, NULL);
		else
			t->explained = 1, py_explain(st, pid, in, forced);
		return;
	}
	/* A process the hook would be refused (traced by a debugger or
	 * strace, stopped) takes the probes at once: a refusal heard later,
	 * from the hook's thread, could not fall back. */
	if (method == LT_PYM_AUTO && usdt && !t->launched && py_hook_refused(pid, msg, sizeof(msg))) {
		py_use_usdt(s, st, t, in, msg);
		return;
	}
	rc = py_try_hook(s, st, t, !now, starting, msg, sizeof(msg));
	if (rc == 1) {
		LT_INFO(1, "python: pid %d: the profile hook goes in once the process can take it", pid);
		return;
	}
	if (rc == 0) {
		LT_INFO(1, "python: pid %d: tracing functions through the injected profile hook: %s, in %s",
			pid, msg, lt_im_dir(s->inject));
		return;
	}
	if (method == LT_PYM_AUTO && usdt) {
		py_use_usdt(s, st, t, in, msg);
		return;
	}
	st->n_untraced++;
	t->explained = 1;
	lt_session_unseen(s, "python", pid, "the profile hook could not go in: %s", msg);
	LT_WARN("python: pid %d: cannot trace Python functions: the profile hook could not go in: %s%s",
		pid, msg, usdt || method != LT_PYM_AUTO ? "" : " (and the interpreter has no USDT probes)");
}

/* Now, in /proc/PID/stat's start-time unit (clock ticks since boot). */
static unsigned long long py_now_ticks(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (unsigned long long)ts.tv_sec * (unsigned long long)sysconf(_SC_CLK_TCK) +
	       (unsigned long long)ts.tv_nsec * (unsigned long long)sysconf(_SC_CLK_TCK) / 1000000000ull;
}

/* A process forked since we started: 1, or 2 when it has exec'd already:
 * BPF saw its exec (it was a target from its fork on), and that record is
 * where the hook goes in, held from the exec (a spawned worker). Flags and
 * start time from /proc/PID/stat: PF_FORKNOEXEC, started after us. */
#define PY_PF_FORKNOEXEC 0x40
static int py_new_child(const struct py_state *st, int pid)
{
	char buf[1024];
	unsigned long flags = 0;
	unsigned long long start = 0;
	const char *p = lt_tf_proc_stat(pid, buf, sizeof(buf));

	/* after the comm: state ppid pgrp session tty_nr tpgid flags ... (19 more) starttime */
	if (!p || sscanf(p, " %*c %*d %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &flags, &start) != 2)
		return 0;
	return start < st->t0_ticks ? 0 : flags & PY_PF_FORKNOEXEC ? 1 : 2;
}

static int py_add_target_at(struct lt_session *s, void *state, int pid, int starting)
{
	struct py_state *st = state;
	struct py_target *t = py_find(st, pid);
	struct py_interp in;
	int forced;

	int new_child = !t && !starting && !py_given(s, pid) && !lt_launch_is_own_fork(pid) ? py_new_child(st, pid) : 0;
	if (new_child == 2) {
		if ((t = py_slot(st, pid)))
			t->await_exec = 1; /* py_on_exec takes it from there */
		return t ? 0 : -ENOMEM;
	}
	if (t && t->await_exec && !starting)
		return 0;
	if (!t && !(t = py_slot(st, pid)))
		return -ENOMEM;
	t->await_exec = 0;
	t->forked_new |= new_child == 1;
	if (new_child == 1 && py_method(s) != LT_PYM_USDT && lt_im_follows_forks(s->inject, pid)) {
		t->hooked = 1; /* its parent's hook, inherited: it records by itself */
		return 0;
	}
	if (lt_launch_is_own_fork(pid)) /* a launched command before its exec */
		starting = t->launched = 1;
	forced = py_resolve(s, pid, &in);
	py_add_resolved(s, st, t, &in, forced, starting);
	py_interp_close(&in);
	return 0;
}

static int py_add_target(struct lt_session *s, void *state, int pid)
{
	return py_add_target_at(s, state, pid, 0);
}

/* A target exec'd: probe the new image unless it is the file we already
 * probe (a launched command we attached to before its exec). */
static void py_on_exec(struct lt_session *s, struct py_state *st, int pid)
{
	struct py_target *t = py_find(st, pid);
	struct py_interp in;
	struct stat sb;

	if (t && t->entry) {
		int same;

		if (!py_forced(pid, &in))
			py_discover(pid, &in);
		same = in.fd >= 0 && !fstat(in.fd, &sb) && sb.st_dev == t->dev && sb.st_ino == t->ino;
		py_interp_close(&in);
		if (same)
			return;
		py_detach(t);
		st->n_traced--;
	}
	/* Just exec'd: a new image, held from its exec for the hook, at once
	 * (what follows reads its files, for milliseconds the new interpreter
	 * would spend starting unheld). */
	if (t)
		t->hooked = t->explained = 0;
	if (py_method(s) != LT_PYM_USDT && !st->hook_failed && lt_im_usable(s->inject, LT_IM_PYTHON, NULL) &&
	    py_exec_holdable(pid))
		lt_im_attach_later(s->inject, pid, LT_IM_PYTHON, LT_IM_FRESH);
	py_add_target_at(s, st, pid, 1);
}

/* The launched command is let go next: the hook's thread holds it for its
 * exec first (inject_exec.h), so the hold at Py_RunMain cannot come late. */
#define PY_ARM_WAIT_MS 2000
static int py_prepare_exec(struct lt_session *s, void *state, int pid, const char *path)
{
	struct py_target *t = py_find(state, pid);

	(void)path;
	if (t && t->hooked)
		lt_im_before_exec(s->inject, pid, PY_ARM_WAIT_MS);
	return 0;
}

/* ------------------------------------------------------------- records */

static struct evlog_str py_str(const char *s, size_t max)
{
	struct evlog_str r = { .ptr = s, .len = (uint32_t)strnlen(s, max) };
	return r;
}

/* One USDT event of `pid`, counted for the summary's line. */
static void py_usdt_count(struct py_state *st, int pid)
{
	if (!st->last || st->last->pid != pid)
		st->last = py_find(st, pid);
	if (st->last)
		st->last->usdt_events++;
}

static int py_handle(struct lt_session *s, void *state, const struct lt_rec_hdr *rec, size_t size)
{
	struct evlog_event ev = { .ts = rec->ts, .pid = rec->pid, .tid = rec->tid };

	if (rec->kind == LT_REC_PY_ENTER || rec->kind == LT_REC_PY_EXIT)
		py_usdt_count(state, rec->pid);
	if (rec->kind == LT_REC_PY_ENTER && size >= sizeof(struct lt_rec_py_enter)) {
		const struct lt_rec_py_enter *r = (const void *)rec;

		ev.type = EV_PY_ENTER;
		ev.u.py_enter.func = py_str(r->func, sizeof(r->func));
		ev.u.py_enter.file = py_str(r->file, sizeof(r->file));
		ev.u.py_enter.line = r->line;
		return lt_session_emit(s, &ev);
	}
	if (rec->kind == LT_REC_PY_EXIT && size >= sizeof(struct lt_rec_py_exit)) {
		const struct lt_rec_py_exit *r = (const void *)rec;

		ev.type = EV_PY_EXIT;
		ev.u.py_exit.func = py_str(r->func, sizeof(r->func));
		return lt_session_emit(s, &ev);
	}
	if (rec->kind == LT_REC_PY_EXEC) {
		py_on_exec(s, state, rec->pid);
		return 0;
	}
	return 0; /* short or unknown record: not ours to fail on */
}

/* ------------------------------------------------------------ lifetime */

/* ------------------------------------------------------------ exec catcher
 *
 * A target that execs an interpreter is held from its exec to Py_RunMain
 * for the hook (inject_mgr.h LT_IM_FRESH). The main loop hears the exec
 * too, but may be busy (records, a file's symbols) for longer than an
 * interpreter takes to start (under load it came 120 ms late, after the
 * program had started): this thread hears the py_execs ring only, at a
 * raised priority, and asks at once. The main loop's request for the same
 * exec joins it (the manager merges them). */
#define PY_CATCH_NICE (-10)

static int py_catch_one(void *ctx, void *data, size_t len)
{
	struct py_state *st = ctx;
	uint32_t pid;

	if (len < sizeof(pid))
		return 0;
	memcpy(&pid, data, sizeof(pid));
	if (py_exec_holdable((int)pid))
		lt_im_attach_later(st->im, (int)pid, LT_IM_PYTHON, LT_IM_FRESH);
	return 0;
}

static void *py_catcher(void *arg)
{
	struct py_state *st = arg;

	setpriority(PRIO_PROCESS, (id_t)gettid(), PY_CATCH_NICE); /* a privilege: else as it is */
	while (!atomic_load(&st->catch_stop))
		ring_buffer__poll(st->catch_rb, 100);
	return NULL;
}

static void py_catch_start(struct lt_session *s, struct py_state *st)
{
	if (py_method(s) == LT_PYM_USDT || !lt_im_usable(s->inject, LT_IM_PYTHON, NULL))
		return;
	st->im = s->inject;
	st->catch_rb = ring_buffer__new(bpf_map__fd(st->skel->maps.py_execs), py_catch_one, st, NULL);
	if (st->catch_rb && !pthread_create(&st->catch_th, NULL, py_catcher, st))
		st->catch_on = 1;
}

static void py_catch_stop(struct py_state *st)
{
	atomic_store(&st->catch_stop, 1);
	if (st->catch_on)
		pthread_join(st->catch_th, NULL);
	st->catch_on = 0;
	ring_buffer__free(st->catch_rb);
	st->catch_rb = NULL;
}

static int py_start(struct lt_session *s, void **state)
{
	struct py_state *st = calloc(1, sizeof(*st));
	int err;

	*state = st;
	if (!st)
		return lt_session_errorf(s, "python: out of memory"), -ENOMEM;
	st->s = s;
	st->t0_ticks = py_now_ticks();
	st->skel = python_bpf__open();
	if (!st->skel)
		return err = -errno, lt_session_errorf(s, "python: cannot open the BPF object: %s",
						       strerror(-err)), err;
	err = lt_session_share_maps(s, st->skel->obj);
	if (!err)
		err = python_bpf__load(st->skel);
	if (err)
		return lt_session_errorf(s, "python: cannot load the BPF programs: %s", strerror(-err)), err;
	/* USDT programs attach per target; only the exec watch is global. */
	st->skel->links.py_exec = bpf_program__attach(st->skel->progs.py_exec);
	if (!st->skel->links.py_exec) {
		err = -errno;
		return lt_session_errorf(s, "python: cannot watch exec: %s", strerror(-err)), err;
	}
	py_catch_start(s, st);
	return 0;
}

/* The processes whose calls were recorded (hook logs with events, USDT
 * probes that fired), under the summary's python row and, with those
 * missed and why, in a line. */
static void py_recorded_line(struct lt_session *s, const struct py_state *st, const struct lt_im_totals *tot)
{
	char pids[128] = "", missed[1024];
	size_t len = 0;
	unsigned n = 0;

	for (int i = 0; i < tot->py_procs; i++, n++) {
		if (i >= (int)(sizeof(tot->py_pids) / sizeof(tot->py_pids[0])))
			continue;
		lt_session_seen(s, "python", tot->py_pids[i]);
		if (len < sizeof(pids))
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%d", len ? ", " : "", tot->py_pids[i]);
	}
	for (size_t i = 0; i < st->n; i++) {
		if (!st->t[i].usdt_events)
			continue;
		lt_session_seen(s, "python", st->t[i].pid);
		if (n++ < 8 && len < sizeof(pids))
			len += (size_t)snprintf(pids + len, sizeof(pids) - len, "%s%d", len ? ", " : "", st->t[i].pid);
	}
	unsigned m = lt_session_unseen_text(s, "python", missed, sizeof(missed));
	if (n)
		lt_session_note(s, "python", "calls recorded in %u process%s (pid %s%s)", n, n == 1 ? "" : "es",
				pids, n > 8 ? ", ..." : "");
	if (n || m)
		LT_INFO(1, "python: calls recorded in %u process(es)%s%s%s; %u missed%s%s", n, n ? " (pid " : "",
			pids, n ? (n > 8 ? ", ...)" : ")") : "", m, m ? ": " : "", missed);
}

static int py_finish(struct lt_session *s, void *state)
{
	struct py_state *st = state;
	char pids[128] = "";
	unsigned n = 0;

	if (!st)
		return 0;
	struct lt_im_totals tot;

	lt_im_totals(s->inject, &tot); /* lt_im_stop ran: the hooks are out */
	st->n_traced += tot.py_later;
	lt_session_add_events(s, "python", tot.py_events);
	lt_session_add_lost(s, "python", tot.py_unpublished);
	for (size_t i = 0; i < st->n; i++) {
		size_t len = strlen(pids);

		if (!st->t[i].waiting)
			continue;
		st->t[i].waiting = 0;
		if (st->t[i].explained) /* said already: it did run one, and exited */
			continue;
		if (n++ < 8)
			snprintf(pids + len, sizeof(pids) - len, "%s%d", len ? ", " : "", st->t[i].pid);
	}
	/* A process without Python (a shell, a shim, a tool a job runs) was not
	 * missed: it is named only when no process ran Python at all. */
	if (n && !st->n_traced)
		lt_session_not_recorded(s, "python", "no process ran a Python interpreter");
	if (n)
		LT_INFO(1, "python: %u process(es) ran no Python interpreter, nothing to trace there (pid %s%s)",
			n, pids, n > 8 ? ", ..." : "");
	py_recorded_line(s, st, &tot);
	return 0;
}

/* Destroying the links lowers the interpreter's probe semaphore again, so
 * the target goes back to CPython's untraced fast path. */
static void py_quiesce(struct lt_session *s, void *state)
{
	struct py_state *st = state;

	(void)s;
	if (!st)
		return;
	py_catch_stop(st);
	for (size_t i = 0; i < st->n; i++)
		py_detach(&st->t[i]);
	lt_close_drain(); /* lowered before we say we are done, not at our exit */
}

static void py_stop(struct lt_session *s, void *state)
{
	struct py_state *st = state;

	if (!st)
		return;
	py_quiesce(s, st);
	free(st->t);
	python_bpf__destroy(st->skel);
	free(st);
}

const struct lt_source lt_source_python = {
	.kind_lo = 64,
	.kind_hi = 79,
	.start = py_start,
	.add_target = py_add_target,
	.prepare_exec = py_prepare_exec,
	.handle = py_handle,
	.quiesce = py_quiesce,
	.finish = py_finish,
	.stop = py_stop,
};
