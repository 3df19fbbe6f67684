// SPDX-License-Identifier: Apache-2.0
/*
 * cpu_two_funcs [SECONDS] [SYSCALL_FRACTION] [cpu]: a CPU-sampling target. For
 * (1 - fraction) of the time it spins, ~2/3 in burn_alpha() and ~1/3 in
 * burn_beta() (same loop, twice the iterations); for the rest it reads
 * /dev/zero in big blocks so samples land in the kernel. It prints the two
 * functions' addresses first ("alpha=0x... beta=0x...") so tests have exact
 * ground truth, and the number of burn rounds done last ("rounds=N", a
 * throughput figure for overhead measurements). Defaults: 2 s, 0.2.
 * "cpu": SECONDS of the process's CPU time rather than of wall time, so a
 * busy machine delays it but samples the same amount of work.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define UNIT 200000 /* loop iterations per unit of work (~0.1-0.3 ms) */

static clockid_t clock_used = CLOCK_MONOTONIC;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(clock_used, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void burn_alpha(long n)
{
	volatile unsigned long x = 1;

	for (long i = 0; i < n; i++)
		x = x * 2862933555777941757ul + 3037000493ul;
}

__attribute__((noinline)) void burn_beta(long n)
{
	volatile unsigned long x = 1;

	for (long i = 0; i < n; i++)
		x = x * 2862933555777941757ul + 3037000493ul;
}

__attribute__((noinline)) static void syscall_phase(double until)
{
	static char buf[1 << 20];
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (now_s() < until)
		if (read(fd, buf, sizeof(buf)) < 0)
			break;
	close(fd);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	double frac = argc > 2 ? atof(argv[2]) : 0.2;

	if (argc > 3 && argv[3][0] == 'c')
		clock_used = CLOCK_PROCESS_CPUTIME_ID;
	double t0 = now_s(), burn_end = t0 + secs * (1 - frac);
	long rounds = 0;

	printf("alpha=%p beta=%p\n", (void *)burn_alpha, (void *)burn_beta);
	fflush(stdout);
	while (now_s() < burn_end) {
		burn_alpha(2 * UNIT);
		burn_beta(UNIT);
		rounds++;
	}
	syscall_phase(t0 + secs);
	printf("rounds=%ld\n", rounds);
	return 0;
}
