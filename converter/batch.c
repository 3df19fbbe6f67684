/* SPDX-License-Identifier: Apache-2.0 */
/*
 * llmtracker-convert batch --in DIR --logdir DIR [--lease SEC] [--shard I/N]
 *                          [--attempts N] [--retry-after SEC] [--overwrite] [-q]
 *
 * Converts every complete, not yet converted profile under DIR into the
 * TensorBoard layout. A profile ("unit") is either an event log directly in
 * DIR, or a subdirectory of DIR holding the logs of one profile (collector
 * log plus the injected library's logs), converted together. Complete means
 * published under its final name: dot-files and *.partial are ignored, and a
 * subdirectory still holding a partial log is left for a later pass. A log
 * written in segments is published as NAME.1, NAME.2, ... and its last
 * segment as NAME itself: NAME.<digits> is never a unit, only part of NAME;
 * segments whose NAME is not there (being written, or a crashed writer's)
 * count as a partial log of NAME, and are left alone. Logs directly in DIR
 * are joined by session id (`profile -o DIR/x.evlog` puts the library's
 * logs beside the collector's): the unit is the main log, whose conversion
 * takes its session's library logs from DIR, and it waits while a partial
 * log of its session (written to within the lease) is there; a library log
 * is a unit of its own only when no main log of its session is in DIR,
 * published or partial. The run is named after the unit (run_names()
 * below): names of different units never share a run.
 *
 * State lives in <logdir>/.llmtracker-batch/<key>/, a directory per unit
 * (key: the unit's entry name made safe, its kind and a hash); every file
 * in it is written once, under a name of its own, and never rewritten:
 *   done              the outputs are published: "host pid time ok wid"
 *   failed.<n>        "host pid time error" of failed attempt n; the unit
 *                     is tried again by a later pass, --retry-after seconds
 *                     after the last failure, up to --attempts times in all
 *   failed            the last attempt allowed failed (not retried; remove
 *                     failed* to retry)
 *   publishing.<wid>  worker wid began moving outputs into the run: whoever
 *                     converts the unit next replaces them
 *   intent.*, lease.* the claim (claim.c)
 *   .stage.<wid>/     worker wid's private conversion output
 *
 * Two ways to share the work:
 *  - claims (the default): any number of workers on one shared directory
 *    (local, NFS, or an object store through s3fs/ossfs), each converting
 *    the units it claims: the claim protocol at the top of claim.c, leases
 *    of --lease seconds renewed while converting, a worker whose lease runs
 *    out (crashed or stalled) taken over after it. Suits workers that poll
 *    a directory as profiles arrive.
 *  - shards (--shard I/N, or JOB_COMPLETION_INDEX with --shard N or
 *    LLMT_BATCH_SHARDS=N, as in a Kubernetes Indexed Job): worker I of N
 *    converts the units whose key hashes to I (SHA-256 of the key, modulo
 *    N), with no claim at all. Each pass tries every unconverted unit of
 *    its shard (--attempts and --retry-after are the Job's backoff, not
 *    ours) and exits 1 when one failed; a pass run again skips what is
 *    done and replaces what an interrupted one began publishing.
 *
 * A unit is converted into the worker's stage directory (conv_convert()
 * writes whole files, renamed into place), then each file is moved into the
 * run directory, never replacing a file there unless the unit's earlier
 * owner began publishing (or --overwrite), and only while our claim holds:
 * a worker whose lease ran out publishes nothing more, and no file is ever
 * written in place under its final name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "converter/convert.h"
#include "converter/conv_int.h"
#include "converter/claim.h"
#include "eventlog/eventlog.h"
#include "common/grow.h"
#include "common/io.h"
#include "common/digest.h"
#include "tb_layout/tb_layout.h"

#define STATE_DIR ".llmtracker-batch"
#define MAX_UNITS 100000          /* entries of --in looked at per pass */
#define DEFAULT_ATTEMPTS 3        /* conversions of a unit before it is failed for good */
#define MAX_ATTEMPTS 100
#define DEFAULT_RETRY_AFTER_S 60  /* since the last failure, before trying again */
#define RUN_STEM_MAX 160          /* of a run name, before any "-<hash>" */
#define MAX_SHARDS 100000
#define UNDECIDED_ROUNDS 3        /* more tries of units whose claim was undecided */
#define SHARDS_ENV "LLMT_BATCH_SHARDS"
#define INDEX_ENV "JOB_COMPLETION_INDEX"  /* set by a Kubernetes Indexed Job */
#define LOCAL_PREFIX "llmtracker-batch."  /* our stages' directory in TMPDIR */

