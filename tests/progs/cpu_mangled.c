// SPDX-License-Identifier: Apache-2.0
/*
 * A C program whose hot function carries a C++ mangled name
 * (_ZN4llmt9spin_loopEm = llmt::spin_loop(unsigned long)), so that
 * symbolizing its CPU samples needs the C++ demangler.
 *   cpu_mangled [MS]   spin for MS milliseconds (default 1500)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

uint64_t spin_loop(uint64_t ms) __asm__("_ZN4llmt9spin_loopEm");

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

__attribute__((noinline)) uint64_t spin_loop(uint64_t ms)
{
	uint64_t end = now_ms() + ms, x = 1;
	while (now_ms() < end)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

int main(int argc, char **argv)
{
	uint64_t ms = argc > 1 ? strtoull(argv[1], NULL, 10) : 1500;
	printf("%llu\n", (unsigned long long)(spin_loop(ms) & 1));
	return 0;
}
