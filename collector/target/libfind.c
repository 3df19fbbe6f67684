// SPDX-License-Identifier: Apache-2.0
/*
 * libfind: the libraries a program will load that a probe file names,
 * before it runs (libfind.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfsym.h"
#include "ldsearch.h"
#include "libfind.h"
#include "collector/session/session.h"
#include "tfile.h"

#define LF_MAX_DIRS 1024

struct lf_obj {
	char *path, *rpath, *runpath;
};

struct lf {
	int root_fd;
	uint32_t kind;                  /* the executable's ELF class and machine */
	const struct lt_probefile *pf;
	struct lt_ldsearch lds;
	void (*found)(void *arg, const struct lt_lf_file *f);
	void *arg;
	struct lf_obj objs[LT_LF_MAX_OBJS];
	size_t n_objs;
	struct { uint64_t dev, ino; } seen[LT_LF_MAX_FILES];
	size_t n_seen;
	char *dirs[LF_MAX_DIRS];
	size_t n_dirs;
	int reported;
};

static void lf_warn(const char *msg)
{
	LT_INFO(1, "cuda: library search: %s", msg);
}

/* First sight of this file? */
static bool lf_new_file(struct lf *f, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < f->n_seen; i++)
		if (f->seen[i].dev == dev && f->seen[i].ino == ino)
			return false;
	if (f->n_seen == LT_LF_MAX_FILES)
		return false;
	f->seen[f->n_seen].dev = dev;
	f->seen[f->n_seen++].ino = ino;
	return true;
}

/* ELF class and machine (e_ident[EI_CLASS] << 16 | e_machine), 0 if not ELF:
 * ld.so skips a library of another kind (a 32-bit libc in /lib32). */
static uint32_t lf_elf_kind(int fd)
{
	unsigned char h[20];

	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, "\177ELF", 4))
		return 0;
	return (uint32_t)h[4] << 16 | (h[5] == 1 ? (uint32_t)(h[18] | h[19] << 8) : (uint32_t)(h[18] << 8 | h[19]));
}

/* Report the file under the name the kernel will give its mapping (links
 * resolved), so calls recorded before and after it is mapped name it alike. */
static void lf_report(struct lf *f, int fd, const char *path, const char *soname, bool needed)
{
	char real[PATH_MAX];
	struct stat st;
	struct lt_lf_file file = { fd, path, soname, 0, 0, needed };

	if (lf_elf_kind(fd) != f->kind || fstat(fd, &st) || !lf_new_file(f, st.st_dev, st.st_ino))
		return;
	if (!lt_tf_realpath(f->root_fd, path, real, sizeof(real)))
		file.path = real;
	file.dev = st.st_dev;
	file.ino = st.st_ino;
	f->reported++;
	f->found(f->arg, &file);
}

static bool lf_have_obj(const struct lf *f, const char *path)
{
	for (size_t i = 0; i < f->n_objs; i++)
		if (!strcmp(f->objs[i].path, path))
			return true;
	return false;
}

static void lf_add_obj(struct lf *f, const char *path)
{
	if (f->n_objs < LT_LF_MAX_OBJS && !lf_have_obj(f, path) &&
	    (f->objs[f->n_objs].path = strdup(path)))
		f->n_objs++;
}

/* The DT_NEEDED closure, breadth first as ld.so loads it. */
static void lf_walk_needed(struct lf *f, int exe_fd)
{
	for (size_t i = 0; i < f->n_objs; i++) { /* objs grows while we walk */
		struct lf_obj *o = &f->objs[i];
		char err[512], dep[PATH_MAX];
		struct lt_elf *e;
		int fd = i ? lt_tf_open(f->root_fd, o->path, NULL, err, sizeof(err)) : dup(exe_fd);

		if (fd < 0 || lt_elf_open_fd(fd, o->path, &e, err, sizeof(err))) {
			LT_INFO(1, "cuda: library search: skipping %s", fd < 0 ? err : o->path);
			if (fd >= 0)
				close(fd);
			continue;
		}
		lf_report(f, fd, o->path, e->soname, true);
		close(fd);
		o->rpath = e->rpath ? strdup(e->rpath) : NULL;
		o->runpath = e->runpath ? strdup(e->runpath) : NULL;
		for (size_t k = 0; k < e->n_needed; k++)
			if (lt_lds_resolve(&f->lds, e, o->path, e->needed[k], dep, sizeof(dep)))
				lf_add_obj(f, dep);
		lt_elf_free(e);
	}
}