/* Extensions of an event log's file name left out of its run name (the
 * last one only): the injected library writes .evlog, the collector's -o
 * default is data.json, and .log is what people use. */
static const char *const LOG_EXTS[] = { ".evlog", ".log", ".json" };

struct batch_opts {
	const char *in, *logdir;
	unsigned lease_s, attempts, retry_after_s;
	unsigned shard_i, shard_n;  /* shard_n 0: claims */
	int overwrite, quiet;
};

struct unit {
	char name[NAME_MAX + 1];  /* entry name in --in */
	char run[TB_NAME_MAX + 1];
	int is_dir;
	int again;                /* the claim was undecided: try again */
};

struct batch {
	struct batch_opts o;
	int statefd;
	int localfd;                 /* the stages' directory in TMPDIR, or -1 */
	char localdir[PATH_MAX];
	char host[256], wid[WID_MAX + 1];
	unsigned converted, skipped, failed, others;
};


/* ------------------------------------------------------------ discovery */

static int name_ignored(const char *n)
{
	size_t len = strlen(n);

	return n[0] == '.' || (len > 8 && !strcmp(n + len - 8, ".partial")) ||
	       (len > 4 && !strcmp(n + len - 4, ".tmp"));
}

/* Length of NAME when n is "NAME.<digits>", a segment of the log NAME;
 * else 0. */
static size_t segment_base(const char *n)
{
	size_t len = strlen(n), i = len;

	while (i > 0 && n[i - 1] >= '0' && n[i - 1] <= '9')
		i--;
	return i < len && i > 1 && n[i - 1] == '.' ? i - 1 : 0;
}

/* A segment whose NAME is not beside it: its log is still being written,
 * or its writer died; either way no more than a partial log. */
