/* SPDX-License-Identifier: Apache-2.0 */
#include "converter/output/jsonw.h"
#include "common/utf8.h"

#include <errno.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <isa-l/igzip_lib.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* LLMT_GZIP_LEVEL=1..12 asks libdeflate for that level (higher: smaller,
 * slower; each buffer one gzip member). Unset, one ISA-L level-1 stream:
 * faster than libdeflate's level 1 on trace JSON for a few percent more
 * bytes, and compression is a large share of a .json.gz conversion's time
 * (docs/MEASUREMENTS.md, converter throughput and memory). */
static int gz_level(void)
{
	const char *s = getenv("LLMT_GZIP_LEVEL");
	int l = s ? atoi(s) : 0;

	return l >= 1 && l <= 12 ? l : 0;
}

static void gz_free(struct cv_out *o)
{
	libdeflate_free_compressor(o->zc);
	o->zc = NULL;
	if (o->zs)
		free(((struct isal_zstream *)o->zs)->level_buf);
	free(o->zs);
	o->zs = NULL;
	free(o->buf);
	free(o->zbuf);
	o->buf = NULL;
	o->zbuf = NULL;
}

static int gz_alloc(struct cv_out *o)
{
	int level = gz_level();

	if (level) {
		if (!(o->zc = libdeflate_alloc_compressor(level)))
			return -1;
		o->zcap = libdeflate_gzip_compress_bound(o->zc, o->cap);
	} else {
		struct isal_zstream *z = calloc(1, sizeof(*z));

		if (!(o->zs = z))
			return -1;
		isal_deflate_init(z);
		z->level = 1;
		z->level_buf_size = ISAL_DEF_LVL1_DEFAULT;
		z->gzip_flag = IGZIP_GZIP;
		z->flush = NO_FLUSH;
		/* Zeroed, so that nothing left in the heap can reach the output:
		 * equal inputs once compressed to different (valid) bytes in a
		 * fresh-clone run (convert_json.sh's O_DIRECT comparison); not
		 * reproduced since, cause not shown. */
		if (!(z->level_buf = calloc(1, z->level_buf_size)))
			return -1;
		o->zcap = o->cap;
	}
	o->zbuf = malloc(o->zcap);
	return o->zbuf ? 0 : -1;
}

int cv_out_open(struct cv_out *o, int dirfd, const char *final, int gz, int overwrite,
		char *err, size_t errsz)
{
	memset(o, 0, sizeof(*o));
	o->tmp.fd = o->tmp.dirfd = -1;
	o->gz = gz;
	o->cap = CV_OUT_CHUNK;
	o->buf = malloc(o->cap);
	if (!o->buf || (gz && gz_alloc(o))) {
		gz_free(o);
		snprintf(err, errsz, "out of memory opening %s", final);
		return -1;
	}
	if ((dirfd >= 0 ? tb_tmp_open(&o->tmp, dirfd, final, overwrite, err, errsz)
			: tb_tmp_open_path(&o->tmp, final, overwrite, err, errsz))) {
		gz_free(o);
		return -1;
	}
	tb_seq_init(&o->seq, o->tmp.fd);
	o->open = 1;
	return 0;
}

static int put(struct cv_out *o, const void *p, size_t n)
{
	if (tb_seq_write(&o->seq, p, n)) {
		snprintf(o->err, sizeof(o->err), "writing %s: %s", o->tmp.final, strerror(errno));
		return -1;
	}
	o->bytes_out += n;
	return 0;
}

/* ISA-L's AVX-512 code returns with the upper vector registers dirty:
 * every legacy-SSE instruction after it (ours, libc's) then pays a
 * transition penalty, which cost more than the compression itself
 * (docs/MEASUREMENTS.md, converter throughput and memory). */
static void vzeroupper(void)
{
#if defined(__x86_64__)
	static int avx = -1;

	if (avx < 0)
		avx = __builtin_cpu_supports("avx");
	if (avx)
		__asm__ volatile("vzeroupper" ::: "memory");
#endif
}

/* Feed buf[0..len) to the ISA-L stream; at the end, finish it. */
static int gz_stream(struct cv_out *o, int final)
{
	struct isal_zstream *z = o->zs;

	z->next_in = (uint8_t *)o->buf;
	z->avail_in = (uint32_t)o->len;
	z->end_of_stream = (uint16_t)final;
	do {
		z->next_out = o->zbuf;
		z->avail_out = (uint32_t)o->zcap;
		if (isal_deflate(z) != COMP_OK) {
			snprintf(o->err, sizeof(o->err), "gzip compression failed");
			return -1;
		}
		vzeroupper();
		size_t have = o->zcap - z->avail_out;

		if (have && put(o, o->zbuf, have))
			return -1;
	} while (z->avail_in || (final && z->internal_state.state != ZSTATE_END));
	return 0;
}

