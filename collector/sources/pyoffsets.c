// SPDX-License-Identifier: Apache-2.0
/*
 * pyoffsets: which CPython a process runs, where its _PyRuntime is, and
 * the layout of the structures the stack walk reads (see pyoffsets.h).
 *
 * The offsets are those of CPython's own headers for x86-64 release
 * builds: Include/internal/pycore_runtime.h, pycore_interp.h,
 * pycore_frame.h, Include/cpython/pystate.h, code.h, unicodeobject.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyoffsets.h"
#include "collector/target/tfile.h"

struct pyoff_table {
	int minor;
	struct lt_pys_proc bpf;
	struct lt_pyoff_obj obj;
};

static const struct pyoff_table pyoff_tables[] = {
	{ 11,
	  { .rt_interp_head = 40, .is_next = 0, .is_threads_head = 16,
	    .ts_next = 8, .ts_native_tid = 160, .ts_cframe = 56, .cf_current_frame = 8,
	    .fr_code = 32, .fr_previous = 48, .fr_owner = 69, .owner_cstack = 0xffff,
	    .fr_is_entry = 68, .co_qualname = 128 },
	  { .ob_type = 8, .co_firstlineno = 72, .co_filename = 112, .co_name = 120,
	    .co_qualname = 128, .str_length = 16, .str_state = 32,
	    .str_ascii_data = 48, .str_compact_data = 72 } },
	/* 3.12: frames start with f_code; C-stack shim frames (owner 3) sit
	 * between calls that re-enter the interpreter from C; no wstr. */
	{ 12,
	  { .rt_interp_head = 40, .is_next = 0, .is_threads_head = 72,
	    .ts_next = 8, .ts_native_tid = 144, .ts_cframe = 56, .cf_current_frame = 0,
	    .fr_code = 0, .fr_previous = 8, .fr_owner = 70, .owner_cstack = 3,
	    .fr_is_entry = 0xffff, .co_qualname = 128 },
	  { .ob_type = 8, .co_firstlineno = 68, .co_filename = 112, .co_name = 120,
	    .co_qualname = 128, .str_length = 16, .str_state = 32,
	    .str_ascii_data = 40, .str_compact_data = 56 } },
};

int lt_pyoff_layout(int major, int minor, struct lt_pys_proc *bpf, struct lt_pyoff_obj *obj)
{
	if (major != 3)
		return -ENOTSUP;
	for (size_t i = 0; i < sizeof(pyoff_tables) / sizeof(pyoff_tables[0]); i++) {
		if (pyoff_tables[i].minor != minor)
			continue;
		*bpf = pyoff_tables[i].bpf;
		*obj = pyoff_tables[i].obj;
		return 0;
	}
	return -ENOTSUP;
}

/* ------------------------------------------------------------------ ELF */

struct pyoff_elf {
	uint64_t runtime, version_sym, code_type;   /* ELF addresses, 0 if absent */
	uint64_t version;                           /* Py_Version's value */
	GElf_Phdr loads[16];
	size_t n_loads;
};

static void scan_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct pyoff_elf *pe)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (size_t i = 0; d && i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
		    GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || (name[0] != '_' && name[0] != 'P'))
			continue;
		if (!strcmp(name, "_PyRuntime"))
			pe->runtime = sym.st_value;
		else if (!strcmp(name, "Py_Version"))
			pe->version_sym = sym.st_value;
		else if (!strcmp(name, "PyCode_Type"))
			pe->code_type = sym.st_value;
	}
}

static int vaddr_to_off(const struct pyoff_elf *pe, uint64_t va, size_t len, uint64_t *off)
{
	for (size_t i = 0; i < pe->n_loads; i++) {
		const GElf_Phdr *p = &pe->loads[i];

		if (va >= p->p_vaddr && va + len <= p->p_vaddr + p->p_filesz) {
			*off = va - p->p_vaddr + p->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

static int scan_elf(int fd, struct pyoff_elf *pe)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t nph = 0;
	uint64_t off;

	memset(pe, 0, sizeof(*pe));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ, NULL); /* pread, not a mapping: no SIGBUS */
	if (!elf)
		return -EINVAL;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nph)) {
		elf_end(elf);
		return -EINVAL;
	}
	for (size_t i = 0; i < nph && pe->n_loads < 16; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			pe->loads[pe->n_loads++] = ph;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM))
			scan_symtab(elf, scn, &sh, pe);
	}
	elf_end(elf);
	/* Py_Version is a constant in the file: read it there, so a process
	 * whose interpreter has not initialized yet is understood too. */
	if (pe->version_sym && !vaddr_to_off(pe, pe->version_sym, 8, &off) &&
	    pread(fd, &pe->version, 8, (off_t)off) != 8)
		pe->version = 0;
	return 0;
}

/* ------------------------------------------------------------- mappings */

static int base_is_python(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return !strncmp(b, "libpython3", 10) || !strncmp(b, "python3", 7) || !strcmp(b, "python");
}

/* The lowest mapping of every python-like file, in map order. */
struct py_maps {
	struct lt_tf_map *out;
	size_t n, max;
};