static int orphan_segment(int dirfd, const char *n)
{
	size_t base = segment_base(n);
	char name[NAME_MAX + 1];
	struct stat st;

	if (!base)
		return 0;
	snprintf(name, sizeof(name), "%.*s", (int)base, n);
	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
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
		if (orphan_segment(fd, e->d_name))
			partial = 1;
		else if (!logs && is_log_at(fd, e->d_name))
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

/* One look at every regular log file directly in --in, partial ones (and
 * segments whose NAME is not there) too. A partial whose header cannot be read yet names no session (its writer
 * writes the header first thing). At most MAX_UNITS files are read. */
static void flat_scan(const struct batch_opts *o, DIR *d, struct flat_sessions *fs)
{
	struct dirent *e;
	size_t seen = 0;
	time_t now = time(NULL);

	while ((e = readdir(d)) && seen < MAX_UNITS) {
		struct stat st;
		int seg = segment_base(e->d_name) > 0;
		int partial = partial_name(e->d_name) || (seg && orphan_segment(dirfd(d), e->d_name));

		if ((seg && !partial) || (!partial && name_ignored(e->d_name)) ||
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
		return 1; /* a log without a session: a unit on its own */
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
		if (!S_ISDIR(st.st_mode) && segment_base(e->d_name))
			continue; /* part of its NAME */
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

/* ---------------------------------------------------------- unit state */

/* The unit's state directory name: its entry name made safe, plus its kind
 * and the hash of the entry name. */
static void unit_key(const struct unit *u, char *out, size_t outsz)
{
	char safe[TB_NAME_MAX + 1];

	tb_host_filename(u->name, safe, 160);
	snprintf(out, outsz, "%s%s-%08x", u->is_dir ? "d-" : "f-", safe, name_hash(u->name));
}

/* Worker I of N converts the units whose key's SHA-256, its first 8 bytes
 * read big-endian, is I modulo N: stable across passes, hosts and listing
 * orders. */
static int in_shard(const struct batch_opts *o, const char *key)
{
	uint8_t d[LT_SHA256_LEN];
	struct lt_sha256 s;
	uint64_t h = 0;

	if (!o->shard_n)
		return 1;
	lt_sha256_init(&s);
	lt_sha256_update(&s, key, strlen(key));
	lt_sha256_final(&s, d);
	for (int i = 0; i < 8; i++)
		h = h << 8 | d[i];
	return h % o->shard_n == o->shard_i;
}

/* When failed attempt n was recorded (its file says; written once), or now
 * where it cannot be read. */
static time_t failed_at(struct batch *b, const char *key, unsigned n)
{
	char name[32], buf[512];
	long long t;
	ssize_t r = -1;
	int dfd = openat(b->statefd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int fd = -1;

	snprintf(name, sizeof(name), "failed.%u", n);
	if (dfd >= 0 && (fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) >= 0)
		r = read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	if (r <= 0)
		return time(NULL);
	buf[r] = 0;
	return sscanf(buf, "%*s %*d %lld", &t) == 1 ? (time_t)t : time(NULL);
}

/* Is the unit to be converted by this pass? Not when done; with claims,
 * not when failed for good, nor failed too recently to try again. */
static int unit_due(struct batch *b, const char *key, const struct ustate *s)
{
	if (s->done)
		return 0;
	if (b->o.shard_n)
		return 1;
	if (s->failed)
		return 0;
	return !s->failed_n || time(NULL) - failed_at(b, key, s->failed_n) >= (time_t)b->o.retry_after_s;
}

/* mkdir of the unit's state directory (another worker may make it too). */
static int unit_dir(struct batch *b, const char *key, char *err, size_t errsz)
{
	if (mkdirat(b->statefd, key, 0755) == 0 || errno == EEXIST)
		return 0;
	snprintf(err, errsz, "cannot create %s/%s/%s: %s", b->o.logdir, STATE_DIR, key, strerror(errno));
	return -1;
}

/* "host pid time what": the content of the state files we write. */
static void state_text(const struct batch *b, const char *what, char *out, size_t sz)
{
	snprintf(out, sz, "%s %d %lld %s\n", b->host, (int)getpid(), (long long)time(NULL), what);
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

/* Remove the staging directories other workers left in the unit's state
 * directory ufd: the unit is ours, so they died or lost it to us. */
static void stages_clear(struct batch *b, int ufd)
{
	char mine[NAME_MAX + 1];
	struct dirent *e;
	DIR *d;
	int fd = dup(ufd);

	snprintf(mine, sizeof(mine), ".stage.%s", b->wid);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, ".stage.", 7) && strcmp(e->d_name, mine))
			rm_tree_at(ufd, e->d_name, 0);
	closedir(d);
}

/* The conversion writes into a private directory of ours; its files move
 * into the run directory only while the unit is ours, so a worker that
 * lost its claim (stalled past the lease) never publishes over the worker
 * that took over. The directory is in the unit's state directory (ufd),
 * where its files are renamed into the run; on a network mount (an object
 * store: every directory operation a round trip, every rename a copy on
 * the server) it is in TMPDIR instead, and its files are copied into the
 * run once each. Returns the directory's fd, its name in stage; *parent
 * is the directory it is in. */
static int stage_open(struct batch *b, int ufd, const char *key, int *parent, char *stage,
		      size_t sz, char *err, size_t errsz)
{
	int fd;

	*parent = b->localfd >= 0 ? b->localfd : ufd;
	snprintf(stage, sz, ".stage.%s", b->wid);
	rm_tree_at(*parent, stage, 0); /* an earlier unit's, if its removal failed */
	if (mkdirat(*parent, stage, 0700) < 0 ||
	    (fd = openat(*parent, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (b->localfd >= 0)
			snprintf(err, errsz, "cannot create %.700s/%.200s: %s", b->localdir, stage,
				 strerror(errno));
		else
			snprintf(err, errsz, "cannot create %s/%s/%s/%s: %s", b->o.logdir, STATE_DIR,
				 key, stage, strerror(errno));
		return -1;
	}
	return fd;
}

/* Remove the stage directories in tmp that workers of our user left when
 * they were killed: not locked (each worker holds a lock on its own), and
 * not just made. */
static void local_sweep(const char *tmp)
{
	DIR *d = opendir(tmp);
	time_t now = time(NULL);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;
		int fd;

		if (strncmp(e->d_name, LOCAL_PREFIX, strlen(LOCAL_PREFIX)) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || now - st.st_mtime < 60)
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
			rm_tree_at(dirfd(d), e->d_name, 0);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
}

/* A logdir on a network file system (an object store's FUSE mount, NFS:
 * lt_fs_network) gets its stages in a directory of ours in TMPDIR, locked
 * while we live. */
static int local_stages(struct batch *b)
{
	const char *tmp = getenv("TMPDIR");

	b->localfd = -1;
	if (lt_fs_network(b->statefd, NULL) != 1)
		return 0;
	tmp = tmp && *tmp ? tmp : "/tmp";
	local_sweep(tmp);
	snprintf(b->localdir, sizeof(b->localdir), "%s/" LOCAL_PREFIX "XXXXXX", tmp);
	if (!mkdtemp(b->localdir) ||
	    (b->localfd = open(b->localdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    flock(b->localfd, LOCK_EX | LOCK_NB) < 0) {
		fprintf(stderr, "batch: cannot create a staging directory %s: %s\n", b->localdir,
			strerror(errno));
		return -1;
	}
	return 0;
}

static void local_stages_free(struct batch *b)
{
	if (b->localfd < 0)
		return;
	close(b->localfd);
	rm_tree_at(AT_FDCWD, b->localdir, 0);
}

/* Files the conversion produced for run, as a list of names (each one's
 * data already synced when the conversion published it, tb_tmp_publish). */
static int staged_files(int src, char (**names)[NAME_MAX + 1], size_t *n,
			char *err, size_t errsz)
{
	int fd = dup(src);
	struct dirent *e;
	struct stat st;
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

		/* FUSE mounts may not tell the type in the listing */
		if (e->d_name[0] == '.' || (e->d_type != DT_REG && (e->d_type != DT_UNKNOWN ||
		    fstatat(src, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))))
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

/* Is the unit still ours? Always, for a shard's worker. */
static int owned(struct claim *cl)
{
	return !cl || claim_held(cl);
}

static int give_name(int sfd, const char *from, int dfd, const char *to, int replace)
{
	if (replace)
		return renameat(sfd, from, dfd, to) ? -errno : 0;
	return lt_rename_noreplace(sfd, from, dfd, to);
}

/* Copy src/name into dst under a temporary name of ours, then give it its
 * name: from a stage on another file system. 0 or -errno. */
static int copy_in(struct batch *b, int src, int dst, const char *name, int replace)
{
	char tmp[NAME_MAX + 1];
	struct stat st;
	uint64_t copied = 0;
	int in, out = -1, rc;

	/* cut to fit: our files are copied one after the other */
	snprintf(tmp, sizeof(tmp), ".%.*s.%s.tmp", (int)(NAME_MAX - 6 - strlen(b->wid)), name, b->wid);
	if ((in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(in, &st) < 0 ||
	    (out = openat(dst, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
		rc = -errno;
	else if (!(rc = lt_copy_bounded(out, in, (uint64_t)st.st_size, &copied)) &&
		 copied != (uint64_t)st.st_size)
		rc = -EIO;
	if (!rc && fsync(out) < 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS)
		rc = -errno;
	if (out >= 0 && close(out) < 0 && !rc)
		rc = -errno; /* an object store uploads on close */
	close(in);
	if (!rc)
		rc = give_name(dst, tmp, dst, name, replace);
	if (rc && out >= 0)
		unlinkat(dst, tmp, 0);
	return rc;
}

/* Move one staged file into the run directory. 0 or -errno. */
static int publish_file(struct batch *b, int src, int dst, const char *name, int replace)
{
	int rc = give_name(src, name, dst, name, replace);

	return rc == -EXDEV ? copy_in(b, src, dst, name, replace) : rc;
}

/* Remove the temporaries copy_in() of other workers left in the run
 * directory (".NAME.<wid>.tmp": they died publishing it). */
static void run_tidy(struct batch *b, int dst)
{
	int fd = dup(dst);
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		const char *wid;

		if (e->d_name[0] != '.' || len < 6 || strcmp(e->d_name + len - 4, ".tmp"))
			continue;
		e->d_name[len - 4] = 0;
		wid = strrchr(e->d_name, '.');
		if (wid && wid > e->d_name && strchr(wid, '-') && strcmp(wid + 1, b->wid)) {
			e->d_name[len - 4] = '.';
			unlinkat(dst, e->d_name, 0);
		}
	}
	closedir(d);
}

/* Move the staged files of run into the logdir. 0: published, 1: the unit
 * is no longer ours (nothing more published), -1: error in err. Before the
 * first, "publishing.<wid>" tells whoever converts the unit after us (we
 * may fail or die halfway) that the run's files are the unit's to replace.
 * Files are renamed whole (never written in place), replacing none unless
 * replace. */
static int publish_staged(struct batch *b, struct claim *cl, const char *key, int stagefd,
			  const char *run, int replace, char *err, size_t errsz)
{
	char rel[TB_NAME_MAX + 64], (*names)[NAME_MAX + 1] = NULL, marker[NAME_MAX + 1], text[400];
	int src, dst = -1, rc = -1, e;
	size_t n = 0, i = 0;

	snprintf(rel, sizeof(rel), "%s/%s", TB_PLUGIN_DIR, run);
	if ((src = tb_mkdirs_at(stagefd, rel, 0, err, errsz)) < 0)
		return -1;
	if (staged_files(src, &names, &n, err, errsz) < 0 ||
	    (dst = tb_open_run_dir(b->o.logdir, run, 1, err, errsz)) < 0)
		goto out;
	if (replace)
		run_tidy(b, dst);
	snprintf(marker, sizeof(marker), "publishing.%s", b->wid);
	state_text(b, "publishing", text, sizeof(text));
	if (owned(cl) && ustate_write(b->statefd, key, marker, text) < 0) {
		snprintf(err, errsz, "cannot create %s/%s/%s/%s: %s", b->o.logdir, STATE_DIR, key,
			 marker, strerror(errno));
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (!owned(cl)) {
			rc = 1;
			goto out;
		}
		if ((e = publish_file(b, src, dst, names[i], replace)) < 0) {
			snprintf(err, errsz, "%s/%s/%s: %s%s", b->o.logdir, rel, names[i], strerror(-e),
				 e == -EEXIST ? " (another writer published it; not replacing it)" : "");
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
 * publish_staged(). */
static int convert_unit(struct batch *b, const struct unit *u, const char *key,
			struct claim *cl, int replace, char *err, size_t errsz)
{
	char path[PATH_MAX], stage[NAME_MAX + 1], stagepath[64];
	const char *inputs[1] = { path };
	struct conv_request req = { 0 };
	int ufd, parent, stagefd, rc;

	if (snprintf(path, sizeof(path), "%s/%s", b->o.in, u->name) >= (int)sizeof(path)) {
		snprintf(err, errsz, "path too long: %s/%s", b->o.in, u->name);
		return -1;
	}
	if (!replace && run_dir_free(b, u->run, err, errsz) < 0)
		return -1;
	if ((ufd = openat(b->statefd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(err, errsz, "cannot open %s/%s/%s: %s", b->o.logdir, STATE_DIR, key,
			 strerror(errno));
		return -1;
	}
	stages_clear(b, ufd);
	if ((stagefd = stage_open(b, ufd, key, &parent, stage, sizeof(stage), err, errsz)) < 0) {
		close(ufd);
		return -1;
	}
	/* Through our own fd: a path under the shared logdir could be swapped. */
	snprintf(stagepath, sizeof(stagepath), "/proc/self/fd/%d", stagefd);
	req.inputs = inputs;
	req.n_inputs = 1;
	req.logdir = stagepath;
	req.run = u->run;
	req.quiet = b->o.quiet;
	req.caller_says_where = 1; /* stagepath is no place to show */
	/* A main log brings its session's library logs from --in (list_units
	 * made them no units of their own); nothing else there. */
	rc = conv_convert(&req, err, errsz);
	if (rc == 0)
		rc = publish_staged(b, cl, key, stagefd, u->run, replace, err, errsz);
	close(stagefd);
	rm_tree_at(parent, stage, 0);
	close(ufd);
	return rc;
}

/* Record a failed attempt (the unit is ours: no other worker writes these
 * meanwhile) and, with claims, after the last one allowed, the verdict.
 * Says which in what (for the message). */
static void record_failure(struct batch *b, const char *key, const char *err, char *what,
			   size_t whatsz)
{
	char n[32], text[1400];
	struct ustate s;
	unsigned tries = 1;

	if (ustate_read(b->statefd, key, &s) == 0)
		tries = s.failed_n + 1;
	ustate_free(&s);
	state_text(b, err, text, sizeof(text));
	for (int i = 0; i < 4; i++, tries++) { /* a record we could not list */
		snprintf(n, sizeof(n), "failed.%u", tries);
		if (ustate_write(b->statefd, key, n, text) == 0 || errno != EEXIST)
			break;
	}
	if (b->o.shard_n) {
		snprintf(what, whatsz, "attempt %u; details in %s/%s/%s/%s", tries, b->o.logdir,
			 STATE_DIR, key, n);
		return;
	}
	if (tries < b->o.attempts) {
		snprintf(what, whatsz, "attempt %u of %u; tried again by a pass at least %u s from "
			 "now; details in %s/%s/%s/%s", tries, b->o.attempts, b->o.retry_after_s,
			 b->o.logdir, STATE_DIR, key, n);
		return;
	}
	ustate_write(b->statefd, key, "failed", text);
	snprintf(what, whatsz, "attempt %u of %u, the last: not tried again (remove %s/%s/%s/failed* "
		 "to retry)", tries, b->o.attempts, b->o.logdir, STATE_DIR, key);
}

/* Claim the unit (claims), or know it is ours (a shard's). 1: ours, with
 * *replace set when an earlier owner began publishing; 0: not ours; 2:
 * undecided, worth another try (claim_take). */
static int take_unit(struct batch *b, const struct unit *u, const char *key,
		     const struct ustate *s, struct claim *cl, int *replace)
{
	int r;

	if (b->o.shard_n) {
		*replace = s->publishing;
		return 1;
	}
	if (ustate_busy(s, b->wid, claim_now_ms()))
		return 0;
	if ((r = claim_take(cl, b->statefd, key, b->wid, (int64_t)b->o.lease_s * 1000)) != 1)
		return r == 2 ? 2 : 0;
	*replace = cl->publishing;
	if (cl->took_from[0] && !b->o.quiet)
		fprintf(stderr, "batch: %s: took over from worker %s, whose lease ran out\n",
			u->name, cl->took_from);
	return 1;
}

static void report(struct batch *b, const struct unit *u, int rc, const char *err,
		   const char *what)
{
	if (rc == 0) {
		b->converted++;
		if (!b->o.quiet)
			fprintf(stderr, "batch: converted %s into %s/%s/%s/\n", u->name, b->o.logdir,
				TB_PLUGIN_DIR, u->run);
	} else if (rc == 1) {
		b->skipped++;
		fprintf(stderr, "batch: %s: our claim ran out and another worker may have taken it "
			"over; not publishing (raise --lease if workers stall longer than it)\n", u->name);
	} else {
		b->failed++;
		fprintf(stderr, "batch: %s: %s (%s)\n", u->name, err, what);
	}
}

/* Convert the unit if it is due and ours. 1: undecided, try again later
 * in the pass. */
static int process_unit(struct batch *b, const struct unit *u)
{
	char key[NAME_MAX - 40], err[1024] = "", what[1024] = "", text[400];
	struct claim cl, *clp = b->o.shard_n ? NULL : &cl;
	struct ustate s;
	int rc, replace = 0;

	unit_key(u, key, sizeof(key));
	if (unit_dir(b, key, err, sizeof(err)) < 0 || ustate_read(b->statefd, key, &s) < 0) {
		if (!err[0])
			snprintf(err, sizeof(err), "cannot list %s/%s/%s: %s", b->o.logdir, STATE_DIR,
				 key, strerror(errno));
		report(b, u, -1, err, "not tried");
		return 0;
	}
	rc = unit_due(b, key, &s) ? take_unit(b, u, key, &s, &cl, &replace) : 0;
	ustate_free(&s);
	if (rc != 1) {
		b->skipped += rc == 0;
		return rc == 2;
	}
	rc = convert_unit(b, u, key, clp, b->o.overwrite || replace, err, sizeof(err));
	if (rc != 0 && !owned(clp))
		rc = 1;
	if (rc == 0) {
		state_text(b, "ok", text, sizeof(text));
		ustate_write(b->statefd, key, "done", text);
		claim_tidy(b->statefd, key, b->wid, 1);
	} else if (rc < 0) {
		record_failure(b, key, err, what, sizeof(what));
	}
	if (clp)
		claim_release(clp);
	report(b, u, rc, err, what);
	return 0;
}

/* Units whose contest ended undecided get a few more tries, a moment
 * apart, before the pass ends. */
static void retry_undecided(struct batch *b, struct unit *u, size_t n)
{
	size_t left = 0;

	for (int round = 0; round < UNDECIDED_ROUNDS; round++) {
		struct timespec pause = { 0, (50 + rand() % 200) * 1000000L };

		left = 0;
		for (size_t i = 0; i < n; i++)
			left += u[i].again;
		if (!left)
			return;
		nanosleep(&pause, NULL);
		for (size_t i = 0; i < n; i++)
			if (u[i].again)
				u[i].again = process_unit(b, &u[i]);
	}
	for (size_t i = 0; i < n; i++)
		b->skipped += u[i].again;
}

/* ------------------------------------------------------------------- CLI */

static void usage(FILE *f)
{
	fprintf(f, "usage: llmtracker-convert batch --in DIR --logdir DIR [--lease SEC] "
		"[--shard I/N | --shard N] [--attempts N] [--retry-after SEC] [--overwrite] [-q]\n"
		"  Converts every complete, unconverted profile in DIR (a log file, or a\n"
		"  subdirectory holding one profile's logs); safe to run as N copies at once,\n"
		"  on a local disk, NFS or an object store mounted with s3fs/ossfs.\n"
		"  --lease SEC  a worker that has not renewed its claim for SEC seconds\n"
		"               (crashed or stalled) is taken over (default 600)\n"
		"  --shard I/N  convert the profiles of shard I of N only, with no claims\n"
		"               (profiles are split by a hash of their names); --shard N\n"
		"               takes I from $" INDEX_ENV " (a Kubernetes Indexed Job),\n"
		"               as does $" SHARDS_ENV "=N without --shard\n"
		"  --attempts N conversions of a failing profile before it is given up (default %d;\n"
		"               not with --shard: each pass tries its failed profiles again)\n"
		"  --retry-after SEC  a failed profile is tried again by a pass at least SEC\n"
		"               seconds after its last failure (default %d)\n",
		DEFAULT_ATTEMPTS, DEFAULT_RETRY_AFTER_S);
}

#define STR_(x) #x
#define STR(x) STR_(x)

/* s as an unsigned in [lo, hi], or a line saying what was wanted. */
static int parse_uint_s(const char *s, const char *opt, const char *want, unsigned long lo,
			unsigned long hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || *s == '-' || *s == '+' || v < lo || v > hi) {
		fprintf(stderr, "batch: %s wants %s, got '%s'\n", opt, want, s);
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

static int parse_uint(const char *opt, const char *want, unsigned long lo, unsigned long hi,
		      unsigned *out)
{
	return parse_uint_s(optarg, opt, want, lo, hi, out);
}

/* "--shard I/N", "--shard N" with I from $JOB_COMPLETION_INDEX, or neither
 * (spec NULL) with N from $LLMT_BATCH_SHARDS (no sharding without it). */
static int parse_shard(const char *spec, struct batch_opts *o)
{
	const char *want = "a shard count from 1 to " STR(MAX_SHARDS);
	const char *slash = spec ? strchr(spec, '/') : NULL, *index;
	char i_s[32];

	if (!spec && !(spec = getenv(SHARDS_ENV)))
		return 0;
	if (slash) {
		snprintf(i_s, sizeof(i_s), "%.*s", (int)(slash - spec), spec);
		if (parse_uint_s(slash + 1, "--shard I/N", want, 1, MAX_SHARDS, &o->shard_n) < 0 ||
		    parse_uint_s(i_s, "--shard I/N", "an index I from 0 to N-1", 0, o->shard_n - 1,
				 &o->shard_i) < 0)
			return -1;
		return 0;
	}
	if (parse_uint_s(spec, spec == getenv(SHARDS_ENV) ? SHARDS_ENV : "--shard", want, 1,
			 MAX_SHARDS, &o->shard_n) < 0)
		return -1;
	if (!(index = getenv(INDEX_ENV))) {
		fprintf(stderr, "batch: %u shards but no index: give --shard I/N, or run where $"
			INDEX_ENV " is set (a Kubernetes Indexed Job)\n", o->shard_n);
		return -1;
	}
	return parse_uint_s(index, INDEX_ENV, "an index from 0 to the shard count - 1", 0,
			    o->shard_n - 1, &o->shard_i);
}

static int parse_args(int argc, char **argv, struct batch_opts *o)
{
	static const struct option opts[] = {
		{ "in", required_argument, NULL, 'i' },
		{ "logdir", required_argument, NULL, 'l' },
		{ "lease", required_argument, NULL, 'L' },
		{ "shard", required_argument, NULL, 'S' },
		{ "attempts", required_argument, NULL, 'A' },
		{ "retry-after", required_argument, NULL, 'R' },
		{ "overwrite", no_argument, NULL, 'w' },
		{ "force", no_argument, NULL, 'w' }, /* the converter's own name for it */
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *shard = NULL;
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
		case 'S': shard = optarg; break;
		case 'w': o->overwrite = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'L':
			if (parse_uint("--lease", "a positive number of seconds", 1, 1000000000,
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
	return parse_shard(shard, o);
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

/* Who we are: "<host>-<pid>-<8 hex>", in the names of our state files
 * (unique to this process: the random part covers pids reused across
 * hosts of one name and containers). */
static unsigned worker_id(struct batch *b)
{
	char host[64];
	unsigned rnd;

	if (gethostname(b->host, sizeof(b->host) - 1) < 0 || !b->host[0])
		snprintf(b->host, sizeof(b->host), "unknown-host");
	for (char *p = b->host; *p; p++)
		if (*p == ' ' || *p == '\n')
			*p = '_';
	tb_host_filename(b->host, host, sizeof(host));
	for (char *p = host; *p; p++)
		if (*p == '.')
			*p = '-';
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
	snprintf(b->wid, sizeof(b->wid), "%s-%d-%08x", host, (int)getpid(), rnd);
	return rnd;
}

int conv_batch_main(int argc, char **argv)
{
	struct batch b = { .statefd = -1, .localfd = -1 };
	struct unit *units = NULL;
	size_t n = 0, start;
	unsigned rnd;

	if (parse_args(argc, argv, &b.o) < 0)
		return 2;
	rnd = worker_id(&b);
	srand(rnd);
	if (open_state(&b) < 0 || local_stages(&b) < 0 || list_units(&b.o, &units, &n) < 0) {
		if (b.statefd >= 0)
			close(b.statefd);
		local_stages_free(&b);
		return 1;
	}
	/* Workers start at different places so they rarely contend. */
	start = n ? rnd % n : 0;
	for (size_t i = 0; i < n; i++) {
		struct unit *u = &units[(i + start) % n];
		char key[NAME_MAX - 40];

		unit_key(u, key, sizeof(key));
		if (in_shard(&b.o, key))
			u->again = process_unit(&b, u);
		else
			b.others++;
	}
	retry_undecided(&b, units, n);
	free(units);
	close(b.statefd);
	local_stages_free(&b);
	if (!b.o.quiet && b.o.shard_n)
		fprintf(stderr, "batch: shard %u/%u: %u converted, %u skipped (done before), %u failed; "
			"%u profiles are other shards'\n", b.o.shard_i, b.o.shard_n, b.converted,
			b.skipped, b.failed, b.others);
	else if (!b.o.quiet)
		fprintf(stderr, "batch: %u converted, %u skipped (done, failed before or claimed "
			"by another worker), %u failed\n", b.converted, b.skipped, b.failed);
	return b.failed ? 1 : 0;
}
