// SPDX-License-Identifier: Apache-2.0
/*
 * loadhold: a target's open of a probed library waits until its probes are
 * in (see loadhold.h for why fanotify).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "loadhold.h"
#include "targets.h"

enum { HELD_WAIT, HELD_TAKEN, HELD_DONE };

struct held {
	int fd, pid, state;
	bool answered;
	uint64_t since, deadline;
	const char *path;
};

struct watched {
	dev_t dev;
	ino_t ino;
	char *path;
};

struct served {
	int pid;
	uint64_t start, dev, ino;
};

struct lt_hold {
	int fan, targets_fd, to_loop, wake[2];
	pid_t self;
	pthread_t thread;
	bool running;
	volatile int stop;
	pthread_mutex_t mu;                     /* files, held, stats */
	struct watched files[LT_HOLD_MAX_FILES];
	size_t n_files;
	struct served served[LT_HOLD_MAX_SERVED];  /* a ring: the oldest go first */
	size_t n_served, next_served;
	struct held held[LT_HOLD_MAX_PENDING];
	size_t n_held;
	struct lt_hold_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A write whose failure leaves nothing to do: a full pipe or counter means
 * the reader is awake anyway; an answer that fails is given by the kernel
 * when the group closes. */
static void poke(int fd, const void *buf, size_t n)
{
	ssize_t r = write(fd, buf, n);

	(void)r;
}

static void answer(struct lt_hold *h, int fd)
{
	struct fanotify_response r = { .fd = fd, .response = FAN_ALLOW };

	poke(h->fan, &r, sizeof(r));
}

static bool is_target(const struct lt_hold *h, int pid)
{
	uint32_t key = (uint32_t)pid;
	uint8_t v;

	return bpf_map_lookup_elem(h->targets_fd, &key, &v) == 0;
}

/* The path the file was watched under (mu held). */
static const char *watched_path(const struct lt_hold *h, int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return NULL;
	for (size_t i = 0; i < h->n_files; i++)
		if (h->files[i].dev == st.st_dev && h->files[i].ino == st.st_ino)
			return h->files[i].path;
	return NULL;
}

/* Has this process its links on the file already? (mu held) */
static bool already_served(const struct lt_hold *h, int pid, int fd)
{
	struct stat st;
	uint64_t start = 0;

	if (fstat(fd, &st))
		return false;
	for (size_t i = 0; i < h->n_served; i++) {
		const struct served *x = &h->served[i];

		if (x->pid != pid || x->dev != st.st_dev || x->ino != st.st_ino)
			continue;
		if (!start)
			start = lt_proc_read_start(pid);
		if (x->start == start) /* not another process reusing the pid */
			return true;
	}
	return false;
}

void lt_hold_served(struct lt_hold *h, int pid, uint64_t start, uint64_t dev, uint64_t ino)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->served[h->next_served] = (struct served){ pid, start, dev, ino };
	h->next_served = (h->next_served + 1) % LT_HOLD_MAX_SERVED;
	if (h->n_served < LT_HOLD_MAX_SERVED)
		h->n_served++;
	pthread_mutex_unlock(&h->mu);
}

/* One permission event: let it go at once, or hold it for the loop. */
static bool on_event(struct lt_hold *h, const struct fanotify_event_metadata *m)
{
	const char *path = NULL;
	bool park;

	pthread_mutex_lock(&h->mu);
	park = m->pid != h->self && h->n_held < LT_HOLD_MAX_PENDING && is_target(h, m->pid) &&
	       (path = watched_path(h, m->fd)) && !already_served(h, m->pid, m->fd);
	if (park) {
		uint64_t t = now_ns();

		h->held[h->n_held++] = (struct held){ m->fd, m->pid, HELD_WAIT, false, t,
						      t + LT_HOLD_MAX_MS * 1000000ull, path };
		h->st.held++;
	} else {
		h->st.passed++;
	}
	pthread_mutex_unlock(&h->mu);
	if (!park) {
		answer(h, m->fd);
		close(m->fd);
	}
	return park;
}

static void read_events(struct lt_hold *h)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
	bool parked = false;
	ssize_t n;

	while ((n = read(h->fan, buf, sizeof(buf))) > 0) {
		const struct fanotify_event_metadata *m = (const void *)buf;

		for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			if (m->vers != FANOTIFY_METADATA_VERSION || m->fd < 0)
				continue;
			if (m->mask & FAN_OPEN_PERM)
				parked |= on_event(h, m);
			else
				close(m->fd);
		}
	}
	if (parked) {
		uint64_t one = 1;

		poke(h->to_loop, &one, sizeof(one));
	}
}

/* Answer what is done or past its time; drop what is done. Returns the ms
 * to the next deadline, or -1. (mu held) */
static int settle(struct lt_hold *h, bool all)
{
	uint64_t t = now_ns(), next = UINT64_MAX;
	size_t i, k = 0;

	for (i = 0; i < h->n_held; i++) {
		struct held *x = &h->held[i];

		if (!x->answered && (x->state == HELD_DONE || all || t >= x->deadline)) {
			answer(h, x->fd);
			x->answered = true;
			h->st.total_ns += t - x->since;
			if (t - x->since > h->st.max_ns)
				h->st.max_ns = t - x->since;
			if (x->state != HELD_DONE)
				h->st.timed_out++;
		}
		if (x->answered && x->state != HELD_TAKEN) {
			close(x->fd);
			continue;
		}
		if (!x->answered && x->deadline < next)
			next = x->deadline;
		h->held[k++] = *x;
	}
	h->n_held = k;
	return next == UINT64_MAX ? -1 : (int)((next - t) / 1000000 + 1);
}

