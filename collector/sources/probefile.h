/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probefile: the JSON file naming the libraries and symbols to probe with
 * uprobes and the kernel functions to probe with kprobes. The format is
 * documented in schemas/probe-file.md. Errors name the file, the line and
 * column and what was expected there.
 */
#ifndef LLMT_PROBEFILE_H
#define LLMT_PROBEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LT_PROBE_MAX_ARGS 8        /* arguments kept per call in the log */
#define LT_PROBE_ARG_SLOTS 12      /* 6 register + 6 stack arguments */
/* Functions probed per profile (distinct file + offset), unless
 * --max-probes says otherwise: a library whose selection would pass it is
 * refused. Attaching is one uprobe_multi link per library, but every probe
 * still costs the kernel a breakpoint per process and every call a trap;
 * the default probe file selects a few hundred. */
#define LT_MAX_PROBES 1000
#define LT_MAX_PROBES_FORCED 65536 /* the most --max-probes accepts */

struct lt_psym {
	char *name;                /* exact name or glob (fnmatch) */
	bool glob;
	int lib_class;             /* enum evlog_lib_class, -1 = the library's */
	int nargs;                 /* -1 = default; else how many of argidx */
	uint8_t argidx[LT_PROBE_MAX_ARGS]; /* argument slots to record (0..11) */
};

struct lt_plib {
	char *spec;                /* path inside the target, or a soname/glob */
	bool is_path;              /* spec contains '/' */
	int lib_class;             /* enum evlog_lib_class */
	struct lt_psym *syms;
	size_t n_syms;
	char **exclude;            /* symbol names/globs never probed */
	size_t n_exclude;
};

struct lt_probefile {
	char *path;
	struct lt_plib *libs;
	size_t n_libs;
	char **kprobes;            /* kernel function names */
	size_t n_kprobes;
};

/* Parse a probe file from disk or from memory (`name` is used in errors).
 * Return 0, or -errno / -EINVAL with "FILE:LINE:COL: what, expected" in err. */
int lt_probefile_load(const char *path, struct lt_probefile **out, char *err, size_t errsz);
int lt_probefile_parse(const char *text, size_t len, const char *name,
		       struct lt_probefile **out, char *err, size_t errsz);
void lt_probefile_free(struct lt_probefile *pf);

/* The class a library spec implies by its name (libcudart -> runtime ...). */
int lt_probefile_guess_class(const char *lib);
const char *lt_probefile_class_name(int lib_class);

/* Does the library `lib` name the file mapped at `path` (soname = its
 * DT_SONAME or NULL)? Paths compare whole; sonames compare with the file's
 * base name (libcudart.so matches libcudart.so.13.0.48) and its DT_SONAME. */
bool lt_plib_matches(const struct lt_plib *lib, const char *path, const char *soname);

/* The entry of `lib` selecting symbol `name`, or NULL. Globs select only
 * exported symbols; exclusions win. */
const struct lt_psym *lt_plib_select(const struct lt_plib *lib, const char *name, bool exported);

/* Where the collector looks for the default probe file:
 * <directory of our executable>/../share/llmtracker/probes.json. */
int lt_probefile_default_path(char *buf, size_t n);

/* `llmtracker generateProbe -p PID [-o FILE] [--force]` (generate_probe.c). */
int lt_generate_probe_main(int argc, char **argv);

/* Offset in the text of a JSON path ("uprobes", 2, "symbols", 1): used to
 * point errors at the right place. Components: string keys, or array
 * indexes encoded as "#N". Returns the offset, or -1. */
long lt_json_locate(const char *text, size_t len, const char *const *path, int n);

/* Turn a byte offset into 1-based line and column. */
void lt_text_linecol(const char *text, size_t len, size_t off, int *line, int *col);

#endif
