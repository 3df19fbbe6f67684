/* SPDX-License-Identifier: Apache-2.0 */
/*
 * symbolize: turn sampled addresses into (name, module, offset).
 *
 * A process's mappings are captured when it is first seen (and again when
 * an address falls outside them or it exec'd), and each mapped object is
 * opened right then through /proc/PID/map_files or /proc/PID/root, so the
 * objects of processes that exited, live in another mount namespace
 * (containers), or were deleted still resolve at the end. Every sampled
 * (pid, address) is noted as it arrives; lt_sym_foreach() resolves them all
 * at the end. Symbol tables are loaded once per object (device + inode) and
 * shared by every process that maps it. Kernel addresses use pid 0 and
 * /proc/kallsyms. A stripped object's names come from its separate debug
 * file inside the process's root (sym_table.h), else, when the collector's
 * environment sets DEBUGINFOD_URLS, from debuginfod (debuginfod.h), asked
 * by lt_sym_foreach and later calls only: never while a profile runs.
 *
 * Results that cannot be named keep module + offset:
 *   file-backed, no symbol: name "", module = path, offset = ELF address
 *                           (what `addr2line -e module` takes)
 *   anonymous / memfd (JIT): name from the process's perf map
 *                           (/tmp/perf-PID.map in its own root and pid
 *                           namespace) when it has one, else name "";
 *                           module "[anon]" (or "[heap]", "[stack]",
 *                           "[vdso]"...), offset from mapping start
 *   no mapping known:        name "", module "[unknown]", offset = address
 */
#ifndef LLMT_SYMBOLIZE_H
#define LLMT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "debuginfod.h"

struct lt_sym;

struct lt_sym_info {
	const char *name;    /* demangled where possible; "" if unknown */
	const char *module;  /* path as the process sees it, or "[anon]"... */
	uint64_t offset;     /* from symbol start, or in module if name is "" */
};

/* debug_roots: NULL-terminated list of directories with .build-id/ trees;
 * NULL means { "/usr/lib/debug", NULL }. kallsyms: NULL = "/proc/kallsyms".
 * Both are copied. */
struct lt_sym_opts {
	const char *const *debug_roots;
	const char *kallsyms;
	const char *proc_root;   /* NULL = "/proc" */
};

int lt_sym_new(struct lt_sym **out, const struct lt_sym_opts *opts);
void lt_sym_free(struct lt_sym *s);

/* Capture pid's mappings now (re-reads them if already known). 0, or
 * -errno (-ESRCH when the process is gone). */
int lt_sym_add_pid(struct lt_sym *s, int pid);

/* Record that (pid, addr) was sampled; pid 0 = kernel address. exec_id
 * changes when the process execs (its mappings are re-read then). is_ret:
 * addr is a return address (a caller frame), looked up as addr - 1 so a call
 * at the very end of a function names that function. Cheap: maps the
 * address to an object now, symbolizes later. Returns 1 if (pid, addr) is
 * new, 0 if already noted, or -errno. */
int lt_sym_note(struct lt_sym *s, int pid, uint32_t exec_id, uint64_t addr, int is_ret);
#define LT_SYM_ANY_EXEC UINT32_MAX  /* exec_id not known */

/* Resolve one address now (notes it too). Strings stay valid until the
 * next call on s. */
int lt_sym_resolve(struct lt_sym *s, int pid, uint64_t addr, struct lt_sym_info *out);

/* Resolve every noted address, calling cb for each; stops at a non-zero
 * return of cb and returns it. */
typedef int (*lt_sym_cb)(void *arg, int pid, uint64_t addr, const struct lt_sym_info *info);
int lt_sym_foreach(struct lt_sym *s, lt_sym_cb cb, void *arg);

/* The executable mappings of pid as last read, in address order, for the
 * unwinder (unwind.h). fd: the mapped file, opened as tfile.h says, owned by
 * s (-1 for anonymous mappings and files that could not be opened); name:
 * its path, or "[anon]", "[vdso]"...; root_fd: the process's root (its
 * debug files), or -1. */
struct lt_sym_mapping {
	uint64_t start, end, pgoff;
	uint64_t dev, ino;
	int fd, root_fd;
	const char *name;
};
typedef int (*lt_sym_map_cb)(void *arg, const struct lt_sym_mapping *m);

/* Calls cb for each mapping (stops at a non-zero return and returns it).
 * *generation (may be NULL) names this reading of the maps: it changes
 * whenever they are read again. -ESRCH for a pid never added or noted. */
int lt_sym_mappings(struct lt_sym *s, int pid, uint64_t *generation, lt_sym_map_cb cb,
		    void *arg);

/* The debuginfod client s uses (debuginfod.h), NULL when DEBUGINFOD_URLS
 * is unset: the unwinder asks it for CFI. */
struct lt_dbgd *lt_sym_debuginfod(struct lt_sym *s);

/* Only the generation of pid's maps (0 for a pid never seen). */
uint64_t lt_sym_generation(struct lt_sym *s, int pid);

struct lt_sym_stats {
	uint64_t addrs;          /* distinct (pid, address) noted */
	uint64_t procs, objects; /* processes, distinct objects opened */
	uint64_t resolved;       /* addresses given a name by the last foreach */
	uint64_t symbols;        /* symbols loaded over all tables */
	const char *kernel_error; /* why kernel frames stay unnamed, or NULL */
	int debuginfod;          /* DEBUGINFOD_URLS was set: dbgd holds its work */
	struct lt_dbgd_stats dbgd;
};
void lt_sym_stats(const struct lt_sym *s, struct lt_sym_stats *st);

#endif
