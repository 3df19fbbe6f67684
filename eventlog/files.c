// SPDX-License-Identifier: Apache-2.0
/*
 * The files of a log in a directory (schemas/eventlog.md 5, 5.2): the sink
 * evlog_writer_open() writes through. Each segment is written into
 * "<dir>/.<name>.partial" (created O_EXCL|O_NOFOLLOW: never over a dead
 * writer's partial or a planted symlink, which get another name), appended
 * to with one write() per chunk, closed once, and published whole under
 * "<name>.<k>", the last under "<name>", never replacing a file
 * (lt_publish_noreplace). Nothing is synced or reopened: on a FUSE mount of
 * an object store (s3fs) every flush, fsync or close uploads the whole
 * file, so each segment is uploaded once, at its close.
 */
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"
#include "common/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct evlog_files {
	int dirfd, fd;
	int overwrite;
	char *dir;           /* the directory part of the path, with its '/' ("" for none) */
	char *name;          /* the log's final name */
	char *partial;       /* the partial file's name, once chosen */
	uint64_t bytes;      /* in the open segment's file */
	uint32_t seg;        /* the open segment; 0 between segments */
};

__attribute__((format(printf, 4, 5)))
static int evf_err(char *err, size_t errsz, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errsz) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return -code;
}

void evlog_segment_name(const char *name, uint32_t seg, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s.%u", name, seg);
}

/* A name this log must not find taken: its final name and, in segments,
 * its first segment's (a later segment's is checked when it is published). */
static int evf_taken(struct evlog_files *f, const char *path, int segments, char *msg,
		     size_t msgsz)
{
	char seg1[PATH_MAX];
	const char *names[2] = { f->name, seg1 };
	struct stat sb;

	evlog_segment_name(f->name, 1, seg1, sizeof(seg1));
	for (int i = 0; i < 1 + !!segments; i++) {
		if (fstatat(f->dirfd, names[i], &sb, AT_SYMLINK_NOFOLLOW))
			continue;
		if (i == 0 && S_ISDIR(sb.st_mode))
			return evf_msg(msg, msgsz, EVLOG_EINVAL, "output '%s' is a directory", path);
		if (!f->overwrite)
			return evf_msg(msg, msgsz, EVLOG_EEXIST, "output '%s%s' already exists; refusing "
				       "to overwrite it (remove it or choose another name)", f->dir,
				       names[i]);
	}
	return 0;
}

static int evf_split(struct evlog_files *f, const char *path, char *msg, size_t msgsz)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;

	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return evf_msg(msg, msgsz, EVLOG_EINVAL,
			       "output path '%s' names a directory; give a file name", path);
	char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	f->dir = strndup(path, slash ? (size_t)(slash - path) + 1 : 0);
	f->name = strdup(base);
	if (!dir || !f->dir || !f->name) {
		free(dir);
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	}
	f->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = errno;
	free(dir);
	if (f->dirfd < 0)
		return evf_msg(msg, msgsz, EVLOG_EIO, "output directory of '%s': %s", path, strerror(e));
	return 0;
}

/* The first segment picks the partial name (another one where a dead
 * writer's is left); later segments take it again once it is free. */
static int evf_create(struct evlog_files *f, char *err, size_t errsz)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;

	if (f->partial) {
		f->fd = openat(f->dirfd, f->partial, flags, 0644);
		return f->fd >= 0 ? 0 : evf_err(err, errsz, EVLOG_EIO, "creating %s%s: %s", f->dir,
						 f->partial, strerror(errno));
	}
	for (unsigned n = 0; n < 1000; n++) {
		char *p = NULL;
		int k = n == 0 ? asprintf(&p, ".%s.partial", f->name)
			       : asprintf(&p, ".%s.%d-%u.partial", f->name, (int)getpid(), n);

		if (k < 0)
			return evf_err(err, errsz, EVLOG_ENOMEM, "out of memory");
		f->fd = openat(f->dirfd, p, flags, 0644);
		if (f->fd >= 0) {
			f->partial = p;
			return 0;
		}
		int e = errno;

		free(p);
		if (e != EEXIST)
			return evf_err(err, errsz, EVLOG_EIO, "creating the partial file for '%s%s': %s",
				       f->dir, f->name, strerror(e));
	}
	return evf_err(err, errsz, EVLOG_EIO, "creating the partial file for '%s%s': too many "
		       "stale partial files next to it; remove them", f->dir, f->name);
}

