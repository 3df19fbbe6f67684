// SPDX-License-Identifier: Apache-2.0
/*
 * Symbol-table load and lookup cost on big C++ libraries (the size class of
 * libtorch / cuDNN): load + sort once, then 10^6 lookups of addresses spread
 * over the table. Prints figures; asserts nothing.
 *   bench_symbolize [LIB ...]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "collector/target/sym_table.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void bench(const char *path)
{
	const int lookups = 1000000;
	struct sym_table *t;
	double t0, t1, t2;
	uint64_t off, hit = 0, seed = 88172645463325252ull;
	char err[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		printf("%-60s (absent)\n", path);
		return;
	}
	t0 = now_ms();
	t = sym_table_load_elf(fd, -1, NULL, NULL, err, sizeof(err));
	t1 = now_ms();
	close(fd);
	if (!t) {
		printf("%-60s %s\n", path, err);
		return;
	}
	for (int i = 0; i < lookups; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		hit += sym_table_lookup(t, sym_table_vaddr(t, seed % (64ull << 20)), &off, NULL) != NULL;
	}
	t2 = now_ms();
	printf("%-60s %8zu symbols  load+sort %7.1f ms  lookup %5.0f ns  (%.0f%% hits)\n", path,
	       sym_table_count(t), t1 - t0, (t2 - t1) * 1e6 / lookups, 100.0 * hit / lookups);
	sym_table_free(t);
}

int main(int argc, char **argv)
{
	static const char *const dflt[] = {
		"/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
		"/usr/local/cuda/lib64/libcudnn_engines_precompiled.so.9",
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/usr/bin/python3.11",
	};

	if (argc > 1)
		for (int i = 1; i < argc; i++)
			bench(argv[i]);
	else
		for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
			bench(dflt[i]);
	return 0;
}
