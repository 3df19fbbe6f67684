// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for the event log reader: any bytes must open cleanly or
 * fail with an error, and iterating must end without a crash, a hang or an
 * out-of-bounds access. Every returned event is dumped so each string, stack
 * and frame pointer is read through its full length.
 *
 * Inputs starting with the file magic are read as whole logs. Any other
 * input is taken as one chunk's raw (decompressed) payload, prefixed by an
 * event-count byte, and wrapped into a log with valid checksums, so the
 * fuzzer reaches the event decoder instead of stopping at a crc check.
 */
#include "eventlog/eventlog.h"
#include "eventlog/evlog_format.h"

#include <libdeflate.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(const uint8_t *buf, size_t len)
{
	static FILE *sink;
	if (!sink)
		sink = fopen("/dev/null", "w");
	struct evlog_reader *r;
	char msg[256];
	if (evlog_reader_open_mem(&r, buf, len, "fuzz", msg, sizeof(msg)))
		return;
	evlog_dump_header(sink, evlog_reader_header(r));
	const struct evlog_event *ev;
	while (evlog_next(r, &ev) == 0)
		evlog_dump_event(sink, ev);
	evlog_reader_close(r);
}

/* Header with no fields + one chunk holding `raw` (count events). */
static uint8_t *wrap_chunk(const uint8_t *raw, size_t rawlen, uint32_t count, size_t *len)
{
	size_t bound = ZSTD_compressBound(rawlen);
	uint8_t *b = malloc(EVF_FILE_FIXED + EVF_CHUNK_HDR + bound);
	if (!b)
		return NULL;
	memcpy(b, EVF_MAGIC, EVF_MAGIC_LEN);
	evf_put16(b + 8, EVLOG_VERSION_MAJOR);
	evf_put16(b + 10, EVLOG_VERSION_MINOR);
	evf_put32(b + 12, 0);
	evf_put32(b + 16, libdeflate_crc32(0, b, 0));
	uint8_t *h = b + EVF_FILE_FIXED;
	size_t c = ZSTD_compress(h + EVF_CHUNK_HDR, bound, raw, rawlen, 1);
	if (ZSTD_isError(c)) {
		free(b);
		return NULL;
	}
	memset(h, 0, EVF_CHUNK_HDR);
	evf_put32(h, EVF_CHUNK_MAGIC);
	evf_put32(h + 8, (uint32_t)c);
	evf_put32(h + 12, (uint32_t)rawlen);
	evf_put32(h + 16, count);
	evf_put64(h + 32, 1000);
	evf_put32(h + 40, libdeflate_crc32(0, h + EVF_CHUNK_HDR, c));
	evf_put32(h + 4, libdeflate_crc32(0, h + 8, EVF_CHUNK_HDR - 8));
	*len = EVF_FILE_FIXED + EVF_CHUNK_HDR + c;
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= EVF_MAGIC_LEN && !memcmp(data, EVF_MAGIC, EVF_MAGIC_LEN)) {
		read_all(data, size);
		return 0;
	}
	if (size < 2)
		return 0;
	size_t len;
	uint8_t *log = wrap_chunk(data + 1, size - 1, 1u + data[0], &len);
	if (log) {
		read_all(log, len);
		free(log);
	}
	return 0;
}
