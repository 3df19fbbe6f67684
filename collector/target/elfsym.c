// SPDX-License-Identifier: Apache-2.0
/*
 * elfsym: read an ELF file's function symbols, dynamic section and PT_LOAD
 * segments with libelf (see elfsym.h).
 */
#include "elfsym.h"
#include "tfile.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

/* The C++ runtime's demangler, when the program carries it (the static
 * build links it in); a dynamic build loads libstdc++ on first use. */
extern char *__cxa_demangle(const char *name, char *buf, size_t *n, int *status)
	__attribute__((weak));
/* NULL in a static executable, where dlopen would bring in a second libc
 * with its own heap. */
extern const char _DYNAMIC[] __attribute__((weak));

demangle_fn lt_find_demangler(void)
{
	static demangle_fn fn;
	static int tried;
	void *h;

	if (__cxa_demangle)
		return __cxa_demangle;
	if (tried || !_DYNAMIC)
		return fn;
	tried = 1;
	h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (h)
		*(void **)&fn = dlsym(h, "__cxa_demangle");
	return fn;
}

struct lt_strbuf {
	char *p;
	size_t len, cap;
};

/* Append a NUL-terminated copy; returns its offset or (size_t)-1. */
static size_t strbuf_add(struct lt_strbuf *b, const char *s)
{
	size_t n = strlen(s) + 1, off = b->len;

	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return (size_t)-1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	return off;
}

static int errf(char *err, size_t errsz, int rc, const char *fmt, const char *a, const char *b)
{
	if (err && errsz)
		snprintf(err, errsz, fmt, a, b);
	return rc;
}

static int read_loads(Elf *elf, struct lt_elf *e)
{
	size_t n, i;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return -EINVAL;
	e->loads = calloc(n ? n : 1, sizeof(*e->loads));
	if (!e->loads)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		e->loads[e->n_loads].vaddr = ph.p_vaddr;
		e->loads[e->n_loads].offset = ph.p_offset;
		e->loads[e->n_loads].filesz = ph.p_filesz;
		e->n_loads++;
	}
	return 0;
}

/* Symbol names are first collected as offsets into the string buffer (it
 * moves while growing) and turned into pointers at the end. */
static int read_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, bool exported,
		       struct lt_elf *e, size_t *cap, struct lt_strbuf *sb)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;

	if (!data || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;
		size_t off;
		int type;

		if (!gelf_getsym(data, i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		if (e->n_syms == *cap) {
			size_t nc = *cap ? *cap * 2 : 256;
			struct lt_elfsym *p = realloc(e->syms, nc * sizeof(*p));

			if (!p)
				return -ENOMEM;
			e->syms = p;
			*cap = nc;
		}
		off = strbuf_add(sb, name);
		if (off == (size_t)-1)
			return -ENOMEM;
		e->syms[e->n_syms++] = (struct lt_elfsym){
			.name = (const char *)(uintptr_t)off,
			.vaddr = sym.st_value, .size = sym.st_size, .exported = exported,
		};
	}
	return 0;
}

static char *dup_str(struct lt_strbuf *sb, const char *s, int *rc)
{
	size_t off = strbuf_add(sb, s);

	if (off == (size_t)-1) {
		*rc = -ENOMEM;
		return NULL;
	}
	return (char *)(uintptr_t)(off + 1); /* +1: NULL stays NULL */
}

static int read_dynamic(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct lt_elf *e,
			struct lt_strbuf *sb)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n, k = 0;
	int rc = 0;

	if (!data || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	e->needed = calloc(n ? n : 1, sizeof(*e->needed));
	if (!e->needed)
		return -ENOMEM;
	for (i = 0; i < n && !rc; i++) {
		GElf_Dyn dyn;
		const char *s;

		if (!gelf_getdyn(data, i, &dyn))
			continue;
		if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_SONAME &&
		    dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH)
			continue;
		s = elf_strptr(elf, sh->sh_link, dyn.d_un.d_val);
		if (!s)
			continue;
		if (dyn.d_tag == DT_NEEDED)
			e->needed[k++] = dup_str(sb, s, &rc);
		else if (dyn.d_tag == DT_SONAME)
			e->soname = dup_str(sb, s, &rc);
		else if (dyn.d_tag == DT_RPATH)
			e->rpath = dup_str(sb, s, &rc);
		else
			e->runpath = dup_str(sb, s, &rc);
	}
	e->n_needed = k;
	return rc;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct lt_elfsym *x = a, *y = b;

	if (x->vaddr != y->vaddr)
		return x->vaddr < y->vaddr ? -1 : 1;
	return (int)y->exported - (int)x->exported;
}

static char *fix_str(struct lt_elf *e, char *p)
{
	return p ? e->strings + ((uintptr_t)p - 1) : NULL;
}

