// SPDX-License-Identifier: Apache-2.0
/*
 * probefile: parse and validate the probe file (schemas/probe-file.md) with
 * json-c. json-c keeps no positions, so semantic errors are pointed at by
 * walking the raw text along the JSON path of the offending value.
 */
#include "probefile.h"
#include "collector/target/tfile.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eventlog/eventlog.h"

#define PF_MAX_BYTES (16u << 20)
#define PF_MAX_DEPTH 6

struct pctx {
	const char *text, *name;
	size_t len;
	char *err;
	size_t errsz;
	const char *path[PF_MAX_DEPTH];
	char idx[PF_MAX_DEPTH][16];
	int depth;
};

/* ------------------------------------------------------------ positions */

void lt_text_linecol(const char *text, size_t len, size_t off, int *line, int *col)
{
	size_t i, bol = 0;
	int l = 1;

	if (off > len)
		off = len;
	for (i = 0; i < off; i++)
		if (text[i] == '\n') {
			l++;
			bol = i + 1;
		}
	*line = l;
	*col = (int)(off - bol) + 1;
}

static size_t skip_ws(const char *t, size_t n, size_t p)
{
	while (p < n) {
		if (t[p] == ' ' || t[p] == '\t' || t[p] == '\n' || t[p] == '\r') {
			p++;
		} else if (t[p] == '/' && p + 1 < n && t[p + 1] == '/') {
			while (p < n && t[p] != '\n')
				p++;
		} else if (t[p] == '/' && p + 1 < n && t[p + 1] == '*') {
			const char *e = memmem(t + p + 2, n - p - 2, "*/", 2);
			p = e ? (size_t)(e - t) + 2 : n;
		} else {
			break;
		}
	}
	return p;
}

static size_t skip_string(const char *t, size_t n, size_t p)
{
	for (p++; p < n && t[p] != '"'; p++)
		if (t[p] == '\\')
			p++;
	return p < n ? p + 1 : n;
}

static size_t skip_value(const char *t, size_t n, size_t p)
{
	int depth = 0;

	p = skip_ws(t, n, p);
	if (p < n && t[p] == '"')
		return skip_string(t, n, p);
	for (; p < n; p++) {
		char c = t[p];

		if (c == '"') {
			p = skip_string(t, n, p) - 1;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				return p;
			if (--depth == 0)
				return p + 1;
		} else if (c == ',' && depth == 0) {
			return p;
		} else if ((c == ' ' || c == '\n' || c == '\t' || c == '\r') && depth == 0) {
			return p;
		}
	}
	return n;
}

/* From the '{' at p, the offset of member `key`'s value, or -1. */
static long find_member(const char *t, size_t n, size_t p, const char *key)
{
	size_t klen = strlen(key);

	for (p = skip_ws(t, n, p + 1); p < n && t[p] == '"';) {
		size_t ks = p + 1, ke = skip_string(t, n, p) - 1;

		p = skip_ws(t, n, ke + 1);
		if (p >= n || t[p] != ':')
			return -1;
		p = skip_ws(t, n, p + 1);
		if (ke - ks == klen && !memcmp(t + ks, key, klen))
			return (long)p;
		p = skip_ws(t, n, skip_value(t, n, p));
		if (p < n && t[p] == ',')
			p = skip_ws(t, n, p + 1);
	}
	return -1;
}

/* From the '[' at p, the offset of element i, or -1. */
static long find_index(const char *t, size_t n, size_t p, long i)
{
	p = skip_ws(t, n, p + 1);
	while (i-- > 0) {
		p = skip_ws(t, n, skip_value(t, n, p));
		if (p >= n || t[p] != ',')
			return -1;
		p = skip_ws(t, n, p + 1);
	}
	return p < n && t[p] != ']' ? (long)p : -1;
}

long lt_json_locate(const char *text, size_t len, const char *const *path, int n)
{
	size_t p = skip_ws(text, len, 0);
	int i;

	for (i = 0; i < n; i++) {
		long q;

		if (p >= len)
			return -1;
		if (path[i][0] == '#' && text[p] == '[')
			q = find_index(text, len, p, strtol(path[i] + 1, NULL, 10));
		else if (path[i][0] != '#' && text[p] == '{')
			q = find_member(text, len, p, path[i]);
		else
			return -1;
		if (q < 0)
			return -1;
		p = (size_t)q;
	}
	return (long)p;
}

/* ------------------------------------------------------------ errors */

static void path_push_key(struct pctx *c, const char *key)
{
	if (c->depth < PF_MAX_DEPTH)
		c->path[c->depth] = key;
	c->depth++;
}

