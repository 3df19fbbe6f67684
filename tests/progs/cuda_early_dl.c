// SPDX-License-Identifier: Apache-2.0
/*
 * cuda_early_dl LIB: does some work of its own (nothing probed), then
 * dlopen(LIB) (a soname, or a path) of the CUDA runtime, which it does not
 * link, prints "loaded" and at once makes the 650 calls of cuda_early.h
 * through it, with no wait.
 */
#include "cuda_early.h"

/* Work of its own before the load. */
static unsigned long busy(unsigned long n)
{
	volatile unsigned long x = 0;

	for (unsigned long i = 0; i < n; i++)
		x += i ^ (x >> 3);
	return x;
}

int main(int argc, char **argv)
{
	struct api a;
	void *h;

	if (argc != 2) {
		fprintf(stderr, "usage: cuda_early_dl LIB\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	busy(20000000);
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h || api_from(h, &a)) {
		fprintf(stderr, "cuda_early_dl: %s\n", dlerror());
		return 1;
	}
	printf("loaded\n");
	run_calls(&a);
	return 0;
}
