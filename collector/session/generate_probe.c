// SPDX-License-Identifier: Apache-2.0
/*
 * `llmtracker generateProbe -p PID [-o FILE] [--force]`: write a probe file
 * for a running process. The libraries it has mapped and their DT_NEEDED
 * dependencies (resolved the way ld.so would, inside the process's root:
 * RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.conf, the default directories)
 * are walked; each CUDA-related one is listed with the path the process
 * sees, the symbols the default probe file selects in it, and every
 * exported function under "available", to pick from.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io.h"
#include "collector/target/elfsym.h"
#include "collector/target/ldsearch.h"
#include "collector/sources/probefile.h"
#include "collector/target/tfile.h"

#define GP_MAX_OBJS 4096

struct gp_obj {
	char *path;          /* as the target sees it */
	char *why;           /* "mapped" or "needed by X" */
	bool cuda;
	bool mapped;         /* opened through its mapping: */
	uint64_t start, end; /* where, */
	struct lt_tf_id id;  /* and which file */
};

struct gp {
	int pid;
	int root_fd;         /* O_PATH of /proc/PID/root: every file is opened in it */
	struct gp_obj objs[GP_MAX_OBJS];
	size_t n_objs;
	struct lt_ldsearch lds;       /* the target's library search path */
};

/* Libraries worth probing for a GPU job (the profiler's own CUPTI is not). */
static bool is_cuda_lib(const char *path)
{
	static const char *const pfx[] = {
		"libcudart", "libcuda.", "libnccl", "libcublas", "libcudnn", "libcufft",
		"libcurand", "libcusparse", "libcusolver", "libnvrtc", "libnvJitLink",
		"libnvshmem", "libcutensor",
	};
	const char *b = strrchr(path, '/');
	size_t i;

	b = b ? b + 1 : path;
	for (i = 0; i < sizeof(pfx) / sizeof(pfx[0]); i++)
		if (!strncmp(b, pfx[i], strlen(pfx[i])))
			return true;
	return false;
}

/* snprintf that says whether everything fitted (a cut path must not be used). */
#define FITS(buf, n, ...) (snprintf((buf), (n), __VA_ARGS__) < (int)(n))

static const char *base_name(const char *p)
{
	const char *b = strrchr(p, '/');

	return b ? b + 1 : p;
}

/* Open object i: a mapped one through its mapping, a needed one by path
 * inside the root. Returns the fd or -errno (message in err). */
static int obj_open(const struct gp *g, const struct gp_obj *o, char *err, size_t errsz)
{
	static struct lt_tf_map m;   /* 4 KiB of path: not on the stack */

	if (!o->mapped)
		return lt_tf_open(g->root_fd, o->path, NULL, err, errsz);
	memset(&m, 0, sizeof(m));
	m.start = o->start;
	m.end = o->end;
	m.id = o->id;
	snprintf(m.path, sizeof(m.path), "%s", o->path);
	return lt_tf_open_mapped(LT_TF_PROC, g->pid, g->root_fd, &m, err, errsz);
}

static int add_obj(struct gp *g, const char *path, const char *why)
{
	size_t i;

	for (i = 0; i < g->n_objs; i++)
		if (!strcmp(g->objs[i].path, path))
			return 0;
	if (g->n_objs == GP_MAX_OBJS)
		return -E2BIG;
	g->objs[g->n_objs].path = strdup(path);
	g->objs[g->n_objs].why = strdup(why);
	g->objs[g->n_objs].cuda = is_cuda_lib(path);
	if (!g->objs[g->n_objs].path || !g->objs[g->n_objs].why)
		return -ENOMEM;
	g->n_objs++;
	return 0;
}

/* ------------------------------------------------------------ ld.so paths */

static void gp_warn(const char *msg)
{
	fprintf(stderr, "llmtracker generateProbe: %s\n", msg);
}

static void init_paths(struct gp *g)
{
	char env[LT_LD_ENV_MAX];

	lt_lds_init(&g->lds, g->root_fd, lt_lds_env_of(g->pid, env, sizeof(env)) ? env : NULL, gp_warn);
}

/* Resolve one DT_NEEDED entry of `loader` (path in the target). */
static bool resolve_needed(const struct gp *g, const struct lt_elf *loader, const char *lpath,
			   const char *name, char *out, size_t n)
{
	size_t i;

	if (!strchr(name, '/'))
		for (i = 0; i < g->n_objs; i++) /* already loaded: ld.so reuses it */
			if (!strcmp(base_name(g->objs[i].path), name))
				return FITS(out, n, "%s", g->objs[i].path);
	return lt_lds_resolve(&g->lds, loader, lpath, name, out, n);
}