static void path_push_idx(struct pctx *c, size_t i)
{
	if (c->depth < PF_MAX_DEPTH) {
		snprintf(c->idx[c->depth], sizeof(c->idx[0]), "#%zu", i);
		c->path[c->depth] = c->idx[c->depth];
	}
	c->depth++;
}

static void path_pop(struct pctx *c)
{
	c->depth--;
}

static void path_format(const struct pctx *c, char *buf, size_t n)
{
	size_t used = 0;
	int i;

	buf[0] = 0;
	for (i = 0; i < c->depth && i < PF_MAX_DEPTH && used < n; i++) {
		const char *p = c->path[i];
		int w = p[0] == '#' ? snprintf(buf + used, n - used, "[%s]", p + 1)
				    : snprintf(buf + used, n - used, "%s%s", i ? "." : "", p);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

static int perr(struct pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct pctx *c, const char *fmt, ...)
{
	char what[256], where[128];
	int line = 1, col = 1, d = c->depth < PF_MAX_DEPTH ? c->depth : PF_MAX_DEPTH;
	long off = lt_json_locate(c->text, c->len, c->path, d);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (off >= 0)
		lt_text_linecol(c->text, c->len, (size_t)off, &line, &col);
	path_format(c, where, sizeof(where));
	snprintf(c->err, c->errsz, "%s:%d:%d: %s%s%s", c->name, line, col, where,
		 *where ? ": " : "", what);
	return -EINVAL;
}

static const char *jtype(struct json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double: return "a number";
	case json_type_int: return "an integer";
	case json_type_object: return "an object";
	case json_type_array: return "an array";
	case json_type_string: return "a string";
	}
	return "?";
}

/* ------------------------------------------------------------ classes */

static const char *const class_names[] = {
	[EVLIB_OTHER] = "other", [EVLIB_CUDA_RUNTIME] = "cuda_runtime",
	[EVLIB_CUDA_DRIVER] = "cuda_driver", [EVLIB_NCCL] = "nccl",
	[EVLIB_CUBLAS] = "cublas", [EVLIB_CUDNN] = "cudnn",
};
#define N_CLASSES (sizeof(class_names) / sizeof(class_names[0]))

const char *lt_probefile_class_name(int lib_class)
{
	if (lib_class < 0 || (size_t)lib_class >= N_CLASSES)
		return "other";
	return class_names[lib_class];
}

static int class_from_name(const char *s)
{
	size_t i;

	for (i = 0; i < N_CLASSES; i++)
		if (!strcmp(s, class_names[i]))
			return (int)i;
	return -1;
}

int lt_probefile_guess_class(const char *lib)
{
	const char *b = strrchr(lib, '/');

	b = b ? b + 1 : lib;
	if (!strncmp(b, "libcudart", 9))
		return EVLIB_CUDA_RUNTIME;
	if (!strncmp(b, "libcuda.", 8) || !strcmp(b, "libcuda"))
		return EVLIB_CUDA_DRIVER;
	if (!strncmp(b, "libnccl", 7))
		return EVLIB_NCCL;
	if (!strncmp(b, "libcublas", 9))
		return EVLIB_CUBLAS;
	if (!strncmp(b, "libcudnn", 8))
		return EVLIB_CUDNN;
	return EVLIB_OTHER;
}

/* ------------------------------------------------------------ parsing */

static int get_class(struct pctx *c, struct json_object *v, int *out)
{
	if (!json_object_is_type(v, json_type_string) ||
	    (*out = class_from_name(json_object_get_string(v))) < 0)
		return perr(c, "expected one of \"cuda_runtime\", \"cuda_driver\", \"nccl\", "
			    "\"cublas\", \"cudnn\", \"other\"");
	return 0;
}

static int get_args(struct pctx *c, struct json_object *v, struct lt_psym *s)
{
	size_t i, n;

	if (json_object_is_type(v, json_type_int)) {
		int64_t k = json_object_get_int64(v);

		if (k < 0 || k > LT_PROBE_MAX_ARGS)
			return perr(c, "expected a count of arguments from 0 to %d", LT_PROBE_MAX_ARGS);
		s->nargs = (int)k;
		for (i = 0; i < (size_t)k; i++)
			s->argidx[i] = (uint8_t)i;
		return 0;
	}
	if (!json_object_is_type(v, json_type_array) ||
	    (n = json_object_array_length(v)) > LT_PROBE_MAX_ARGS)
		return perr(c, "expected a count or an array of at most %d argument indexes (0-%d)",
			    LT_PROBE_MAX_ARGS, LT_PROBE_ARG_SLOTS - 1);
	for (i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(v, i);
		int64_t k = json_object_get_int64(e);

		if (!json_object_is_type(e, json_type_int) || k < 0 || k >= LT_PROBE_ARG_SLOTS) {
			path_push_idx(c, i);
			return perr(c, "expected an argument index from 0 to %d, got %s",
				    LT_PROBE_ARG_SLOTS - 1, jtype(e));
		}
		s->argidx[i] = (uint8_t)k;
	}
	s->nargs = (int)n;
	return 0;
}

static int set_name(struct pctx *c, struct json_object *v, struct lt_psym *s)
{
	const char *n = json_object_get_string(v);

	if (!json_object_is_type(v, json_type_string) || !*n)
		return perr(c, "expected a non-empty symbol name or glob");
	s->name = strdup(n);
	s->glob = strpbrk(n, "*?[") != NULL;
	return s->name ? 0 : -ENOMEM;
}

static int parse_sym_object(struct pctx *c, struct json_object *o, struct lt_psym *s)
{
	int rc = 0;

	json_object_object_foreach(o, key, v) {
		path_push_key(c, key);
		if (!strcmp(key, "name"))
			rc = set_name(c, v, s);
		else if (!strcmp(key, "class"))
			rc = get_class(c, v, &s->lib_class);
		else if (!strcmp(key, "args"))
			rc = get_args(c, v, s);
		else
			rc = perr(c, "unknown key; expected \"name\", \"class\" or \"args\"");
		path_pop(c);
		if (rc)
			return rc;
	}
	if (!s->name)
		return perr(c, "missing \"name\" (the symbol name or glob)");
	return 0;
}

static int parse_sym(struct pctx *c, struct json_object *v, struct lt_psym *s)
{
	s->lib_class = -1;
	s->nargs = -1;
	if (json_object_is_type(v, json_type_string))
		return set_name(c, v, s);
	if (json_object_is_type(v, json_type_object))
		return parse_sym_object(c, v, s);
	return perr(c, "expected a symbol name, a glob, or an object {\"name\": ..., \"args\": ...}, got %s",
		    jtype(v));
}

static int parse_syms(struct pctx *c, struct json_object *v, struct lt_plib *lib)
{
	size_t i, n;
	int rc;

	if (!json_object_is_type(v, json_type_array))
		return perr(c, "expected an array of symbol names, got %s", jtype(v));
	n = json_object_array_length(v);
	lib->syms = calloc(n ? n : 1, sizeof(*lib->syms));
	if (!lib->syms)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		path_push_idx(c, i);
		rc = parse_sym(c, json_object_array_get_idx(v, i), &lib->syms[i]);
		lib->n_syms = i + 1;
		path_pop(c);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_strings(struct pctx *c, struct json_object *v, char ***out, size_t *n_out,
			 const char *what)
{
	size_t i, n;

	if (!json_object_is_type(v, json_type_array))
		return perr(c, "expected an array of %s, got %s", what, jtype(v));
	n = json_object_array_length(v);
	*out = calloc(n ? n : 1, sizeof(char *));
	if (!*out)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(v, i);

		if (json_object_is_type(e, json_type_object))
			e = json_object_object_get(e, "name"); /* {"name": ...} form */
		if (!e || !json_object_is_type(e, json_type_string) || !*json_object_get_string(e)) {
			path_push_idx(c, i);
			int rc = perr(c, "expected %s as a non-empty string", what);
			path_pop(c);
			return rc;
		}
		(*out)[i] = strdup(json_object_get_string(e));
		*n_out = i + 1;
		if (!(*out)[i])
			return -ENOMEM;
	}
	return 0;
}

static bool is_key(const char *k, const char *a, const char *b, const char *d)
{
	return !strcmp(k, a) || (b && !strcmp(k, b)) || (d && !strcmp(k, d));
}

static int parse_lib_member(struct pctx *c, const char *key, struct json_object *v,
			    struct lt_plib *lib)
{
	if (is_key(key, "library", "path", "lib")) {
		const char *s = json_object_get_string(v);

		if (!json_object_is_type(v, json_type_string) || !*s)
			return perr(c, "expected the library's path in the target or its soname (\"libcudart.so\")");
		free(lib->spec);
		lib->spec = strdup(s);
		lib->is_path = strchr(s, '/') != NULL;
		return lib->spec ? 0 : -ENOMEM;
	}
	if (is_key(key, "symbols", "functions", "funcs"))
		return parse_syms(c, v, lib);
	if (!strcmp(key, "class"))
		return get_class(c, v, &lib->lib_class);
	if (!strcmp(key, "exclude"))
		return parse_strings(c, v, &lib->exclude, &lib->n_exclude, "a symbol name or glob");
	if (is_key(key, "available", "comment", "resolved"))
		return 0; /* written by generateProbe for the reader */
	return perr(c, "unknown key; expected \"library\" (or \"path\"), \"symbols\", \"class\" or \"exclude\"");
}

static int parse_lib(struct pctx *c, struct json_object *o, struct lt_plib *lib)
{
	int rc = 0;

	lib->lib_class = -1;
	if (!json_object_is_type(o, json_type_object))
		return perr(c, "expected an object {\"library\": ..., \"symbols\": [...]}, got %s", jtype(o));
	json_object_object_foreach(o, key, v) {
		path_push_key(c, key);
		rc = parse_lib_member(c, key, v, lib);
		path_pop(c);
		if (rc)
			return rc;
	}
	if (!lib->spec)
		return perr(c, "missing \"library\" (a path inside the target, or a soname such as \"libcudart.so\")");
	if (!lib->syms)
		return perr(c, "missing \"symbols\" (an array of names or globs)");
	if (lib->lib_class < 0)
		lib->lib_class = lt_probefile_guess_class(lib->spec);
	return 0;
}

static int parse_uprobes(struct pctx *c, struct json_object *v, struct lt_probefile *pf)
{
	size_t i, n;
	int rc;

	if (!json_object_is_type(v, json_type_array))
		return perr(c, "expected an array of libraries, got %s", jtype(v));
	n = json_object_array_length(v);
	pf->libs = calloc(n ? n : 1, sizeof(*pf->libs));
	if (!pf->libs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		path_push_idx(c, i);
		pf->n_libs = i + 1;
		rc = parse_lib(c, json_object_array_get_idx(v, i), &pf->libs[i]);
		path_pop(c);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_root(struct pctx *c, struct json_object *root, struct lt_probefile *pf)
{
	int rc = 0;

	if (!json_object_is_type(root, json_type_object))
		return perr(c, "expected an object {\"uprobes\": [...], \"kprobes\": [...]}, got %s",
			    jtype(root));
	json_object_object_foreach(root, key, v) {
		path_push_key(c, key);
		if (is_key(key, "uprobes", "uprobe", NULL))
			rc = parse_uprobes(c, v, pf);
		else if (is_key(key, "kprobes", "kprobe", NULL))
			rc = parse_strings(c, v, &pf->kprobes, &pf->n_kprobes, "a kernel function name");
		else if (is_key(key, "version", "comment", "description") || !strcmp(key, "generated"))
			rc = 0;
		else
			rc = perr(c, "unknown key; expected \"uprobes\" or \"kprobes\"");
		path_pop(c);
		if (rc)
			return rc;
	}
	return 0;
}

static int syntax_error(struct pctx *c, struct json_tokener *tok, size_t off, const char *what)
{
	int line, col;

	lt_text_linecol(c->text, c->len, off, &line, &col);
	snprintf(c->err, c->errsz, "%s:%d:%d: invalid JSON: %s", c->name, line, col,
		 what ? what : json_tokener_error_desc(json_tokener_get_error(tok)));
	return -EINVAL;
}

static struct json_object *parse_json(struct pctx *c, int *rc)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *root;
	size_t end;

	*rc = -ENOMEM;
	if (!tok)
		return NULL;
	root = json_tokener_parse_ex(tok, c->text, (int)c->len);
	end = json_tokener_get_parse_end(tok);
	if (!root) {
		enum json_tokener_error e = json_tokener_get_error(tok);

		*rc = syntax_error(c, tok, end, e == json_tokener_continue ?
				   "unexpected end of file (an object or array is not closed)" : NULL);
	} else if (skip_ws(c->text, c->len, end) < c->len) {
		*rc = syntax_error(c, tok, skip_ws(c->text, c->len, end),
				   "unexpected text after the top-level object");
		json_object_put(root);
		root = NULL;
	} else {
		*rc = 0;
	}
	json_tokener_free(tok);
	return root;
}

int lt_probefile_parse(const char *text, size_t len, const char *name,
		       struct lt_probefile **out, char *err, size_t errsz)
{
	struct pctx c = { .text = text, .len = len, .name = name, .err = err, .errsz = errsz };
	struct json_object *root;
	struct lt_probefile *pf;
	int rc;

	*out = NULL;
	if (len > INT32_MAX) {
		snprintf(err, errsz, "%s: file too large", name);
		return -EFBIG;
	}
	root = parse_json(&c, &rc);
	if (!root)
		return rc;
	pf = calloc(1, sizeof(*pf));
	rc = pf ? 0 : -ENOMEM;
	if (!rc)
		pf->path = strdup(name);
	if (!rc && !pf->path)
		rc = -ENOMEM;
	if (!rc)
		rc = parse_root(&c, root, pf);
	json_object_put(root);
	if (rc == -ENOMEM)
		snprintf(err, errsz, "%s: out of memory", name);
	if (rc) {
		lt_probefile_free(pf);
		return rc;
	}
	*out = pf;
	return 0;
}

static int read_all(const char *path, char **buf, size_t *len, char *err, size_t errsz)
{
	/* A regular file is checked before it is opened for reading (a FIFO
	 * would block us, a device be read forever): tfile.h. */
	char why[512];
	int fd = lt_tf_open_node(path, why, sizeof(why)), rc = 0;
	struct stat st;
	ssize_t n = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = fd < 0 ? fd : -errno;
		snprintf(err, errsz, "cannot read the probe file: %s", fd < 0 ? why : strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size > PF_MAX_BYTES) {
		snprintf(err, errsz, "%s: not a regular file of at most %u MiB", path, PF_MAX_BYTES >> 20);
		rc = -EINVAL;
		goto out;
	}
	*buf = malloc((size_t)st.st_size + 1);
	if (!*buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (*len = 0; *len < (size_t)st.st_size; *len += (size_t)n) {
		n = read(fd, *buf + *len, (size_t)st.st_size - *len);
		if (n <= 0)
			break;
	}
	if (n < 0) {
		rc = -errno;
		snprintf(err, errsz, "%s: read: %s", path, strerror(-rc));
	}
	(*buf)[*len] = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int lt_probefile_load(const char *path, struct lt_probefile **out, char *err, size_t errsz)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = read_all(path, &buf, &len, err, errsz);
	if (!rc)
		rc = lt_probefile_parse(buf, len, path, out, err, errsz);
	free(buf);
	return rc;
}

static void free_strv(char **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void lt_probefile_free(struct lt_probefile *pf)
{
	size_t i, j;

	if (!pf)
		return;
	for (i = 0; i < pf->n_libs; i++) {
		struct lt_plib *l = &pf->libs[i];

		for (j = 0; j < l->n_syms; j++)
			free(l->syms[j].name);
		free(l->syms);
		free(l->spec);
		free_strv(l->exclude, l->n_exclude);
	}
	free(pf->libs);
	free_strv(pf->kprobes, pf->n_kprobes);
	free(pf->path);
	free(pf);
}

int lt_probefile_default_path(char *buf, size_t n)
{
	char exe[4096];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (k <= 0)
		return -errno;
	exe[k] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	if (snprintf(buf, n, "%s/../share/llmtracker/probes.json", exe) >= (int)n)
		return -ENAMETOOLONG;
	return 0;
}

/* ------------------------------------------------------------ matching */

/* "libcudart.so" names "libcudart.so.13" and "libcudart.so.13.0.48". */
static bool versioned_match(const char *spec, const char *name)
{
	size_t n = strlen(spec);

	return !strncmp(name, spec, n) && (name[n] == '.' || name[n] == 0);
}

/* Wheels repaired by auditwheel carry renamed copies:
 * "libcudart.so.13" -> "libcudart-d0da41ae.so.13". */
static bool hashed_match(const char *spec, const char *name)
{
	const char *so = strstr(spec, ".so"), *dot;
	size_t stem;

	if (!so)
		return false;
	stem = (size_t)(so - spec);
	if (strncmp(name, spec, stem) || name[stem] != '-')
		return false;
	dot = strstr(name + stem + 1, ".so");
	return dot && versioned_match(so, dot);
}

static bool soname_matches(const char *spec, const char *name)
{
	return !fnmatch(spec, name, 0) || versioned_match(spec, name) || hashed_match(spec, name);
}

bool lt_plib_matches(const struct lt_plib *lib, const char *path, const char *soname)
{
	const char *base;

	if (lib->is_path)
		return !strcmp(lib->spec, path) || !fnmatch(lib->spec, path, FNM_PATHNAME);
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return soname_matches(lib->spec, base) || (soname && soname_matches(lib->spec, soname));
}

const struct lt_psym *lt_plib_select(const struct lt_plib *lib, const char *name, bool exported)
{
	size_t i;

	for (i = 0; i < lib->n_exclude; i++)
		if (!fnmatch(lib->exclude[i], name, 0))
			return NULL;
	for (i = 0; i < lib->n_syms; i++) {
		const struct lt_psym *s = &lib->syms[i];

		if (s->glob ? exported && !fnmatch(s->name, name, 0) : !strcmp(s->name, name))
			return s;
	}
	return NULL;
}
