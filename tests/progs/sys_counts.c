// SPDX-License-Identifier: Apache-2.0
/*
 * Makes a known number of system calls: each of N threads (default 3) calls
 * getppid x1000, write to /dev/null x777 and nanosleep x50, through
 * syscall(2) so libc cannot substitute other calls (clock_nanosleep).
 *   sys_counts [-n THREADS] [-w]   -w: wait for SIGUSR1 before starting,
 *                                  and again before exiting.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N_GETPPID 1000
#define N_WRITE 777
#define N_NANOSLEEP 50

static int null_fd;

static void *work(void *arg)
{
	struct timespec ts = { 0, 1000 };
	char c = 'x';

	(void)arg;
	for (int i = 0; i < N_GETPPID; i++)
		syscall(SYS_getppid);
	for (int i = 0; i < N_WRITE; i++)
		if (syscall(SYS_write, null_fd, &c, 1) != 1)
			abort();
	for (int i = 0; i < N_NANOSLEEP; i++)
		syscall(SYS_nanosleep, &ts, NULL);
	return NULL;
}

static void wait_usr1(const sigset_t *set)
{
	int sig;

	while (sigwait(set, &sig) || sig != SIGUSR1)
		;
}

int main(int argc, char **argv)
{
	int n = 3, wait = 0;
	pthread_t t[64];
	sigset_t set;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-w"))
			wait = 1;
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = atoi(argv[++i]);
	}
	if (n < 1 || n > 64) {
		fprintf(stderr, "sys_counts: -n must be 1..64\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	null_fd = open("/dev/null", O_WRONLY);
	if (null_fd < 0)
		return 1;
	if (wait)
		wait_usr1(&set);
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, work, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (wait)
		wait_usr1(&set);
	return 0;
}
