// SPDX-License-Identifier: Apache-2.0
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "linkclose.h"

#define LT_CLOSE_THREADS 16

struct closing {
	struct bpf_link *link;
	int fd;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER, idle = PTHREAD_COND_INITIALIZER;
static struct closing *q;
static size_t n_q, cap_q, busy; /* queued; being closed now */
static bool started;

static void close_one(struct closing c)
{
	bpf_link__destroy(c.link);
	if (c.fd >= 0)
		close(c.fd);
}

/* Take one and close it unlocked; false when the queue is empty. mu held. */
static bool close_next(void)
{
	if (!n_q)
		return false;
	struct closing c = q[--n_q];
	busy++;
	pthread_mutex_unlock(&mu);
	close_one(c);
	pthread_mutex_lock(&mu);
	if (!--busy && !n_q)
		pthread_cond_broadcast(&idle);
	return true;
}

static void *closer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;)
		if (!close_next())
			pthread_cond_wait(&more, &mu);
	return NULL;
}

void lt_close_later(struct bpf_link *link, int fd)
{
	struct closing c = { link, fd };
	pthread_t th;

	if (!link && fd < 0)
		return;
	pthread_mutex_lock(&mu);
	if (!started) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		started = !pthread_create(&th, &a, closer, NULL);
		pthread_attr_destroy(&a);
	}
	if (n_q == cap_q) {
		size_t cap = cap_q ? cap_q * 2 : 64;
		struct closing *nq = started ? realloc(q, cap * sizeof(*q)) : NULL;
		if (!nq) { /* no thread or no memory: close it here */
			pthread_mutex_unlock(&mu);
			close_one(c);
			return;
		}
		q = nq;
		cap_q = cap;
	}
	q[n_q++] = c;
	pthread_cond_signal(&more);
	pthread_mutex_unlock(&mu);
}

static void *helper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (close_next())
		;
	pthread_mutex_unlock(&mu);
	return NULL;
}

void lt_close_drain(void)
{
	pthread_t th[LT_CLOSE_THREADS];
	int n = 0;

	/* Closes on several threads wait out their grace periods together. */
	while (n < LT_CLOSE_THREADS && !pthread_create(&th[n], NULL, helper, NULL))
		n++;
	while (n)
		pthread_join(th[--n], NULL);
	pthread_mutex_lock(&mu);
	while (close_next() || busy)
		if (busy && !n_q)
			pthread_cond_wait(&idle, &mu);
	pthread_mutex_unlock(&mu);
}
