// SPDX-License-Identifier: Apache-2.0
/*
 * A multi-threaded target for the injector tests: THREADS workers each run
 * ITERS rounds of arithmetic, handing a token around under a mutex and
 * sleeping briefly, then wait for the main thread, which reads stdin until
 * EOF (so the process keeps all its threads while the tests look). Then it
 * prints a result that depends only on THREADS and ITERS, so any change an
 * injection makes to its memory, registers or system calls shows.
 *   inject_target [THREADS [ITERS]]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stdin_done_cv = PTHREAD_COND_INITIALIZER;
static int stdin_done;
static uint64_t shared_sum;
static int iters = 2000;

struct worker {
	pthread_t th;
	int id;
	uint64_t h;
	double f;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t h = 1469598103934665603ull ^ (uint64_t)w->id;
	double f = 1.0 + w->id;
	for (int i = 0; i < iters; i++) {
		h = (h ^ (uint64_t)i) * 1099511628211ull;
		f = f * 1.000001 + 0.5 / (1.0 + (double)i); /* keeps FP registers live */
		if (i % 50 == 0) {
			pthread_mutex_lock(&mu);
			shared_sum += h & 0xffff;
			pthread_mutex_unlock(&mu);
			struct timespec ts = { 0, 200000 };
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
	}
	w->h = h;
	w->f = f;
	pthread_mutex_lock(&mu);
	while (!stdin_done)
		pthread_cond_wait(&stdin_done_cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	if (argc > 2)
		iters = atoi(argv[2]);
	if (n < 1 || n > 64 || iters < 1) {
		fprintf(stderr, "usage: inject_target [THREADS(1-64) [ITERS]]\n");
		return 2;
	}
	struct worker w[64];
	for (int i = 0; i < n; i++) {
		w[i].id = i;
		pthread_create(&w[i].th, NULL, work, &w[i]);
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char buf[256];
	uint64_t bytes = 0;
	for (;;) {
		ssize_t r = read(0, buf, sizeof(buf));
		if (r > 0)
			bytes += (uint64_t)r;
		else if (r == 0 || errno != EINTR)
			break;
	}
	pthread_mutex_lock(&mu);
	stdin_done = 1;
	pthread_cond_broadcast(&stdin_done_cv);
	pthread_mutex_unlock(&mu);
	uint64_t total = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].th, NULL);
		printf("thread %d hash %016" PRIx64 " f %.9f\n", i, w[i].h, w[i].f);
		total ^= w[i].h;
	}
	printf("shared %" PRIu64 " total %016" PRIx64 " stdin %" PRIu64 "\n", shared_sum, total, bytes);
	return 7;
}
