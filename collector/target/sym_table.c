// SPDX-License-Identifier: Apache-2.0
/*
 * sym_table: sorted function-symbol tables from ELF files and kallsyms.
 * Names live in one string pool per table; symbols are 24-byte records so a
 * big library (libtorch: ~10^6 symbols) stays compact and is sorted once.
 */
#include "sym_table.h"
#include "tfile.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* A debug file is checked against its link's CRC up to this size. */
#define DEBUG_FILE_MAX (4ll << 30)

struct sym {
	uint64_t addr;
	uint64_t size;
	uint32_t name;   /* offset in pool */
	uint16_t mod;    /* kallsyms: index in mods */
	uint8_t bind;    /* rank: 0 global, 1 weak, 2 local (lower wins on ties) */
	uint8_t pad;
};

struct seg {
	uint64_t off, vaddr, filesz;
};

struct sym_table {
	struct sym *syms;
	size_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
	struct seg *segs;
	size_t n_segs;
	char **mods;     /* kallsyms module names, "[kernel.kallsyms]" first */
	size_t n_mods;
	char build_id[41];
	int stripped;    /* the object has no .symtab */
	int debug_file;
};

static int pool_add(struct sym_table *t, const char *s, uint32_t *off)
{
	size_t len = strlen(s) + 1;

	if (t->pool_len + len > t->pool_cap) {
		size_t cap = t->pool_cap ? t->pool_cap * 2 : 1 << 16;
		char *p;

		while (cap < t->pool_len + len)
			cap *= 2;
		if (cap > UINT32_MAX)
			return -E2BIG;
		p = realloc(t->pool, cap);
		if (!p)
			return -ENOMEM;
		t->pool = p;
		t->pool_cap = cap;
	}
	memcpy(t->pool + t->pool_len, s, len);
	*off = (uint32_t)t->pool_len;
	t->pool_len += len;
	return 0;
}

static int sym_push(struct sym_table *t, uint64_t addr, uint64_t size,
		    const char *name, uint8_t bind, uint16_t mod)
{
	struct sym *s;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct sym *p = realloc(t->syms, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->syms = p;
		t->cap = cap;
	}
	s = &t->syms[t->n];
	memset(s, 0, sizeof(*s));
	s->addr = addr;
	s->size = size;
	s->bind = bind;
	s->mod = mod;
	if (pool_add(t, name, &s->name))
		return -ENOMEM;
	t->n++;
	return 0;
}

/* Sort by address; among aliases at one address the best name comes first:
 * exported before local, then the public spelling (`getpid` before
 * `__getpid`), then global before weak, then sized before unsized. */
static int sym_cmp_pool(const struct sym_table *t, const struct sym *x, const struct sym *y)
{
	int lx = x->bind == 2, ly = y->bind == 2;
	size_t ux, uy;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (lx != ly)
		return lx - ly;
	ux = strspn(t->pool + x->name, "_");
	uy = strspn(t->pool + y->name, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	if (x->bind != y->bind)
		return x->bind - y->bind;
	if ((x->size == 0) != (y->size == 0))
		return x->size == 0 ? 1 : -1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static int sym_cmp(const void *a, const void *b, void *t)
{
	return sym_cmp_pool(t, a, b);
}

static void sym_finalize(struct sym_table *t)
{
	size_t i, j = 0;

	if (t->n)
		qsort_r(t->syms, t->n, sizeof(*t->syms), sym_cmp, t);
	for (i = 0; i < t->n; i++) /* keep the first (best) of each address */
		if (j == 0 || t->syms[j - 1].addr != t->syms[i].addr)
			t->syms[j++] = t->syms[i];
	t->n = j;
}

void sym_table_free(struct sym_table *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->n_mods; i++)
		free(t->mods[i]);
	free(t->mods);
	free(t->syms);
	free(t->pool);
	free(t->segs);
	free(t);
}

/* ------------------------------------------------------------------ ELF */

static int elf_read_segs(struct sym_table *t, Elf *e)
{
	size_t n, i;

	if (elf_getphdrnum(e, &n))
		return 0; /* relocatable or odd: offsets are used as is */
	t->segs = calloc(n ? n : 1, sizeof(*t->segs));
	if (!t->segs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		t->segs[t->n_segs++] = (struct seg){ ph.p_offset, ph.p_vaddr, ph.p_filesz };
	}
	return 0;
}

static void elf_read_build_id(char *out, Elf *e)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff, next;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		while ((next = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)d->d_buf + noff, "GNU", 4)) {
				const unsigned char *id = (unsigned char *)d->d_buf + doff;
				size_t k, len = nh.n_descsz > 20 ? 20 : nh.n_descsz;

				for (k = 0; k < len; k++)
					snprintf(out + 2 * k, 3, "%02x", id[k]);
				return;
			}
			off = next;
		}
	}
}

