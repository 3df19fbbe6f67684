/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inputs: a log file, a directory of logs, or a .tar/.tar.gz/.tar.zst
 * archive of logs. Every candidate is checked for the event-log magic, so a
 * directory such as /tmp (a usual --cupti-dir) may hold anything else;
 * what is skipped is said. The same file reached twice (-i /tmp/data.json
 * --cupti-dir /tmp) is read once. Archive members are extracted into a
 * private temporary directory, removed at the end. Which of the logs found
 * belong to the profiles given is sessions.c's choice.
 */
#include "conv_int.h"
#include "../eventlog/evlog_format.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_DEPTH_MAX 4

static int has_magic_fd(int fd)
{
	char m[EVF_MAGIC_LEN];

	return pread(fd, m, sizeof(m), 0) == (ssize_t)sizeof(m) &&
	       memcmp(m, EVF_MAGIC, EVF_MAGIC_LEN) == 0;
}

static int push_log(struct cv_inputs *in, const char *name, const char *path)
{
	if (in->n == in->cap) {
		size_t nc = in->cap ? in->cap * 2 : 16;
		struct cv_log *nl = realloc(in->logs, nc * sizeof(*nl));

		if (!nl)
			return -1;
		in->logs = nl;
		in->cap = nc;
	}
	struct cv_log *l = &in->logs[in->n];

	memset(l, 0, sizeof(*l));
	l->name = strdup(name);
	l->path = strdup(path);
	if (!l->name || !l->path) {
		free(l->name);
		free(l->path);
		return -1;
	}
	in->n++;
	return 0;
}

/* Already taken (same device and inode)? Logs extracted from archives are
 * unique by construction and never compared. */
static int seen_before(const struct cv_inputs *in, const struct stat *st)
{
	for (size_t i = 0; i < in->n; i++) {
		struct stat o;

		if (stat(in->logs[i].path, &o) == 0 && o.st_dev == st->st_dev &&
		    o.st_ino == st->st_ino)
			return 1;
	}
	return 0;
}

static void note(struct cv_inputs *in, const char *path, const char *why)
{
	in->skipped++;
	cv_buf_printf(&in->notes, "skipped %s: %s\n", path, why);
}

static int ensure_tmpdir(struct cv_inputs *in, char *err, size_t errsz)
{
	if (in->tmpdir)
		return 0;
	const char *t = getenv("TMPDIR");
	char tmpl[4096];

	snprintf(tmpl, sizeof(tmpl), "%s/llmt-convert.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpl)) {
		snprintf(err, errsz, "cannot create a temporary directory for archive members (%s): %s; "
			 "set TMPDIR to a writable directory", tmpl, strerror(errno));
		return -1;
	}
	in->tmpdir = strdup(tmpl);
	return in->tmpdir ? 0 : -1;
}

/* Bounds on what archives may expand to in TMPDIR (a few KiB of zstd can
 * hold terabytes of zeros): per member and for all members of a
 * conversion, in MiB, raised or lowered through the environment. */
#define ARCHIVE_MEMBER_MB_DEFAULT (16u << 10)
#define ARCHIVE_TOTAL_MB_DEFAULT (64u << 10)

static uint64_t bound_mb(const char *env, unsigned dflt)
{
	const char *s = getenv(env);
	char *end;
	unsigned long long mb = s && *s ? strtoull(s, &end, 10) : 0;

	return (uint64_t)(mb > 0 && mb < (1ull << 30) && !*end ? mb : dflt) << 20;
}

/* The member would pass a bound once n more bytes are written: say which. */
static int past_bound(struct cv_inputs *in, const char *shown, uint64_t member, size_t n,
		      char *err, size_t errsz)
{
	uint64_t mmax = bound_mb("LLMT_ARCHIVE_MEMBER_MB", ARCHIVE_MEMBER_MB_DEFAULT);
	uint64_t tmax = bound_mb("LLMT_ARCHIVE_TOTAL_MB", ARCHIVE_TOTAL_MB_DEFAULT);

	if (member + n > mmax)
		snprintf(err, errsz, "%s: expands past %llu MiB, the bound on one archive member "
			 "(LLMT_ARCHIVE_MEMBER_MB raises it); nothing converted", shown,
			 (unsigned long long)(mmax >> 20));
	else if (in->extracted + n > tmax)
		snprintf(err, errsz, "%s: archive members expand past %llu MiB in all, the bound on "
			 "extraction (LLMT_ARCHIVE_TOTAL_MB raises it); nothing converted", shown,
			 (unsigned long long)(tmax >> 20));
	else
		return 0;
	return 1;
}

