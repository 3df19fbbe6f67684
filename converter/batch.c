/* SPDX-License-Identifier: Apache-2.0 */
/*
 * llmtracker-convert batch --in DIR --logdir DIR [--lease SEC] [--overwrite] [-q]
 *
 * Converts every complete, not yet converted profile under DIR into the
 * TensorBoard layout. A profile ("unit") is either an event log directly in
 * DIR, or a subdirectory of DIR holding the logs of one profile (collector
 * log plus the injected library's logs), converted together. Complete means
 * published under its final name: dot-files and *.partial are ignored, and a
 * subdirectory still holding a partial log is left for a later pass. The run
 * is named after the unit (file name without extension, or directory name).
 *
 * Safe to run as N copies at once on one shared (NFS-like) directory; the
 * state lives in <logdir>/.llmtracker-batch/:
 *   <key>.claim   created with O_CREAT|O_EXCL: "host pid unix-time"; its
 *                 mtime is refreshed while the conversion runs (heartbeat)
 *   <key>.done    created after the conversion succeeded
 *   <key>.failed  the error, when it failed (not retried automatically;
 *                 remove the file to retry)
 * A claim whose mtime is older than the lease, and whose pid is not alive
 * when it is on our host, is stale (crashed worker): it is renamed away
 * (only one worker wins that rename) and the unit claimed again as usual.
 * Outputs are published by conv_convert() atomically, never over another
 * writer's file.
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
#include "../eventlog/eventlog.h"
#include "../tb_layout/tb_layout.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define STATE_DIR ".llmtracker-batch"
#define MAX_UNITS 100000
#define MAX_LOGS_PER_UNIT 4096

struct batch_opts {
	const char *in, *logdir;
	unsigned lease_s;
	int overwrite, quiet;
};

struct unit {
	char name[NAME_MAX + 1];  /* entry name in --in */
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

/* A published event log (its header reads); other files are not ours. */
static int is_log(const char *path)
{
	struct evlog_reader *r;
	char msg[256];

	if (evlog_reader_open(&r, path, msg, sizeof(msg)) < 0)
		return 0;
	evlog_reader_close(r);
	return 1;
}

/* 1: a complete directory of logs; 0: not (yet) a unit. */
static int dir_unit_ready(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char p[PATH_MAX];
	int logs = 0, partial = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len > 8 && !strcmp(e->d_name + len - 8, ".partial"))
			partial = 1;
		if (name_ignored(e->d_name) || e->d_type == DT_DIR || e->d_type == DT_LNK)
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", path, e->d_name) >= (int)sizeof(p))
			continue;
		if (!logs && is_log(p))
			logs = 1;
	}
	closedir(d);
	return logs && !partial;
}

static int list_units(const struct batch_opts *o, struct unit **out, size_t *n)
{
	DIR *d = opendir(o->in);
	struct dirent *e;
	struct unit *u = NULL;
	char p[PATH_MAX];
	size_t cnt = 0;

	if (!d) {
		fprintf(stderr, "batch: cannot read --in %s: %s\n", o->in, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) && cnt < MAX_UNITS) {
		struct stat st;
		struct unit *nu;

		if (name_ignored(e->d_name))
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", o->in, e->d_name) >= (int)sizeof(p))
			continue;
		if (lstat(p, &st) < 0) /* never follow links planted in a shared dir */
			continue;
		if (S_ISDIR(st.st_mode) ? !dir_unit_ready(p) : !S_ISREG(st.st_mode) || !is_log(p))
			continue;
		nu = realloc(u, (cnt + 1) * sizeof(*u));
		if (!nu)
			break;
		u = nu;
		snprintf(u[cnt].name, sizeof(u[cnt].name), "%s", e->d_name);
		u[cnt].is_dir = S_ISDIR(st.st_mode);
		cnt++;
	}
	closedir(d);
	*out = u;
	*n = cnt;
	return 0;
}

/* ---------------------------------------------------------------- claims */

