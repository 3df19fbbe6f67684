// SPDX-License-Identifier: Apache-2.0
/*
 * A launched CUDA program in the small, for the launch form of
 * --enable-cuda-kernel on machines without a GPU: it loads the stand-in
 * CUPTI (fake_cupti, as the CUDA runtime loads libcupti), then, as cuInit
 * does, the library CUDA_INJECTION64_PATH names and its InitializeInjection;
 * lets the stand-in write kernel records for a while; returns from main.
 *   fake_cuda_launch FAKE_CUPTI_SO [MS]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	struct timespec ms = { 0, (argc > 2 ? atol(argv[2]) : 300) * 1000000L };
	void *h;
	int (*init)(void);

	if (argc < 2 || !dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "usage: fake_cuda_launch FAKE_CUPTI_SO [MS] (%s)\n", dlerror());
		return 2;
	}
	if (!inj || !(h = dlopen(inj, RTLD_NOW)) || !(*(void **)&init = dlsym(h, "InitializeInjection"))) {
		fprintf(stderr, "no injection library: %s\n", inj ? dlerror() : "CUDA_INJECTION64_PATH unset");
		return 3;
	}
	printf("InitializeInjection %d\n", init());
	fflush(stdout);
	nanosleep(&ms, NULL);
	printf("done\n");
	return 7;
}
