/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which of several `batch` workers converts a unit, on any shared directory:
 * a local disk, NFS, or an object store mounted through FUSE (s3fs, ossfs).
 *
 * What an object-store mount gives: an object is uploaded whole when its
 * file is closed (another mount sees it whole or not at all), and a listing
 * (S3/OSS LIST, strongly consistent on both) sees every object whose upload
 * or deletion finished before the listing began. What it does not give:
 * O_EXCL across mounts (each mount checks by itself), an atomic rename (a
 * server-side copy, then a delete), link, or fresh attributes: s3fs keeps
 * stat results for stat_cache_expire (900 s by default), so a file that
 * another mount rewrote or removed keeps its old size and mtime here, and a
 * mtime is no heartbeat. So nothing here reads a mtime or content that can
 * change, and no name is written twice: every fact is the existence of a
 * name in a fresh listing of the unit's directory, and a name carries its
 * own data (a lease's expiry is in its name). Names use [A-Za-z0-9._-]
 * only: s3fs's server-side copy (its rename) loses keys holding '+', ':',
 * '=', ',' or '@'.
 *
 * NFS: the unit's directory is opened by name for every listing; the open
 * revalidates it (close-to-open consistency) and the listing comes fresh
 * from the server whenever the directory changed, which its change
 * attribute (NFSv4) or mtime (NFSv3; fine-grained on current servers) tells.
 * Creates and unlinks are done on the server before they return, O_EXCL is
 * atomic (v3 and v4), rename is atomic. Local disks give all of that.
 *
 * The claim is Lamport's bakery on names, in the unit's directory:
 *   intent.<wid>.<exp>        worker wid is choosing a ticket (exp: ms
 *                             since the epoch; lives a minute at most)
 *   lease.<t>.<wid>.<exp>     ticket t of worker wid, live until exp;
 *                             renewed by new names (a new exp), the newest
 *                             two kept, so a listing always meets one
 * A worker writes its intent, lists, takes ticket t = 1 + the highest
 * ticket listed (live or not), writes its lease, removes its intent, then
 * lists until two listings in a row (the second begun after the first
 * ended) show no live intent of another worker: the unit is the worker's if
 * its (t, wid) is the lowest of the live leases there; losers remove their
 * lease at once. Two listings, because one is no snapshot: it may miss an
 * intent removed and a lease written while it ran; every change under way
 * during the first has finished before the second begins. Why two workers
 * A and B cannot both win: had B's second listing begun after A's lease was
 * written, B saw it, and A saw B's likewise, and only one of them comes
 * first. So say B's began before. Then A's intent, removed only after A's
 * lease was written, was not yet there when B's first listing looked, so
 * A wrote it after B's lease, A's ticket listing saw B's lease, A's ticket
 * is higher, and A's listings, begun after B's lease, show B first.
 *
 * Leases run out: a lease past its exp (by the reader's clock) is ignored,
 * and removed by the next owner. An owner renews 4 times a lease, and
 * counts itself lost once no more than a quarter of the lease is left of
 * its newest renewal (a renewal completing later does not count, and none
 * is tried after): that quarter is the margin for the clocks of two hosts
 * (they must agree to well within it: NTP) and for the time between a
 * check and what follows it. A worker whose doorway outlasted three
 * quarters of its intent's life gives up its ticket (others stop waiting
 * for an intent once it runs out). The owner checks claim_held() before
 * each file it publishes: a worker stalled past its lease publishes
 * nothing more once another may have taken over.
 */
#include "converter/claim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/io.h"

#define UNIT_ENTRIES_MAX 4096   /* names of a unit's directory read per listing */
#define CONTEST_MAX_MS 30000    /* longest wait for others' intents */
#define INTENT_MAX_MS 60000     /* an intent's life: the doorway is 3 operations */

struct seen {
	uint64_t ticket;
	int64_t exp;
	char wid[WID_MAX + 1];
};

int64_t claim_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Opened by name for every listing: on NFS the open revalidates it. */
static int unit_open(int statefd, const char *key)
{
	return openat(statefd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* "<digits>" of at most 19, up to `end` (a '.' or NUL): the value, or -1. */
static int64_t parse_num(const char **p, char end)
{
	int64_t v = 0;
	int n = 0;

	for (; **p >= '0' && **p <= '9' && n < 19; (*p)++, n++)
		v = v * 10 + (**p - '0');
	if (!n || **p != end)
		return -1;
	if (end)
		(*p)++;
	return v;
}

/* "<wid>." into out: the characters a worker id has. */
static int parse_wid(const char **p, char *out)
{
	size_t n = 0;

	for (; **p && **p != '.'; (*p)++) {
		char ch = **p;

		if (n == WID_MAX || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
			return -1;
		out[n++] = ch;
	}
	out[n] = 0;
	if (!n || **p != '.')
		return -1;
	(*p)++;
	return 0;
}

/* "intent.<wid>.<exp>" (ticket 0) or "lease.<t>.<wid>.<exp>". */
static int parse_claim_name(const char *name, int *is_lease, struct seen *v)
{
	const char *p = name;
	int64_t t = 0;

	if (!strncmp(p, "lease.", 6)) {
		p += 6;
		*is_lease = 1;
		if ((t = parse_num(&p, '.')) < 1)
			return -1;
	} else if (!strncmp(p, "intent.", 7)) {
		p += 7;
		*is_lease = 0;
	} else {
		return -1;
	}
	v->ticket = (uint64_t)t;
	if (parse_wid(&p, v->wid) < 0 || (v->exp = parse_num(&p, 0)) < 0)
		return -1;
	return 0;
}

/* Keep one entry per worker: its latest expiry. */
static int seen_add(struct seen **v, size_t *n, size_t *cap, const struct seen *x)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].wid, x->wid)) {
			if (x->exp > (*v)[i].exp)
				(*v)[i] = *x;
			return 0;
		}
	if (lt_grow((void **)v, cap, *n + 1, sizeof(**v), 8) < 0)
		return -1;
	(*v)[(*n)++] = *x;
	return 0;
}