/* A python-named file not seen before; full ends the scan. */
static int python_map(const struct lt_tf_map *m, void *ctx)
{
	struct py_maps *c = ctx;
	size_t i;

	if (m->path[0] != '/' || m->deleted || !base_is_python(m->path))
		return 0;
	for (i = 0; i < c->n && strcmp(c->out[i].path, m->path); i++)
		;
	if (i == c->n)
		c->out[c->n++] = *m;
	return c->n == c->max;
}

static size_t python_maps(int pid, struct lt_tf_map *out, size_t max)
{
	struct py_maps c = { out, 0, max };

	if (max)
		lt_tf_maps_each(LT_TF_PROC, pid, python_map, &c);
	return c.n;
}

/* FNV-1a over each mapping's range and file: a new mapping changes it. */
static int map_key_add(const struct lt_tf_map *m, void *ctx)
{
	uint64_t *key = ctx, v[3] = { m->start, m->end, (uint64_t)m->id.ino };
	for (int i = 0; i < 3; i++)
		*key = (*key ^ v[i]) * 1099511628211ull;
	return 0;
}

uint64_t lt_pyoff_maps_key(int pid)
{
	char fn[64];
	uint64_t key = 1469598103934665603ull;
	struct stat sb;

	snprintf(fn, sizeof(fn), "/proc/%d/exe", pid);
	if (!stat(fn, &sb))
		key = (key ^ sb.st_ino ^ ((uint64_t)sb.st_dev << 32)) * 1099511628211ull;
	return lt_tf_maps_each(LT_TF_PROC, pid, map_key_add, &key) ? 0 : key;
}

static void version_from_name(const char *path, struct lt_pyinterp *out)
{
	const char *b = strrchr(path, '/');
	const char *v;

	b = b ? b + 1 : path;
	v = strstr(b, "python");
	if (v && sscanf(v + 6, "%d.%d", &out->major, &out->minor) != 2)
		out->major = out->minor = 0;
}

/* Fill out from one mapped candidate. 1: it is a CPython; 0: it is not. */
static int try_map(int pid, int root_fd, const struct lt_tf_map *m, struct lt_pyinterp *out)
{
	struct pyoff_elf pe;
	struct stat sb;
	uint64_t va = 0;
	char err[512];
	int fd = lt_tf_open_mapped(LT_TF_PROC, pid, root_fd, m, err, sizeof(err));

	if (fd < 0)
		return 0;
	if (scan_elf(fd, &pe) || !pe.runtime || fstat(fd, &sb)) {
		close(fd);
		return 0;
	}
	close(fd);
	memset(out, 0, sizeof(*out));
	snprintf(out->path, sizeof(out->path), "%s", m->path);
	out->dev = sb.st_dev;
	out->ino = sb.st_ino;
	for (size_t i = 0; i < pe.n_loads; i++) {
		const GElf_Phdr *p = &pe.loads[i];

		if (m->pgoff >= (p->p_offset & ~0xfffull) && m->pgoff < p->p_offset + p->p_filesz) {
			va = p->p_vaddr - (p->p_offset - m->pgoff);
			break;
		}
	}
	out->bias = m->start - va;
	out->runtime = pe.runtime + out->bias;
	out->code_type = pe.code_type ? pe.code_type + out->bias : 0;
	if (pe.version) { /* PY_VERSION_HEX: 0xMMmmppLS */
		out->major = (int)(pe.version >> 24) & 0xff;
		out->minor = (int)(pe.version >> 16) & 0xff;
		out->micro = (int)(pe.version >> 8) & 0xff;
	} else {
		version_from_name(m->path, out);
	}
	return 1;
}

int lt_pyoff_detect(int pid, struct lt_pyinterp *out, char *why, size_t whysz)
{
	enum { PYOFF_MAX_MAPS = 8 };
	struct lt_tf_map *maps = calloc(PYOFF_MAX_MAPS, sizeof(*maps));
	int root_fd, rc = -ENOENT;
	size_t n = 0;
	char fn[64];

	snprintf(fn, sizeof(fn), "/proc/%d", pid);
	if (access(fn, F_OK)) {
		free(maps);
		return snprintf(why, whysz, "the process is gone"), -ESRCH;
	}
	root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	n = maps ? python_maps(pid, maps, PYOFF_MAX_MAPS) : 0;
	for (size_t i = 0; i < n && rc == -ENOENT; i++) {
		if (!try_map(pid, root_fd, &maps[i], out))
			continue;
		if (lt_pyoff_layout(out->major, out->minor, &out->bpf, &out->obj)) {
			snprintf(why, whysz, "%s is CPython %d.%d; sampled stacks support 3.11 and 3.12",
				 out->path, out->major, out->minor);
			rc = -ENOTSUP;
			break;
		}
		out->bpf.runtime = out->runtime;
		snprintf(why, whysz, "%s, CPython %d.%d.%d, _PyRuntime at 0x%llx", out->path,
			 out->major, out->minor, out->micro, (unsigned long long)out->runtime);
		rc = 0;
	}
	if (rc == -ENOENT)
		snprintf(why, whysz, n ? "no mapped python file defines _PyRuntime (stripped?)"
				       : "no CPython interpreter is mapped");
	if (root_fd >= 0)
		close(root_fd);
	free(maps);
	return rc;
}