static void fix_pointers(struct lt_elf *e)
{
	size_t i;

	for (i = 0; i < e->n_syms; i++)
		e->syms[i].name = e->strings + (uintptr_t)e->syms[i].name;
	for (i = 0; i < e->n_needed; i++)
		e->needed[i] = fix_str(e, e->needed[i]);
	e->soname = fix_str(e, e->soname);
	e->rpath = fix_str(e, e->rpath);
	e->runpath = fix_str(e, e->runpath);
}

static int read_sections(Elf *elf, struct lt_elf *e, struct lt_strbuf *sb)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0;
	int rc = 0;

	while (!rc && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB)
			rc = read_symtab(elf, scn, &sh, sh.sh_type == SHT_DYNSYM, e, &cap, sb);
		else if (sh.sh_type == SHT_DYNAMIC)
			rc = read_dynamic(elf, scn, &sh, e, sb);
	}
	return rc;
}

int lt_elf_open(const char *path, struct lt_elf **out, char *err, size_t errsz)
{
	int fd = lt_tf_open_node(path, err, errsz), rc;

	*out = NULL;
	if (fd < 0)
		return fd;
	rc = lt_elf_open_fd(fd, path, out, err, errsz);
	close(fd);
	return rc;
}

/* ELF_C_READ, not a mapping: sections are read with pread when asked for,
 * so a file its owner truncates meanwhile is an error, not a SIGBUS. */
int lt_elf_open_fd(int fd, const char *name, struct lt_elf **out, char *err, size_t errsz)
{
	struct lt_strbuf sb = { 0 };
	struct lt_elf *e;
	Elf *elf = NULL;
	int rc;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return errf(err, errsz, -EINVAL, "%s: libelf: %s", name, elf_errmsg(-1));
	e = calloc(1, sizeof(*e));
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || !elf || elf_kind(elf) != ELF_K_ELF) {
		rc = errf(err, errsz, e ? -ENOEXEC : -ENOMEM, "%s: %s", name,
			  e ? "not an ELF file" : "out of memory");
		goto fail;
	}
	e->path = strdup(name);
	rc = e->path ? read_loads(elf, e) : -ENOMEM;
	if (!rc)
		rc = read_sections(elf, e, &sb);
	if (rc) {
		errf(err, errsz, rc, "%s: cannot read ELF tables: %s", name, strerror(-rc));
		goto fail;
	}
	e->strings = sb.p;
	sb.p = NULL;
	fix_pointers(e);
	if (e->n_syms) /* none: syms is NULL, which qsort must not get */
		qsort(e->syms, e->n_syms, sizeof(*e->syms), sym_cmp);
	elf_end(elf);
	*out = e;
	return 0;
fail:
	free(sb.p);
	if (elf)
		elf_end(elf);
	lt_elf_free(e);
	return rc;
}

void lt_elf_free(struct lt_elf *e)
{
	if (!e)
		return;
	free(e->path);
	free(e->needed);
	free(e->syms);
	free(e->loads);
	free(e->strings);
	free(e);
}

int lt_elf_vaddr_to_offset(const struct lt_elf *e, uint64_t vaddr, uint64_t *off)
{
	size_t i;

	for (i = 0; i < e->n_loads; i++) {
		const struct lt_elf_load *l = &e->loads[i];

		if (vaddr >= l->vaddr && vaddr < l->vaddr + l->filesz) {
			*off = vaddr - l->vaddr + l->offset;
			return 0;
		}
	}
	return -ENOENT;
}

int lt_elf_offset_to_vaddr(const struct lt_elf *e, uint64_t off, uint64_t *vaddr)
{
	size_t i;

	for (i = 0; i < e->n_loads; i++) {
		const struct lt_elf_load *l = &e->loads[i];

		if (off >= l->offset && off < l->offset + l->filesz) {
			*vaddr = off - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

const struct lt_elfsym *lt_elf_lookup(const struct lt_elf *e, uint64_t vaddr)
{
	size_t lo = 0, hi = e->n_syms;
	const struct lt_elfsym *s;

	while (lo < hi) { /* first symbol above vaddr */
		size_t mid = lo + (hi - lo) / 2;

		if (e->syms[mid].vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &e->syms[lo - 1];
	while (s > e->syms && s[-1].vaddr == s->vaddr)
		s--; /* the exported alias sorts first */
	if (s->size && vaddr >= s->vaddr + s->size)
		return NULL;
	return s;
}

const char *lt_elf_demangle(const char *name, char *buf, size_t n)
{
	demangle_fn fn = name[0] == '_' && name[1] == 'Z' ? lt_find_demangler() : NULL;
	char *d = NULL;
	int status = -1;

	if (!n)
		return buf;
	if (fn)
		d = fn(name, NULL, NULL, &status);
	snprintf(buf, n, "%s", d && status == 0 ? d : name);
	free(d);
	return buf;
}
