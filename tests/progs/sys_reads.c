// SPDX-License-Identifier: Apache-2.0
/* A system-call-heavy program: N (default 2000000) one-byte reads of
 * /dev/zero. Prints the loop's CPU time (user + system) and wall time, in
 * seconds: in-kernel tracing runs in the caller's context and shows in CPU
 * time, steadier than wall time on a shared machine; a ptrace-based tracer
 * (strace) mostly makes the caller wait, which only wall time shows. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	struct rusage a, b;
	struct timespec wa, wb;
	char c;
	int fd = open("/dev/zero", O_RDONLY);

	if (fd < 0 || n <= 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &wa);
	getrusage(RUSAGE_SELF, &a);
	for (long i = 0; i < n; i++)
		if (read(fd, &c, 1) != 1)
			return 1;
	getrusage(RUSAGE_SELF, &b);
	clock_gettime(CLOCK_MONOTONIC, &wb);
	printf("%.6f %.6f\n", (b.ru_utime.tv_sec - a.ru_utime.tv_sec) + (b.ru_stime.tv_sec - a.ru_stime.tv_sec) +
			       ((b.ru_utime.tv_usec - a.ru_utime.tv_usec) + (b.ru_stime.tv_usec - a.ru_stime.tv_usec)) / 1e6,
	       (wb.tv_sec - wa.tv_sec) + (wb.tv_nsec - wa.tv_nsec) / 1e9);
	return 0;
}