static int elf_sym_rank(int bind)
{
	return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

/* Add the function symbols of every SHT_SYMTAB/SHT_DYNSYM section.
 * Returns the number of SHT_SYMTAB sections seen (0: stripped). */
static int elf_read_syms(struct sym_table *t, Elf *e, int *n_symtab)
{
	Elf_Scn *scn = NULL;

	*n_symtab = 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			(*n_symtab)++;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (i = 0; i < n; i++) {
			GElf_Sym s;
			const char *name;
			int type;

			if (!gelf_getsym(d, (int)i, &s))
				break;
			type = GELF_ST_TYPE(s.st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
			    s.st_shndx == SHN_UNDEF || s.st_value == 0)
				continue;
			name = elf_strptr(e, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			if (sym_push(t, s.st_value, s.st_size, name,
				     (uint8_t)elf_sym_rank(GELF_ST_BIND(s.st_info)), 0))
				return -ENOMEM;
		}
	}
	return 0;
}

/* Is the debug file open at fd the one for our object? Same build-id when
 * the object has one, else the CRC its .gnu_debuglink names. */
static int debug_file_matches(int fd, Elf *e, const char *build_id, uint32_t crc)
{
	char id[41] = "";
	unsigned char buf[65536];
	uLong c = crc32(0, NULL, 0);
	off_t off = 0;
	ssize_t n;

	if (build_id[0]) {
		elf_read_build_id(id, e);
		return !strcmp(id, build_id);
	}
	while (off < DEBUG_FILE_MAX && (n = pread(fd, buf, sizeof(buf), off)) > 0) {
		c = crc32(c, buf, (uInt)n);
		off += n;
	}
	return n == 0 && (uint32_t)c == crc;
}

/* Read the symbols of the debug file open at fd when it is ours; -ENOENT
 * when it is not. */
static int read_debug_fd(struct sym_table *t, int fd, uint32_t crc)
{
	int r = -ENOENT, n_symtab;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);

	if (e && elf_kind(e) == ELF_K_ELF && debug_file_matches(fd, e, t->build_id, crc)) {
		r = elf_read_syms(t, e, &n_symtab);
		if (!r)
			t->debug_file = 1;
	}
	if (e)
		elf_end(e);
	return r;
}

/* Read the symbols of the debug file at path inside root_fd when it is ours. */
static int try_debug_file(struct sym_table *t, int root_fd, const char *path, uint32_t crc)
{
	char err[512];
	int r, fd = lt_tf_open(root_fd, path, NULL, err, sizeof(err));

	if (fd < 0)
		return -ENOENT;
	r = read_debug_fd(t, fd, crc);
	close(fd);
	return r;
}

/* The separate debug file of a stripped object, inside the target's root
 * (tfile.h): its debug files, not the node's. By build-id,
 * <root>/.build-id/xx/yyyy.debug; else by .gnu_debuglink, where gdb looks:
 * beside the object, in its .debug/, and under each root + its directory. */