/* Copy the current archive member to a fresh file; 1 if it is a log, -2
 * (err set, the file removed) past a bound. */
static int extract_member(struct cv_inputs *in, struct archive *a, const char *dst,
			  const char *shown, char *err, size_t errsz)
{
	int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	char buf[1 << 16];
	ssize_t n;
	uint64_t member = 0;
	int first = 1, is_log = 0;

	if (fd < 0)
		return -1;
	while ((n = archive_read_data(a, buf, sizeof(buf))) > 0) {
		if (first) {
			is_log = n >= EVF_MAGIC_LEN && memcmp(buf, EVF_MAGIC, EVF_MAGIC_LEN) == 0;
			first = 0;
			if (!is_log)
				break;
		}
		if (past_bound(in, shown, member, (size_t)n, err, errsz)) {
			close(fd);
			unlink(dst);
			return -2;
		}
		if (write(fd, buf, (size_t)n) != n) {
			close(fd);
			unlink(dst);
			return -1;
		}
		member += (uint64_t)n;
		in->extracted += (uint64_t)n;
	}
	close(fd);
	if (n < 0)
		cv_buf_printf(&in->notes, "archive member cut short: %s (kept what was read)\n",
			      dst);
	if (!is_log)
		unlink(dst);
	return is_log;
}

/* Returns 1 if path was an archive (its logs added), 0 if not an archive. */
static int try_archive(struct cv_inputs *in, const char *path, char *err, size_t errsz)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int members = 0, logs = 0, r;

	if (!a)
		return -1;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		archive_read_free(a);
		return 0;
	}
	do {
		const char *mname = archive_entry_pathname(e);

		members++;
		if (archive_entry_filetype(e) != AE_IFREG)
			continue;
		if (ensure_tmpdir(in, err, errsz)) {
			archive_read_free(a);
			return -1;
		}
		char dst[4200], shown[8400];

		snprintf(dst, sizeof(dst), "%s/m%zu", in->tmpdir, in->n);
		snprintf(shown, sizeof(shown), "%s!%s", path, mname ? mname : "?");
		int is_log = extract_member(in, a, dst, shown, err, errsz);

		if (is_log == -2) {
			archive_read_free(a);
			return -1;
		}
		if (is_log > 0) {
			if (push_log(in, shown, dst))
				break;
			logs++;
		} else if (is_log == 0) {
			note(in, shown, "not an event log");
		} else {
			note(in, shown, "could not be extracted");
		}
	} while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK);
	if (r != ARCHIVE_EOF && r != ARCHIVE_OK)
		cv_buf_printf(&in->notes, "%s: archive damaged after %d members: %s\n", path,
			      members, archive_error_string(a) ? archive_error_string(a) : "?");
	archive_read_free(a);
	if (!logs)
		note(in, path, "archive holds no event logs");
	return 1;
}

static int add_file(struct cv_inputs *in, const char *path, const struct stat *st,
		    int origin, int depth, char *err, size_t errsz)
{
	int quiet_skip = origin != CV_FROM_INPUT && depth > 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		if (quiet_skip)
			in->skipped++;
		else
			note(in, path, strerror(errno));
		return 0;
	}
	int is_log = has_magic_fd(fd);

	close(fd);
	if (is_log) {
		if (seen_before(in, st))
			return 0;
		if (push_log(in, path, path))
			return -1;
		in->logs[in->n - 1].origin = origin;
		in->logs[in->n - 1].named = depth == 0 && origin == CV_FROM_INPUT;
		return 0;
	}
	if (quiet_skip) {
		in->skipped++;
		return 0;
	}
	int r = try_archive(in, path, err, errsz);

	if (r < 0)
		return -1;
	if (r == 0)
		note(in, path, st->st_size == 0 ? "empty file" : "not an event log (bad magic)");
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(struct cv_inputs *in, const char *path, int depth, int origin,
		    char *err, size_t errsz);

static int add_dir(struct cv_inputs *in, const char *path, int depth, int origin,
		   char *err, size_t errsz)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d) {
		note(in, path, strerror(errno));
		return 0;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*nn));

			if (!nn) {
				rc = -1;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), cmp_str); /* deterministic order */
	for (size_t i = 0; i < n; i++) {
		char child[4096];

		if (!rc && (size_t)snprintf(child, sizeof(child), "%s/%s", path, names[i]) <
				   sizeof(child))
			rc = add_path(in, child, depth + 1, origin, err, errsz);
		free(names[i]);
	}
	free(names);
	if (rc && !*err)
		snprintf(err, errsz, "out of memory listing %s", path);
	return rc;
}

