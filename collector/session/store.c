// SPDX-License-Identifier: Apache-2.0
/*
 * The output store's writer process (store.h). The collector and the writer
 * share one anonymous mapping, made before the fork: a header of atomic
 * counters and a ring of messages (BEGIN segment, DATA bytes, END segment,
 * END of the last segment, ABORT), written by the collector only, read by
 * the writer only. The collector moves `head` past a whole message before
 * it wakes the writer through a pipe; the writer moves `tail` past it once
 * the store call it asked for has returned, so head - tail is what the
 * store has not taken yet, the figure the cap bounds. A pipe whose last
 * writer is gone tells the writer that the collector died.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OP_BEGIN = 1, OP_DATA, OP_END, OP_END_LAST, OP_ABORT };

struct st_msg {
	uint32_t op, seg;
	uint64_t len;
};

/* The writer's state, as the collector sees it. */
enum { W_STARTING = 0, W_OPEN, W_DONE, W_FAILED };

/* Room the log's last chunks leave free in the ring (final mode): for the
 * end of the last segment and the count of what was dropped. */
#define ST_TAIL_ROOM (64u << 10)
/* Beyond the cap: file headers, segment records, the log's last chunks. */
#define ST_RESERVE (4ull << 20)

struct st_shm {
	_Atomic uint64_t head;        /* bytes the collector put in the ring */
	_Atomic uint64_t tail;        /* bytes the writer is done with */
	_Atomic uint64_t busy_since;  /* CLOCK_MONOTONIC ns the call in progress began; 0: none */
	_Atomic uint64_t longest;     /* the longest store call so far, ns */
	_Atomic uint64_t written;     /* DATA bytes the store took */
	_Atomic int state;            /* W_* */
	_Atomic int producer_done;    /* the collector's last message is in the ring */
	_Atomic int abandoned;        /* the collector stopped waiting: the writer says how it ends */
	int code;                     /* how (an EVLOG_E* code), with... */
	char msg[512];                /* ... why (both set before state W_FAILED) */
};

struct lt_store {
	struct st_shm *shm;
	uint8_t *ring;
	uint64_t size, cap;           /* the ring's bytes; the cap on unwritten bytes */
	size_t map_len;
	pid_t pid;
	int wake;                     /* the pipe's write end */
	int final;
	char path[PATH_MAX];
};

static uint64_t st_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void ring_copy(uint8_t *ring, uint64_t size, uint64_t at, const void *src, uint64_t n)
{
	uint64_t off = at % size, first = n < size - off ? n : size - off;

	if (!n)
		return;
	memcpy(ring + off, src, first);
	memcpy(ring, (const uint8_t *)src + first, n - first);
}

static void ring_read(const uint8_t *ring, uint64_t size, uint64_t at, void *dst, uint64_t n)
{
	uint64_t off = at % size, first = n < size - off ? n : size - off;

	if (!n)
		return;
	memcpy(dst, ring + off, first);
	memcpy((uint8_t *)dst + first, ring, n - first);
}

/* ------------------------------------------------------------------ writer */

struct w_ctx {
	struct lt_store *st;
	struct evlog_files *f;
	int wake_rd;
	pid_t parent;
	int gone;                     /* the collector died */
	uint64_t deadline;            /* left alone: give up after this */
	uint8_t *buf;
	size_t cap;
};

/* Every call on the store is timed: the collector reports the longest. */
static int w_call(struct w_ctx *w, const struct st_msg *m, char *err, size_t errsz)
{
	struct st_shm *sh = w->st->shm;
	uint64_t t0 = st_now();
	int rc = 0;

	atomic_store(&sh->busy_since, t0);
	switch (m->op) {
	case OP_BEGIN:
		if (m->seg > 1) /* the first was begun at open */
			rc = evlog_files_sink.begin(w->f, m->seg, err, errsz);
		break;
	case OP_DATA:
		rc = evlog_files_sink.put(w->f, m->seg, w->buf, m->len, NULL, err, errsz);
		break;
	case OP_END:
	case OP_END_LAST:
		rc = evlog_files_sink.end(w->f, m->seg, m->op == OP_END_LAST, err, errsz);
		break;
	case OP_ABORT:
		evlog_files_sink.abort(w->f);
		break;
	}
	uint64_t d = st_now() - t0;

	atomic_store(&sh->busy_since, 0);
	if (d > atomic_load(&sh->longest))
		atomic_store(&sh->longest, d);
	return rc;
}

/* The next message, copied out of the ring: 1, or 0 when there is none. */
static int w_take(struct w_ctx *w, struct st_msg *m)
{
	struct lt_store *st = w->st;
	uint64_t tail = atomic_load_explicit(&st->shm->tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&st->shm->head, memory_order_acquire);

	if (head - tail < sizeof(*m))
		return 0;
	ring_read(st->ring, st->size, tail, m, sizeof(*m));
	if (m->len > w->cap) {
		uint8_t *b = realloc(w->buf, m->len);

		if (!b)
			return -1;
		w->buf = b;
		w->cap = m->len;
	}
	ring_read(st->ring, st->size, tail + sizeof(*m), w->buf, m->len);
	return 1;
}