static int elf_read_debug_file(struct sym_table *t, Elf *e, int root_fd, const char *obj_path,
			       const char *const *roots)
{
	const char *const *rt;
	const char *link, *slash;
	char path[4096];
	GElf_Word crc = 0;
	int r, i, dir_len;

	if (root_fd < 0)
		return 0;
	for (rt = roots; rt && *rt && t->build_id[0]; rt++) {
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", *rt,
			 t->build_id, t->build_id + 2);
		if ((r = try_debug_file(t, root_fd, path, 0)) != -ENOENT)
			return r;
	}
	link = dwelf_elf_gnu_debuglink(e, &crc);
	if (!link || !*link || strchr(link, '/') || !obj_path || obj_path[0] != '/' ||
	    !(slash = strrchr(obj_path, '/')))
		return 0;
	dir_len = (int)(slash - obj_path);
	for (i = 0; i < 2 || (roots && roots[i - 2]); i++) {
		int k = i == 0 ? snprintf(path, sizeof(path), "%.*s/%s", dir_len, obj_path, link) :
			i == 1 ? snprintf(path, sizeof(path), "%.*s/.debug/%s", dir_len, obj_path, link) :
			snprintf(path, sizeof(path), "%s%.*s/%s", roots[i - 2], dir_len, obj_path, link);

		if (k < 0 || (size_t)k >= sizeof(path))
			continue;
		if ((r = try_debug_file(t, root_fd, path, crc)) != -ENOENT)
			return r;
	}
	return 0;
}

struct sym_table *sym_table_load_elf(int fd, int root_fd, const char *path,
				     const char *const *debug_roots, char *err, size_t errsz)
{
	struct sym_table *t;
	int n_symtab = 0, r;
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, errsz, "libelf: %s", elf_errmsg(-1));
		return NULL;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		snprintf(err, errsz, "not an ELF file (%s)", elf_errmsg(-1));
		if (e)
			elf_end(e);
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		elf_end(e);
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	elf_read_build_id(t->build_id, e);
	r = elf_read_segs(t, e);
	if (!r)
		r = elf_read_syms(t, e, &n_symtab);
	t->stripped = n_symtab == 0;
	if (!r && t->stripped)
		r = elf_read_debug_file(t, e, root_fd, path, debug_roots);
	elf_end(e);
	if (r) {
		snprintf(err, errsz, "reading symbols: %s", strerror(-r));
		sym_table_free(t);
		return NULL;
	}
	sym_finalize(t);
	return t;
}

int sym_table_wants_debug_file(const struct sym_table *t)
{
	return t->stripped && !t->debug_file && t->build_id[0];
}

int sym_table_add_debug_fd(struct sym_table *t, int fd)
{
	struct stat sb;
	int r;

	if (!t->build_id[0])
		return -ENOENT; /* only a build-id ties a node's file to the object */
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
		return -ENOENT;
	r = read_debug_fd(t, fd, 0);
	sym_finalize(t); /* sorted again, whatever was added */
	return r;
}

int sym_elf_build_id(int fd, char buf[41])
{
	Elf *e;

	buf[0] = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_kind(e) == ELF_K_ELF)
		elf_read_build_id(buf, e);
	if (e)
		elf_end(e);
	return buf[0] ? 0 : -1;
}

/* ------------------------------------------------------------- kallsyms */

