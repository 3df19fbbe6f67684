/* SPDX-License-Identifier: Apache-2.0 */
/*
 * llmtracker-convert pack --logdir DIR --run NAME -o FILE.tar.zst [--overwrite]
 *
 * One run of the TensorBoard layout as a single .tar.zst, for moving it off
 * the node or attaching it to a ticket. Entries are named
 * "plugins/profile/<run>/<file>", so `tar -C NEWLOGDIR -xf FILE` recreates
 * the layout. Only the run's regular, published files are packed (no dot
 * files, temporaries or symlinks). The archive is written to a temporary
 * file beside FILE and renamed into place.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "converter/convert.h"
#include "tb_layout/tb_layout.h"

struct pack_opts {
	const char *logdir, *run, *out;
	int overwrite;
};

static int fail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The run's published files, sorted (a stable archive order). */
static int list_files(int dirfd, char ***out, size_t *n, char *err, size_t errsz)
{
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	char **v = NULL;
	size_t cnt = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return fail(err, errsz, "cannot list the run directory: %s", strerror(errno));
	}
	while ((e = readdir(d))) {
		struct stat st;
		char **nv;

		if (e->d_name[0] == '.' ||
		    fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv || !(nv[cnt] = strdup(e->d_name))) {
			free(nv ? nv : v);
			closedir(d);
			return fail(err, errsz, "out of memory");
		}
		v = nv;
		cnt++;
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_names);
	*out = v;
	*n = cnt;
	return 0;
}

static int add_file(struct archive *a, int dirfd, const char *run, const char *name,
		    char *err, size_t errsz)
{
	char path[TB_NAME_MAX * 2 + 64], buf[1 << 16];
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct archive_entry *e;
	struct stat st;
	ssize_t r;
	int rc = 0;

	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = fail(err, errsz, "cannot read %s: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	snprintf(path, sizeof(path), "%s/%s/%s", TB_PLUGIN_DIR, run, name);
	e = archive_entry_new();
	archive_entry_set_pathname(e, path);
	archive_entry_set_size(e, st.st_size);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, st.st_mtime, 0);
	if (archive_write_header(a, e) != ARCHIVE_OK)
		rc = fail(err, errsz, "archiving %s: %s", name, archive_error_string(a));
	/* Exactly the size announced in the header, even if the file changes. */
	for (off_t left = st.st_size; rc == 0 && left > 0; left -= r) {
		r = read(fd, buf, (size_t)(left < (off_t)sizeof(buf) ? left : (off_t)sizeof(buf)));
		if (r <= 0)
			rc = fail(err, errsz, "%s shrank or failed while packing: %s", name,
				  r < 0 ? strerror(errno) : "short read");
		else if (archive_write_data(a, buf, (size_t)r) != r)
			rc = fail(err, errsz, "archiving %s: %s", name, archive_error_string(a));
	}
	archive_entry_free(e);
	close(fd);
	return rc;
}

static int write_archive(int fd, int dirfd, const char *run, char **files, size_t n,
			 char *err, size_t errsz)
{
	struct archive *a = archive_write_new();
	int rc = 0;

	if (!a)
		return fail(err, errsz, "out of memory");
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
	    archive_write_open_fd(a, fd) != ARCHIVE_OK)
		rc = fail(err, errsz, "cannot start the archive: %s", archive_error_string(a));
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = add_file(a, dirfd, run, files[i], err, errsz);
	if (archive_write_close(a) != ARCHIVE_OK && rc == 0)
		rc = fail(err, errsz, "finishing the archive: %s", archive_error_string(a));
	archive_write_free(a);
	return rc;
}

static int pack_run(const struct pack_opts *o, char *err, size_t errsz)
{
	struct tb_tmpfile t;
	char **files = NULL;
	size_t n = 0;
	int dirfd, rc;

	dirfd = tb_open_run_dir(o->logdir, o->run, 0, err, errsz);
	if (dirfd < 0)
		return -1;
	rc = list_files(dirfd, &files, &n, err, errsz);
	if (rc == 0 && n == 0)
		rc = fail(err, errsz, "run %s in %s has no files to pack", o->run, o->logdir);
	if (rc == 0)
		rc = tb_tmp_open_path(&t, o->out, o->overwrite, err, errsz);
	if (rc == 0) {
		rc = write_archive(t.fd, dirfd, o->run, files, n, err, errsz);
		if (rc == 0)
			rc = tb_tmp_publish(&t, o->overwrite, err, errsz);
		else
			tb_tmp_discard(&t);
	}
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	close(dirfd);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: llmtracker-convert pack --logdir DIR --run NAME -o FILE.tar.zst "
		"[--overwrite]\n"
		"  Packs DIR/plugins/profile/NAME into one archive (extract with tar -C LOGDIR).\n");
}

static int parse_args(int argc, char **argv, struct pack_opts *o)
{
	static const struct option opts[] = {
		{ "logdir", required_argument, NULL, 'l' },
		{ "run", required_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "overwrite", no_argument, NULL, 'w' },
		{ "force", no_argument, NULL, 'w' }, /* the converter's own name for it */
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	while ((c = getopt_long(argc, argv, "l:r:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': o->logdir = optarg; break;
		case 'r': o->run = optarg; break;
		case 'o': o->out = optarg; break;
		case 'w': o->overwrite = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (!o->logdir || !o->run || !o->out || optind != argc) {
		fprintf(stderr, "pack: %s\n", optind != argc ? "unexpected argument" :
			"--logdir DIR, --run NAME and -o FILE.tar.zst are all required");
		usage(stderr);
		return -1;
	}
	return 0;
}

int conv_pack_main(int argc, char **argv)
{
	struct pack_opts o;
	char err[1024];

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	if (pack_run(&o, err, sizeof(err)) < 0) {
		fprintf(stderr, "pack: %s\n", err);
		return 1;
	}
	return 0;
}
