// SPDX-License-Identifier: Apache-2.0
/*
 * ldsearch: the dynamic linker's search path, inside a target's root
 * (ldsearch.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfsym.h"
#include "ldsearch.h"
#include "tfile.h"

/* snprintf that says whether everything fitted (a cut path must not be used). */
#define FITS(buf, n, ...) (snprintf((buf), (n), __VA_ARGS__) < (int)(n))

static void add_dir(char **v, size_t *n, const char *d)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (!strcmp(v[i], d))
			return;
	if (*n < LT_LD_MAX_DIRS && (v[*n] = strdup(d)))
		(*n)++;
}

static void say(const struct lt_ldsearch *l, const char *fmt, const char *a, const char *b)
{
	char msg[PATH_MAX + 600];

	if (!l->warn)
		return;
	snprintf(msg, sizeof(msg), fmt, a, b);
	l->warn(msg);
}

static void read_ld_conf(struct lt_ldsearch *l, const char *file, int depth);

/* `include PATTERN`: the pattern's last component may hold wildcards; the
 * directory is opened inside the root and listed (glob() would resolve
 * links against our own root). */
static void read_ld_include(struct lt_ldsearch *l, const char *pat, int depth)
{
	char dir[PATH_MAX], file[PATH_MAX], err[512];
	const char *slash = strrchr(pat, '/');
	struct dirent *de;
	DIR *d;
	int fd;

	if (!slash || !FITS(dir, sizeof(dir), "%.*s", (int)(slash - pat), pat))
		return;
	fd = lt_tf_open_dir(l->root_fd, dir[0] ? dir : "/", err, sizeof(err));
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && !fnmatch(slash + 1, de->d_name, 0) &&
		    FITS(file, sizeof(file), "%s/%s", dir, de->d_name))
			read_ld_conf(l, file, depth + 1);
	closedir(d);
}

/* ld.so.conf and its includes, inside the root: a regular file each, at most
 * LT_TF_CONF_MAX_BYTES and LT_TF_CONF_MAX_LINES, 3 levels deep. */
static void read_ld_conf(struct lt_ldsearch *l, const char *file, int depth)
{
	struct lt_tf_lines *r;
	char err[512], pat[PATH_MAX], *s;
	int fd;

	if (depth >= 3)
		return;
	fd = lt_tf_open(l->root_fd, file, NULL, err, sizeof(err));
	if (fd < 0) {
		if (fd != -ENOENT)
			say(l, "skipping %s%s", err, "");
		return;
	}
	if (!(r = malloc(sizeof(*r)))) {
		close(fd);
		return;
	}
	lt_tf_lines_init(r, fd, LT_TF_CONF_MAX_BYTES, LT_TF_CONF_MAX_LINES);
	while ((s = lt_tf_lines_next(r))) {
		s += strspn(s, " \t");
		s[strcspn(s, "#")] = 0;
		while (*s && (s[strlen(s) - 1] == ' ' || s[strlen(s) - 1] == '\t'))
			s[strlen(s) - 1] = 0;
		if (!strncmp(s, "include", 7) && (s[7] == ' ' || s[7] == '\t')) {
			const char *p = s + 8 + strspn(s + 8, " \t");

			if (FITS(pat, sizeof(pat), "%s%s", *p == '/' ? "" : "/etc/", p))
				read_ld_include(l, pat, depth);
		} else if (*s == '/') {
			add_dir(l->sys_dirs, &l->n_sys, s);
		}
	}
	if (r->err || r->skipped)
		say(l, "%s (in the target's root): read partly (%s)", file,
		    r->err == -E2BIG ? "longer than allowed" : r->err ? strerror(-r->err)
								      : "overlong lines skipped");
	free(r);
	close(fd);
}

void lt_lds_init(struct lt_ldsearch *l, int root_fd, const char *ld_library_path,
		 void (*warn)(const char *msg))
{
	static const char *const defaults[] = {
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
	};
	char *copy, *save = NULL, *d;
	size_t i;

	memset(l, 0, sizeof(*l));
	l->root_fd = root_fd;
	l->warn = warn;
	/* ld.so splits LD_LIBRARY_PATH at ':' and ';'; relative entries are
	 * relative to the target's working directory: left out. */
	if (ld_library_path && (copy = strdup(ld_library_path))) {
		for (d = strtok_r(copy, ":;", &save); d; d = strtok_r(NULL, ":;", &save))
			if (*d == '/')
				add_dir(l->env_dirs, &l->n_env, d);
		free(copy);
	}
	read_ld_conf(l, "/etc/ld.so.conf", 0);
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		add_dir(l->sys_dirs, &l->n_sys, defaults[i]);
}

