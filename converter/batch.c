/* SPDX-License-Identifier: Apache-2.0 */
/*
 * llmtracker-convert batch --in DIR --logdir DIR [--lease SEC] [--overwrite] [-q]
 *
 * Converts every complete, not yet converted profile under DIR into the
 * TensorBoard layout. A profile ("unit") is either an event log directly in
 * DIR, or a subdirectory of DIR holding the logs of one profile (collector
 * log plus the injected library's logs), converted together. Complete means
 * published under its final name: dot-files and *.partial are ignored, and a
 * subdirectory still holding a partial log is left for a later pass. Logs
 * directly in DIR are joined by session id (`profile -o DIR/x.evlog` puts the
 * library's logs beside the collector's): the unit is the main log, whose
 * conversion takes its session's library logs from DIR, and it waits while a
 * partial log of its session (written to within the lease) is there; a
 * library log is a unit of its own only when no main log of its session is
 * in DIR, published or partial. The run
 * is named after the unit (run_names() below): names of different units
 * never share a run.
 *
 * Safe to run as N copies at once on one shared (NFS-like) directory; the
 * state lives in <logdir>/.llmtracker-batch/:
 *   <key>.claim   created with O_CREAT|O_EXCL: "host pid unix-time"; its
 *                 mtime is refreshed 4 times per lease while its worker
 *                 converts and publishes (heartbeat)
 *   <key>.taken   a stale claim of the unit was taken over: the outputs its
 *                 worker had published are replaced by the next owner
 *   <key>.done    created after the outputs were published
 *   <key>.failed.<n>  "host pid time error" of failed attempt n; the unit
 *                 is tried again by a later pass, --retry-after seconds
 *                 after the last failure, up to --attempts times in all
 *   <key>.failed  the last error, once the last attempt failed (not
 *                 retried; remove <key>.failed* to retry)
 *   .stage.<key>+<host>.<pid>/  a worker's private conversion output
 * A claim whose mtime is older than the lease, and whose pid is not alive
 * when it is on our host, is stale (crashed or stalled worker): it is
 * renamed away (only one worker wins that rename), judged again, and the
 * unit claimed again as usual. A unit is converted into the worker's stage
 * directory (conv_convert() writes whole files, renamed into place), the
 * files are synced, and each is renamed into the run directory only after
 * checking that the claim is still ours: a worker whose claim was taken over
 * publishes nothing, and no file is ever written in place under its final
 * name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"
#include "conv_int.h"
#include "../eventlog/eventlog.h"
#include "../common/grow.h"
#include "../tb_layout/tb_layout.h"
#include "../common/io.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define STATE_DIR ".llmtracker-batch"
#define MAX_UNITS 100000          /* entries of --in looked at per pass */
#define DEFAULT_ATTEMPTS 3        /* conversions of a unit before it is failed for good */
#define MAX_ATTEMPTS 100
#define DEFAULT_RETRY_AFTER_S 60  /* since the last failure, before trying again */
#define RUN_STEM_MAX 160          /* of a run name, before any "-<hash>" */

/* Extensions of an event log's file name left out of its run name (the
 * last one only): the injected library writes .evlog, the collector's -o
 * default is data.json, and .log is what people use. */
static const char *const LOG_EXTS[] = { ".evlog", ".log", ".json" };

struct batch_opts {
	const char *in, *logdir;
	unsigned lease_s, attempts, retry_after_s;
	int overwrite, quiet;
};

struct unit {
	char name[NAME_MAX + 1];  /* entry name in --in */
	char run[TB_NAME_MAX + 1];
	int is_dir;
};

struct batch {
	struct batch_opts o;
	int statefd;
	char host[256];
	unsigned converted, skipped, failed;
};

/* ------------------------------------------------------------ discovery */

static int name_ignored(const char *n)
{
	size_t len = strlen(n);

	return n[0] == '.' || (len > 8 && !strcmp(n + len - 8, ".partial")) ||
	       (len > 4 && !strcmp(n + len - 4, ".tmp"));
}

/* A published event log (its header reads), `name` in dirfd, read through
 * the fd opened (no final symlink followed, no FIFO waited on); other files
 * are not ours. */
static int is_log_at(int dirfd, const char *name)
{
	struct evlog_reader *r;
	struct stat st;
	const char *why;
	char msg[256];
	int fd = cv_open_input(dirfd, name, 0, &st, &why);

	if (fd < 0)
		return 0;
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	if (evlog_reader_open_fd(&r, fd, name, msg, sizeof(msg)) < 0) /* fd closed */
		return 0;
	evlog_reader_close(r);
	return 1;
}

