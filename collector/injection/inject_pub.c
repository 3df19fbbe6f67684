// SPDX-License-Identifier: Apache-2.0
/*
 * The library logs' publisher (inject_pub.h). The collector and the
 * publisher share one anonymous mapping, made before the fork: a count of
 * the slots used and LT_IPUB_MAX slots, each a request (written by the
 * collector before the slot is QUEUED) and its answer (written by the
 * publisher before it is DONE). The slot's state is what both change, each
 * by compare-and-swap, which settles the race between the collector giving
 * up and the publisher naming the log:
 *
 *   QUEUED -> WORKING (taken) -> NAMING (the copy is synced, the rename
 *   begins) -> DONE (answered): the publisher;
 *   QUEUED, WORKING or NAMING -> GIVEN_UP: the collector, at its deadline.
 *
 * A publisher that cannot move WORKING -> NAMING removes its copy; one that
 * cannot move NAMING -> DONE after a rename that worked removes the name.
 * A pipe wakes the publisher; EOF on it (the collector is done, or died),
 * or a parent that changed, ends it.
 */
#include "inject_pub.h"
#include "collector/session/clock.h"
#include "collector/session/store.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { S_FREE, S_QUEUED, S_WORKING, S_NAMING, S_DONE, S_GIVEN_UP };
enum { OP_PUBLISH = 1, OP_DESCRIBE, OP_FETCH };

struct pub_slot {
	_Atomic int state;
	int op;
	struct lt_ilog log;           /* publish: the sealed log; describe: its name */
	struct lt_ipub_res res;
};

struct pub_shm {
	_Atomic int used;             /* slots handed out (may pass LT_IPUB_MAX: refused) */
	struct pub_slot slot[LT_IPUB_MAX];
};

struct lt_ipub {
	struct pub_shm *shm;
	pid_t pid;
	int wake;                     /* the pipe's write end */
	char died[128];               /* how the process ended, if it did before its answers */
};

static int cas(_Atomic int *state, int from, int to)
{
	return atomic_compare_exchange_strong(state, &from, to);
}

/* ------------------------------------------------------------ the publisher */

struct p_ctx {
	struct pub_shm *shm;
	int wake;
	struct lt_ipub_dirs d;
	pid_t parent;
};

/* Sleep until woken (a second at most): 0 once the collector is done or gone. */
static int p_wait(struct p_ctx *c)
{
	struct pollfd p = { c->wake, POLLIN, 0 };
	char b[256];

	if (poll(&p, 1, 1000) > 0 && read(c->wake, b, sizeof(b)) == 0)
		return 0;
	return getppid() == c->parent;
}

/* A log the collector gave up on, finished late: said where it is (stderr:
 * a terminal or a file only, lt_store_child). */
static void p_late(const struct p_ctx *c, const struct pub_slot *s, const struct lt_ilog *l)
{
	fprintf(stderr, "llmtracker: the output store answered after the profile had given up on the "
		"library log %s: not published; it stays as %s/%s\n", l->name,
		s->op == OP_FETCH ? c->d.launch : c->d.stage, l->partial);
}

/* The answer, unless the collector gave up meanwhile: 1 answered. */
static int p_answer(struct pub_slot *s, int from, const struct lt_ipub_res *res)
{
	s->res = *res; /* read only once DONE */
	return cas(&s->state, from, S_DONE);
}

static void p_publish(struct p_ctx *c, struct pub_slot *s)
{
	struct lt_ilog l = s->log;
	struct lt_ipub_res res = { 0 };

	res.rc = s->op == OP_FETCH ?
		 lt_ilog_copy_staged(&l, c->d.launchfd, c->d.owner, c->d.outfd, res.err, sizeof(res.err)) :
		 lt_ilog_copy(&l, c->d.stagefd, c->d.outfd, res.err, sizeof(res.err));
	if (res.rc) {
		p_answer(s, S_WORKING, &res);
		return;
	}
	if (getppid() != c->parent || !cas(&s->state, S_WORKING, S_NAMING)) {
		lt_ilog_uncopy(&l, c->d.outfd);
		p_late(c, s, &l);
		return;
	}
	res.rc = lt_ilog_name(&l, c->d.outfd, res.err, sizeof(res.err));
	res.size = l.size;
	memcpy(res.digest, l.digest, sizeof(res.digest));
	res.capped = l.capped;
	res.dev = l.dev;
	res.ino = l.ino;
	if (!p_answer(s, S_NAMING, &res)) {
		if (!res.rc)
			lt_ilog_unname(&l, c->d.outfd);
		p_late(c, s, &l);
	}
}

static void p_take(struct p_ctx *c, struct pub_slot *s)
{
	struct lt_ipub_res res = { 0 };

	if (!cas(&s->state, S_QUEUED, S_WORKING))
		return; /* given up */
	if (s->op != OP_DESCRIBE)
		return p_publish(c, s);
	res.rc = lt_ilog_describe(c->d.outfd, s->log.name, &res.size, res.digest, sizeof(res.digest), res.err,
				  sizeof(res.err));
	p_answer(s, S_WORKING, &res);
}