int cv_out_flush(struct cv_out *o, int final)
{
	if (!o->open)
		return -1;
	o->bytes_in += o->len;
	if (!o->gz) {
		int rc = o->len ? put(o, o->buf, o->len) : 0;

		o->len = 0;
		return rc;
	}
	if (o->zs) {
		int rc = o->len || final ? gz_stream(o, final) : 0;

		o->len = 0;
		return rc;
	}
	/* An empty file is not valid gzip: the last flush always writes a member. */
	if (!o->len && !(final && !o->bytes_out))
		return 0;
	size_t have = libdeflate_gzip_compress(o->zc, o->buf, o->len, o->zbuf, o->zcap);

	if (!have) {
		snprintf(o->err, sizeof(o->err), "gzip compression failed");
		return -1;
	}
	o->len = 0;
	return put(o, o->zbuf, have);
}

int cv_out_close(struct cv_out *o)
{
	if (!o->open)
		return -1;
	int rc = cv_out_flush(o, 1);

	if (tb_seq_finish(&o->seq) && rc == 0) {
		snprintf(o->err, sizeof(o->err), "writing %s: %s", o->tmp.final, strerror(errno));
		rc = -1;
	}
	gz_free(o);
	o->gz = 0;
	o->cap = o->len = 0;
	return rc;
}

int cv_out_publish(struct cv_out *o, int overwrite, char *err, size_t errsz)
{
	if (o->buf && cv_out_close(o)) {
		snprintf(err, errsz, "%s", o->err);
		cv_out_discard(o);
		return -1;
	}
	o->open = 0;
	return tb_tmp_publish(&o->tmp, overwrite, err, errsz);
}

void cv_out_discard(struct cv_out *o)
{
	tb_seq_free(&o->seq);
	gz_free(o);
	o->gz = 0;
	if (o->open || o->tmp.fd >= 0)
		tb_tmp_discard(&o->tmp);
	o->open = 0;
}

/* ---------------------------------------------------------------- JSON */

/* Escape up to max_in bytes of s (finishing a started sequence); returns
 * the bytes consumed, *out the bytes written. */
static size_t escape_some(char *dst, const char *src, size_t len, size_t max_in, size_t *out)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)src;
	size_t i = 0, o = 0;

	while (i < len && i < max_in) {
		unsigned char c = s[i];

		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			dst[o++] = (char)c;
			i++;
		} else if (c == '"' || c == '\\') {
			dst[o++] = '\\';
			dst[o++] = (char)c;
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;

			if (e) {
				memcpy(dst + o, e, 2);
				o += 2;
			} else {
				memcpy(dst + o, "\\u00", 4);
				dst[o + 4] = hex[c >> 4];
				dst[o + 5] = hex[c & 15];
				o += 6;
			}
			i++;
		} else {
			int k = (int)lt_utf8_seq(s + i, len - i);

			if (k) {
				memcpy(dst + o, s + i, (size_t)k);
				o += (size_t)k;
				i += (size_t)k;
			} else {
				memcpy(dst + o, "\xef\xbf\xbd", 3); /* U+FFFD */
				o += 3;
				i++;
			}
		}
	}
	*out = o;
	return i;
}

size_t cv_json_escape(char *dst, const char *s, size_t len)
{
	size_t o;

	dst[0] = '"';
	escape_some(dst + 1, s, len, len, &o);
	dst[o + 1] = '"';
	return o + 2;
}

#define ESC_PIECE 4096

/* Bytes of s that need no escaping (printable ASCII other than '"' and '\\'):
 * names and stacks are nearly always all of it, copied in one go. */
size_t cv_json_plain_len(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	size_t i = 0;

#ifdef __SSE2__
	/* Sixteen bytes at a time: as signed bytes, >= 0x80 and < 0x20 are
	 * both "less than 0x20". */
	const __m128i lo = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f),
		      quo = _mm_set1_epi8('"'), bsl = _mm_set1_epi8('\\');

	for (; i + 16 <= len; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(u + i));
		__m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(x, lo), _mm_cmpeq_epi8(x, del)),
					   _mm_or_si128(_mm_cmpeq_epi8(x, quo), _mm_cmpeq_epi8(x, bsl)));

		if (_mm_movemask_epi8(bad))
			break;
	}