/* ------------------------------------------------------------ walking */

/* Each executable file mapping, as a new object (mapped). */
static int note_mapped(const struct lt_tf_map *m, void *ctx)
{
	struct gp *g = ctx;
	size_t n = g->n_objs;

	if (m->perms[2] != 'x' || m->path[0] != '/' || m->deleted || add_obj(g, m->path, "mapped") ||
	    g->n_objs == n)
		return 0;
	g->objs[n].mapped = true;
	g->objs[n].start = m->start;
	g->objs[n].end = m->end;
	g->objs[n].id = m->id;
	return 0;
}

static int read_mapped(struct gp *g)
{
	return lt_tf_maps_each(LT_TF_PROC, g->pid, note_mapped, g);
}

static void walk_deps(struct gp *g)
{
	size_t i, k;

	for (i = 0; i < g->n_objs; i++) { /* objs grows while we walk */
		char err[512], why[PATH_MAX + 16], dep[PATH_MAX];
		struct lt_elf *e;
		int fd = obj_open(g, &g->objs[i], err, sizeof(err));

		if (fd < 0 || lt_elf_open_fd(fd, g->objs[i].path, &e, err, sizeof(err))) {
			fprintf(stderr, "llmtracker generateProbe: skipping %s\n", err);
			if (fd >= 0)
				close(fd);
			continue;
		}
		close(fd);
		snprintf(why, sizeof(why), "needed by %.4000s", base_name(g->objs[i].path));
		for (k = 0; k < e->n_needed; k++)
			if (resolve_needed(g, e, g->objs[i].path, e->needed[k], dep, sizeof(dep)))
				add_obj(g, dep, why);
			else
				fprintf(stderr, "llmtracker generateProbe: %s needs %s: not found in the target's root\n",
					g->objs[i].path, e->needed[k]);
		lt_elf_free(e);
	}
}

/* ------------------------------------------------------------ output */

/* The default probe file's entry for this library, if any (JSON object). */
static struct json_object *default_entry(struct json_object *defaults,
					 const struct lt_probefile *pf, const char *path)
{
	struct json_object *ups;
	size_t i;

	if (!defaults || !pf || !json_object_object_get_ex(defaults, "uprobes", &ups))
		return NULL;
	for (i = 0; i < pf->n_libs && i < json_object_array_length(ups); i++)
		if (lt_plib_matches(&pf->libs[i], path, NULL))
			return json_object_array_get_idx(ups, i);
	return NULL;
}

static struct json_object *exported_funcs(const struct gp *g, const struct gp_obj *o, size_t *n)
{
	struct json_object *arr = json_object_new_array();
	struct lt_elf *e = NULL;
	char err[512];
	size_t i;
	int fd;

	*n = 0;
	if (!arr || (fd = obj_open(g, o, err, sizeof(err))) < 0)
		return arr;
	if (lt_elf_open_fd(fd, o->path, &e, err, sizeof(err))) {
		close(fd);
		return arr;
	}
	close(fd);
	for (i = 0; i < e->n_syms; i++)
		if (e->syms[i].exported && !json_object_array_add(arr, json_object_new_string(e->syms[i].name)))
			(*n)++;
	lt_elf_free(e);
	return arr;
}

static int sort_names(const void *a, const void *b)
{
	return strcmp(json_object_get_string(*(struct json_object *const *)a),
		      json_object_get_string(*(struct json_object *const *)b));
}

static struct json_object *lib_entry(const struct gp *g, const struct gp_obj *o,
				     struct json_object *defaults, const struct lt_probefile *pf)
{
	struct json_object *e = json_object_new_object(), *d = default_entry(defaults, pf, o->path);
	struct json_object *syms = NULL, *excl = NULL, *avail;
	size_t n;

	avail = exported_funcs(g, o, &n);
	json_object_array_sort(avail, sort_names);
	json_object_object_add(e, "library", json_object_new_string(o->path));
	json_object_object_add(e, "class", json_object_new_string(
		lt_probefile_class_name(lt_probefile_guess_class(o->path))));
	json_object_object_add(e, "resolved", json_object_new_string(o->why));
	if (d && json_object_object_get_ex(d, "symbols", &syms))
		json_object_object_add(e, "symbols", json_object_get(syms));
	else
		json_object_object_add(e, "symbols", json_object_new_array());
	if (d && json_object_object_get_ex(d, "exclude", &excl))
		json_object_object_add(e, "exclude", json_object_get(excl));
	json_object_object_add(e, "available", avail);
	fprintf(stderr, "  %-70s %6zu exported functions (%s)\n", o->path, n, o->why);
	return e;
}

