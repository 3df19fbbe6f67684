/* SPDX-License-Identifier: Apache-2.0 */
/*
 * elfsym: the function symbols, dynamic section (soname, DT_NEEDED, run
 * paths) and loadable segments of one ELF file, read with libelf. Used to
 * place uprobes (symbol -> file offset), to name code addresses of a target
 * (file offset -> symbol) and to walk library dependencies.
 */
#ifndef LLMT_ELFSYM_H
#define LLMT_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lt_elfsym {
	const char *name;
	uint64_t vaddr;      /* st_value */
	uint64_t size;
	bool exported;       /* from .dynsym (the library's API), else .symtab */
};

struct lt_elf_load {
	uint64_t vaddr, offset, filesz;
};

struct lt_elf {
	char *path;
	char *soname;                /* DT_SONAME or NULL */
	char **needed;               /* DT_NEEDED */
	size_t n_needed;
	char *rpath, *runpath;       /* DT_RPATH / DT_RUNPATH or NULL */
	struct lt_elfsym *syms;      /* defined functions, sorted by vaddr */
	size_t n_syms;
	struct lt_elf_load *loads;   /* PT_LOAD segments */
	size_t n_loads;
	char *strings;               /* storage for the names */
};

/* Read what is listed above from the ELF file open as fd (not closed;
 * `name` is kept as e->path and used in messages). Returns 0, or -errno with
 * a message in err. A target's file is opened with tfile.h first. */
int lt_elf_open_fd(int fd, const char *name, struct lt_elf **out, char *err, size_t errsz);
/* The same for a file of the node (a regular file, opened non-blocking). */
int lt_elf_open(const char *path, struct lt_elf **out, char *err, size_t errsz);
void lt_elf_free(struct lt_elf *e);

/* Segment arithmetic. Return 0, or -ENOENT when outside every PT_LOAD. */
int lt_elf_vaddr_to_offset(const struct lt_elf *e, uint64_t vaddr, uint64_t *off);
int lt_elf_offset_to_vaddr(const struct lt_elf *e, uint64_t off, uint64_t *vaddr);

/* The function symbol containing vaddr (or the nearest below it when sizes
 * are 0), or NULL. */
const struct lt_elfsym *lt_elf_lookup(const struct lt_elf *e, uint64_t vaddr);

/* Demangle a C++ name into buf; copies the name unchanged when it is not
 * mangled or no demangler is available. Returns buf. */
const char *lt_elf_demangle(const char *name, char *buf, size_t n);

/* The C++ demangler (__cxa_demangle): linked in (static build) or loaded
 * from libstdc++ (dynamic build only: a static program must never dlopen, it
 * would bring in a second libc and heap). NULL when there is none. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
demangle_fn lt_find_demangler(void);

#endif
