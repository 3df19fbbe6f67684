// SPDX-License-Identifier: Apache-2.0
/*
 * A process whose thread closes a file while the process exits: what a
 * collector with a writer thread would do at its end. Writes 4 MiB to FILE
 * (new), creates READY, waits for a line on stdin, then starts a thread that
 * closes FILE and, a moment later, exits from main (exit_group).
 *   close_then_exit FILE READY
 * On a FUSE mount whose daemon does not answer (an object store stalled),
 * the close sends a FLUSH that waits for the answer uninterruptibly, and
 * the process's exit waits for that thread (tests/bench/store_exit_hold.sh).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd;

static void *closer(void *arg)
{
	(void)arg;
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	char line[16];
	pthread_t t;

	if (argc != 3) {
		fprintf(stderr, "usage: close_then_exit FILE READY\n");
		return 2;
	}
	fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < 4; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			return 1;
	close(open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&t, NULL, closer, NULL);
	usleep(200000);
	exit(0);
}