/* Sleep until woken (or a second passed); notice a collector gone. */
static void w_wait(struct w_ctx *w)
{
	struct pollfd p = { w->wake_rd, POLLIN, 0 };
	char b[256];

	if (poll(&p, 1, 1000) > 0) {
		ssize_t n = read(w->wake_rd, b, sizeof(b));

		w->gone |= n == 0;
	}
	w->gone |= getppid() != w->parent;
}

static void w_fail(struct w_ctx *w, int code, const char *msg)
{
	struct st_shm *sh = w->st->shm;

	sh->code = code < 0 ? -code : code;
	snprintf(sh->msg, sizeof(sh->msg), "%s", msg);
	atomic_store(&sh->state, W_FAILED);
}

/* Left alone (the collector stopped waiting, or died): how long it tries. */
static int w_past_deadline(struct w_ctx *w)
{
	if (!w->deadline && (w->gone || atomic_load(&w->st->shm->abandoned)))
		w->deadline = st_now() + LT_STORE_LINGER_S * 1000000000ull;
	return w->deadline && st_now() > w->deadline;
}

/* Take messages until the last one, a dead collector or the deadline. */
static void w_loop(struct w_ctx *w)
{
	struct st_shm *sh = w->st->shm;
	char err[512];
	struct st_msg m;
	int r;

	for (;;) {
		if ((r = w_take(w, &m)) < 0) {
			w_fail(w, EVLOG_ENOMEM, "the store writer ran out of memory");
			return;
		}
		if (!r) {
			if (atomic_load(&sh->producer_done) || w->gone || w_past_deadline(w))
				return;
			w_wait(w);
			continue;
		}
		if (atomic_load(&sh->state) != W_FAILED && (r = w_call(w, &m, err, sizeof(err))))
			w_fail(w, r, err);
		if (m.op == OP_DATA)
			atomic_fetch_add(&sh->written, m.len);
		atomic_fetch_add_explicit(&sh->tail, sizeof(m) + m.len, memory_order_release);
		if ((m.op == OP_END_LAST || m.op == OP_ABORT) && atomic_load(&sh->state) != W_FAILED)
			atomic_store(&sh->state, W_DONE);
		if (w_past_deadline(w))
			return;
	}
}

/* What a writer left alone says at its end. */
static void w_last_line(struct w_ctx *w, uint64_t t_left)
{
	struct st_shm *sh = w->st->shm;
	int state = atomic_load(&sh->state);
	uint64_t left = atomic_load(&sh->head) - atomic_load(&sh->tail);

	if (!atomic_load(&sh->abandoned))
		return;
	if (state == W_DONE)
		fprintf(stderr, "llmtracker: the output store answered %.0f s after the profile "
			"ended: %s published\n", (double)(st_now() - t_left) / 1e9, w->st->path);
	else if (state == W_FAILED)
		fprintf(stderr, "llmtracker: %s\n", sh->msg);
	else
		fprintf(stderr, "llmtracker: the output store did not answer for %d s after the "
			"profile ended: gave up, %.1f MiB not written; %s is not published (what "
			"was written stays as %s%s)\n", LT_STORE_LINGER_S, left / 1048576.0,
			w->st->path, evlog_files_dir(w->f), evlog_files_partial(w->f));
}

static __attribute__((noreturn)) void w_main(struct lt_store *st, int wake_rd, pid_t parent)
{
	struct w_ctx w = { .st = st, .parent = parent };
	char msg[512];

	lt_store_child("llmt-store", &wake_rd, 1);
	w.wake_rd = wake_rd;
	int rc = evlog_files_open(&w.f, st->path, EVLOG_FILES_SEGMENTS, msg, sizeof(msg));

	if (rc || (rc = evlog_files_sink.begin(w.f, 1, msg, sizeof(msg)))) {
		w_fail(&w, rc, msg);
		_exit(1);
	}
	atomic_store(&st->shm->state, W_OPEN);
	w_loop(&w);
	uint64_t t_left = st_now();

	w_last_line(&w, t_left);
	/* An open segment's file is closed and kept: its partial file. */
	evlog_files_close(w.f);
	_exit(0);
}

/* Where its last line goes once the collector is gone: stderr if that is
 * a terminal or a file, never a pipe or socket (a caller reading the
 * collector's output to its end would wait for this process). */
static void child_stdio(void)
{
	struct stat sb;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null < 0)
		return;
	dup2(null, 0);
	dup2(null, 1);
	if (fstat(2, &sb) || S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode))
		dup2(null, 2);
	close(null);
}

