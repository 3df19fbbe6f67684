// SPDX-License-Identifier: Apache-2.0
/*
 * The injected library's logs a profile's main log records (EV_LIB_LOG):
 * the collector names each one it published, with its size
 * and SHA-256. A library log of that session joins the profile only when
 * its file name, size and digest match one of them (sessions.c): a session
 * id is no secret (it is in every 0644 log), so a log that merely carries
 * it proves nothing; a forged, cut or grown file is left out and named.
 */
#include "converter/conv_int.h"
#include "common/grow.h"
#include "common/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIBLOGS_MAX 100000   /* records kept from all main logs together */
#define LIBLOG_NAME_MAX 255
#define LIBLOG_DIGEST_LEN (7 + 2 * LT_SHA256_LEN) /* "sha256:" HEX */

struct cv_liblog {
	uint8_t session[EVLOG_SESSION_LEN];
	char name[LIBLOG_NAME_MAX + 1];
	uint64_t size;
	char digest[LIBLOG_DIGEST_LEN + 1];
};

/* A record of the main log, if well formed. */
static int liblog_take(struct cv_liblogs *v, const uint8_t *session, const struct evlog_event *ev)
{
	struct evlog_str n = ev->u.lib_log.name, d = ev->u.lib_log.digest;

	if (!n.len || n.len > LIBLOG_NAME_MAX || d.len != LIBLOG_DIGEST_LEN || v->n >= LIBLOGS_MAX)
		return 0;
	if (lt_grow((void **)&v->v, &v->cap, v->n + 1, sizeof(*v->v), 16))
		return -1;
	struct cv_liblog *e = &v->v[v->n++];

	memcpy(e->session, session, EVLOG_SESSION_LEN);
	memcpy(e->name, n.ptr, n.len);
	e->name[n.len] = 0;
	e->size = ev->u.lib_log.size;
	memcpy(e->digest, d.ptr, d.len);
	e->digest[d.len] = 0;
	return 0;
}

int cv_liblogs_read(struct cv_liblogs *v, const struct cv_log *l, const uint8_t *session)
{
	struct evlog_reader *r;
	const struct evlog_event *ev;
	char msg[256];
	int rc;

	if (cv_log_reader(l, &r, msg, sizeof(msg)))
		return 0; /* unreadable: pass 1 says why */
	while ((rc = evlog_next(r, &ev)) == 0)
		if (ev->type == EV_LIB_LOG && liblog_take(v, session, ev)) {
			evlog_reader_close(r);
			return -1;
		}
	evlog_reader_close(r);
	return 0;
}

/* The file name a log had where it was found (an archive member's too). */
static const char *base_name(const char *shown)
{
	const char *s = strrchr(shown, '/'), *a = strrchr(shown, '!');

	if (a && (!s || a > s))
		s = a;
	return s ? s + 1 : shown;
}

static int digest_is(const char *path, uint64_t size, const char *want)
{
	char hex[LT_SHA256_HEX];
	uint64_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc = fd < 0 ? -errno : lt_sha256_fd(fd, size, hex, &n);

	if (fd >= 0)
		close(fd);
	return !rc && n == size && !strcmp(want + 7, hex);
}

const char *cv_liblogs_check(const struct cv_liblogs *v, const uint8_t *session, const char *shown,
			     const char *path)
{
	const char *name = base_name(shown), *why = "no collector log of its session records it";
	struct stat sb;

	if (stat(path, &sb))
		return "cannot be read";
	for (size_t i = 0; i < v->n; i++) {
		const struct cv_liblog *e = &v->v[i];

		if (memcmp(e->session, session, EVLOG_SESSION_LEN) || strcmp(e->name, name))
			continue;
		if ((uint64_t)sb.st_size != e->size) {
			why = (uint64_t)sb.st_size > e->size ? "larger than its collector log records"
							     : "smaller than its collector log records";
			continue;
		}
		if (digest_is(path, e->size, e->digest))
			return NULL;
		why = "its content differs from the digest its collector log records";
	}
	return why;
}

void cv_liblogs_free(struct cv_liblogs *v)
{
	free(v->v);
	memset(v, 0, sizeof(*v));
}
