// SPDX-License-Identifier: Apache-2.0
/*
 * The segments of a log (schemas/eventlog.md 5.2), found from its last one
 * (or any later one, or a dead writer's partial file): each file whose
 * header says it is segment k >= 2 starts with the record of segment k - 1
 * (name, size, SHA-256); that file is looked up by name beside it and
 * checked against the record before it is taken, back to the first. A
 * segment that is missing, of another size or content, or not segment k - 1
 * stops the open with a message naming it: a log read whole or not at all.
 */
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"
#include "common/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Segments a chain may have: far more than any profile makes (a day at one
 * a minute is 1440), bounding what a forged header can ask for. */
#define EVLOG_CHAIN_MAX (1u << 20)
#define SEGNAME_MAX 255
#define DIGEST_LEN (7 + 2 * LT_SHA256_LEN)

struct evlog_chain {
	size_t n, cap;
	int *fd;       /* newest first while resolving; reversed when done */
	char **name;
};

/* What a file says of its place: its segment number, and the record of the
 * one before it. */
struct seg_rec {
	uint32_t seg;  /* 1 for a first (or only) file */
	char name[SEGNAME_MAX + 1];
	uint64_t size;
	char digest[DIGEST_LEN + 1];
};

static int plain_name(const struct evlog_str *s)
{
	if (!s->len || s->len > SEGNAME_MAX || memchr(s->ptr, '/', s->len) || memchr(s->ptr, 0, s->len))
		return 0;
	return !(s->len == 1 && s->ptr[0] == '.') && !(s->len == 2 && !memcmp(s->ptr, "..", 2));
}

static int digest_form(const struct evlog_str *s)
{
	if (s->len != DIGEST_LEN || memcmp(s->ptr, "sha256:", 7))
		return 0;
	for (uint32_t i = 7; i < s->len; i++)
		if (!strchr("0123456789abcdef", s->ptr[i]) || !s->ptr[i])
			return 0;
	return 1;
}

/* Read fd's header (and first event, for a later segment) through a reader
 * of its own on a duplicate. */
static int read_rec(int fd, const char *shown, struct seg_rec *rec, char *msg, size_t msgsz)
{
	struct evlog_reader *r;
	const struct evlog_event *ev;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (dfd < 0)
		return evf_msg(msg, msgsz, EVLOG_EIO, "%s: %s", shown, strerror(errno));
	int rc = evlog_reader_open_fd(&r, dfd, shown, msg, msgsz);
	if (rc)
		return rc;
	uint32_t k = evlog_reader_header(r)->segment;
	rec->seg = k ? k : 1;
	if (rec->seg < 2) {
		evlog_reader_close(r);
		return 0;
	}
	rc = evlog_next(r, &ev);
	if (rc == 0 && (ev->type != EV_SEGMENT || !plain_name(&ev->u.segment.name) ||
			!digest_form(&ev->u.segment.digest)))
		rc = -EVLOG_ESEGMENT;
	if (rc == 0) {
		memcpy(rec->name, ev->u.segment.name.ptr, ev->u.segment.name.len);
		rec->name[ev->u.segment.name.len] = 0;
		memcpy(rec->digest, ev->u.segment.digest.ptr, DIGEST_LEN);
		rec->digest[DIGEST_LEN] = 0;
		rec->size = ev->u.segment.size;
	} else {
		rc = evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: segment %u of a log, but its record of "
			     "segment %u cannot be read (damaged)", shown, rec->seg, rec->seg - 1);
	}
	evlog_reader_close(r);
	return rc;
}

/* Is fd the file rec describes? 0, or a message why not. */
static int check_seg(int fd, const char *shown, const char *by, const struct seg_rec *rec,
		     char *msg, size_t msgsz)
{
	char hex[LT_SHA256_HEX];
	uint64_t n = 0;
	struct stat sb;

	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
		return evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: not a regular file; %s records it as "
			       "a segment of its log", shown, by);
	if ((uint64_t)sb.st_size != rec->size)
		return evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: %llu bytes, but %s records %llu (cut, "
			       "grown or replaced since it was published)", shown,
			       (unsigned long long)sb.st_size, by, (unsigned long long)rec->size);
	int rc = lt_sha256_fd(fd, rec->size, hex, &n);
	if (rc)
		return evf_msg(msg, msgsz, EVLOG_EIO, "%s: %s", shown, strerror(-rc));
	if (n != rec->size || strcmp(hex, rec->digest + 7))
		return evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: its content differs from the SHA-256 "
			       "that %s records (altered or replaced since it was published)", shown, by);
	return 0;
}

