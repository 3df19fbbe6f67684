// SPDX-License-Identifier: Apache-2.0
/*
 * Checks the inject library's zstd shim (inject/zstd_shim.c)
 * against the real libzstd decoder: frames it writes, raw-block
 * (LLMT_INJECT_ZSTD=raw) or through libzstd.so.1, decode to the input, for
 * sizes around the 128 KiB block limit. Prints "ok SIZE" / "bad SIZE why".
 */
#define ZSTD_createCCtx shim_createCCtx
#define ZSTD_freeCCtx shim_freeCCtx
#define ZSTD_compressBound shim_compressBound
#define ZSTD_compressCCtx shim_compressCCtx
#define ZSTD_isError shim_isError
#define ZSTD_getErrorName shim_getErrorName
#define ZSTD_createDCtx shim_createDCtx
#define ZSTD_freeDCtx shim_freeDCtx
#define ZSTD_decompressDCtx shim_decompressDCtx
#include "inject/zstd_shim.c"
#undef ZSTD_createCCtx
#undef ZSTD_freeCCtx
#undef ZSTD_compressBound
#undef ZSTD_compressCCtx
#undef ZSTD_isError
#undef ZSTD_getErrorName
#undef ZSTD_createDCtx
#undef ZSTD_freeDCtx
#undef ZSTD_decompressDCtx
#include <stdio.h>
#include <zstd.h>

static int check(size_t n)
{
	unsigned char *src = malloc(n + 1), *dst, *back = malloc(n + 1);
	uint32_t x = (uint32_t)n * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		src[i] = (i / 64) % 2 ? (unsigned char)(x >> 24) : (unsigned char)('a' + i % 7);
	}
	size_t cap = shim_compressBound(n);
	dst = malloc(cap);
	ZSTD_CCtx *c = shim_createCCtx();
	size_t z = shim_compressCCtx(c, dst, cap, src, n, 1);
	int bad = 0;
	if (shim_isError(z)) {
		printf("bad %zu compress: %s\n", n, shim_getErrorName(z));
		bad = 1;
	} else {
		size_t d = ZSTD_decompress(back, n + 1, dst, z);
		if (ZSTD_isError(d) || d != n || memcmp(back, src, n)) {
			printf("bad %zu decode: %s\n", n, ZSTD_isError(d) ? ZSTD_getErrorName(d) : "differs");
			bad = 1;
		} else if (ZSTD_getFrameContentSize(dst, z) != n) {
			printf("bad %zu content size\n", n);
			bad = 1;
		} else {
			printf("ok %zu -> %zu bytes\n", n, z);
		}
	}
	shim_freeCCtx(c);
	free(src);
	free(dst);
	free(back);
	return bad;
}

int main(void)
{
	static const size_t sizes[] = { 0, 1, 100, 131071, 131072, 131073, 262144, 1000003 };
	int bad = 0;
	printf("mode %s\n", have_zstd() ? "libzstd" : "raw");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		bad |= check(sizes[i]);
	return bad;
}