static __attribute__((noreturn)) void p_main(struct p_ctx *c)
{
	int keep[4] = { c->wake, c->d.outfd, c->d.stagefd, c->d.launchfd };

	lt_store_child("llmt-publish", keep, c->d.launchfd >= 0 ? 4 : 3);
	c->wake = keep[0];
	c->d.outfd = keep[1];
	c->d.stagefd = keep[2];
	c->d.launchfd = c->d.launchfd >= 0 ? keep[3] : -1;
	/* In order; a slot still being filled (FREE) is waited for. */
	for (int i = 0;;) {
		while (i < LT_IPUB_MAX && atomic_load(&c->shm->slot[i].state) != S_FREE)
			p_take(c, &c->shm->slot[i++]);
		if (!p_wait(c))
			_exit(0);
	}
}

/* ------------------------------------------------------------ the collector */

int lt_ipub_start(struct lt_ipub **out, const struct lt_ipub_dirs *dirs, char *err, size_t errsz)
{
	struct lt_ipub *p = calloc(1, sizeof(*p));
	int pfd[2] = { -1, -1 }, e = 0;

	*out = NULL;
	if (!p)
		e = ENOMEM;
	else if ((p->shm = mmap(NULL, sizeof(*p->shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
				0)) == MAP_FAILED)
		e = errno, p->shm = NULL;
	else if (pipe2(pfd, O_CLOEXEC))
		e = errno;
	else if ((p->pid = fork()) < 0)
		e = errno;
	if (p && p->pid == 0 && !e) {
		struct p_ctx c = { .shm = p->shm, .wake = pfd[0], .d = *dirs, .parent = getppid() };
		close(pfd[1]);
		p_main(&c);
	}
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (e) {
		if (pfd[1] >= 0)
			close(pfd[1]);
		if (p && p->shm)
			munmap(p->shm, sizeof(*p->shm));
		free(p);
		snprintf(err, errsz, "cannot start the process that publishes the library logs: %s", strerror(e));
		return -e;
	}
	p->wake = pfd[1];
	fcntl(p->wake, F_SETFL, O_NONBLOCK); /* a full pipe has woken it already */
	*out = p;
	return 0;
}

pid_t lt_ipub_pid(const struct lt_ipub *p)
{
	return p ? p->pid : 0;
}

static int request(struct lt_ipub *p, int op, const struct lt_ilog *l)
{
	int i = atomic_fetch_add(&p->shm->used, 1);
	char b = 0;

	if (i >= LT_IPUB_MAX)
		return -ENOSPC;
	struct pub_slot *s = &p->shm->slot[i];
	s->op = op;
	s->log = *l;
	s->log.rfd = s->log.tail_fd = -1; /* ours: the publisher opens the file itself */
	atomic_store(&s->state, S_QUEUED);
	if (write(p->wake, &b, 1) < 0) {
		/* full: it is awake already; gone: lt_ipub_result says so */
	}
	return i;
}

int lt_ipub_publish(struct lt_ipub *p, const struct lt_ilog *l)
{
	return request(p, OP_PUBLISH, l);
}

/* A request for a log known by its name only. */
static int request_name(struct lt_ipub *p, int op, const char *name)
{
	struct lt_ilog l = { 0 };

	snprintf(l.name, sizeof(l.name), "%s", name);
	return request(p, op, &l);
}

int lt_ipub_describe(struct lt_ipub *p, const char *name)
{
	return request_name(p, OP_DESCRIBE, name);
}

int lt_ipub_fetch(struct lt_ipub *p, const char *name)
{
	return request_name(p, OP_FETCH, name);
}

/* Has the process ended (its answers with it)? Said in p->died. */
static int p_ended(struct lt_ipub *p)
{
	int status;

	if (p->pid > 0 && waitpid(p->pid, &status, WNOHANG) == p->pid) {
		p->pid = 0;
		snprintf(p->died, sizeof(p->died), "the process that publishes the library logs ended (%s %d)",
			 WIFSIGNALED(status) ? "signal" : "status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	}
	return p->pid <= 0;
}

int lt_ipub_result(struct lt_ipub *p, int ticket, uint64_t deadline_ms, struct lt_ipub_res *res)
{
	struct pub_slot *s = &p->shm->slot[ticket];

	memset(res, 0, sizeof(*res));
	for (;;) {
		int st = atomic_load(&s->state);
		if (st == S_DONE) {
			*res = s->res;
			return 1;
		}
		int ended = p_ended(p);
		if (st == S_GIVEN_UP || ((ended || lt_mono_ms() >= deadline_ms) && cas(&s->state, st, S_GIVEN_UP))) {
			res->rc = ended ? -ECHILD : -ETIMEDOUT;
			snprintf(res->err, sizeof(res->err), "%s", ended ? p->died : "");
			return 0;
		}
		struct timespec ts = { 0, 5 * 1000000 };
		nanosleep(&ts, NULL);
	}
}

void lt_ipub_close(struct lt_ipub *p)
{
	int status, used;

	if (!p)
		return;
	used = atomic_load(&p->shm->used);
	for (int i = 0; i < used && i < LT_IPUB_MAX; i++) {
		_Atomic int *state = &p->shm->slot[i].state;
		int st;
		while ((st = atomic_load(state)) != S_DONE && st != S_GIVEN_UP && !cas(state, st, S_GIVEN_UP))
			;
	}
	close(p->wake); /* EOF: it ends once its call in progress returns */
	for (int i = 0; p->pid > 0 && i < 20; i++) {
		struct timespec ts = { 0, 5 * 1000000 };
		if (waitpid(p->pid, &status, WNOHANG) == p->pid)
			break;
		nanosleep(&ts, NULL);
	}
	munmap(p->shm, sizeof(*p->shm));
	free(p);
}