static int push(struct evlog_chain *c, int fd, const char *name)
{
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 8;
		int *f = realloc(c->fd, nc * sizeof(*f));
		if (f)
			c->fd = f;
		char **s = f ? realloc(c->name, nc * sizeof(*s)) : NULL;
		if (!s)
			return -1;
		c->name = s;
		c->cap = nc;
	}
	if (!(c->name[c->n] = strdup(name)))
		return -1;
	c->fd[c->n++] = fd;
	return 0;
}

/* Every segment stays open until the chain is closed: a long profile may
 * pass the soft limit on open files, which the hard limit allows raising. */
static int lookup_fd(int (*lookup)(void *, const char *), void *ctx, const char *name)
{
	int fd = lookup(ctx, name);
	struct rlimit rl;

	if (fd == -EMFILE && !getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (!setrlimit(RLIMIT_NOFILE, &rl))
			fd = lookup(ctx, name);
	}
	return fd;
}

int evlog_chain_lookup_at(void *dirfd_ptr, const char *name)
{
	int fd = openat(*(int *)dirfd_ptr, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The segment before `cur` (segment rec->seg), found and checked. */
static int step(struct evlog_chain *c, const char *dir, const char *by, const struct seg_rec *rec,
		int (*lookup)(void *, const char *), void *ctx, char *msg, size_t msgsz)
{
	char shown[4096 + SEGNAME_MAX];
	struct seg_rec prev;

	snprintf(shown, sizeof(shown), "%s%s", dir, rec->name);
	int fd = lookup_fd(lookup, ctx, rec->name);
	if (fd < 0)
		return evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: missing (%s): segment %u of the log, "
			       "recorded by %s; give every segment, in the directory where it was "
			       "published", shown, strerror(-fd), rec->seg - 1, by);
	int rc = check_seg(fd, shown, by, rec, msg, msgsz);
	if (!rc)
		rc = read_rec(fd, shown, &prev, msg, msgsz);
	if (!rc && prev.seg != rec->seg - 1)
		rc = evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: segment %u of its log, but %s records it "
			     "as segment %u", shown, prev.seg, by, rec->seg - 1);
	if (!rc && push(c, fd, shown))
		rc = evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	if (rc) {
		close(fd);
		return rc;
	}
	return 0;
}

int evlog_chain_open(struct evlog_chain **out, int fd, const char *shown,
		     int (*lookup)(void *ctx, const char *name), void *ctx,
		     char *msg, size_t msgsz)
{
	struct seg_rec rec;

	*out = NULL;
	struct evlog_chain *c = calloc(1, sizeof(*c));
	if (!c || push(c, fd, shown)) {
		free(c);
		close(fd);
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	}
	const char *slash = strrchr(shown, '/');
	char *dir = strndup(shown, slash ? (size_t)(slash - shown) + 1 : 0);
	int rc = dir ? read_rec(fd, shown, &rec, msg, msgsz)
		     : evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	if (!rc && rec.seg > EVLOG_CHAIN_MAX)
		rc = evf_msg(msg, msgsz, EVLOG_ESEGMENT, "%s: segment %u of a log, more than the %u "
			     "a log may have", shown, rec.seg, EVLOG_CHAIN_MAX);
	while (!rc && rec.seg >= 2) {
		const char *by = c->name[c->n - 1];
		rc = step(c, dir, by, &rec, lookup, ctx, msg, msgsz);
		if (!rc)
			rc = read_rec(c->fd[c->n - 1], c->name[c->n - 1], &rec, msg, msgsz);
	}
	free(dir);
	if (rc) {
		evlog_chain_close(c);
		return rc;
	}
	for (size_t i = 0; i < c->n / 2; i++) { /* oldest first */
		int f = c->fd[i];
		char *s = c->name[i];
		c->fd[i] = c->fd[c->n - 1 - i];
		c->name[i] = c->name[c->n - 1 - i];
		c->fd[c->n - 1 - i] = f;
		c->name[c->n - 1 - i] = s;
	}
	*out = c;
	return 0;
}

size_t evlog_chain_count(const struct evlog_chain *c)
{
	return c ? c->n : 0;
}

int evlog_chain_fd(const struct evlog_chain *c, size_t i)
{
	return c && i < c->n ? c->fd[i] : -1;
}

const char *evlog_chain_name(const struct evlog_chain *c, size_t i)
{
	return c && i < c->n ? c->name[i] : NULL;
}

void evlog_chain_close(struct evlog_chain *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		close(c->fd[i]);
		free(c->name[i]);
	}
	free(c->fd);
	free(c->name);
	free(c);
}
