/* SPDX-License-Identifier: Apache-2.0 */
/*
 * UTF-8 validation for names that come from targets as bytes: the trace
 * JSON escapes what is not UTF-8, and the XPlane writer replaces it (proto3
 * strings must be UTF-8, or readers reject the whole file).
 */
#ifndef LLMT_COMMON_UTF8_H
#define LLMT_COMMON_UTF8_H

#include <stddef.h>

/* Length (1..4) of the valid UTF-8 sequence at s, of at most n bytes, or 0
 * (overlong forms, UTF-16 surrogates and code points past U+10FFFF are not
 * valid). */
static inline size_t lt_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];

	if (!n)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80 || (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

#endif