static void child_signals(void)
{
	static const int ignored[] = { SIGINT, SIGQUIT, SIGHUP, SIGPIPE, SIGTTOU, SIGTSTP };
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigset_t none;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigaction(ignored[i], &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

void lt_store_child(const char *name, int *keep, int n)
{
	int tmp[8];

	/* Its own session: the terminal's signals are the collector's, and a
	 * Ctrl-C there must not cut what it still has to write. */
	setsid();
	prctl(PR_SET_NAME, name);
	child_signals();
	child_stdio();
	/* Nothing of the collector's but keep[] (BPF, the launched command's
	 * pipes, other files): above the numbers they take first, then down. */
	for (int i = 0; i < n && i < 8; i++)
		tmp[i] = fcntl(keep[i], F_DUPFD, 3 + n);
	for (int i = 0; i < n && i < 8; i++) {
		dup2(tmp[i], 3 + i);
		keep[i] = 3 + i;
	}
	close_range((unsigned)(3 + n), ~0u, 0);
}

/* --------------------------------------------------------------- collector */

static int st_reap(struct lt_store *st, int *status)
{
	if (st->pid <= 0)
		return 0;
	pid_t r = waitpid(st->pid, status, WNOHANG);

	if (r == st->pid)
		st->pid = 0;
	return r == st->pid || r == 0 ? 0 : 1;
}

/* Wait until the writer's state leaves `from` or it exits: its state. */
static int st_wait_state(struct lt_store *st, int from, uint64_t wait_ns, int *exited)
{
	uint64_t end = st_now() + wait_ns;
	int state, status = 0;

	*exited = 0;
	while ((state = atomic_load(&st->shm->state)) == from && st_now() < end) {
		struct timespec ts = { 0, 10 * 1000000 };

		if (st->pid > 0 && waitpid(st->pid, &status, WNOHANG) == st->pid) {
			st->pid = 0;
			*exited = 1;
			break;
		}
		nanosleep(&ts, NULL);
	}
	state = atomic_load(&st->shm->state);
	if (*exited && state == from) {
		snprintf(st->shm->msg, sizeof(st->shm->msg), "the store writer process died (%s %d)",
			 WIFSIGNALED(status) ? "signal" : "status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		state = W_FAILED;
	}
	return state;
}

static void st_free(struct lt_store *st)
{
	if (st->wake >= 0)
		close(st->wake);
	if (st->shm)
		munmap(st->shm, st->map_len);
	free(st);
}

/* The writer goes on alone (if alive): it says how it ends. */
static void st_leave(struct lt_store *st)
{
	atomic_store(&st->shm->abandoned, 1);
	atomic_store(&st->shm->producer_done, 1);
}

static int st_map(struct lt_store *st, uint64_t queue_bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t head = ((sizeof(struct st_shm) + (size_t)page - 1) / (size_t)page) * (size_t)page;

	st->cap = queue_bytes < LT_STORE_QUEUE_MIN ? LT_STORE_QUEUE_MIN : queue_bytes;
	st->size = st->cap + ST_RESERVE;
	st->map_len = head + st->size;
	void *m = mmap(NULL, st->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return -errno;
	st->shm = m;
	st->ring = (uint8_t *)m + head;
	return 0;
}

int lt_store_open(struct lt_store **out, const char *path, uint64_t queue_bytes, char *err,
		  size_t errsz)
{
	struct lt_store *st = calloc(1, sizeof(*st));
	int pfd[2], exited, rc;

	*out = NULL;
	if (!st || strlen(path) >= sizeof(st->path)) {
		snprintf(err, errsz, "%s", st ? "output path too long" : "out of memory");
		free(st);
		return -1;
	}
	st->wake = -1;
	snprintf(st->path, sizeof(st->path), "%s", path);
	if ((rc = st_map(st, queue_bytes)) || pipe2(pfd, O_CLOEXEC | O_NONBLOCK)) {
		snprintf(err, errsz, "cannot set up the output queue: %s", strerror(rc ? -rc : errno));
		st_free(st);
		return -1;
	}
	pid_t parent = getpid();

	st->pid = fork();
	if (st->pid == 0) {
		close(pfd[1]);
		w_main(st, pfd[0], parent);
	}
	close(pfd[0]);
	st->wake = pfd[1];
	if (st->pid < 0) {
		snprintf(err, errsz, "cannot start the store writer process: %s", strerror(errno));
		st_free(st);
		return -1;
	}
	int state = st_wait_state(st, W_STARTING, LT_STORE_WAIT_S * 1000000000ull, &exited);

	if (state == W_OPEN) {
		*out = st;
		return 0;
	}
	rc = -1;
	if (state == W_FAILED) {
		snprintf(err, errsz, "%s", st->shm->msg);
		rc = st->shm->code ? -st->shm->code : -1;
	} else
		snprintf(err, errsz, "the output store of %s did not answer within %d s (a stalled "
			 "network or object-store mount?)", path, LT_STORE_WAIT_S);
	st_leave(st);
	st_reap(st, &exited);
	st_free(st);
	return rc;
}

static void st_wake(struct lt_store *st)
{
	char b = 0;

	if (write(st->wake, &b, 1) < 0 && errno != EAGAIN)
		return; /* the writer is gone: its state says so */
}

/* Put one message in the ring, or 1: no room (not keep), dropped. */
static int st_push(struct lt_store *st, uint32_t op, uint32_t seg, const void *p, size_t n,
		   int keep, char *err, size_t errsz)
{
	struct st_msg m = { op, seg, n };
	uint64_t head = atomic_load_explicit(&st->shm->head, memory_order_relaxed);
	uint64_t used = head - atomic_load_explicit(&st->shm->tail, memory_order_acquire);
	uint64_t need = sizeof(m) + n;
	uint64_t limit = keep ? st->size : st->final ? st->size - ST_TAIL_ROOM : st->cap;

	if (atomic_load(&st->shm->state) == W_FAILED) {
		snprintf(err, errsz, "%s", st->shm->msg);
		return -EVLOG_EIO;
	}
	if (used + need > limit) {
		if (!keep)
			return 1;
		snprintf(err, errsz, "the output store has not taken %.1f MiB of the log: no room left "
			 "even for its file headers", used / 1048576.0);
		return -EVLOG_EIO;
	}
	ring_copy(st->ring, st->size, head + sizeof(m), p, n);
	ring_copy(st->ring, st->size, head, &m, sizeof(m));
	atomic_store_explicit(&st->shm->head, head + need, memory_order_release);
	st_wake(st);
	return 0;
}

static int st_begin(void *ctx, uint32_t seg, char *err, size_t errsz)
{
	return seg == 1 ? 0 : st_push(ctx, OP_BEGIN, seg, NULL, 0, 1, err, errsz);
}

static int st_put(void *ctx, uint32_t seg, const void *p, size_t n, const struct evlog_put *pi,
		  char *err, size_t errsz)
{
	return st_push(ctx, OP_DATA, seg, p, n, pi->keep, err, errsz);
}

static int st_end(void *ctx, uint32_t seg, int last, char *err, size_t errsz)
{
	return st_push(ctx, last ? OP_END_LAST : OP_END, seg, NULL, 0, 1, err, errsz);
}

static void st_abort(void *ctx)
{
	char err[64];

	st_push(ctx, OP_ABORT, 0, NULL, 0, 1, err, sizeof(err));
}

const struct evlog_sink lt_store_sink = {
	.begin = st_begin, .put = st_put, .end = st_end, .abort = st_abort,
};

void lt_store_final(struct lt_store *st)
{
	st->final = 1;
}

void lt_store_state(const struct lt_store *st, struct lt_store_state *out)
{
	const struct st_shm *sh = st->shm;
	uint64_t since = atomic_load(&sh->busy_since), now = st_now();

	memset(out, 0, sizeof(*out));
	out->failed = atomic_load(&sh->state) == W_FAILED;
	if (out->failed)
		snprintf(out->msg, sizeof(out->msg), "%s", sh->msg);
	out->busy_ns = since && now > since ? now - since : 0;
	out->longest_ns = atomic_load(&sh->longest);
	if (out->busy_ns > out->longest_ns)
		out->longest_ns = out->busy_ns;
	out->queued = atomic_load(&sh->head) - atomic_load(&sh->tail);
	out->written = atomic_load(&sh->written);
	out->cap = st->cap;
}

pid_t lt_store_pid(const struct lt_store *st)
{
	return st->pid;
}

int lt_store_close(struct lt_store *st, uint64_t wait_ms, struct lt_store_state *state)
{
	int exited, status;

	atomic_store(&st->shm->producer_done, 1);
	st_wake(st);
	int s = st_wait_state(st, W_OPEN, wait_ms * 1000000ull, &exited);

	lt_store_state(st, state);
	if (s == W_FAILED && !state->failed) { /* it died */
		state->failed = 1;
		snprintf(state->msg, sizeof(state->msg), "%s", st->shm->msg);
	}
	if (s == W_OPEN)
		st_leave(st);
	/* Done: it exits at once (its last close returned); reap it, briefly. */
	for (int i = 0; s != W_OPEN && st->pid > 0 && i < 100; i++) {
		struct timespec ts = { 0, 10 * 1000000 };

		if (st_reap(st, &status) || st->pid <= 0)
			break;
		nanosleep(&ts, NULL);
	}
	st_free(st);
	return s == W_DONE ? 0 : s == W_OPEN ? 1 : -1;
}