static void ustate_note(struct ustate *s, const char *name)
{
	struct seen v;
	int is_lease;
	const char *p;

	if (!strcmp(name, "done")) {
		s->done = 1;
	} else if (!strcmp(name, "failed")) {
		s->failed = 1;
	} else if (!strncmp(name, "failed.", 7)) {
		int64_t n;

		p = name + 7;
		if ((n = parse_num(&p, 0)) > 0 && n <= UINT32_MAX && (unsigned)n > s->failed_n)
			s->failed_n = (unsigned)n;
	} else if (!strncmp(name, "publishing.", 11)) {
		s->publishing = 1;
	} else if (parse_claim_name(name, &is_lease, &v) == 0) {
		if (is_lease && v.ticket > s->max_ticket)
			s->max_ticket = v.ticket;
		/* Out of memory: a lease not kept could be a live one. */
		if (is_lease ? seen_add(&s->leases, &s->n_leases, &s->cap_leases, &v) :
			       seen_add(&s->intents, &s->n_intents, &s->cap_intents, &v))
			s->too_many = 1;
	}
}

int ustate_read(int statefd, const char *key, struct ustate *s)
{
	int fd = unit_open(statefd, key);
	struct dirent *e;
	size_t seen = 0;
	DIR *d;

	memset(s, 0, sizeof(*s));
	if (fd < 0)
		return -1;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (++seen > UNIT_ENTRIES_MAX) {
			s->too_many = 1;
			break;
		}
		ustate_note(s, e->d_name);
	}
	closedir(d);
	return 0;
}

void ustate_free(struct ustate *s)
{
	free(s->leases);
	free(s->intents);
	s->leases = s->intents = NULL;
	s->n_leases = s->n_intents = s->cap_leases = s->cap_intents = 0;
}

int ustate_busy(const struct ustate *s, const char *wid, int64_t now)
{
	if (s->too_many)
		return 1;
	for (size_t i = 0; i < s->n_leases; i++)
		if (strcmp(s->leases[i].wid, wid) && s->leases[i].exp > now)
			return 1;
	return 0;
}

/* Create an empty file: its name is its content. */
static int put_name(int statefd, const char *key, const char *name)
{
	int dfd = unit_open(statefd, key), fd, rc = -1, e;

	if (dfd < 0)
		return -1;
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	/* An object store uploads on close: its error is the upload's. */
	if (fd >= 0)
		rc = close(fd);
	e = errno;
	close(dfd);
	errno = e;
	return rc;
}

