// SPDX-License-Identifier: Apache-2.0
/*
 * cuda_early: calls the real CUDA runtime (linked: DT_NEEDED, mapped before
 * main) from its very first instructions, with no wait, for the tests of
 * probes armed before a launched program runs and in a child that forks and
 * execs. Without a GPU driver every call fails fast; each call's return code
 * is printed ("ret SYMBOL CODE"). cuda_early_dl does the same through dlopen.
 *
 *   cuda_early calls    650 calls right after main (cuda_early.h)
 *   cuda_early spawn    fork a child that execs `cuda_early calls`; prints
 *                       "child PID" and exits with the child's status
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_early.h"

int main(int argc, char **argv)
{
	struct api a;

	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (argc >= 2 && !strcmp(argv[1], "calls")) {
		a = (struct api){ cudaGetDeviceCount, cudaMalloc, cudaMemset, cudaDeviceSynchronize };
		run_calls(&a);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "spawn")) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", "cuda_early", "calls", (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			return 1;
		printf("child %d\n", (int)pid);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	fprintf(stderr, "usage: cuda_early calls | spawn\n");
	return 2;
}
