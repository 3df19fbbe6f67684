// SPDX-License-Identifier: Apache-2.0
/*
 * The target for the inject library's buffer test: loads the fake CUPTI
 * (fake_cupti, soname libcupti.so.13) from FAKE_LIB, prints "ready PID",
 * makes a "CUDA call" every millisecond until stdin closes, then prints
 * what the fake CUPTI saw:
 *   generated=N buffers=N unzeroed=N misaligned=N finalized=N
 *   fake_cuda_app FAKE_LIB
 */
#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fake_cuda_app FAKE_LIB\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	void (*call)(void) = h ? (void (*)(void))dlsym(h, "fake_cupti_api_call") : NULL;
	void (*stats)(unsigned long long *) =
		h ? (void (*)(unsigned long long *))dlsym(h, "fake_cupti_stats") : NULL;
	if (!call || !stats) {
		fprintf(stderr, "fake_cuda_app: %s: %s\n", argv[1], dlerror());
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		if (poll(&p, 1, 1) > 0) {
			char buf[64];
			if (read(0, buf, sizeof(buf)) <= 0)
				break;
		}
		call();
	}
	unsigned long long s[5];
	stats(s);
	printf("generated=%llu buffers=%llu unzeroed=%llu misaligned=%llu finalized=%llu\n", s[0], s[1],
	       s[2], s[3], s[4]);
	return 0;
}
