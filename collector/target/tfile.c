// SPDX-License-Identifier: Apache-2.0
/*
 * tfile: opening a target's files inside its own root, regular files only,
 * bounded reads (see tfile.h for the rules and why).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tfile.h"

#define TF_READ_FLAGS (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
#define TF_DELETED " (deleted)"

static int tf_fail(char *err, size_t errsz, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int tf_fail(char *err, size_t errsz, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errsz) {
		va_start(ap, fmt);
		vsnprintf(err, errsz, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* What a non-regular file is, for the message. */
static const char *tf_kind(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFIFO: return "a FIFO";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFDIR: return "a directory";
	case S_IFSOCK: return "a socket";
	case S_IFLNK: return "a symbolic link";
	default: return "not a regular file";
	}
}

int lt_tf_root_open(const char *proc, int pid)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%d/root", proc, pid);
	fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

static int same_file(const char *a, const char *b)
{
	struct stat x, y;

	if (stat(a, &x) || stat(b, &y))
		return -errno;
	return x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

int lt_tf_same_view(int pid, bool root_too)
{
	char p[64];
	int same;

	snprintf(p, sizeof(p), LT_TF_PROC "/%d/ns/mnt", pid);
	same = same_file(p, LT_TF_PROC "/self/ns/mnt");
	if (same != 1 || !root_too)
		return same;
	snprintf(p, sizeof(p), LT_TF_PROC "/%d/root", pid);
	return same_file(p, "/");
}

void lt_tf_fd_path(int fd, char *buf, size_t n)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}

/*
 * An O_PATH fd checked to be a regular file (and `want`, if given) becomes
 * a readable fd. The O_PATH step is what keeps a FIFO from blocking us and
 * a device from being opened at all; reopening through our own fd link
 * reaches the same inode, whatever happens to the name meanwhile.
 */
static int tf_reopen(int pfd, const char *what, const struct lt_tf_id *want, char *err,
		     size_t errsz)
{
	char self[64];
	struct stat st;
	int fd, rc;

	if (fstat(pfd, &st)) {
		rc = -errno;
		close(pfd);
		return tf_fail(err, errsz, rc, "%s: %s", what, strerror(-rc));
	}
	if (!S_ISREG(st.st_mode)) {
		close(pfd);
		return tf_fail(err, errsz, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
			       "%s: %s, not a regular file; not read", what, tf_kind(st.st_mode));
	}
	if (want && (st.st_dev != want->dev || st.st_ino != want->ino)) {
		close(pfd);
		return tf_fail(err, errsz, -ESTALE,
			       "%s: not the file mapped (device %u:%u inode %" PRIu64
			       ", mapped %u:%u inode %" PRIu64 "); not read", what,
			       major(st.st_dev), minor(st.st_dev), (uint64_t)st.st_ino,
			       major(want->dev), minor(want->dev), (uint64_t)want->ino);
	}
	lt_tf_fd_path(pfd, self, sizeof(self));
	fd = open(self, TF_READ_FLAGS);
	rc = fd >= 0 ? fd : -errno;
	close(pfd);
	if (rc < 0)
		return tf_fail(err, errsz, rc, "%s: %s", what, strerror(-rc));
	return rc;
}

static int tf_openat2(int root_fd, const char *path, uint64_t flags)
{
	struct open_how how = {
		.flags = flags,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN); /* a rename raced the lookup: retry */
	return fd >= 0 ? (int)fd : -errno;
}

