// SPDX-License-Identifier: Apache-2.0
/*
 * A busy target that reports its own progress: it loops on system calls
 * (100 getppid an iteration) and every 100 ms appends a line
 * "<CLOCK_MONOTONIC ns> <iterations so far>" to FILE, so a test can tell
 * whether something slowed it (its work rate in a window against another).
 *   busy_rate FILE [SECONDS]    runs SECONDS (default: until killed)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
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
	unsigned long long start = now_ns(), next = start, iters = 0;
	unsigned long long end = argc > 2 ? start + (unsigned long long)(atof(argv[2]) * 1e9) : ~0ull;

	for (;;) {
		for (int i = 0; i < 100; i++)
			syscall(SYS_getppid);
		iters++;
		unsigned long long t = now_ns();

		if (t >= next) {
			char line[64];
			int n = snprintf(line, sizeof(line), "%llu %llu\n", t, iters);

			if (write(fd, line, (size_t)n) != n)
				return 1;
			next += 100000000ull;
		}
		if (t >= end)
			return 0;
	}
}