static int add_path(struct cv_inputs *in, const char *path, int depth, int origin,
		    char *err, size_t errsz)
{
	int flat = origin != CV_FROM_INPUT;
	struct stat st;

	/* Below a named directory, symlinks are not followed (no loops, no
	 * surprises in shared directories). */
	if ((depth ? lstat(path, &st) : stat(path, &st)) != 0) {
		if (depth == 0) {
			snprintf(err, errsz, "input %s: %s", path, strerror(errno));
			return -1;
		}
		note(in, path, strerror(errno));
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		/* --cupti-dir and a main log's directory are flat (often /tmp);
		 * -i directories may nest. */
		if (depth > (flat ? 0 : DIR_DEPTH_MAX))
			return 0;
		return add_dir(in, path, depth, origin, err, errsz);
	}
	if (!S_ISREG(st.st_mode)) {
		if (!flat || depth == 0)
			note(in, path, "not a regular file");
		return 0;
	}
	return add_file(in, path, &st, origin, depth, err, errsz);
}

int cv_inputs_add(struct cv_inputs *in, const char *path, int origin, char *err, size_t errsz)
{
	uint64_t before = in->skipped;

	*err = 0;
	if (add_path(in, path, 0, origin, err, errsz))
		return -1;
	if (origin == CV_FROM_CUPTI && in->skipped > before)
		cv_buf_printf(&in->notes, "%s: ignored %llu files that are not event logs\n", path,
			      (unsigned long long)(in->skipped - before));
	else if (origin == CV_FROM_SIBLING) /* other files beside a log are no news */
		in->skipped = before;
	return 0;
}

struct hdr_info {
	char host[256];
	uint64_t rt;
	int ok;
};

static struct hdr_info read_hdr(const char *path)
{
	struct hdr_info hi = { .ok = 0 };
	struct evlog_reader *r;
	char msg[256];

	if (evlog_reader_open(&r, path, msg, sizeof(msg)))
		return hi;
	const struct evlog_header *h = evlog_reader_header(r);

	snprintf(hi.host, sizeof(hi.host), "%.*s", (int)(h->host.len < 255 ? h->host.len : 255),
		 h->host.len ? h->host.ptr : "");
	hi.rt = h->realtime_ns;
	hi.ok = 1;
	evlog_reader_close(r);
	return hi;
}

void cv_inputs_filter_cupti(struct cv_inputs *in, const unsigned char *old_join)
{
	uint64_t start = UINT64_MAX;
	size_t n_main = 0;
	char (*hosts)[256] = calloc(in->n ? in->n : 1, sizeof(*hosts));

	if (!hosts)
		return;
	for (size_t i = 0; i < in->n; i++) {
		if (in->logs[i].origin != CV_FROM_INPUT)
			continue;
		struct hdr_info h = read_hdr(in->logs[i].path);

		if (!h.ok)
			continue;
		memcpy(hosts[n_main++], h.host, sizeof(h.host));
		if (h.rt && h.rt < start)
			start = h.rt;
	}
	for (size_t i = 0; n_main && i < in->n; i++) {
		struct cv_log *l = &in->logs[i];
		struct stat st;
		int same_host = 0;

		if (l->origin != CV_FROM_CUPTI || l->bad || !old_join[i])
			continue;
		struct hdr_info h = read_hdr(l->path);

		for (size_t k = 0; k < n_main && h.ok; k++)
			same_host |= !strcmp(hosts[k], h.host);
		if (h.ok && !same_host) {
			l->bad = 1;
			in->skipped++;
			cv_buf_printf(&in->notes, "skipped %s: from host %s, not the profiled one\n",
				      l->name, h.host);
		} else if (start != UINT64_MAX && stat(l->path, &st) == 0 &&
			   (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec +
				   1000000000ULL < start) {
			l->bad = 1;
			in->skipped++;
			cv_buf_printf(&in->notes, "skipped %s: last written before the profile "
				      "started (an older run)\n", l->name);
		}
	}
	free(hosts);
}

static void rm_tmpdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (d) {
		while ((de = readdir(d)))
			if (de->d_name[0] == 'm')
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

void cv_inputs_free(struct cv_inputs *in)
{
	for (size_t i = 0; i < in->n; i++) {
		free(in->logs[i].name);
		free(in->logs[i].path);
	}
	free(in->logs);
	if (in->tmpdir) {
		rm_tmpdir(in->tmpdir);
		free(in->tmpdir);
	}
	cv_buf_free(&in->notes);
	memset(in, 0, sizeof(*in));
}