int lt_tf_open(int root_fd, const char *path, const struct lt_tf_id *want, char *err,
	       size_t errsz)
{
	int pfd;

	if (root_fd < 0)
		return tf_fail(err, errsz, -EBADF, "%s: the target's root is not open", path);
	pfd = tf_openat2(root_fd, path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return tf_fail(err, errsz, pfd, "%s (in the target's root): %s", path,
			       strerror(-pfd));
	return tf_reopen(pfd, path, want, err, errsz);
}

#define TF_MAX_LINKS 40 /* as the kernel's own limit on a lookup */

/* One component of a path (at most NAME_MAX) into comp; advances *p. */
static int tf_next_comp(const char **p, char *comp)
{
	size_t len;

	while (**p == '/')
		(*p)++;
	len = strcspn(*p, "/");
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(comp, *p, len);
	comp[len] = 0;
	*p += len;
	return 0;
}

int lt_tf_realpath(int root_fd, const char *path, char *out, size_t n)
{
	char cur[PATH_MAX] = "", rest[2 * PATH_MAX], next[2 * PATH_MAX], link[PATH_MAX];
	char comp[NAME_MAX + 1], cand[PATH_MAX];
	const char *p;
	int links = 0, fd, rc;
	struct stat st;
	ssize_t k;

	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		return -ENAMETOOLONG;
	for (p = rest; *p;) {
		if ((rc = tf_next_comp(&p, comp)))
			return rc;
		if (!comp[0] || !strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) { /* cur holds no link: its parent is lexical */
			if (strrchr(cur, '/'))
				*strrchr(cur, '/') = 0;
			continue;
		}
		if (snprintf(cand, sizeof(cand), "%s/%s", cur, comp) >= (int)sizeof(cand))
			return -ENAMETOOLONG;
		fd = tf_openat2(root_fd, cand, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fd;
		if (fstat(fd, &st) || !S_ISLNK(st.st_mode)) {
			close(fd);
			memcpy(cur, cand, sizeof(cur));
			continue;
		}
		k = ++links > TF_MAX_LINKS ? -1 : readlinkat(fd, "", link, sizeof(link) - 1);
		close(fd);
		if (k < 0)
			return links > TF_MAX_LINKS ? -ELOOP : -errno;
		link[k] = 0;
		if (snprintf(next, sizeof(next), "%s/%s", link, p) >= (int)sizeof(next))
			return -ENAMETOOLONG;
		if (link[0] == '/')
			cur[0] = 0;
		memcpy(rest, next, sizeof(rest));
		p = rest;
	}
	return snprintf(out, n, "%s", cur[0] ? cur : "/") < (int)n ? 0 : -ENAMETOOLONG;
}

int lt_tf_open_dir(int root_fd, const char *path, char *err, size_t errsz)
{
	int fd = root_fd < 0 ? -EBADF : tf_openat2(root_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return tf_fail(err, errsz, fd, "%s (in the target's root): %s", path, strerror(-fd));
	return fd;
}

bool lt_tf_exists(int root_fd, const char *path)
{
	struct stat st;
	int pfd = root_fd < 0 ? -EBADF : tf_openat2(root_fd, path, O_PATH | O_CLOEXEC);
	bool ok;

	if (pfd < 0)
		return false;
	ok = !fstat(pfd, &st) && S_ISREG(st.st_mode);
	close(pfd);
	return ok;
}

int lt_tf_open_mapped(const char *proc, int pid, int root_fd, const struct lt_tf_map *m,
		      char *err, size_t errsz)
{
	char p[256];
	int pfd;

	snprintf(p, sizeof(p), "%s/%d/map_files/%" PRIx64 "-%" PRIx64, proc, pid, m->start, m->end);
	pfd = open(p, O_PATH | O_CLOEXEC);
	if (pfd >= 0) /* the kernel's binding of this mapping to its file */
		return tf_reopen(pfd, m->path[0] ? m->path : p, NULL, err, errsz);
	/* map_files needs CAP_SYS_ADMIN; the path then, checked to be the
	 * file mapped (a deleted file has no path left to open). */
	if (m->deleted)
		return tf_fail(err, errsz, -ENOENT, "%s: deleted, and %s: %s", m->path, p,
			       strerror(errno));
	return lt_tf_open(root_fd, m->path, &m->id, err, errsz);
}

int lt_tf_open_link(const char *proc, int pid, const char *name, char *err, size_t errsz)
{
	char p[256];
	int pfd;

	snprintf(p, sizeof(p), "%s/%d/%s", proc, pid, name);
	pfd = open(p, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return tf_fail(err, errsz, -errno, "%s: %s", p, strerror(errno));
	return tf_reopen(pfd, p, NULL, err, errsz);
}

int lt_tf_open_node(const char *path, char *err, size_t errsz)
{
	int pfd = open(path, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return tf_fail(err, errsz, -errno, "%s: %s", path, strerror(errno));
	return tf_reopen(pfd, path, NULL, err, errsz);
}

int lt_tf_read_all(int fd, size_t max, char **buf, size_t *len, char *err, size_t errsz)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap + 1), *nb;
	ssize_t r;

	*buf = NULL;
	*len = 0;
	if (!b)
		return tf_fail(err, errsz, -ENOMEM, "out of memory");
	for (;;) {
		if (n == cap) {
			if (cap > max) { /* read one byte past max to know it is longer */
				free(b);
				return tf_fail(err, errsz, -EFBIG, "longer than %zu bytes; not read", max);
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			if (!(nb = realloc(b, cap + 1))) {
				free(b);
				return tf_fail(err, errsz, -ENOMEM, "out of memory");
			}
			b = nb;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = -errno;

			free(b);
			return tf_fail(err, errsz, rc, "read: %s", strerror(-rc));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		free(b);
		return tf_fail(err, errsz, -EFBIG, "longer than %zu bytes; not read", max);
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}

/* ------------------------------------------------------------ lines */

void lt_tf_lines_init(struct lt_tf_lines *r, int fd, size_t max_bytes, size_t max_lines)
{
	r->fd = fd;
	r->max_bytes = max_bytes;
	r->max_lines = max_lines;
	r->bytes = r->lines = r->skipped = r->len = r->pos = 0;
	r->err = 0;
	r->eof = false;
}

/* Refill the buffer after the consumed part; false at EOF, error or cap. */
static bool tf_fill(struct lt_tf_lines *r)
{
	ssize_t n;

	if (r->eof || r->err)
		return false;
	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
	}
	if (r->bytes >= r->max_bytes) {
		r->err = -E2BIG;
		return false;
	}
	do
		n = read(r->fd, r->buf + r->len, LT_TF_LINE_MAX - r->len);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		r->err = -errno;
		return false;
	}
	if (n == 0) {
		r->eof = true;
		return r->len > 0;
	}
	r->len += (size_t)n;
	r->bytes += (size_t)n;
	return true;
}

char *lt_tf_lines_next(struct lt_tf_lines *r)
{
	for (;;) {
		char *s = r->buf + r->pos, *nl = memchr(s, '\n', r->len - r->pos);

		if (nl || (r->eof && r->len > r->pos)) {
			if (r->lines >= r->max_lines) {
				r->err = -E2BIG;
				return NULL;
			}
			r->lines++;
			if (nl) {
				*nl = 0;
				r->pos = (size_t)(nl - r->buf) + 1;
			} else {
				r->buf[r->len] = 0;
				r->pos = r->len;
			}
			return s;
		}
		if (r->pos == 0 && r->len == LT_TF_LINE_MAX) {
			/* A line longer than the buffer: drop it up to its '\n'. */
			r->skipped++;
			r->len = 0;
			while (tf_fill(r) && !(nl = memchr(r->buf, '\n', r->len)))
				r->len = 0;
			if (!nl)
				return NULL;
			r->pos = (size_t)(nl - r->buf) + 1;
			continue;
		}
		if (!tf_fill(r))
			return NULL;
	}
}

/* ------------------------------------------------------------ maps */

int lt_tf_maps_open(const char *proc, int pid)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%d/maps", proc, pid);
	fd = open(p, TF_READ_FLAGS);
	return fd >= 0 ? fd : -errno;
}

int lt_tf_maps_each_fd(int fd, lt_tf_map_fn fn, void *ctx)
{
	struct {
		struct lt_tf_lines r;
		struct lt_tf_map m;
	} *w = malloc(sizeof(*w));
	int rc = w ? 0 : -ENOMEM;
	char *line;

	if (!rc) {
		lt_tf_lines_init(&w->r, fd, LT_TF_MAPS_MAX_BYTES, LT_TF_MAPS_MAX_LINES);
		while (!rc && (line = lt_tf_lines_next(&w->r)))
			if (!lt_tf_map_parse(line, &w->m))
				rc = fn(&w->m, ctx);
		if (!rc)
			rc = w->r.err;
	}
	free(w);
	return rc;
}

int lt_tf_maps_each(const char *proc, int pid, lt_tf_map_fn fn, void *ctx)
{
	int fd = lt_tf_maps_open(proc, pid), rc = fd < 0 ? fd : lt_tf_maps_each_fd(fd, fn, ctx);

	if (fd >= 0)
		close(fd);
	return rc;
}

const char *lt_tf_proc_stat(int pid, char *buf, size_t n)
{
	char path[64];
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (n < 2 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return NULL;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r <= 0)
		return NULL;
	buf[r] = 0;
	char *p = strrchr(buf, ')');
	return p ? p + 1 : NULL;
}

bool lt_tf_proc_running(int pid)
{
	char buf[512];
	const char *p = lt_tf_proc_stat(pid, buf, sizeof(buf));
	return p && p[0] == ' ' && p[1] != 'Z' && p[1] != 'X' && p[1] != 'x';
}

int lt_tf_environ_open(const char *proc, int pid)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%d/environ", proc, pid);
	fd = open(p, TF_READ_FLAGS);
	return fd >= 0 ? fd : -errno;
}

/* The kernel prints a mapped file's path with '\n' as "\012" (and nothing
 * else escaped, so a name holding "\012" itself reads the same: the
 * (device, inode) check tells them apart). */
static void tf_unescape(const char *s, char *out, size_t n)
{
	size_t o = 0;

	while (*s && o + 1 < n) {
		if (!strncmp(s, "\\012", 4)) {
			out[o++] = '\n';
			s += 4;
		} else {
			out[o++] = *s++;
		}
	}
	out[o] = 0;
}

int lt_tf_map_parse(const char *line, struct lt_tf_map *m)
{
	unsigned long long start, end, pgoff, ino;
	unsigned maj, min;
	size_t len;
	int pos = 0;

	memset(m, 0, sizeof(*m));
	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu%n", &start, &end, m->perms, &pgoff, &maj,
		   &min, &ino, &pos) < 7 || !pos || strlen(m->perms) != 4 || start >= end)
		return -EINVAL;
	m->start = start;
	m->end = end;
	m->pgoff = pgoff;
	m->id.dev = makedev(maj, min);
	m->id.ino = (ino_t)ino;
	line += pos;
	line += strspn(line, " ");
	tf_unescape(line, m->path, sizeof(m->path));
	len = strlen(m->path);
	m->deleted = len > strlen(TF_DELETED) && !strcmp(m->path + len - strlen(TF_DELETED), TF_DELETED);
	return 0;
}
