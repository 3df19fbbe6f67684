// SPDX-License-Identifier: Apache-2.0
/*
 * The target for the inject library's buffer test: loads the fake CUPTI
 * (fake_cupti, soname libcupti.so.13) from FAKE_LIB, prints "ready PID",
 * makes a "CUDA call" every millisecond until stdin closes (and, with
 * FAKE_APP_THREADS=N, N more threads call every ~0.1 ms), every 10th call
 * followed by a direct driver launch (a line "quiet" on stdin pauses the
 * main thread's calls, "calls" resumes them, "release" lets a held fake
 * CUPTI go: fake_cupti_release_hold), then prints what the fake CUPTI saw:
 *   generated=N buffers=N unzeroed=N misaligned=N finalized=N launch_cbs=N drv_cbs=N
 * and exits 0, or, given a command after FAKE_LIB, execs it (a CUDA process
 * that becomes another program: what was loaded into it goes with the image).
 * FAKE_APP_FORK=1: once ready, it forks a child that prints nothing, makes no
 * call and exits when stdin closes (a DataLoader worker of a CUDA process),
 * and prints "forked PID".
 *   fake_cuda_app FAKE_LIB [CMD ARGS...]
 */
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static void (*call)(void), (*drv_launch)(void);

static void call_some(unsigned *i)
{
	call();
	if (++*i % 10 == 0 && drv_launch)
		drv_launch();
}
static atomic_int quit;

static void *caller(void *arg)
{
	(void)arg;
	unsigned i = 0;
	while (!atomic_load(&quit)) {
		call_some(&i);
		usleep(100);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fake_cuda_app FAKE_LIB [CMD ARGS...]\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	call = h ? (void (*)(void))dlsym(h, "fake_cupti_api_call") : NULL;
	drv_launch = h ? (void (*)(void))dlsym(h, "fake_cupti_driver_launch") : NULL;
	void (*stats)(unsigned long long *) =
		h ? (void (*)(unsigned long long *))dlsym(h, "fake_cupti_stats") : NULL;
	if (!call || !stats) {
		fprintf(stderr, "fake_cuda_app: %s: %s\n", argv[1], dlerror());
		return 1;
	}
	int nth = getenv("FAKE_APP_THREADS") ? atoi(getenv("FAKE_APP_THREADS")) : 0;
	pthread_t th[16];
	nth = nth < 0 ? 0 : nth > 16 ? 16 : nth;
	for (int i = 0; i < nth; i++)
		if (pthread_create(&th[i], NULL, caller, NULL))
			nth = i;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (getenv("FAKE_APP_FORK")) {
		pid_t child = fork();
		if (child == 0) {
			char buf[64];
			while (read(0, buf, sizeof(buf)) > 0)
				;
			_exit(0);
		}
		printf("forked %d\n", (int)child);
		fflush(stdout);
	}
	void (*release)(void) = (void (*)(void))dlsym(h, "fake_cupti_release_hold");
	unsigned n_main = 0;
	int quiet = 0;
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		if (poll(&p, 1, 1) > 0) {
			char buf[64];
			ssize_t n = read(0, buf, sizeof(buf) - 1);
			if (n <= 0)
				break;
			buf[n] = 0;
			quiet = strstr(buf, "quiet") ? 1 : strstr(buf, "calls") ? 0 : quiet;
			if (strstr(buf, "release") && release)
				release();
		}
		if (!quiet)
			call_some(&n_main);
	}
	atomic_store(&quit, 1);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	unsigned long long s[7];
	stats(s);
	printf("generated=%llu buffers=%llu unzeroed=%llu misaligned=%llu finalized=%llu launch_cbs=%llu "
	       "drv_cbs=%llu\n", s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
	if (argc > 2) {
		fflush(stdout);
		execv(argv[2], argv + 2);
		perror("fake_cuda_app: exec");
		return 127;
	}
	return 0;
}