/* The header of the regular file `name` in dirfd, opened as is_log_at(). */
static struct cv_head head_at(int dirfd, const char *name)
{
	struct cv_head h = { 0 };
	struct stat st;
	const char *why;
	int fd = cv_open_input(dirfd, name, 0, &st, &why);

	if (fd < 0)
		return h;
	if (S_ISREG(st.st_mode))
		h = cv_read_head(fd, name);
	close(fd);
	return h;
}

/* 1: `name` in dirfd is a complete directory of logs; 0: not (yet) a unit. */
static int dir_unit_ready(int dirfd, const char *name)
{
	struct stat st;
	const char *why;
	int fd = cv_open_input(dirfd, name, 0, &st, &why);
	int lfd = fd >= 0 && S_ISDIR(st.st_mode) ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *e;
	int logs = 0, partial = 0;

	if (!d) {
		if (lfd >= 0)
			close(lfd);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len > 8 && !strcmp(e->d_name + len - 8, ".partial"))
			partial = 1;
		if (name_ignored(e->d_name) || e->d_type == DT_DIR || e->d_type == DT_LNK)
			continue;
		if (!logs && is_log_at(fd, e->d_name))
			logs = 1;
	}
	closedir(d);
	close(fd);
	return logs && !partial;
}

/* FNV-1a of a unit's entry name: keeps names that sanitize alike ("a:b",
 * "a_b") apart in state keys and run names. */
static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* The run's stem: the entry name, less a known log extension on a file,
 * made file-safe; "-<hash of the entry name>" is appended when making it
 * safe changed or cut it, so two entry names never give one stem that way. */
static void run_stem(struct unit *u)
{
	char base[NAME_MAX + 1];
	size_t len;

	snprintf(base, sizeof(base), "%s", u->name);
	len = strlen(base);
	for (size_t i = 0; !u->is_dir && i < sizeof(LOG_EXTS) / sizeof(*LOG_EXTS); i++) {
		size_t el = strlen(LOG_EXTS[i]);

		if (len > el && !strcmp(base + len - el, LOG_EXTS[i])) {
			base[len - el] = 0;
			break;
		}
	}
	tb_host_filename(base, u->run, RUN_STEM_MAX + 1);
	if (strcmp(u->run, base))
		snprintf(u->run + strlen(u->run), sizeof(u->run) - strlen(u->run), "-%08x",
			 name_hash(u->name));
}

static int cmp_run(const void *a, const void *b)
{
	const struct unit *x = a, *y = b;
	int c = strcmp(x->run, y->run);

	return c ? c : strcmp(x->name, y->name);
}

/* Run names: each unit's stem; units whose stems are equal (train.log
 * beside train.evlog or a directory train/) all get "-<hash of the entry
 * name>" appended, so no two units of a listing publish into one run. */
static void run_names(struct unit *u, size_t n)
{
	size_t i = 0, j;

	for (i = 0; i < n; i++)
		run_stem(&u[i]);
	qsort(u, n, sizeof(*u), cmp_run);
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && !strcmp(u[j].run, u[i].run); j++)
			;
		for (size_t k = i; j - i > 1 && k < j; k++)
			snprintf(u[k].run + strlen(u[k].run), sizeof(u[k].run) - strlen(u[k].run),
				 "-%08x", name_hash(u[k].name));
	}
}

/* The sessions of the logs directly in --in that hold other logs back:
 * `main` those of main logs (published or partial), `busy` those of partial
 * logs still being written (modified within the lease). Sorted for lookup. */
struct flat_sessions {
	uint8_t (*main)[EVLOG_SESSION_LEN], (*busy)[EVLOG_SESSION_LEN];
	size_t n_main, n_busy, cap_main, cap_busy;
};

static int partial_name(const char *n)
{
	size_t len = strlen(n);

	return n[0] == '.' && len > 9 && !strcmp(n + len - 8, ".partial");
}

static int cmp_session(const void *a, const void *b)
{
	return memcmp(a, b, EVLOG_SESSION_LEN);
}

static int session_in(uint8_t (*v)[EVLOG_SESSION_LEN], size_t n, const uint8_t *id)
{
	return n && bsearch(id, v, n, EVLOG_SESSION_LEN, cmp_session) != NULL;
}

static void session_add(uint8_t (**v)[EVLOG_SESSION_LEN], size_t *n, size_t *cap,
			const uint8_t *id)
{
	if (!lt_grow((void **)v, cap, *n + 1, EVLOG_SESSION_LEN, 16))
		memcpy((*v)[(*n)++], id, EVLOG_SESSION_LEN);
}

