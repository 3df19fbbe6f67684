// SPDX-License-Identifier: Apache-2.0
/*
 * A target whose errno is watched across an injection: with RLIMIT_NOFILE
 * at its three standard fds (so that any fd made in it fails, EMFILE: an
 * injected system call that fails), it sets errno to 4242, prints
 * "ready PID" and sleeps in a read of stdin; once that returns it prints
 * "errno N" (what errno holds then: 4242 unless something in the process
 * changed it) and exits 0.
 *   errno_target
 */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

int main(void)
{
	struct rlimit rl = { 3, 3 };
	char c;

	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		perror("errno_target: setrlimit");
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	errno = 4242;
	ssize_t n = read(0, &c, 1);
	int e = errno;
	printf("errno %d (read %zd)\n", e, n);
	return 0;
}