static void *hold_thread(void *arg)
{
	struct lt_hold *h = arg;
	int timeout = -1;

	while (!h->stop) {
		struct pollfd p[2] = { { h->fan, POLLIN, 0 }, { h->wake[0], POLLIN, 0 } };
		char junk[64];

		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			break;
		if (p[1].revents & POLLIN)
			while (read(h->wake[0], junk, sizeof(junk)) > 0)
				;
		if (p[0].revents & POLLIN)
			read_events(h);
		pthread_mutex_lock(&h->mu);
		timeout = settle(h, false);
		pthread_mutex_unlock(&h->mu);
	}
	return NULL;
}

struct lt_hold *lt_hold_start(int targets_fd, char *err, size_t errsz)
{
	struct lt_hold *h = calloc(1, sizeof(*h));

	if (!h) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	h->wake[0] = h->wake[1] = h->to_loop = -1;
	h->targets_fd = targets_fd;
	h->self = getpid();
	pthread_mutex_init(&h->mu, NULL);
	h->fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK,
			       O_RDONLY | O_CLOEXEC | O_LARGEFILE);
	if (h->fan < 0) {
		snprintf(err, errsz, "fanotify permission events: %s%s", strerror(errno),
			 errno == EPERM ? " (needs CAP_SYS_ADMIN)" : "");
		free(h);
		return NULL;
	}
	h->to_loop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->to_loop < 0 || pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) ||
	    pthread_create(&h->thread, NULL, hold_thread, h)) {
		snprintf(err, errsz, "cannot start its thread: %s", strerror(errno));
		lt_hold_stop(h, NULL);
		return NULL;
	}
	h->running = true;
	return h;
}

int lt_hold_watch(struct lt_hold *h, int fd, const char *path)
{
	struct stat st;
	int rc = 0;

	if (fstat(fd, &st))
		return -errno;
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < h->n_files; i++)
		if (h->files[i].dev == st.st_dev && h->files[i].ino == st.st_ino)
			goto out;
	if (h->n_files == LT_HOLD_MAX_FILES) {
		rc = -E2BIG;
		goto out;
	}
	/* The file's path is added before the mark: an event can come at once. */
	h->files[h->n_files] = (struct watched){ st.st_dev, st.st_ino, strdup(path) };
	if (!h->files[h->n_files].path) {
		rc = -ENOMEM;
		goto out;
	}
	h->n_files++;
	if (fanotify_mark(h->fan, FAN_MARK_ADD, FAN_OPEN_PERM, fd, NULL)) {
		rc = -errno;
		free(h->files[--h->n_files].path);
	}
out:
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int lt_hold_fd(const struct lt_hold *h)
{
	return h->to_loop;
}

void lt_hold_serve(struct lt_hold *h, void (*attach)(void *arg, int pid, int fd, const char *path),
		   void *arg)
{
	struct held take[LT_HOLD_MAX_PENDING];
	size_t n = 0, i, k;
	uint64_t junk;

	if (read(h->to_loop, &junk, sizeof(junk)) < 0)
		junk = 0; /* nothing new: serve what waits anyway */
	pthread_mutex_lock(&h->mu);
	for (i = 0; i < h->n_held; i++)
		if (h->held[i].state == HELD_WAIT && !h->held[i].answered) {
			h->held[i].state = HELD_TAKEN;
			take[n++] = h->held[i];
		}
	pthread_mutex_unlock(&h->mu);
	for (i = 0; i < n; i++)
		attach(arg, take[i].pid, take[i].fd, take[i].path);
	pthread_mutex_lock(&h->mu);
	for (i = 0; i < h->n_held; i++)
		for (k = 0; k < n; k++)
			if (h->held[i].fd == take[k].fd && h->held[i].state == HELD_TAKEN)
				h->held[i].state = HELD_DONE;
	pthread_mutex_unlock(&h->mu);
	if (n)
		poke(h->wake[1], "d", 1);
}

void lt_hold_stop(struct lt_hold *h, struct lt_hold_stats *stats)
{
	if (!h)
		return;
	if (h->running) {
		h->stop = 1;
		poke(h->wake[1], "s", 1);
		pthread_join(h->thread, NULL);
	}
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < h->n_held; i++)
		h->held[i].state = h->held[i].state == HELD_TAKEN ? HELD_DONE : h->held[i].state;
	settle(h, true);
	if (stats)
		*stats = h->st;
	pthread_mutex_unlock(&h->mu);
	for (size_t i = 0; i < h->n_files; i++)
		free(h->files[i].path);
	if (h->fan >= 0)
		close(h->fan); /* anything still pending is allowed by the kernel */
	if (h->to_loop >= 0)
		close(h->to_loop);
	if (h->wake[0] >= 0) {
		close(h->wake[0]);
		close(h->wake[1]);
	}
	pthread_mutex_destroy(&h->mu);
	free(h);
}