/* One look at every regular log file directly in --in, partial ones too.
 * A partial whose header cannot be read yet names no session (its writer
 * writes the header first thing). At most MAX_UNITS files are read. */
static void flat_scan(const struct batch_opts *o, DIR *d, struct flat_sessions *fs)
{
	struct dirent *e;
	size_t seen = 0;
	time_t now = time(NULL);

	while ((e = readdir(d)) && seen < MAX_UNITS) {
		struct stat st;
		int partial = partial_name(e->d_name);

		if ((!partial && name_ignored(e->d_name)) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		seen++;
		struct cv_head h = head_at(dirfd(d), e->d_name);

		if (!h.ok || !evlog_session_set(h.session))
			continue;
		if (!h.lib)
			session_add(&fs->main, &fs->n_main, &fs->cap_main, h.session);
		if (partial && now - st.st_mtim.tv_sec <= (time_t)o->lease_s)
			session_add(&fs->busy, &fs->n_busy, &fs->cap_busy, h.session);
	}
	if (fs->n_main)
		qsort(fs->main, fs->n_main, EVLOG_SESSION_LEN, cmp_session);
	if (fs->n_busy)
		qsort(fs->busy, fs->n_busy, EVLOG_SESSION_LEN, cmp_session);
	rewinddir(d);
}

/* A published log directly in --in: is it a unit now (see the top)? */
static int file_unit_ready(int dirfd, const char *name, const struct flat_sessions *fs)
{
	struct cv_head h = head_at(dirfd, name);

	if (!h.ok)
		return 0;
	if (!evlog_session_set(h.session))
		return 1; /* a log of format 1.0/1.1: on its own, as before */
	if (h.lib)
		return !session_in(fs->main, fs->n_main, h.session);
	return !session_in(fs->busy, fs->n_busy, h.session);
}

static int list_units(const struct batch_opts *o, struct unit **out, size_t *n)
{
	DIR *d = opendir(o->in);
	struct dirent *e;
	struct unit *u = NULL;
	size_t cnt = 0, cap = 0;
	struct flat_sessions fs = { 0 };

	if (!d) {
		fprintf(stderr, "batch: cannot read --in %s: %s\n", o->in, strerror(errno));
		return -1;
	}
	flat_scan(o, d, &fs);
	while ((e = readdir(d))) {
		struct stat st;

		if (name_ignored(e->d_name))
			continue;
		/* never follow links planted in a shared dir */
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode) ? !dir_unit_ready(dirfd(d), e->d_name)
					: !S_ISREG(st.st_mode) || !file_unit_ready(dirfd(d), e->d_name, &fs))
			continue;
		if (cnt == MAX_UNITS) {
			fprintf(stderr, "batch: --in %s holds more than %d profiles; converting %d "
				"this pass, the rest wait for a later one\n", o->in, MAX_UNITS, MAX_UNITS);
			break;
		}
		if (cnt == cap) {
			struct unit *nu = realloc(u, (cap ? cap * 2 : 64) * sizeof(*u));

			if (!nu) {
				fprintf(stderr, "batch: out of memory listing --in %s\n", o->in);
				break;
			}
			u = nu;
			cap = cap ? cap * 2 : 64;
		}
		memset(&u[cnt], 0, sizeof(*u));
		snprintf(u[cnt].name, sizeof(u[cnt].name), "%s", e->d_name);
		u[cnt].is_dir = S_ISDIR(st.st_mode);
		cnt++;
	}
	closedir(d);
	free(fs.main);
	free(fs.busy);
	run_names(u, cnt);
	*out = u;
	*n = cnt;
	return 0;
}

/* ---------------------------------------------------------------- claims */

/* Our claim on a unit. The file stays open while we hold it: an open inode
 * cannot be reused, so "the file under the claim name is still this inode"
 * proves the claim is still ours, and the heartbeat refreshes this inode
 * only, never a claim that replaced it. */
struct claim {
	int fd;
	char name[NAME_MAX + 1];
};

/* State file names: the unit name made safe, plus its kind. */
static void unit_key(const struct unit *u, char *out, size_t outsz)
{
	char safe[TB_NAME_MAX + 1];

	tb_host_filename(u->name, safe, 160);
	snprintf(out, outsz, "%s%s-%08x", u->is_dir ? "d-" : "f-", safe, name_hash(u->name));
}

