// SPDX-License-Identifier: Apache-2.0
/*
 * The zstd compression calls the event-log writer makes, for the inject
 * library only. Debian's libzstd.a is not position independent, so it
 * cannot go into a shared object, and the library must not need a libzstd
 * the target may lack. So: use the target's libzstd.so.1 when it has one
 * (dlopen at first use), else write valid zstd frames made of raw
 * (uncompressed) blocks, which every zstd decoder reads.
 *
 * These definitions are hidden: the writer binds to them at link time and
 * they never interpose on the target's own zstd.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HIDDEN __attribute__((visibility("hidden")))

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

static struct {
	void *h;
	ZSTD_CCtx *(*create)(void);
	size_t (*free_)(ZSTD_CCtx *);
	size_t (*compress)(ZSTD_CCtx *, void *, size_t, const void *, size_t, int);
	size_t (*bound)(size_t);
	unsigned (*is_error)(size_t);
	const char *(*err_name)(size_t);
} z;
static pthread_once_t z_once = PTHREAD_ONCE_INIT;

static void z_load(void)
{
	const char *force = getenv("LLMT_INJECT_ZSTD");
	if (force && !strcmp(force, "raw"))
		return; /* raw frames on request (tests, or a libzstd not to be trusted) */
	void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&z.create = dlsym(h, "ZSTD_createCCtx");
	*(void **)&z.free_ = dlsym(h, "ZSTD_freeCCtx");
	*(void **)&z.compress = dlsym(h, "ZSTD_compressCCtx");
	*(void **)&z.bound = dlsym(h, "ZSTD_compressBound");
	*(void **)&z.is_error = dlsym(h, "ZSTD_isError");
	*(void **)&z.err_name = dlsym(h, "ZSTD_getErrorName");
	if (z.create && z.free_ && z.compress && z.bound && z.is_error && z.err_name)
		z.h = h;
	else
		dlclose(h);
}

static int have_zstd(void)
{
	pthread_once(&z_once, z_load);
	return z.h != NULL;
}

/* The library's own handle when there is no libzstd: a dummy. */
static char raw_cctx;

/* Raw-block frame: magic, header (single segment, 4-byte content size),
 * blocks of at most 128 KiB, each with a 3-byte header. */
#define RAW_BLOCK_MAX (128u << 10)
#define RAW_ERROR ((size_t)-1)

static size_t raw_bound(size_t n)
{
	return 4 + 1 + 4 + (n / RAW_BLOCK_MAX + 1) * 3 + n;
}

static size_t raw_compress(void *dst, size_t cap, const void *src, size_t n)
{
	if (n > 0xffffffffu || cap < raw_bound(n))
		return RAW_ERROR;
	unsigned char *o = dst;
	const unsigned char *s = src;
	size_t p = 0;
	o[p++] = 0x28; o[p++] = 0xB5; o[p++] = 0x2F; o[p++] = 0xFD;
	o[p++] = 0xA0; /* FCS 4 bytes, single segment, no checksum, no dict */
	for (int i = 0; i < 4; i++)
		o[p++] = (unsigned char)(n >> (8 * i));
	size_t off = 0;
	do {
		size_t b = n - off < RAW_BLOCK_MAX ? n - off : RAW_BLOCK_MAX;
		unsigned last = off + b == n;
		uint32_t hdr = (uint32_t)(b << 3) | last; /* type 0 = raw */
		o[p++] = (unsigned char)hdr;
		o[p++] = (unsigned char)(hdr >> 8);
		o[p++] = (unsigned char)(hdr >> 16);
		memcpy(o + p, s + off, b);
		p += b;
		off += b;
	} while (off < n);
	return p;
}

HIDDEN ZSTD_CCtx *ZSTD_createCCtx(void)
{
	return have_zstd() ? z.create() : (ZSTD_CCtx *)&raw_cctx;
}

HIDDEN size_t ZSTD_freeCCtx(ZSTD_CCtx *c)
{
	if (c && (void *)c != (void *)&raw_cctx && have_zstd())
		return z.free_(c);
	return 0;
}

HIDDEN size_t ZSTD_compressBound(size_t n)
{
	size_t a = raw_bound(n);
	if (have_zstd() && z.bound(n) > a)
		a = z.bound(n);
	return a;
}

HIDDEN size_t ZSTD_compressCCtx(ZSTD_CCtx *c, void *dst, size_t cap, const void *src, size_t n, int level)
{
	if ((void *)c != (void *)&raw_cctx && have_zstd())
		return z.compress(c, dst, cap, src, n, level);
	return raw_compress(dst, cap, src, n);
}

HIDDEN unsigned ZSTD_isError(size_t code)
{
	if (have_zstd())
		return z.is_error(code);
	return code == RAW_ERROR;
}

HIDDEN const char *ZSTD_getErrorName(size_t code)
{
	if (have_zstd())
		return z.err_name(code);
	return code == RAW_ERROR ? "destination buffer too small" : "no error";
}

/* The reader is linked in with the rest of the event log but never used
 * here; decompression works only with the target's libzstd. */
typedef struct ZSTD_DCtx_s ZSTD_DCtx;

HIDDEN ZSTD_DCtx *ZSTD_createDCtx(void)
{
	if (!have_zstd())
		return NULL;
	ZSTD_DCtx *(*fn)(void);
	*(void **)&fn = dlsym(z.h, "ZSTD_createDCtx");
	return fn ? fn() : NULL;
}

HIDDEN size_t ZSTD_freeDCtx(ZSTD_DCtx *c)
{
	size_t (*fn)(ZSTD_DCtx *);
	if (!c || !have_zstd())
		return 0;
	*(void **)&fn = dlsym(z.h, "ZSTD_freeDCtx");
	return fn ? fn(c) : 0;
}

HIDDEN size_t ZSTD_decompressDCtx(ZSTD_DCtx *c, void *dst, size_t cap, const void *src, size_t n)
{
	size_t (*fn)(ZSTD_DCtx *, void *, size_t, const void *, size_t);
	if (!have_zstd())
		return RAW_ERROR;
	*(void **)&fn = dlsym(z.h, "ZSTD_decompressDCtx");
	return fn ? fn(c, dst, cap, src, n) : RAW_ERROR;
}