/* Publish atomically; never replace an existing file unless asked. */
static int write_file(const char *path, const char *text, bool force)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t len = strlen(text);
	int fd, rc = 0;

	if (slash ? !FITS(tmp, sizeof(tmp), "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
		  : !FITS(tmp, sizeof(tmp), ".%s.XXXXXX", path))
		return -ENAMETOOLONG;
	fd = mkstemp(tmp); /* O_EXCL: no planted symlink is followed */
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len || fsync(fd))
		rc = errno ? -errno : -EIO;
	fchmod(fd, 0644);
	close(fd);
	if (!rc && !force)
		rc = lt_rename_noreplace(AT_FDCWD, tmp, AT_FDCWD, path);
	else if (!rc && force && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: llmtracker generateProbe -p PID [-o FILE] [--force]\n"
		   "  Lists the CUDA libraries PID has loaded or depends on, with their exported\n"
		   "  functions, and writes a probe file for --probe-file (stdout without -o).\n"
		   "  --force replaces an existing FILE.\n");
}

static void load_defaults(struct json_object **defaults, struct lt_probefile **pf)
{
	char path[PATH_MAX], err[512];

	*defaults = NULL;
	*pf = NULL;
	if (lt_probefile_default_path(path, sizeof(path)) || access(path, R_OK))
		return;
	if (lt_probefile_load(path, pf, err, sizeof(err))) {
		fprintf(stderr, "llmtracker generateProbe: ignoring the default probe file: %s\n", err);
		return;
	}
	*defaults = json_object_from_file(path);
}

static int generate(struct gp *g, const char *out, bool force)
{
	struct json_object *root = json_object_new_object(), *ups = json_object_new_array(), *defaults;
	struct lt_probefile *pf;
	char note[128];
	size_t i, n = 0;
	int rc;

	load_defaults(&defaults, &pf);
	snprintf(note, sizeof(note), "generated by llmtracker generateProbe -p %d", g->pid);
	json_object_object_add(root, "generated", json_object_new_string(note));
	fprintf(stderr, "CUDA libraries of pid %d:\n", g->pid);
	for (i = 0; i < g->n_objs; i++)
		if (g->objs[i].cuda && ++n)
			json_object_array_add(ups, lib_entry(g, &g->objs[i], defaults, pf));
	if (!n)
		fprintf(stderr, "  none: pid %d neither maps nor needs a CUDA library\n", g->pid);
	json_object_object_add(root, "uprobes", ups);
	json_object_object_add(root, "kprobes", json_object_new_array());
	const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
							  JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!out) {
		printf("%s\n", text);
		rc = 0;
	} else if ((rc = write_file(out, text, force))) {
		fprintf(stderr, "llmtracker generateProbe: cannot write %s: %s%s\n", out, strerror(-rc),
			rc == -EEXIST ? " (pass --force to replace it)" : "");
	} else {
		fprintf(stderr, "wrote %s: edit \"symbols\" (names or globs; see \"available\"), then "
			"pass it with --probe-file\n", out);
	}
	json_object_put(root);
	json_object_put(defaults);
	lt_probefile_free(pf);
	return rc ? 1 : 0;
}

int lt_generate_probe_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' }, { "output", required_argument, NULL, 'o' },
		{ "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, { 0 },
	};
	const char *out = NULL;
	struct gp *g;
	bool force = false;
	int c, pid = 0, rc;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:o:fh", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pid = (int)strtol(optarg, &end, 10);
			if (*end || pid <= 0) {
				fprintf(stderr, "llmtracker generateProbe: -p %s: expected a process id\n", optarg);
				return 2;
			}
			break;
		case 'o': out = optarg; break;
		case 'f': force = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!pid || optind < argc) {
		usage(stderr);
		return 2;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return 1;
	g->pid = pid;
	g->root_fd = lt_tf_root_open(LT_TF_PROC, pid);
	rc = g->root_fd < 0 ? g->root_fd : read_mapped(g);
	if (rc) {
		fprintf(stderr, "llmtracker generateProbe: cannot read the %s of pid %d: %s\n",
			g->root_fd < 0 ? "root" : "mappings", pid, strerror(-rc));
		if (g->root_fd >= 0)
			close(g->root_fd);
		free(g);
		return 1;
	}
	init_paths(g);
	walk_deps(g);
	rc = generate(g, out, force);
	for (size_t i = 0; i < g->n_objs; i++) {
		free(g->objs[i].path);
		free(g->objs[i].why);
	}
	lt_lds_free(&g->lds);
	close(g->root_fd);
	free(g);
	return rc;
}
