/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The call sequence shared by cuda_early (libcudart linked: mapped before
 * main) and cuda_early_dl (libcudart loaded half-way with dlopen): 650 calls
 * of four runtime functions, each return code printed as "ret SYMBOL CODE".
 */
#ifndef LLMT_TEST_CUDA_EARLY_H
#define LLMT_TEST_CUDA_EARLY_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

/* How many times each function is called, in this order, round-robin. */
#define N_GETCOUNT 300
#define N_MALLOC 200
#define N_MEMSET 100
#define N_SYNC 50

struct api {
	cudaError_t (*get_count)(int *);
	cudaError_t (*malloc_)(void **, size_t);
	cudaError_t (*memset_)(void *, int, size_t);
	cudaError_t (*sync)(void);
};

static inline void run_calls(const struct api *a)
{
	int left[4] = { N_GETCOUNT, N_MALLOC, N_MEMSET, N_SYNC };
	int count, done = 1;
	void *p;

	while (done) {
		done = 0;
		if (left[0]-- > 0 && ++done)
			printf("ret cudaGetDeviceCount %d\n", (int)a->get_count(&count));
		if (left[1]-- > 0 && ++done)
			printf("ret cudaMalloc %d\n", (int)a->malloc_(&p, 4096));
		if (left[2]-- > 0 && ++done)
			printf("ret cudaMemset %d\n", (int)a->memset_((void *)0x1000, 0, 64));
		if (left[3]-- > 0 && ++done)
			printf("ret cudaDeviceSynchronize %d\n", (int)a->sync());
	}
	printf("done\n");
}

static inline int api_from(void *h, struct api *a)
{
	a->get_count = (cudaError_t(*)(int *))dlsym(h, "cudaGetDeviceCount");
	a->malloc_ = (cudaError_t(*)(void **, size_t))dlsym(h, "cudaMalloc");
	a->memset_ = (cudaError_t(*)(void *, int, size_t))dlsym(h, "cudaMemset");
	a->sync = (cudaError_t(*)(void))dlsym(h, "cudaDeviceSynchronize");
	return a->get_count && a->malloc_ && a->memset_ && a->sync ? 0 : -1;
}

#endif
