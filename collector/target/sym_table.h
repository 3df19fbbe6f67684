/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sym_table: one object's function symbols, sorted once by address so a
 * lookup is a binary search. Built from an ELF file (.symtab + .dynsym, plus
 * the separate debug file found by build-id when the object is stripped) or
 * from /proc/kallsyms.
 */
#ifndef LLMT_SYM_TABLE_H
#define LLMT_SYM_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct sym_table;

/* Load the function symbols of the ELF file open at fd (not closed).
 * A stripped file's come from its separate debug file: by build-id,
 * debug_roots (NULL-terminated, e.g. "/usr/lib/debug"; may be NULL) holding
 * .build-id/xx/yyyy.debug, else by .gnu_debuglink beside `path` (the file's
 * path as the process sees it; may be NULL), in its .debug/ or under a
 * debug root. All are paths inside root_fd, the root of the process that
 * maps the file (tfile.h); root_fd < 0: no debug file is looked for.
 * Returns NULL with a message in err when fd is not a readable ELF file. */
struct sym_table *sym_table_load_elf(int fd, int root_fd, const char *path,
				     const char *const *debug_roots, char *err, size_t errsz);

/* Load kernel symbols from a kallsyms-format file. NULL (and err) when the
 * file is unreadable or its addresses are hidden (kptr_restrict). */
struct sym_table *sym_table_load_kallsyms(const char *path, char *err, size_t errsz);

/* Load a JIT symbol map ("/tmp/perf-PID.map": lines "START SIZE name", hex)
 * open at fd (not closed). Addresses are absolute. NULL (and err) when it
 * holds no entry. At most SYM_PERFMAP_MAX_BYTES / _LINES are read. */
#define SYM_PERFMAP_MAX_BYTES (512u << 20)
#define SYM_PERFMAP_MAX_LINES (8u << 20)
struct sym_table *sym_table_load_perfmap(int fd, char *err, size_t errsz);

void sym_table_free(struct sym_table *t);

/* ELF virtual address of a file offset (through the PT_LOAD headers); the
 * offset itself when no segment holds it. */
uint64_t sym_table_vaddr(const struct sym_table *t, uint64_t file_off);

/* The symbol holding `addr` (a virtual address of the object, or a kernel
 * address): its name, or NULL when none does. *off = addr - symbol start;
 * *module (kallsyms only, else NULL) = "[kernel.kallsyms]" or "[mod]". */
const char *sym_table_lookup(const struct sym_table *t, uint64_t addr,
			     uint64_t *off, const char **module);

/* Hex GNU build-id of the ELF file open at fd into buf (41 bytes); 0, or
 * -1 when it has none. Cheap: reads the notes only. */
int sym_elf_build_id(int fd, char buf[41]);

/* Whether the object is stripped, no debug file was found for it and it
 * has a build-id to look one up by (debuginfod.h). */
int sym_table_wants_debug_file(const struct sym_table *t);
/* Add the symbols of a debug file open at fd (not closed; a regular file,
 * e.g. from the node's debuginfod cache) when its build-id is the
 * object's. 0, -ENOENT when it is not the object's, or -ENOMEM. */
int sym_table_add_debug_fd(struct sym_table *t, int fd);

size_t sym_table_count(const struct sym_table *t);
/* Hex GNU build-id, "" when the object has none. */
const char *sym_table_build_id(const struct sym_table *t);
/* Whether the symbols came (partly) from a separate debug file. */
int sym_table_has_debug_file(const struct sym_table *t);

#endif