#endif
	/* Eight bytes at a time: any byte >= 0x80, < 0x20, 0x7f, '"' or '\\'
	 * sends the word to the byte loop. */
	for (; i + 8 <= len; i += 8) {
		uint64_t x;

		memcpy(&x, u + i, 8);
		uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\'), d = x ^ (ones * 0x7f);
		uint64_t bad = (x | ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) |
				((b - ones) & ~b) | ((d - ones) & ~d)) & highs;

		if (bad)
			break;
	}
	while (i < len && u[i] >= 0x20 && u[i] < 0x7f && u[i] != '"' && u[i] != '\\')
		i++;
	return i;
}

int cv_json_str(struct cv_out *o, const char *s, size_t len)
{
	size_t i = cv_json_plain_len(s, len);

	if (i <= ESC_PIECE && cv_out_reserve(o, i + 2) == 0) {
		char *d = o->buf + o->len;

		d[0] = '"';
		memcpy(d + 1, s, i);
		o->len += i + 1;
		if (i == len) {
			o->buf[o->len++] = '"';
			return 0;
		}
	} else {
		i = 0;
		if (cv_out_reserve(o, 1))
			return -1;
		o->buf[o->len++] = '"';
	}
	while (i < len) {
		size_t w;

		if (cv_out_reserve(o, ESC_PIECE * 6 + 32))
			return -1;
		i += escape_some(o->buf + o->len, s + i, len - i, ESC_PIECE, &w);
		o->len += w;
	}
	if (cv_out_reserve(o, 1))
		return -1;
	o->buf[o->len++] = '"';
	return 0;
}

int cv_out_str(struct cv_out *o, const char *s)
{
	return cv_out_write(o, s, strlen(s));
}

size_t cv_dec_u64(char *d, uint64_t v)
{
	static const char pairs[] = "00010203040506070809101112131415161718192021222324"
				    "25262728293031323334353637383940414243444546474849"
				    "50515253545556575859606162636465666768697071727374"
				    "75767778798081828384858687888990919293949596979899";
	static const uint64_t pow10[20] = {
		1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
		100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
		10000000000000ULL, 100000000000000ULL, 1000000000000000ULL,
		10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
		10000000000000000000ULL };
	/* Digits from the bit length (log10(2) ~ 1233/4096), corrected once. */
	unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);
	size_t n = (bits * 1233) >> 12;

	n += n < 20 && v >= pow10[n];
	n += !n;
	/* Digits straight into place, last first, two at a time. */
	char *end = d + n;

	while (v >= 100) {
		end -= 2;
		memcpy(end, pairs + (v % 100) * 2, 2);
		v /= 100;
	}
	if (v >= 10)
		memcpy(end - 2, pairs + v * 2, 2);
	else
		end[-1] = (char)('0' + v);
	return n;
}

int cv_json_u64(struct cv_out *o, uint64_t v)
{
	if (cv_out_reserve(o, 20))
		return -1;
	o->len += cv_dec_u64(o->buf + o->len, v);
	return 0;
}

int cv_json_i64(struct cv_out *o, int64_t v)
{
	if (v < 0) {
		if (CV_OUT_LIT(o, "-"))
			return -1;
		return cv_json_u64(o, (uint64_t)0 - (uint64_t)v);
	}
	return cv_json_u64(o, (uint64_t)v);
}

int cv_json_us(struct cv_out *o, int64_t ns)
{
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	uint64_t frac = a % 1000;

	if (ns < 0 && CV_OUT_LIT(o, "-"))
		return -1;
	if (cv_json_u64(o, a / 1000) || cv_out_reserve(o, 4))
		return -1;
	o->buf[o->len++] = '.';
	o->buf[o->len++] = (char)('0' + frac / 100);
	o->buf[o->len++] = (char)('0' + frac / 10 % 10);
	o->buf[o->len++] = (char)('0' + frac % 10);
	return 0;
}

int cv_json_double(struct cv_out *o, double v)
{
	char tmp[40];
	int n;

	if (v != v || v > 1e300 || v < -1e300)
		return CV_OUT_LIT(o, "0");
	/* Ratios and rates: six decimals, trailing zeros dropped, without
	 * printf (slow) for the usual range. */
	if (v >= 0 && v < 1e12) {
		uint64_t m = (uint64_t)(v * 1e6 + 0.5), frac = m % 1000000;
		char f[8];
		size_t k = 7;

		if (cv_json_u64(o, m / 1000000))
			return -1;
		if (!frac)
			return 0;
		f[0] = '.';
		for (int i = 6; i >= 1; i--, frac /= 10)
			f[i] = (char)('0' + frac % 10);
		while (f[k - 1] == '0')
			k--;
		return cv_out_write(o, f, k);
	}
	n = snprintf(tmp, sizeof(tmp), "%.6g", v);
	return cv_out_write(o, tmp, (size_t)n);
}