/* State file names: the unit name made safe, plus its kind. */
static void unit_key(const struct unit *u, char *out, size_t outsz)
{
	char safe[TB_NAME_MAX + 1];

	uint32_t h = 2166136261u;

	/* The hash keeps names that sanitize alike ("a:b", "a_b") apart. */
	for (const char *p = u->name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	tb_host_filename(u->name, safe, 160);
	snprintf(out, outsz, "%s%s-%08x", u->is_dir ? "d-" : "f-", safe, h);
}

static int state_exists(struct batch *b, const char *key, const char *ext)
{
	char n[NAME_MAX + 1];
	struct stat st;

	snprintf(n, sizeof(n), "%s%s", key, ext);
	return fstatat(b->statefd, n, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int write_state(struct batch *b, const char *name, const char *text)
{
	int fd = openat(b->statefd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	int rc;

	if (fd < 0)
		return -1;
	rc = tb_write_all(fd, text, strlen(text));
	close(fd);
	return rc;
}

static int pid_alive(long pid)
{
	return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Is this claim abandoned? Only claims older than the lease qualify, and on
 * our own host only when the worker's pid is gone. */
static int claim_stale(struct batch *b, const char *cname, struct stat *st)
{
	char buf[512], host[256];
	long pid = 0;
	ssize_t r;
	int fd = openat(b->statefd, cname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return 0;
	r = fstat(fd, st) == 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	close(fd);
	if (r < 0)
		return 0;
	buf[r] = 0;
	if (time(NULL) - st->st_mtime <= (time_t)b->o.lease_s)
		return 0;
	if (sscanf(buf, "%255s %ld", host, &pid) == 2 && !strcmp(host, b->host) && pid_alive(pid))
		return 0;
	return 1;
}

/* Remove a stale claim. Renaming it to a name of our own is atomic: of
 * several workers doing this at once, one moves it and the others get
 * ENOENT. If what we moved is not the file we judged (it was replaced in
 * between), it goes back. */
static int take_over(struct batch *b, const char *cname)
{
	struct stat st, moved;
	char aside[NAME_MAX + 1];

	if (!claim_stale(b, cname, &st))
		return 0;
	snprintf(aside, sizeof(aside), ".%.180s.stale.%d", cname, (int)getpid());
	if (renameat(b->statefd, cname, b->statefd, aside) < 0)
		return 0;
	if (fstatat(b->statefd, aside, &moved, AT_SYMLINK_NOFOLLOW) == 0 &&
	    moved.st_ino != st.st_ino) {
		syscall(SYS_renameat2, b->statefd, aside, b->statefd, cname, RENAME_NOREPLACE);
		return 0;
	}
	unlinkat(b->statefd, aside, 0);
	if (!b->o.quiet)
		fprintf(stderr, "batch: took over the stale claim %s\n", cname);
	return 1;
}

/* 1: claimed (cname holds our claim), 2: claimed after taking over a dead
 * worker's claim, 0: someone else has it, -1: error. */
static int claim(struct batch *b, const char *key, char *cname, size_t csz)
{
	char text[400];
	int took = 0;

	snprintf(cname, csz, "%s.claim", key);
	snprintf(text, sizeof(text), "%s %d %lld\n", b->host, (int)getpid(), (long long)time(NULL));
	for (int attempt = 0; attempt < 2; attempt++) {
		if (write_state(b, cname, text) == 0)
			return took ? 2 : 1;
		if (errno != EEXIST)
			return -1;
		took = take_over(b, cname);
	}
	return 0;
}

/* Remove our claim, only if it is still ours (never another worker's). */
static void release_claim(struct batch *b, const char *cname)
{
	char buf[512], mine[300];
	int fd = openat(b->statefd, cname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (r <= 0)
		return;
	buf[r] = 0;
	snprintf(mine, sizeof(mine), "%s %d ", b->host, (int)getpid());
	if (!strncmp(buf, mine, strlen(mine)))
		unlinkat(b->statefd, cname, 0);
}

/* ------------------------------------------------------------- heartbeat */

struct heartbeat {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, dirfd;
	unsigned period_s;
	char name[NAME_MAX + 1];
};

/* Keep the claim fresh while converting so the lease only runs out when
 * the worker is gone, however long the conversion takes. */
static void *heartbeat_main(void *arg)
{
	struct heartbeat *h = arg;
	struct timespec until;

	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += h->period_s;
		pthread_cond_timedwait(&h->cv, &h->mu, &until);
		if (!h->stop)
			utimensat(h->dirfd, h->name, NULL, AT_SYMLINK_NOFOLLOW);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static int heartbeat_start(struct heartbeat *h, struct batch *b, const char *cname)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	h->dirfd = b->statefd;
	h->period_s = b->o.lease_s / 4 ? b->o.lease_s / 4 : 1;
	snprintf(h->name, sizeof(h->name), "%s", cname);
	return pthread_create(&h->th, NULL, heartbeat_main, h) == 0 ? 0 : -1;
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

/* ------------------------------------------------------------ conversion */

static void run_name(const struct unit *u, char *out, size_t outsz)
{
	char *dot;

	tb_host_filename(u->name, out, outsz);
	dot = u->is_dir ? NULL : strchr(out + 1, '.');
	if (dot)
		*dot = 0;
}

/* A unit taken over from a dead worker may have some of its outputs
 * published already: those are replaced (we own the claim now). */
static int convert_unit(struct batch *b, const struct unit *u, int replace, char *err, size_t errsz)
{
	char path[PATH_MAX], run[TB_NAME_MAX + 1];
	const char *inputs[1] = { path };
	struct conv_request req = { 0 };

	if (snprintf(path, sizeof(path), "%s/%s", b->o.in, u->name) >= (int)sizeof(path)) {
		snprintf(err, errsz, "path too long: %s/%s", b->o.in, u->name);
		return -1;
	}
	run_name(u, run, sizeof(run));
	req.inputs = inputs;
	req.n_inputs = 1;
	req.logdir = b->o.logdir;
	req.run = run;
	req.overwrite = b->o.overwrite || replace;
	req.quiet = b->o.quiet;
	return conv_convert(&req, err, errsz);
}

static void process_unit(struct batch *b, const struct unit *u)
{
	char key[NAME_MAX - 16], cname[NAME_MAX + 1], n[NAME_MAX + 1], err[1024] = "";
	char text[1400];
	struct heartbeat hb;
	int rc, hb_ok, claimed;

	unit_key(u, key, sizeof(key));
	if (state_exists(b, key, ".done") || state_exists(b, key, ".failed") ||
	    (claimed = claim(b, key, cname, sizeof(cname))) < 1) {
		b->skipped++;
		return;
	}
	/* Done by another worker between our check and our claim? */
	if (state_exists(b, key, ".done")) {
		release_claim(b, cname);
		b->skipped++;
		return;
	}
	hb_ok = heartbeat_start(&hb, b, cname) == 0;
	rc = convert_unit(b, u, claimed == 2, err, sizeof(err));
	if (hb_ok)
		heartbeat_stop(&hb);
	snprintf(n, sizeof(n), "%s%s", key, rc == 0 ? ".done" : ".failed");
	snprintf(text, sizeof(text), "%s %d %lld %s\n", b->host, (int)getpid(),
		 (long long)time(NULL), rc == 0 ? "ok" : err);
	write_state(b, n, text);
	release_claim(b, cname);
	if (rc == 0) {
		b->converted++;
		if (!b->o.quiet)
			fprintf(stderr, "batch: converted %s\n", u->name);
	} else {
		b->failed++;
		fprintf(stderr, "batch: %s: %s (details in %s/%s/%s)\n", u->name, err,
			b->o.logdir, STATE_DIR, n);
	}
}

/* ------------------------------------------------------------------- CLI */

static void usage(FILE *f)
{
	fprintf(f, "usage: llmtracker-convert batch --in DIR --logdir DIR [--lease SEC] "
		"[--overwrite] [-q]\n"
		"  Converts every complete, unconverted profile in DIR (a log file, or a\n"
		"  subdirectory holding one profile's logs); safe to run as N copies at once.\n"
		"  --lease SEC  a claim not refreshed for SEC seconds is taken over (default 600)\n");
}

static int parse_args(int argc, char **argv, struct batch_opts *o)
{
	static const struct option opts[] = {
		{ "in", required_argument, NULL, 'i' },
		{ "logdir", required_argument, NULL, 'l' },
		{ "lease", required_argument, NULL, 'L' },
		{ "overwrite", no_argument, NULL, 'w' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *end;
	int c;

	memset(o, 0, sizeof(*o));
	o->lease_s = 600;
	optind = 1;
	while ((c = getopt_long(argc, argv, "i:l:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': o->in = optarg; break;
		case 'l': o->logdir = optarg; break;
		case 'w': o->overwrite = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'L':
			errno = 0;
			o->lease_s = (unsigned)strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || o->lease_s == 0) {
				fprintf(stderr, "batch: --lease wants a positive number of seconds, "
					"got '%s'\n", optarg);
				return -1;
			}
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
