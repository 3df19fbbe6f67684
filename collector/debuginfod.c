// SPDX-License-Identifier: Apache-2.0
/*
 * debuginfod: debug files by build-id through elfutils' client; see
 * debuginfod.h.
 */
#include "debuginfod.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The client's API (elfutils' debuginfod.h, since 0.179), declared here:
 * its header (libdebuginfod-dev) is not a build dependency, and the
 * library is loaded only when a profile asks for it, so that a node
 * without it (or a collector that never needs it) runs as before. */
typedef struct debuginfod_client debuginfod_client;
typedef int (*debuginfod_progressfn_t)(debuginfod_client *c, long a, long b);

struct dbgd_api {
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *c);
	int (*find_debuginfo)(debuginfod_client *c, const unsigned char *build_id,
			      int build_id_len, char **path);
	void (*set_progressfn)(debuginfod_client *c, debuginfod_progressfn_t fn);
	void (*set_user_data)(debuginfod_client *c, void *data);
	void *(*get_user_data)(debuginfod_client *c);
};

struct dbgd_id {
	char build_id[41];
	int fd;                  /* -1: none found */
};

struct lt_dbgd {
	int state;               /* 0 not loaded yet, 1 ready, -1 unavailable */
	void *lib;
	struct dbgd_api api;
	debuginfod_client *client;
	uint64_t deadline_ns;    /* of the lookup under way (progress callback) */
	struct dbgd_id *ids;
	size_t n_ids;
	struct lt_dbgd_stats st;
	char error[256];
};

/* NULL in a static executable, where dlopen would bring in a second libc
 * with its own heap (as elfsym.c's demangler). */
extern const char _DYNAMIC[] __attribute__((weak));

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct lt_dbgd *lt_dbgd_new(void)
{
	const char *urls = getenv("DEBUGINFOD_URLS");

	if (!urls || !urls[strspn(urls, " \t")])
		return NULL;
	return calloc(1, sizeof(struct lt_dbgd));
}

void lt_dbgd_free(struct lt_dbgd *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_ids; i++)
		if (d->ids[i].fd >= 0)
			close(d->ids[i].fd);
	free(d->ids);
	if (d->client)
		d->api.end(d->client);
	/* d->lib stays loaded: libcurl, which it brings, registers handlers
	 * that do not survive an unload. */
	free(d);
}

/* The library's get_user_data, for the progress callback, which gets
 * only the client (the library is loaded once per process anyway). */
static void *(*dbgd_get_user_data)(debuginfod_client *c);

/* Called by the client about once a second while it waits on a server:
 * non-zero cancels the download. */
static int dbgd_progress(debuginfod_client *c, long a, long b)
{
	struct lt_dbgd *d = dbgd_get_user_data ? dbgd_get_user_data(c) : NULL;

	(void)a; (void)b;
	return d && now_ns() >= d->deadline_ns;
}

static int dbgd_load(struct lt_dbgd *d)
{
	static const char *const names[] = {
		"debuginfod_begin", "debuginfod_end", "debuginfod_find_debuginfo",
		"debuginfod_set_progressfn", "debuginfod_set_user_data",
		"debuginfod_get_user_data",
	};
	void **slots[] = {
		(void **)&d->api.begin, (void **)&d->api.end, (void **)&d->api.find_debuginfo,
		(void **)&d->api.set_progressfn, (void **)&d->api.set_user_data,
		(void **)&d->api.get_user_data,
	};
	size_t i;

	if (!_DYNAMIC) {
		snprintf(d->error, sizeof(d->error),
			 "the static collector cannot load libdebuginfod.so.1");
		return -1;
	}
	d->lib = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!d->lib) {
		snprintf(d->error, sizeof(d->error), "%s", dlerror());
		return -1;
	}
	for (i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!(*slots[i] = dlsym(d->lib, names[i]))) {
			snprintf(d->error, sizeof(d->error), "libdebuginfod.so.1 has no %s",
				 names[i]);
			return -1;
		}
	d->client = d->api.begin();
	if (!d->client) {
		snprintf(d->error, sizeof(d->error), "debuginfod_begin failed");
		return -1;
	}
	dbgd_get_user_data = d->api.get_user_data;
	d->api.set_user_data(d->client, d);
	d->api.set_progressfn(d->client, dbgd_progress);
	return 0;
}

static struct dbgd_id *dbgd_remember(struct lt_dbgd *d, const char *build_id)
{
	struct dbgd_id *id;

	if (d->n_ids >= LT_DBGD_MAX_IDS)
		return NULL;
	if (!d->ids && !(d->ids = calloc(LT_DBGD_MAX_IDS, sizeof(*d->ids))))
		return NULL;
	id = &d->ids[d->n_ids++];
	snprintf(id->build_id, sizeof(id->build_id), "%s", build_id);
	id->fd = -1;
	return id;
}

/* The client's answer for one build-id: its file open read-only, checked
 * to be a regular file (a cache directory is writable by its owner, not
 * necessarily only by us), or -1. */
static int dbgd_fetch(struct lt_dbgd *d, const char *build_id, uint64_t deadline)
{
	char *path = NULL;
	struct stat sb;
	int fd;

	d->deadline_ns = deadline;
	fd = d->api.find_debuginfo(d->client, (const unsigned char *)build_id, 0, &path);
	free(path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

int lt_dbgd_find(struct lt_dbgd *d, const char *build_id)
{
	uint64_t t0 = now_ns(), total = (uint64_t)LT_DBGD_TOTAL_S * 1000000000ull;
	uint64_t lookup = (uint64_t)LT_DBGD_LOOKUP_S * 1000000000ull, deadline;
	struct dbgd_id *id;
	size_t i;
	int fd;

	if (!build_id[0] || strspn(build_id, "0123456789abcdef") != strlen(build_id))
		return -EINVAL;
	for (i = 0; i < d->n_ids; i++)
		if (!strcmp(d->ids[i].build_id, build_id))
			return d->ids[i].fd >= 0 ? fcntl(d->ids[i].fd, F_DUPFD_CLOEXEC, 0) : -ENOENT;
	if (!d->state)
		d->state = dbgd_load(d) ? -1 : 1;
	if (d->state < 0)
		return -ENOSYS;
	if (d->st.ns >= total || !(id = dbgd_remember(d, build_id))) {
		d->st.skipped++;
		return -ETIME;
	}
	deadline = t0 + (total - d->st.ns < lookup ? total - d->st.ns : lookup);
	fd = dbgd_fetch(d, build_id, deadline);
	d->st.ns += now_ns() - t0;
	if (fd < 0 && now_ns() >= deadline) {
		d->st.timed_out++;
		return -ETIME;
	}
	if (fd < 0) {
		d->st.missed++;
		return -ENOENT;
	}
	d->st.found++;
	id->fd = fd;
	return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

void lt_dbgd_stats(const struct lt_dbgd *d, struct lt_dbgd_stats *st)
{
	*st = d->st;
	st->error = d->state < 0 ? d->error : NULL;
}