static int state_exists(struct batch *b, const char *key, const char *ext)
{
	char n[NAME_MAX + 1];
	struct stat st;

	snprintf(n, sizeof(n), "%s%s", key, ext);
	return fstatat(b->statefd, n, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Has a worker given its verdict on the unit (.done, or .failed after the
 * last attempt)? */
static int unit_settled(struct batch *b, const char *key)
{
	return state_exists(b, key, ".done") || state_exists(b, key, ".failed");
}

/* Failed attempts so far (<key>.failed.1 ... .failed.<n>), and when the
 * last of them was recorded (0 if none). */
static unsigned failed_attempts(struct batch *b, const char *key, time_t *last)
{
	char n[NAME_MAX + 1];
	struct stat st;
	unsigned i;

	*last = 0;
	for (i = 0; i < MAX_ATTEMPTS; i++) {
		snprintf(n, sizeof(n), "%s.failed.%u", key, i + 1);
		if (fstatat(b->statefd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			break;
		*last = st.st_mtim.tv_sec;
	}
	return i;
}

/* Not settled, and not failed too recently to try again. */
static int unit_due(struct batch *b, const char *key)
{
	time_t last;

	if (unit_settled(b, key))
		return 0;
	return !failed_attempts(b, key, &last) ||
	       time(NULL) - last >= (time_t)b->o.retry_after_s;
}

/* Create name exclusively with text in it, synced; returns the open fd. */
static int create_state(struct batch *b, const char *name, const char *text)
{
	int fd = openat(b->statefd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	if (lt_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
		int e = errno;

		unlinkat(b->statefd, name, 0);
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int write_state(struct batch *b, const char *name, const char *text)
{
	int fd = create_state(b, name, text);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* renameat2(RENAME_NOREPLACE), or where the file system lacks it (NFS):
 * link (which never replaces either) and unlink the old name. */
static int rename_noreplace(int sfd, const char *sname, int dfd, const char *dname)
{
	if (syscall(SYS_renameat2, sfd, sname, dfd, dname, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (linkat(sfd, sname, dfd, dname, 0) < 0)
		return -1;
	unlinkat(sfd, sname, 0);
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Is the claim open as fd abandoned? Only a claim not refreshed for the
 * whole lease qualifies, and on our own host only when its pid is gone.
 * st gets the claim's inode as judged. */
static int claim_stale(struct batch *b, int fd, struct stat *st)
{
	char buf[512], host[256];
	long pid = 0;
	ssize_t r;
	int64_t age;

	if (fstat(fd, st) < 0 || (r = pread(fd, buf, sizeof(buf) - 1, 0)) < 0)
		return 0;
	buf[r] = 0;
	age = now_ns() - ((int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
	if (age <= (int64_t)b->o.lease_s * 1000000000)
		return 0;
	if (sscanf(buf, "%255s %ld", host, &pid) == 2 && !strcmp(host, b->host) && pid_alive(pid))
		return 0;
	return 1;
}

/* Remove a stale claim. Renaming it to a name of our own is atomic: of
 * several workers doing this at once, one moves it and the others get
 * ENOENT. What we moved is judged again: if it is not the inode we judged
 * (another worker took over and claimed meanwhile; the inode cannot have
 * been reused while we hold it open), or if its owner refreshed it after
 * all, it goes back. <key>.taken is created first: whichever worker claims
 * the unit next (not necessarily us: the claim name is free for a moment)
 * knows the dead worker's published outputs are to be replaced. */
static int take_over(struct batch *b, const char *key, const char *cname)
{
	struct stat st, now, moved, again;
	char aside[NAME_MAX + 1], taken[NAME_MAX + 1];
	int fd = openat(b->statefd, cname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), took = 0;

	if (fd < 0)
		return 0;
	snprintf(aside, sizeof(aside), ".%.180s.stale.%d", cname, (int)getpid());
	snprintf(taken, sizeof(taken), "%s.taken", key);
	/* Still the claim we judged under that name? (Another worker may have
	 * taken it over and claimed since: never move a live claim if we can
	 * tell.) */
	if (!claim_stale(b, fd, &st) || fstatat(b->statefd, cname, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
	    now.st_ino != st.st_ino || now.st_dev != st.st_dev ||
	    (write_state(b, taken, cname) < 0 && errno != EEXIST) ||
	    renameat(b->statefd, cname, b->statefd, aside) < 0)
		goto out;
	if (fstatat(b->statefd, aside, &moved, AT_SYMLINK_NOFOLLOW) == 0 &&
	    moved.st_ino == st.st_ino && moved.st_dev == st.st_dev && claim_stale(b, fd, &again)) {
		took = 1;
	} else if (rename_noreplace(b->statefd, aside, b->statefd, cname) == 0) {
		goto out;
	}
	/* Not put back (a third worker claimed in between): its owner finds
	 * its claim gone before publishing and stands down. */
	unlinkat(b->statefd, aside, 0);
	if (took && !b->o.quiet)
		fprintf(stderr, "batch: took over the stale claim %s\n", cname);
out:
	close(fd);
	return took;
}

/* 1: claimed (cl holds our claim), 0: someone else has it, -1: error. */
static int claim(struct batch *b, const char *key, struct claim *cl)
{
	char text[400];

	snprintf(cl->name, sizeof(cl->name), "%s.claim", key);
	snprintf(text, sizeof(text), "%s %d %lld\n", b->host, (int)getpid(), (long long)time(NULL));
	for (int attempt = 0; attempt < 2; attempt++) {
		cl->fd = create_state(b, cl->name, text);
		if (cl->fd >= 0)
			return 1;
		if (errno != EEXIST)
			return -1;
		if (!take_over(b, key, cl->name))
			return 0;
	}
	return 0;
}

/* Is the file under our claim's name still the one we created? A taker
 * that moved it aside to judge it puts it back at once, so a missing name
 * is looked at again for a while before the claim counts as lost. */
static int claim_held(struct batch *b, const struct claim *cl)
{
	const struct timespec pause = { 0, 20000000 };
	struct stat mine, now;

	for (int tries = 0; tries < 100; tries++) {
		if (fstat(cl->fd, &mine) < 0 || mine.st_nlink == 0)
			return 0;
		if (fstatat(b->statefd, cl->name, &now, AT_SYMLINK_NOFOLLOW) == 0)
			return now.st_ino == mine.st_ino && now.st_dev == mine.st_dev;
		if (errno != ENOENT)
			return 0;
		nanosleep(&pause, NULL);
	}
	return 0;
}

/* Remove our claim, only if it is still ours (never another worker's). */
static void release_claim(struct batch *b, struct claim *cl)
{
	if (claim_held(b, cl))
		unlinkat(b->statefd, cl->name, 0);
	close(cl->fd);
	cl->fd = -1;
}

/* ------------------------------------------------------------- heartbeat */

struct heartbeat {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, fd;
	int64_t period_ns;
};

/* Keep the claim fresh while converting and publishing, so the lease only
 * runs out when the worker is gone or stalled, however long the conversion
 * takes. Four beats per lease: a late beat or two never lets it lapse. */
static void *heartbeat_main(void *arg)
{
	struct heartbeat *h = arg;
	struct timespec until;
	int64_t t;

	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		clock_gettime(CLOCK_MONOTONIC, &until);
		t = (int64_t)until.tv_nsec + h->period_ns;
		until.tv_sec += t / 1000000000;
		until.tv_nsec = t % 1000000000;
		pthread_cond_timedwait(&h->cv, &h->mu, &until);
		if (!h->stop)
			futimens(h->fd, NULL);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static int heartbeat_start(struct heartbeat *h, struct batch *b, const struct claim *cl)
{
	pthread_condattr_t ca;

	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	h->fd = cl->fd;
	h->period_ns = (int64_t)b->o.lease_s * 250000000;
	if (pthread_create(&h->th, NULL, heartbeat_main, h) == 0)
		return 0;
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	return -1;
}

static void heartbeat_stop(struct heartbeat *h)
{
	pthread_mutex_lock(&h->mu);
	h->stop = 1;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
}

/* --------------------------------------------------------------- staging */

/* rm -r of name under dirfd, never following a symlink. */
static void rm_tree_at(int at, const char *name, int depth)
{
	struct dirent *e;
	DIR *d;
	int fd;

	if (unlinkat(at, name, 0) == 0 || errno == ENOENT || depth > 8)
		return;
	fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rm_tree_at(fd, e->d_name, depth + 1);
	closedir(d);
	unlinkat(at, name, AT_REMOVEDIR);
}

/* Remove the staging directories other workers left for this unit (they
 * died, or lost their claim to us). */
static void stages_clear(struct batch *b, const char *key)
{
	char prefix[NAME_MAX + 1];
	struct dirent *e;
	DIR *d;
	int fd = dup(b->statefd);
	size_t len;

	len = (size_t)snprintf(prefix, sizeof(prefix), ".stage.%s+", key);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, len))
			rm_tree_at(b->statefd, e->d_name, 0);
	closedir(d);
}

/* The conversion writes into a private directory of ours; its files move
 * into the run directory only while our claim holds, so a worker that lost
 * its claim (stalled past the lease) never publishes over the worker that
 * took over. Returns the directory's fd, its name in stage. */
static int stage_open(struct batch *b, const char *key, char *stage, size_t sz,
		      char *err, size_t errsz)
{
	char host[80];
	int fd;

	tb_host_filename(b->host, host, sizeof(host));
	snprintf(stage, sz, ".stage.%.180s+%.40s.%d", key, host, (int)getpid());
	rm_tree_at(b->statefd, stage, 0); /* a dead process with our pid left it */
	if (mkdirat(b->statefd, stage, 0700) < 0 ||
	    (fd = openat(b->statefd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(err, errsz, "cannot create %s/%s/%s: %s", b->o.logdir, STATE_DIR, stage,
			 strerror(errno));
		return -1;
	}
	return fd;
}

/* Files the conversion produced for run, as a list of names (each one's
 * data already synced when the conversion published it, tb_tmp_publish). */
static int staged_files(int src, char (**names)[NAME_MAX + 1], size_t *n,
			char *err, size_t errsz)
{
	int fd = dup(src);
	struct dirent *e;
	DIR *d;

	*names = NULL;
	*n = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		snprintf(err, errsz, "cannot list the converted files: %s", strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		void *nn;

		if (e->d_name[0] == '.' || e->d_type != DT_REG)
			continue;
		if (!(nn = realloc(*names, (*n + 1) * sizeof(**names)))) {
			snprintf(err, errsz, "out of memory listing the converted files");
			closedir(d);
			return -1;
		}
		*names = nn;
		snprintf((*names)[(*n)++], NAME_MAX + 1, "%s", e->d_name);
	}
	closedir(d);
	return 0;
}

/* Move the staged files of run into the logdir. 0: published, 1: our claim
 * was lost (nothing more published), -1: error in err. Files are renamed
 * whole (never written in place): RENAME_NOREPLACE unless replace. */
static int publish_staged(struct batch *b, const struct claim *cl, int stagefd, const char *run,
			  int replace, char *err, size_t errsz)
{
	char rel[TB_NAME_MAX + 64], (*names)[NAME_MAX + 1] = NULL;
	int src, dst = -1, rc = -1;
	size_t n = 0, i = 0;

	snprintf(rel, sizeof(rel), "%s/%s", TB_PLUGIN_DIR, run);
	if ((src = tb_mkdirs_at(stagefd, rel, 0, err, errsz)) < 0)
		return -1;
	if (staged_files(src, &names, &n, err, errsz) < 0 ||
	    (dst = tb_open_run_dir(b->o.logdir, run, 1, err, errsz)) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		if (!claim_held(b, cl)) {
			rc = 1;
			goto out;
		}
		if ((replace ? renameat(src, names[i], dst, names[i]) :
			       rename_noreplace(src, names[i], dst, names[i])) < 0) {
			snprintf(err, errsz, "%s/%s/%s: %s%s", b->o.logdir, rel, names[i], strerror(errno),
				 errno == EEXIST ? " (another writer published it; not replacing it)" : "");
			goto out;
		}
	}
	fsync(dst);
	rc = 0;
out:
	if (rc < 0 && i > 0)
		snprintf(err + strlen(err), errsz - strlen(err), "; %zu of %zu files were published", i, n);
	free(names);
	close(src);
	if (dst >= 0)
		close(dst);
	return rc;
}

/* ------------------------------------------------------------ conversion */

/* Without replace, a run directory that already holds outputs (another
 * tool's, or an earlier run of the same name) is refused before converting. */
static int run_dir_free(struct batch *b, const char *run, char *err, size_t errsz)
{
	char sub[512];
	struct dirent *e;
	DIR *d;
	int fd = tb_open_run_dir(b->o.logdir, run, 0, sub, sizeof(sub)), busy = 0;

	if (fd < 0)
		return 0; /* not there yet */
	if (!(d = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d)) && !busy)
		busy = e->d_name[0] != '.';
	closedir(d);
	if (busy)
		snprintf(err, errsz, "%s/%s/%s already holds files; not replacing them (remove "
			 "them, or pass --overwrite)", b->o.logdir, TB_PLUGIN_DIR, run);
	return busy ? -1 : 0;
}

/* Convert a unit into our staging directory, then publish it. Returns as
 * publish_staged(). A unit taken over from a dead worker may have some of
 * its outputs published already: those are replaced (we own the claim). */
static int convert_unit(struct batch *b, const struct unit *u, const char *key,
			const struct claim *cl, int replace, char *err, size_t errsz)
{
	char path[PATH_MAX], stage[NAME_MAX + 1], stagepath[64];
	const char *run = u->run;
	const char *inputs[1] = { path };
	struct conv_request req = { 0 };
	int stagefd, rc;

	if (snprintf(path, sizeof(path), "%s/%s", b->o.in, u->name) >= (int)sizeof(path)) {
		snprintf(err, errsz, "path too long: %s/%s", b->o.in, u->name);
		return -1;
	}
	if (!replace && run_dir_free(b, run, err, errsz) < 0)
		return -1;
	if ((stagefd = stage_open(b, key, stage, sizeof(stage), err, errsz)) < 0)
		return -1;
	/* Through our own fd: a path under the shared logdir could be swapped. */
	snprintf(stagepath, sizeof(stagepath), "/proc/self/fd/%d", stagefd);
	req.inputs = inputs;
	req.n_inputs = 1;
	req.logdir = stagepath;
	req.run = run;
	req.quiet = b->o.quiet;
	req.caller_says_where = 1; /* stagepath is no place to show */
	/* A main log brings its session's library logs from --in (list_units
	 * made them no units of their own); nothing else there. */
	rc = conv_convert(&req, err, errsz);
	if (rc == 0)
		rc = publish_staged(b, cl, stagefd, run, replace, err, errsz);
	close(stagefd);
	rm_tree_at(b->statefd, stage, 0);
	return rc;
}

static void lost_claim(struct batch *b, const struct unit *u)
{
	b->skipped++;
	fprintf(stderr, "batch: %s: our claim ran out and another worker took it over; "
		"not publishing (raise --lease if workers stall longer than it)\n", u->name);
}

/* Record a failed attempt (we hold the claim: no other worker writes these
 * meanwhile) and, after the last one allowed, the verdict. Says which in
 * what (for the message). */
static void record_failure(struct batch *b, const char *key, const char *err, char *what,
			   size_t whatsz)
{
	char n[NAME_MAX + 1], text[1400];
	time_t last;
	unsigned tries = failed_attempts(b, key, &last) + 1;

	snprintf(text, sizeof(text), "%s %d %lld %s\n", b->host, (int)getpid(),
		 (long long)time(NULL), err);
	snprintf(n, sizeof(n), "%s.failed.%u", key, tries);
	write_state(b, n, text);
	if (tries < b->o.attempts) {
		snprintf(what, whatsz, "attempt %u of %u; tried again by a pass at least %u s from "
			 "now; details in %s/%s/%s", tries, b->o.attempts, b->o.retry_after_s,
			 b->o.logdir, STATE_DIR, n);
		return;
	}
	snprintf(n, sizeof(n), "%s.failed", key);
	write_state(b, n, text);
	snprintf(what, whatsz, "attempt %u of %u, the last: not tried again (remove %s/%s/%s.failed* "
		 "to retry)", tries, b->o.attempts, b->o.logdir, STATE_DIR, key);
}

static void process_unit(struct batch *b, const struct unit *u)
{
	char key[NAME_MAX - 40], n[NAME_MAX + 1], err[1024] = "", what[1024] = "";
	char text[400], taken_name[NAME_MAX + 1];
	struct claim cl;
	struct heartbeat hb;
	int rc, hb_ok, taken;

	unit_key(u, key, sizeof(key));
	if (!unit_due(b, key) || claim(b, key, &cl) < 1) {
		b->skipped++;
		return;
	}
	/* Settled or failed by another worker between our check and our claim? */
	if (!unit_due(b, key)) {
		release_claim(b, &cl);
		b->skipped++;
		return;
	}
	taken = state_exists(b, key, ".taken");
	if (taken)
		stages_clear(b, key);
	hb_ok = heartbeat_start(&hb, b, &cl) == 0;
	rc = convert_unit(b, u, key, &cl, b->o.overwrite || taken, err, sizeof(err));
	if (rc != 0 && !claim_held(b, &cl))
		rc = 1;
	if (rc == 0) {
		snprintf(n, sizeof(n), "%s.done", key);
		snprintf(text, sizeof(text), "%s %d %lld ok\n", b->host, (int)getpid(),
			 (long long)time(NULL));
		write_state(b, n, text);
	} else if (rc < 0) {
		record_failure(b, key, err, what, sizeof(what));
	}
	if (rc != 1) {
		snprintf(taken_name, sizeof(taken_name), "%s.taken", key);
		unlinkat(b->statefd, taken_name, 0);
	}
	if (hb_ok)
		heartbeat_stop(&hb);
	release_claim(b, &cl);
	if (rc == 0) {
		b->converted++;
		if (!b->o.quiet)
			fprintf(stderr, "batch: converted %s into %s/%s/%s/\n", u->name, b->o.logdir,
				TB_PLUGIN_DIR, u->run);
	} else if (rc == 1) {
		lost_claim(b, u);
	} else {
		b->failed++;
		fprintf(stderr, "batch: %s: %s (%s)\n", u->name, err, what);
	}
}

/* ------------------------------------------------------------------- CLI */

static void usage(FILE *f)
{
	fprintf(f, "usage: llmtracker-convert batch --in DIR --logdir DIR [--lease SEC] "
		"[--attempts N] [--retry-after SEC] [--overwrite] [-q]\n"
		"  Converts every complete, unconverted profile in DIR (a log file, or a\n"
		"  subdirectory holding one profile's logs); safe to run as N copies at once.\n"
		"  --lease SEC  a claim not refreshed for SEC seconds is taken over (default 600)\n"
		"  --attempts N conversions of a failing profile before it is given up (default %d)\n"
		"  --retry-after SEC  a failed profile is tried again by a pass at least SEC\n"
		"               seconds after its last failure (default %d)\n",
		DEFAULT_ATTEMPTS, DEFAULT_RETRY_AFTER_S);
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* optarg as an unsigned in [lo, hi], or a line saying what was wanted. */
static int parse_uint(const char *opt, const char *want, unsigned long lo, unsigned long hi,
		      unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(optarg, &end, 10);
	if (errno || *end || !*optarg || *optarg == '-' || v < lo || v > hi) {
		fprintf(stderr, "batch: %s wants %s, got '%s'\n", opt, want, optarg);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct batch_opts *o)
{
	static const struct option opts[] = {
		{ "in", required_argument, NULL, 'i' },
		{ "logdir", required_argument, NULL, 'l' },
		{ "lease", required_argument, NULL, 'L' },
		{ "attempts", required_argument, NULL, 'A' },
		{ "retry-after", required_argument, NULL, 'R' },
		{ "overwrite", no_argument, NULL, 'w' },
		{ "force", no_argument, NULL, 'w' }, /* the converter's own name for it */
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->lease_s = 600;
	o->attempts = DEFAULT_ATTEMPTS;
	o->retry_after_s = DEFAULT_RETRY_AFTER_S;
	optind = 1;
	while ((c = getopt_long(argc, argv, "i:l:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': o->in = optarg; break;
		case 'l': o->logdir = optarg; break;
		case 'w': o->overwrite = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'L':
			if (parse_uint("--lease", "a positive number of seconds", 1, UINT_MAX,
				       &o->lease_s) < 0)
				return -1;
			break;
		case 'A':
			if (parse_uint("--attempts", "a number of attempts from 1 to "
				       STR(MAX_ATTEMPTS), 1, MAX_ATTEMPTS, &o->attempts) < 0)
				return -1;
			break;
		case 'R':
			if (parse_uint("--retry-after", "a number of seconds", 0, UINT_MAX,
				       &o->retry_after_s) < 0)
				return -1;
			break;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (!o->in || !o->logdir || optind != argc) {
		fprintf(stderr, "batch: %s\n", optind != argc ? "unexpected argument" :
			"--in DIR and --logdir DIR are both required");
		usage(stderr);
		return -1;
	}
	return 0;
}

static int open_state(struct batch *b)
{
	char err[512];
	int root;

	if (tb_mkdir_user_path(b->o.logdir) < 0) {
		fprintf(stderr, "batch: cannot create --logdir %s: %s\n", b->o.logdir, strerror(errno));
		return -1;
	}
	root = open(b->o.logdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		fprintf(stderr, "batch: cannot open --logdir %s: %s\n", b->o.logdir, strerror(errno));
		return -1;
	}
	b->statefd = tb_mkdirs_at(root, STATE_DIR, 1, err, sizeof(err));
	close(root);
	if (b->statefd < 0)
		fprintf(stderr, "batch: %s/%s: %s\n", b->o.logdir, STATE_DIR, err);
	return b->statefd < 0 ? -1 : 0;
}

int conv_batch_main(int argc, char **argv)
{
	struct batch b = { .statefd = -1 };
	struct unit *units = NULL;
	size_t n = 0;

	if (parse_args(argc, argv, &b.o) < 0)
		return 2;
	if (gethostname(b.host, sizeof(b.host) - 1) < 0 || !b.host[0])
		snprintf(b.host, sizeof(b.host), "unknown-host");
	for (char *p = b.host; *p; p++)
		if (*p == ' ' || *p == '\n')
			*p = '_';
	if (open_state(&b) < 0 || list_units(&b.o, &units, &n) < 0) {
		if (b.statefd >= 0)
			close(b.statefd);
		return 1;
	}
	/* Workers start at different places so they rarely contend. */
	for (size_t i = 0; i < n; i++)
		process_unit(&b, &units[(i + (size_t)getpid()) % n]);
	free(units);
	close(b.statefd);
	if (!b.o.quiet)
		fprintf(stderr, "batch: %u converted, %u skipped (done, failed before or claimed "
			"by another worker), %u failed\n", b.converted, b.skipped, b.failed);
	return b.failed ? 1 : 0;
}