int ustate_write(int statefd, const char *key, const char *name, const char *text)
{
	int dfd = unit_open(statefd, key), fd, rc, e;

	if (dfd < 0)
		return -1;
	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		e = errno;
		close(dfd);
		errno = e;
		return -1;
	}
	rc = lt_write_all(fd, text, strlen(text)) < 0 ||
	     (fsync(fd) < 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS);
	rc = close(fd) < 0 || rc ? -1 : 0;
	e = errno;
	if (rc < 0)
		unlinkat(dfd, name, 0);
	close(dfd);
	errno = e;
	return rc;
}

void ustate_remove(int statefd, const char *key, const char *name)
{
	int dfd = unit_open(statefd, key);

	if (dfd >= 0) {
		unlinkat(dfd, name, 0);
		close(dfd);
	}
}

/* --------------------------------------------------------------- leases */

static int64_t margin_ms(const struct claim *c)
{
	return c->lease_ms / 4;
}

/* Write a lease running out a lease from `t0`; its name in name. */
static int lease_put(struct claim *c, int64_t t0, char *name)
{
	snprintf(name, NAME_MAX + 1, "lease.%llu.%s.%lld", (unsigned long long)c->ticket, c->wid,
		 (long long)(t0 + c->lease_ms));
	return put_name(c->statefd, c->key, name);
}

/* One renewal. A lease that has (nearly) run out is not renewed: others
 * may be taking over, and a renewal now would make us look alive again. */
static void renew_once(struct claim *c)
{
	char name[NAME_MAX + 1], old[NAME_MAX + 1] = "";
	int64_t t0 = claim_now_ms(), prev;
	int lost;

	pthread_mutex_lock(&c->mu);
	prev = c->exp_ms;
	if (t0 >= prev - margin_ms(c))
		c->lost = 1;
	lost = c->lost;
	pthread_mutex_unlock(&c->mu);
	if (lost || lease_put(c, t0, name) < 0)
		return;
	pthread_mutex_lock(&c->mu);
	if (claim_now_ms() >= prev - margin_ms(c)) {
		c->lost = 1;
		snprintf(old, sizeof(old), "%s", name);
	} else {
		snprintf(old, sizeof(old), "%s", c->lease_name[1]);
		snprintf(c->lease_name[1], sizeof(c->lease_name[1]), "%s", c->lease_name[0]);
		snprintf(c->lease_name[0], sizeof(c->lease_name[0]), "%s", name);
		c->exp_ms = t0 + c->lease_ms;
	}
	pthread_mutex_unlock(&c->mu);
	if (old[0])
		ustate_remove(c->statefd, c->key, old);
}

/* Renew 4 times a lease, however long the conversion takes. */
static void *renew_main(void *arg)
{
	struct claim *c = arg;
	struct timespec until;
	int64_t t;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		t = (int64_t)until.tv_nsec + c->lease_ms * 250000;
		until.tv_sec += t / 1000000000;
		until.tv_nsec = t % 1000000000;
		pthread_cond_timedwait(&c->cv, &c->mu, &until);
		if (c->stop || c->lost)
			continue;
		pthread_mutex_unlock(&c->mu);
		renew_once(c);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int claim_held(struct claim *c)
{
	int held;

	pthread_mutex_lock(&c->mu);
	held = !c->lost && claim_now_ms() < c->exp_ms - margin_ms(c);
	if (!held)
		c->lost = 1;
	pthread_mutex_unlock(&c->mu);
	return held;
}

void claim_release(struct claim *c)
{
	if (c->th_ok) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->th, NULL);
		c->th_ok = 0;
	}
	for (int i = 0; i < 2; i++)
		if (c->lease_name[i][0])
			ustate_remove(c->statefd, c->key, c->lease_name[i]);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

/* ---------------------------------------------------------------- contest */

/* Does lease x come before ours? */
static int before(const struct claim *c, const struct seen *x)
{
	return x->ticket < c->ticket || (x->ticket == c->ticket && strcmp(x->wid, c->wid) < 0);
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000 };

	nanosleep(&ts, NULL);
}

/* One listing of the contest: -1 lost (or error), 0 others are still
 * choosing, 1 ours so far (remembering what the winner needs to know). */
