// SPDX-License-Identifier: Apache-2.0
/*
 * A busy target that reports its own progress: it loops on system calls
 * (100 getppid an iteration) and every 100 ms appends a line
 * "<CLOCK_MONOTONIC ns> <iterations so far> <its CPU time, ns>" to FILE, so
 * a test can tell whether something slowed it: its work per second of wall
 * time and of its own CPU time in a window against another, and the
 * longest time between two lines (a stop).
 *   busy_rate FILE [SECONDS]    runs SECONDS (default: until killed)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: busy_rate FILE [SECONDS]\n");
		return 2;
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	unsigned long long start = now_ns(CLOCK_MONOTONIC), next = start, iters = 0;
	unsigned long long end = argc > 2 ? start + (unsigned long long)(atof(argv[2]) * 1e9) : ~0ull;

	for (;;) {
		for (int i = 0; i < 100; i++)
			syscall(SYS_getppid);
		iters++;
		unsigned long long t = now_ns(CLOCK_MONOTONIC);

		if (t >= next) {
			char line[96];
			int n = snprintf(line, sizeof(line), "%llu %llu %llu\n", t, iters,
					 now_ns(CLOCK_PROCESS_CPUTIME_ID));

			if (write(fd, line, (size_t)n) != n)
				return 1;
			next += 100000000ull;
		}
		if (t >= end)
			return 0;
	}
}
