// SPDX-License-Identifier: Apache-2.0
/*
 * A process whose dynamic loader is busy for a while: one thread sits in a
 * dl_iterate_phdr() callback (which holds the loader's write lock, as a long
 * library constructor would hold its load lock) for HOLD_MS, spinning
 * without a system call, while the main thread sleeps in read() on stdin,
 * the one thread an injector may borrow. A dlopen() injected meanwhile waits
 * for the lock. Prints "ready" once the lock is held, "released" when it is
 * let go; exits 7 once stdin closes (its own status).
 *   loader_hold HOLD_MS
 */
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long hold_ms;

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static int hold(struct dl_phdr_info *info, size_t size, void *arg)
{
	long end = now_ms() + hold_ms;

	(void)info; (void)size; (void)arg;
	printf("ready\n");
	fflush(stdout);
	while (now_ms() < end)
		; /* busy, no system call: never a thread the injector borrows */
	return 1;
}

static void *holder(void *arg)
{
	(void)arg;
	dl_iterate_phdr(hold, NULL);
	printf("released\n");
	fflush(stdout);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th;
	char c;

	hold_ms = argc > 1 ? atol(argv[1]) : 15000;
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&th, NULL, holder, NULL);
	while (read(0, &c, 1) > 0)
		;
	pthread_join(th, NULL);
	return 7;
}