int evlog_files_open(struct evlog_files **out, const char *path, int flags, char *msg,
		     size_t msgsz)
{
	*out = NULL;
	if (!path || !*path)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "empty output path");
	struct evlog_files *f = calloc(1, sizeof(*f));

	if (!f)
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	f->dirfd = f->fd = -1;
	f->overwrite = !!(flags & EVLOG_FILES_OVERWRITE);
	int rc = evf_split(f, path, msg, msgsz);

	if (!rc)
		rc = evf_taken(f, path, flags & EVLOG_FILES_SEGMENTS, msg, msgsz);
	if (rc) {
		evlog_files_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

static int evf_begin(void *ctx, uint32_t seg, char *err, size_t errsz)
{
	struct evlog_files *f = ctx;

	if (f->fd >= 0)
		return evf_err(err, errsz, EVLOG_EINVAL, "segment %u begun before %u ended", seg, f->seg);
	int rc = evf_create(f, err, errsz);

	if (rc)
		return rc;
	f->seg = seg;
	f->bytes = 0;
	return 0;
}

/* A failed append may have left part of a chunk: cut it off, so that the
 * file stays a valid log up to its last complete chunk. */
static int evf_put(void *ctx, uint32_t seg, const void *p, size_t n, const struct evlog_put *pi,
		   char *err, size_t errsz)
{
	struct evlog_files *f = ctx;

	(void)pi;
	if (f->fd < 0 || seg != f->seg)
		return evf_err(err, errsz, EVLOG_EINVAL, "bytes of segment %u while %u is open", seg,
			       f->seg);
	int rc = lt_write_all(f->fd, p, n);

	if (rc == 0) {
		f->bytes += n;
		return 0;
	}
	if (ftruncate(f->fd, (off_t)f->bytes) == 0)
		lseek(f->fd, (off_t)f->bytes, SEEK_SET);
	const char *hint = (rc == -ENOSPC || rc == -EFBIG || rc == -EDQUOT)
		? " (disk full or file size limit: free space or raise the limit)" : "";
	return evf_err(err, errsz, EVLOG_EIO, "writing %s%s: %s%s; it keeps its complete chunks "
		       "(%llu bytes)", f->dir, f->partial, strerror(-rc), hint,
		       (unsigned long long)f->bytes);
}

/* Close once (on an object store the upload happens here, and its error
 * shows here), then publish. */
static int evf_end(void *ctx, uint32_t seg, int last, char *err, size_t errsz)
{
	struct evlog_files *f = ctx;
	char name[PATH_MAX];

	if (f->fd < 0 || seg != f->seg)
		return evf_err(err, errsz, EVLOG_EINVAL, "end of segment %u while %u is open", seg, f->seg);
	int e = close(f->fd) ? errno : 0;

	f->fd = -1;
	f->seg = 0;
	if (e)
		return evf_err(err, errsz, EVLOG_EIO, "closing %s%s: %s; it is kept as it is", f->dir,
			       f->partial, strerror(e));
	if (last)
		snprintf(name, sizeof(name), "%s", f->name);
	else
		evlog_segment_name(f->name, seg, name, sizeof(name));
	e = f->overwrite ? (renameat(f->dirfd, f->partial, f->dirfd, name) ? -errno : 0)
			 : lt_publish_noreplace(f->dirfd, f->partial, name);
	if (e == -EEXIST)
		return evf_err(err, errsz, EVLOG_EEXIST, "publishing %s%s: it already exists (never "
			       "replaced); this log was kept as %s%s", f->dir, name, f->dir, f->partial);
	if (e)
		return evf_err(err, errsz, EVLOG_EIO, "publishing %s%s: %s; this log was kept as %s%s",
			       f->dir, name, strerror(-e), f->dir, f->partial);
	return 0;
}

static void evf_abort(void *ctx)
{
	struct evlog_files *f = ctx;

	if (f->fd < 0)
		return;
	close(f->fd);
	f->fd = -1;
	unlinkat(f->dirfd, f->partial, 0);
}

const struct evlog_sink evlog_files_sink = {
	.begin = evf_begin, .put = evf_put, .end = evf_end, .abort = evf_abort,
};

const char *evlog_files_partial(const struct evlog_files *f)
{
	return f && f->partial ? f->partial : "";
}

const char *evlog_files_dir(const struct evlog_files *f)
{
	return f ? f->dir : "";
}

void evlog_files_close(struct evlog_files *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	if (f->dirfd >= 0)
		close(f->dirfd);
	free(f->dir);
	free(f->name);
	free(f->partial);
	free(f);
}
