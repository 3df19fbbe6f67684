// SPDX-License-Identifier: Apache-2.0
/* Session ids: one per `profile` run, in the header of each of its logs
 * (schemas/eventlog.md, tag 10), so the converter takes a profile's logs
 * by id, never by file time. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include "eventlog/eventlog.h"

int evlog_session_new(uint8_t id[EVLOG_SESSION_LEN])
{
	size_t got = 0;

	while (got < EVLOG_SESSION_LEN) {
		ssize_t n = getrandom(id + got, EVLOG_SESSION_LEN - got, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		got += n > 0 ? (size_t)n : 0;
	}
	if (!evlog_session_set(id)) /* all zero means "none": never hand that out */
		id[0] = 1;
	return 0;
}

int evlog_session_set(const uint8_t id[EVLOG_SESSION_LEN])
{
	for (int i = 0; i < EVLOG_SESSION_LEN; i++)
		if (id[i])
			return 1;
	return 0;
}

char *evlog_session_hex(const uint8_t id[EVLOG_SESSION_LEN], char out[EVLOG_SESSION_HEX])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < EVLOG_SESSION_LEN; i++) {
		out[2 * i] = digits[id[i] >> 4];
		out[2 * i + 1] = digits[id[i] & 15];
	}
	out[2 * EVLOG_SESSION_LEN] = 0;
	return out;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int evlog_session_parse(const char *hex, uint8_t id[EVLOG_SESSION_LEN])
{
	memset(id, 0, EVLOG_SESSION_LEN);
	if (!hex || strlen(hex) != 2 * EVLOG_SESSION_LEN)
		return -EVLOG_EINVAL;
	for (int i = 0; i < EVLOG_SESSION_LEN; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			memset(id, 0, EVLOG_SESSION_LEN);
			return -EVLOG_EINVAL;
		}
		id[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}
