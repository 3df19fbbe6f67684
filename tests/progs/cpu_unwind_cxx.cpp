// SPDX-License-Identifier: Apache-2.0
// A C++ program built with -O2 -fomit-frame-pointer (no frame pointers, as
// most distribution and wheel binaries): a fixed amount of work through
// classes, templates, std::sort and a recursion, so CPU stacks are several
// frames deep and each function's share is known and stable.
//   cpu_unwind_cxx ROUNDS
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace work {

template <typename T> struct Mixer {
	T state;
	__attribute__((noinline)) T mix(const T *v, size_t n)
	{
		for (size_t i = 0; i < n; i++)
			state = (state ^ v[i]) * 0x9e3779b97f4a7c15ull + (state >> 29);
		return state;
	}
};

__attribute__((noinline)) uint64_t hash_block(const std::vector<uint64_t> &v, int reps)
{
	Mixer<uint64_t> m{ 1 };
	uint64_t r = 0;

	for (int i = 0; i < reps; i++)
		r += m.mix(v.data(), v.size());
	return r;
}

__attribute__((noinline)) uint64_t sort_block(std::vector<uint32_t> &v, uint32_t seed)
{
	for (auto &x : v)
		x = seed = seed * 1664525u + 1013904223u;
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

__attribute__((noinline)) double sum_roots(int n)
{
	volatile double s = 0;

	for (int i = 1; i <= n; i++)
		s = s + std::sqrt((double)i) / (1.0 + std::log((double)i));
	return s;
}

// A recursion with a real frame per level (an array on the stack), so the
// unwinder has to walk a deep stack built without frame pointers.
__attribute__((noinline)) uint64_t descend(int depth, std::vector<uint64_t> &hv,
					   std::vector<uint32_t> &sv, int round)
{
	volatile uint64_t pad[8];

	for (int i = 0; i < 8; i++)
		pad[i] = (uint64_t)depth * i;
	if (depth > 0)
		return descend(depth - 1, hv, sv, round) + pad[depth % 8];
	return hash_block(hv, 60) + sort_block(sv, (uint32_t)round) + (uint64_t)sum_roots(300000);
}

} // namespace work

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	std::vector<uint64_t> hv(40000, 3);
	std::vector<uint32_t> sv(200000);
	uint64_t r = 0;

	for (int i = 0; i < rounds; i++)
		r += work::descend(12, hv, sv, i);
	printf("%llu\n", (unsigned long long)r);
	return 0;
}