static int contest_look(struct claim *c)
{
	struct ustate s;
	int64_t now = claim_now_ms();
	int rc = 1;

	if (ustate_read(c->statefd, c->key, &s) < 0)
		return -1;
	if (s.done || s.failed || s.too_many)
		rc = -1;
	for (size_t i = 0; rc >= 0 && i < s.n_leases; i++) {
		const struct seen *x = &s.leases[i];

		if (!strcmp(x->wid, c->wid))
			continue;
		if (x->exp > now && before(c, x))
			rc = -1;
		else if (x->exp <= now)
			snprintf(c->took_from, sizeof(c->took_from), "%s", x->wid);
	}
	for (size_t i = 0; rc > 0 && i < s.n_intents; i++)
		if (strcmp(s.intents[i].wid, c->wid) && s.intents[i].exp > now)
			rc = 0;
	c->publishing = s.publishing;
	ustate_free(&s);
	return rc;
}

/* Two listings in a row that show us first and nobody choosing: 1. 0: we
 * lost; 2: undecided (others kept choosing, or our lease lapsed). */
static int contest(struct claim *c)
{
	int64_t deadline = claim_now_ms() + CONTEST_MAX_MS;
	int clean = 0, r;

	while (claim_held(c)) {
		c->took_from[0] = 0;
		if ((r = contest_look(c)) < 0)
			return 0;
		if (r > 0 && clean)
			return 1;
		clean = r > 0;
		if (!clean) {
			if (claim_now_ms() > deadline)
				return 2;
			pause_ms(10 + (unsigned)(rand() % 30));
		}
	}
	return 2;
}

static int claim_init(struct claim *c, int statefd, const char *key, const char *wid,
		      int64_t lease_ms)
{
	pthread_condattr_t ca;

	memset(c, 0, sizeof(*c));
	c->statefd = statefd;
	c->lease_ms = lease_ms;
	snprintf(c->key, sizeof(c->key), "%s", key);
	snprintf(c->wid, sizeof(c->wid), "%s", wid);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

/* The doorway: our intent, a listing, our ticket. 1: we hold a ticket,
 * 0: the unit is settled or another worker's, 2: too slow (try again),
 * -1: error. */
static int doorway(struct claim *c)
{
	char intent[NAME_MAX + 1];
	int64_t life = c->lease_ms < INTENT_MAX_MS ? c->lease_ms : INTENT_MAX_MS;
	int64_t t0 = claim_now_ms(), intent_exp = t0 + life, t1;
	struct ustate s;
	int rc = 0;

	snprintf(intent, sizeof(intent), "intent.%s.%lld", c->wid, (long long)intent_exp);
	if (put_name(c->statefd, c->key, intent) < 0)
		return -1;
	if (ustate_read(c->statefd, c->key, &s) < 0) {
		rc = -1;
	} else if (!s.done && !s.failed && !ustate_busy(&s, c->wid, claim_now_ms())) {
		c->ticket = s.max_ticket + 1;
		t1 = claim_now_ms();
		if (lease_put(c, t1, c->lease_name[0]) == 0) {
			c->exp_ms = t1 + c->lease_ms;
			rc = 1;
		} else {
			c->lease_name[0][0] = 0;
			rc = -1;
		}
	}
	ustate_free(&s);
	ustate_remove(c->statefd, c->key, intent);
	/* Others stop waiting for an intent once it runs out. */
	if (rc > 0 && claim_now_ms() >= intent_exp - life / 4)
		rc = 2;
	return rc;
}

int claim_take(struct claim *c, int statefd, const char *key, const char *wid, int64_t lease_ms)
{
	int rc, e;

	claim_init(c, statefd, key, wid, lease_ms);
	if ((rc = doorway(c)) == 1) {
		c->th_ok = pthread_create(&c->th, NULL, renew_main, c) == 0;
		rc = contest(c);
	}
	if (rc != 1) {
		e = errno;
		claim_release(c);
		errno = e;
	}
	return rc;
}

void claim_tidy(int statefd, const char *key, const char *wid, int done)
{
	int fd = unit_open(statefd, key);
	int64_t now = claim_now_ms();
	struct dirent *e;
	struct seen v;
	int is_lease;
	size_t n = 0;
	DIR *d;

	if (fd < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) && n++ < UNIT_ENTRIES_MAX) {
		if ((parse_claim_name(e->d_name, &is_lease, &v) == 0 && strcmp(v.wid, wid) &&
		     v.exp <= now) ||
		    (done && !strncmp(e->d_name, "publishing.", 11)))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}
