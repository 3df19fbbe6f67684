// SPDX-License-Identifier: Apache-2.0
/*
 * A launched CUDA program in the small, for the launch form of
 * --enable-cuda-kernel on machines without a GPU: it loads the stand-in
 * CUPTI (fake_cupti, as the CUDA runtime loads libcupti), then, as cuInit
 * does, the library CUDA_INJECTION64_PATH names and its InitializeInjection;
 * lets the stand-in write kernel records for a while; returns from main.
 *   fake_cuda_launch FAKE_CUPTI_SO [MS [HOLD]]
 * With HOLD: once MS have passed it says "recorded PID" and waits until
 * the file HOLD exists before it returns.
 * FAKE_LAUNCH_SWAP=symlink:PATH or fifo: at its exit, once the library has
 * published its log in $LLMT_CUPTI_DIR, the log's name is made a symbolic
 * link to PATH (or a FIFO), the log itself kept as NAME.real: a hostile
 * command's swap of the file the collector is about to read.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Runs after the library's own exit handler (registered later, by
 * InitializeInjection), which publishes the log. */
static void swap_log(void)
{
	const char *how = getenv("FAKE_LAUNCH_SWAP"), *dir = getenv("LLMT_CUPTI_DIR");
	char from[4096], to[4096 + 8];
	struct dirent *e;
	DIR *d;

	if (!how || !dir || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, "llmtracker-cupti.", 17) || n < 6 || strcmp(e->d_name + n - 6, ".evlog"))
			continue;
		snprintf(from, sizeof(from), "%s/%s", dir, e->d_name);
		snprintf(to, sizeof(to), "%s.real", from);
		int rc = rename(from, to);
		if (!rc && !strncmp(how, "symlink:", 8))
			rc = symlink(how + 8, from);
		else if (!rc && !strcmp(how, "fifo"))
			rc = mkfifo(from, 0600);
		printf("swapped %s %s\n", e->d_name, rc ? "failed" : how);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	struct timespec ms = { 0, (argc > 2 ? atol(argv[2]) : 300) * 1000000L }, poll = { 0, 10000000L };
	void *h;
	int (*init)(void);

	if (argc < 2 || !dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "usage: fake_cuda_launch FAKE_CUPTI_SO [MS [HOLD]] (%s)\n", dlerror());
		return 2;
	}
	if (!inj || !(h = dlopen(inj, RTLD_NOW)) || !(*(void **)&init = dlsym(h, "InitializeInjection"))) {
		fprintf(stderr, "no injection library: %s\n", inj ? dlerror() : "CUDA_INJECTION64_PATH unset");
		return 3;
	}
	atexit(swap_log);
	printf("InitializeInjection %d\n", init());
	fflush(stdout);
	nanosleep(&ms, NULL);
	if (argc > 3) {
		printf("recorded %d\n", (int)getpid());
		fflush(stdout);
		while (access(argv[3], F_OK))
			nanosleep(&poll, NULL);
	}
	printf("done\n");
	fflush(stdout);
	return 7;
}