void lt_lds_free(struct lt_ldsearch *l)
{
	size_t i;

	for (i = 0; i < l->n_env; i++)
		free(l->env_dirs[i]);
	for (i = 0; i < l->n_sys; i++)
		free(l->sys_dirs[i]);
	l->n_env = l->n_sys = 0;
}

bool lt_lds_env_of(int pid, char *buf, size_t n)
{
	char path[64], *env = malloc(LT_LD_ENV_MAX);
	size_t len = 0, off;
	ssize_t r;
	bool found = false;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = env ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	while (fd >= 0 && len < LT_LD_ENV_MAX - 1 &&
	       (r = read(fd, env + len, LT_LD_ENV_MAX - 1 - len)) > 0)
		len += (size_t)r;
	if (fd >= 0)
		close(fd);
	for (off = 0; env && off < len; off += strlen(env + off) + 1) {
		env[len] = 0;
		if (!strncmp(env + off, "LD_LIBRARY_PATH=", 16)) {
			found = FITS(buf, n, "%s", env + off + 16);
			break;
		}
	}
	free(env);
	return found;
}

/* Each directory of a ':' list ($ORIGIN = the loader's directory). */
static bool each_in_list(const char *list, const char *origin, bool (*cb)(const char *, void *),
			 void *arg)
{
	char buf[PATH_MAX * 2], dir[PATH_MAX], *save = NULL, *d;

	if (!list || !FITS(buf, sizeof(buf), "%s", list))
		return false;
	for (d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		const char *rest = NULL;

		if (!strncmp(d, "$ORIGIN", 7))
			rest = d + 7;
		else if (!strncmp(d, "${ORIGIN}", 9))
			rest = d + 9;
		if (rest ? !FITS(dir, sizeof(dir), "%s%s", origin, rest) : !FITS(dir, sizeof(dir), "%s", d))
			continue;
		if (dir[0] == '/' && cb(dir, arg))
			return true;
	}
	return false;
}

static bool each_dir(char *const *dirs, size_t n, bool (*cb)(const char *, void *), void *arg)
{
	for (size_t i = 0; i < n; i++)
		if (cb(dirs[i], arg))
			return true;
	return false;
}

void lt_lds_dirs(const struct lt_ldsearch *l, const struct lt_elf *loader, const char *loader_path,
		 bool (*cb)(const char *dir, void *arg), void *arg)
{
	char origin[PATH_MAX] = "/";

	if (loader_path && FITS(origin, sizeof(origin), "%s", loader_path) && strrchr(origin, '/'))
		*strrchr(origin, '/') = 0;
	if (loader && !loader->runpath && each_in_list(loader->rpath, origin, cb, arg))
		return;
	if (each_dir(l->env_dirs, l->n_env, cb, arg))
		return;
	if (loader && each_in_list(loader->runpath, origin, cb, arg))
		return;
	each_dir(l->sys_dirs, l->n_sys, cb, arg);
}

struct find_arg {
	const struct lt_ldsearch *l;
	const char *name;
	char *out;
	size_t n;
	bool found;
};

static bool try_dir(const char *dir, void *p)
{
	struct find_arg *a = p;

	a->found = FITS(a->out, a->n, "%s/%s", dir, a->name) && lt_tf_exists(a->l->root_fd, a->out);
	return a->found;
}

bool lt_lds_resolve(const struct lt_ldsearch *l, const struct lt_elf *loader, const char *loader_path,
		    const char *name, char *out, size_t n)
{
	struct find_arg a = { l, name, out, n, false };

	if (strchr(name, '/'))
		return FITS(out, n, "%s", name) && lt_tf_exists(l->root_fd, out);
	lt_lds_dirs(l, loader, loader_path, try_dir, &a);
	return a.found;
}