static bool lf_add_dir(const char *dir, void *arg)
{
	struct lf *f = arg;

	for (size_t i = 0; i < f->n_dirs; i++)
		if (!strcmp(f->dirs[i], dir))
			return false;
	if (f->n_dirs < LF_MAX_DIRS && (f->dirs[f->n_dirs] = strdup(dir)))
		f->n_dirs++;
	return false; /* all of them */
}

static bool lf_named(const struct lf *f, const char *path)
{
	for (size_t i = 0; i < f->pf->n_libs; i++)
		if (!f->pf->libs[i].is_path && lt_plib_matches(&f->pf->libs[i], path, NULL))
			return true;
	return false;
}

/* The files of one directory whose names the probe file names. */
static void lf_scan_dir(struct lf *f, const char *dir)
{
	char err[512], path[PATH_MAX];
	struct dirent *de;
	size_t n = 0;
	DIR *d;
	int dfd = lt_tf_open_dir(f->root_fd, dir, err, sizeof(err));

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d)) && n++ < LT_LF_MAX_DIRENTS) {
		int fd;

		if (de->d_name[0] == '.' || snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(path) || !lf_named(f, path))
			continue;
		fd = lt_tf_open(f->root_fd, path, NULL, err, sizeof(err));
		if (fd < 0) {
			LT_INFO(1, "cuda: library search: skipping %s", err);
			continue;
		}
		lf_report(f, fd, path, NULL, false);
		close(fd);
	}
	closedir(d);
}

/* Probe-file entries naming a path (without wildcards): that file. */
static void lf_named_paths(struct lf *f)
{
	char err[512];

	for (size_t i = 0; i < f->pf->n_libs; i++) {
		const char *p = f->pf->libs[i].spec;
		int fd;

		if (!f->pf->libs[i].is_path || strpbrk(p, "*?[") ||
		    (fd = lt_tf_open(f->root_fd, p, NULL, err, sizeof(err))) < 0)
			continue;
		lf_report(f, fd, p, NULL, false);
		close(fd);
	}
}

int lt_libfind(int root_fd, int exe_fd, const char *exe_path, const char *ld_library_path,
	       const struct lt_probefile *pf, void (*found)(void *arg, const struct lt_lf_file *f),
	       void *arg)
{
	struct lf *f = calloc(1, sizeof(*f));
	int reported;

	if (!f)
		return -ENOMEM;
	f->root_fd = root_fd;
	f->pf = pf;
	f->found = found;
	f->arg = arg;
	/* Libraries of the executable's kind; a script's are its interpreter's,
	 * which runs on this machine as we do. */
	f->kind = lf_elf_kind(exe_fd);
	if (!f->kind) {
		int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

		f->kind = self >= 0 ? lf_elf_kind(self) : 0;
		if (self >= 0)
			close(self);
	}
	lt_lds_init(&f->lds, root_fd, ld_library_path, lf_warn);
	lf_add_obj(f, exe_path);
	lf_walk_needed(f, exe_fd);
	/* dlopen searches the calling object's run paths: any of them may call it. */
	for (size_t i = 0; i < f->n_objs; i++) {
		struct lt_elf loader = { .rpath = f->objs[i].rpath, .runpath = f->objs[i].runpath };

		lt_lds_dirs(&f->lds, &loader, f->objs[i].path, lf_add_dir, f);
	}
	for (size_t i = 0; i < f->n_dirs; i++)
		lf_scan_dir(f, f->dirs[i]);
	lf_named_paths(f);
	reported = f->reported;
	for (size_t i = 0; i < f->n_objs; i++) {
		free(f->objs[i].path);
		free(f->objs[i].rpath);
		free(f->objs[i].runpath);
	}
	for (size_t i = 0; i < f->n_dirs; i++)
		free(f->dirs[i]);
	lt_lds_free(&f->lds);
	free(f);
	return reported;
}