static int kallsyms_mod(struct sym_table *t, const char *name, uint16_t *idx)
{
	size_t i;
	char **m;

	for (i = t->n_mods; i-- > 0;) /* modules come in runs: search from the end */
		if (!strcmp(t->mods[i], name)) {
			*idx = (uint16_t)i;
			return 0;
		}
	if (t->n_mods >= UINT16_MAX)
		return -E2BIG;
	m = realloc(t->mods, (t->n_mods + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	t->mods = m;
	m[t->n_mods] = strdup(name);
	if (!m[t->n_mods])
		return -ENOMEM;
	*idx = (uint16_t)t->n_mods++;
	return 0;
}

static int kallsyms_line(struct sym_table *t, char *line, int *nonzero)
{
	char type, name[512], mod[256];
	unsigned long long addr;
	uint16_t idx = 0;
	int n;

	mod[0] = 0;
	n = sscanf(line, "%llx %c %511s %255s", &addr, &type, name, mod);
	if (n < 3)
		return 0;
	if (addr)
		*nonzero = 1;
	if (type != 't' && type != 'T' && type != 'w' && type != 'W')
		return 0;
	if (n == 4 && mod[0] == '[') {
		if (kallsyms_mod(t, mod, &idx))
			return -ENOMEM;
	}
	return sym_push(t, addr, 0, name, type == 'T' ? 0 : type == 'W' ? 1 : 2, idx);
}

struct sym_table *sym_table_load_kallsyms(const char *path, char *err, size_t errsz)
{
	struct sym_table *t;
	char line[1024];
	int nonzero = 0, r = 0;
	uint16_t k;
	FILE *f;

	f = fopen(path, "re");
	if (!f) {
		snprintf(err, errsz, "%s: %s", path, strerror(errno));
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t || kallsyms_mod(t, "[kernel.kallsyms]", &k)) {
		fclose(f);
		sym_table_free(t);
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	while (!r && fgets(line, sizeof(line), f))
		r = kallsyms_line(t, line, &nonzero);
	fclose(f);
	if (r || !nonzero) {
		snprintf(err, errsz, r ? "%s: out of memory" :
			 "%s: addresses are hidden (kernel.kptr_restrict); kernel frames stay unsymbolized",
			 path);
		sym_table_free(t);
		return NULL;
	}
	sym_finalize(t);
	return t;
}

/* --------------------------------------------------------------- perf map */

struct sym_table *sym_table_load_perfmap(int fd, char *err, size_t errsz)
{
	struct sym_table *t = calloc(1, sizeof(*t));
	struct lt_tf_lines *rd = malloc(sizeof(*rd));
	char *line;
	int r = 0;

	if (!t || !rd) {
		free(t);
		free(rd);
		snprintf(err, errsz, "perf map: out of memory");
		return NULL;
	}
	lt_tf_lines_init(rd, fd, SYM_PERFMAP_MAX_BYTES, SYM_PERFMAP_MAX_LINES);
	while (!r && (line = lt_tf_lines_next(rd))) {
		unsigned long long start, size;
		int n = 0;

		if (sscanf(line, "%llx %llx %n", &start, &size, &n) == 2 && n && line[n])
			r = sym_push(t, start, size, line + n, 0, 0);
	}
	free(rd);
	if (r || !t->n) {
		snprintf(err, errsz, r ? "perf map: out of memory" : "perf map: no entries");
		sym_table_free(t);
		return NULL;
	}
	sym_finalize(t);
	return t;
}

/* --------------------------------------------------------------- lookup */

uint64_t sym_table_vaddr(const struct sym_table *t, uint64_t off)
{
	size_t i;

	for (i = 0; i < t->n_segs; i++) {
		const struct seg *s = &t->segs[i];

		if (off >= s->off && off < s->off + s->filesz)
			return off - s->off + s->vaddr;
	}
	return off;
}

const char *sym_table_lookup(const struct sym_table *t, uint64_t addr,
			     uint64_t *off, const char **module)
{
	size_t lo = 0, hi = t->n;
	const struct sym *s;

	if (module)
		*module = NULL;
	while (lo < hi) { /* first symbol above addr */
		size_t mid = lo + (hi - lo) / 2;

		if (t->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	s = &t->syms[lo - 1];
	/* A sized symbol ends where it says; an unsized one (kallsyms, asm)
	 * runs to the next symbol. */
	if (s->size && addr >= s->addr + s->size)
		return NULL;
	*off = addr - s->addr;
	if (module && t->mods)
		*module = t->mods[s->mod];
	return t->pool + s->name;
}

size_t sym_table_count(const struct sym_table *t)
{
	return t->n;
}

const char *sym_table_build_id(const struct sym_table *t)
{
	return t->build_id;
}

int sym_table_has_debug_file(const struct sym_table *t)
{
	return t->debug_file;
}
