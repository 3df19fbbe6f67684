// SPDX-License-Identifier: Apache-2.0
/*
 * debuginfod: debug files by build-id through elfutils' client; see
 * debuginfod.h.
 */
#include "debuginfod.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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
	uint8_t state;           /* enum dbgd_id_state */
	int fd;                  /* -1: none found */
};

enum dbgd_id_state { ID_QUEUED, ID_FETCHING, ID_DONE };

/* One lookup under way: what the progress callback checks. */
struct dbgd_call {
	struct lt_dbgd *d;
	uint64_t deadline_ns;
};

struct lt_dbgd {
	pthread_mutex_t lock;    /* all below; a fetch runs without it */
	pthread_cond_t cond;     /* an id queued or done, or stopping */
	int state;               /* 0 not loaded yet, 1 ready, -1 unavailable */
	void *lib;
	struct dbgd_api api;
	debuginfod_client *client;   /* the caller's (lt_dbgd_find) */
	pthread_t worker;            /* lt_dbgd_request's lookups */
	int worker_state;            /* 0 none, 1 running, -1 could not start */
	int stopping;
	uint64_t completed;          /* lookups by the worker that found a file */
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
	struct lt_dbgd *d;

	if (!urls || !urls[strspn(urls, " \t")] || !(d = calloc(1, sizeof(*d))))
		return NULL;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	return d;
}

void lt_dbgd_free(struct lt_dbgd *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	__atomic_store_n(&d->stopping, 1, __ATOMIC_RELAXED); /* cancels a fetch under way */
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->worker_state == 1)
		pthread_join(d->worker, NULL);
	for (size_t i = 0; i < d->n_ids; i++)
		if (d->ids[i].fd >= 0)
			close(d->ids[i].fd);
	free(d->ids);
	if (d->client)
		d->api.end(d->client);
	/* d->lib stays loaded: libcurl, which it brings, registers handlers
	 * that do not survive an unload. */
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* The library's get_user_data, for the progress callback, which gets
 * only the client (the library is loaded once per process anyway). */
static void *(*dbgd_get_user_data)(debuginfod_client *c);

/* Called by the client about once a second while it waits on a server:
 * non-zero cancels the download. */
static int dbgd_progress(debuginfod_client *c, long a, long b)
{
	struct dbgd_call *call = dbgd_get_user_data ? dbgd_get_user_data(c) : NULL;

	(void)a; (void)b;
	return call && (now_ns() >= call->deadline_ns ||
			__atomic_load_n(&call->d->stopping, __ATOMIC_RELAXED));
}

static debuginfod_client *dbgd_client(struct lt_dbgd *d)
{
	debuginfod_client *c = d->api.begin();

	if (c)
		d->api.set_progressfn(c, dbgd_progress);
	return c;
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
	dbgd_get_user_data = d->api.get_user_data;
	if (!(d->client = dbgd_client(d))) {
		snprintf(d->error, sizeof(d->error), "debuginfod_begin failed");
		return -1;
	}
	return 0;
}

static struct dbgd_id *dbgd_id_find(struct lt_dbgd *d, const char *build_id)
{
	for (size_t i = 0; i < d->n_ids; i++)
		if (!strcmp(d->ids[i].build_id, build_id))
			return &d->ids[i];
	return NULL;
}

/* A new id to look up (locked), or NULL, with *err, when it cannot be:
 * -EINVAL, -ENOSYS the library is unavailable, -ETIME the time is up. */
static struct dbgd_id *dbgd_id_add(struct lt_dbgd *d, const char *build_id, int *err)
{
	struct dbgd_id *id;

	*err = -EINVAL;
	if (!build_id[0] || strlen(build_id) >= sizeof(id->build_id) ||
	    strspn(build_id, "0123456789abcdef") != strlen(build_id))
		return NULL;
	if (!d->state)
		d->state = dbgd_load(d) ? -1 : 1;
	*err = -ENOSYS;
	if (d->state < 0)
		return NULL;
	*err = -ETIME;
	if (d->st.ns >= (uint64_t)LT_DBGD_TOTAL_S * 1000000000ull || d->n_ids >= LT_DBGD_MAX_IDS ||
	    (!d->ids && !(d->ids = calloc(LT_DBGD_MAX_IDS, sizeof(*d->ids))))) {
		d->st.skipped++;
		return NULL;
	}
	id = &d->ids[d->n_ids++];
	snprintf(id->build_id, sizeof(id->build_id), "%s", build_id);
	id->state = ID_QUEUED;
	id->fd = -1;
	return id;
}

/* The client's answer for one build-id: its file open read-only, checked
 * to be a regular file (a cache directory is writable by its owner, not
 * necessarily only by us), or -errno. */
