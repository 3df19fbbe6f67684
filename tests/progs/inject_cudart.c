// SPDX-License-Identifier: Apache-2.0
/*
 * A CUDA runtime program for launch-mode tests: asks libcudart for the
 * device count (which loads the CUDA_INJECTION64_PATH library when a driver
 * is present), prints what it got and a fixed computation, exits 5.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
	int n = -1;
	cudaError_t e = cudaGetDeviceCount(&n);
	printf("cudaGetDeviceCount: %s (%d), devices %d\n", cudaGetErrorName(e), (int)e,
	       e == cudaSuccess ? n : 0);
	unsigned long long h = 1469598103934665603ull;
	for (int i = 0; i < 100000; i++)
		h = (h ^ (unsigned)i) * 1099511628211ull;
	printf("hash %016llx\n", h);
	return 5;
}