static int dbgd_fetch(struct lt_dbgd *d, debuginfod_client *c, const char *build_id,
		      uint64_t deadline)
{
	struct dbgd_call call = { d, deadline };
	char *path = NULL;
	struct stat sb;
	int fd;

	d->api.set_user_data(c, &call);
	fd = d->api.find_debuginfo(c, (const unsigned char *)build_id, 0, &path);
	d->api.set_user_data(c, NULL);
	free(path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

/* Look id up with client c: unlocked while the client works, then the
 * answer recorded and the waiters woken. Locked on entry and exit. */
static int dbgd_lookup(struct lt_dbgd *d, debuginfod_client *c, struct dbgd_id *id)
{
	uint64_t t0 = now_ns(), total = (uint64_t)LT_DBGD_TOTAL_S * 1000000000ull;
	uint64_t lookup = (uint64_t)LT_DBGD_LOOKUP_S * 1000000000ull;
	uint64_t left = d->st.ns < total ? total - d->st.ns : 0;
	uint64_t deadline = t0 + (left < lookup ? left : lookup);
	char build_id[sizeof(id->build_id)];
	int fd;

	id->state = ID_FETCHING;
	memcpy(build_id, id->build_id, sizeof(build_id));
	pthread_mutex_unlock(&d->lock);
	fd = c ? dbgd_fetch(d, c, build_id, deadline) : -ENOMEM;
	pthread_mutex_lock(&d->lock);
	d->st.ns += now_ns() - t0;
	if (fd >= 0)
		d->st.found++;
	else if (now_ns() >= deadline)
		d->st.timed_out++;
	else
		d->st.missed++;
	id->fd = fd >= 0 ? fd : -1;
	id->state = ID_DONE;
	pthread_cond_broadcast(&d->cond);
	return fd >= 0 ? 0 : -ENOENT;
}

/* A copy of a done id's file, or -ENOENT. */
static int dbgd_answer(const struct dbgd_id *id)
{
	int fd = id->fd >= 0 ? fcntl(id->fd, F_DUPFD_CLOEXEC, 0) : -ENOENT;

	return fd >= 0 || fd == -ENOENT ? fd : -errno;
}

int lt_dbgd_find(struct lt_dbgd *d, const char *build_id)
{
	struct dbgd_id *id;
	int r = 0;

	pthread_mutex_lock(&d->lock);
	id = dbgd_id_find(d, build_id);
	if (!id)
		id = dbgd_id_add(d, build_id, &r);
	if (id && id->state == ID_QUEUED)
		dbgd_lookup(d, d->client, id);
	while (id && id->state != ID_DONE && !d->stopping)
		pthread_cond_wait(&d->cond, &d->lock); /* the worker has it: bounded by its deadline */
	if (id)
		r = id->state == ID_DONE ? dbgd_answer(id) : -ETIME;
	pthread_mutex_unlock(&d->lock);
	return r;
}

/* The worker: queued ids, one at a time, with its own client (a client
 * is not to be shared between threads). */
static void *dbgd_worker(void *arg)
{
	struct lt_dbgd *d = arg;
	debuginfod_client *c = dbgd_client(d);

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		struct dbgd_id *id = NULL;

		for (size_t i = 0; i < d->n_ids && !id; i++)
			if (d->ids[i].state == ID_QUEUED)
				id = &d->ids[i];
		if (!id) {
			pthread_cond_wait(&d->cond, &d->lock);
			continue;
		}
		if (!dbgd_lookup(d, c, id))
			__atomic_add_fetch(&d->completed, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&d->lock);
	if (c)
		d->api.end(c);
	return NULL;
}

/* The worker with every signal blocked: SIGINT and SIGTERM are for the
 * poll loop, which they wake. */
static int dbgd_start_worker(struct lt_dbgd *d)
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&d->worker, NULL, dbgd_worker, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

int lt_dbgd_request(struct lt_dbgd *d, const char *build_id)
{
	struct dbgd_id *id;
	int r = -EINPROGRESS;

	pthread_mutex_lock(&d->lock);
	id = dbgd_id_find(d, build_id);
	if (id && id->state == ID_DONE) {
		r = dbgd_answer(id);
	} else if (!id && (id = dbgd_id_add(d, build_id, &r))) {
		if (!d->worker_state)
			d->worker_state = dbgd_start_worker(d) ? -1 : 1;
		if (d->worker_state < 0) {       /* no thread: never blocks the caller */
			id->state = ID_DONE;
			r = -ENOENT;
		} else {
			pthread_cond_broadcast(&d->cond);
			r = -EINPROGRESS;
		}
	}
	pthread_mutex_unlock(&d->lock);
	return r;
}

uint64_t lt_dbgd_completed(struct lt_dbgd *d)
{
	return __atomic_load_n(&d->completed, __ATOMIC_ACQUIRE);
}

void lt_dbgd_stats(struct lt_dbgd *d, struct lt_dbgd_stats *st)
{
	pthread_mutex_lock(&d->lock);
	*st = d->st;
	st->error = d->state < 0 ? d->error : NULL;
	pthread_mutex_unlock(&d->lock);
}
