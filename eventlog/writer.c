// SPDX-License-Identifier: Apache-2.0
/*
 * Event log writer: encodes events into an in-memory chunk (per-chunk string,
 * stack and Python-stack interning; delta timestamps), one buffer per field
 * column (evlog_columns.h), compresses full or stale chunks with zstd and
 * hands each whole to its sink: the files of a log in a directory
 * (evlog_writer_open, files.c: "<dir>/.<name>.partial", published without
 * ever replacing another file), a sink of the caller's
 * (evlog_writer_open_sink), or appends it with a single write() to a file
 * someone else created and publishes (evlog_writer_open_fd). With segment
 * bounds it ends a segment after a chunk and starts the next with its own
 * file header and, as its first event, the record of the one before
 * (schemas/eventlog.md 5.2). Format: schemas/eventlog.md.
 */
#include "eventlog/eventlog.h"
#include "eventlog/evlog_columns.h"
#include "eventlog/evlog_format.h"
#include "eventlog/evlog_table.h"
#include "common/io.h"
#include "common/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

/* A segment record's name and digest ("sha256:" HEX). */
#define EVW_SEGNAME_MAX 256
#define EVW_DIGEST_LEN (7 + 2 * LT_SHA256_LEN)

struct evlog_writer {
	int fd;                 /* evlog_writer_open_fd's file, else -1 */
	const struct evlog_sink *sink; /* else where the segments go */
	void *ctx;
	struct evlog_files *files; /* evlog_writer_open's own sink, owned */
	char *name;             /* the log's final name, for segment records */
	char *label;            /* the log in messages */
	char *partial_path;     /* evlog_writer_open's: the partial file, as given */
	struct evlog_writer_opts opts;
	ZSTD_CCtx *cctx;
	int failed;             /* sticky error code (positive) */
	int keep;               /* the chunk being flushed is one the sink must keep */

	/* the file header: its body without the segment tag */
	uint8_t *hbody;
	size_t hbody_len;

	/* the open segment */
	uint32_t seg;
	uint64_t seg_bytes, seg_born_ns;
	int seg_events;         /* it holds a chunk of events, beyond its record */
	struct lt_sha256 seg_sha;
	/* the segment before it */
	char prev_name[EVW_SEGNAME_MAX];
	uint64_t prev_size;
	char prev_digest[EVW_DIGEST_LEN + 1];

	/* current chunk: one growing buffer per column. Every column has at
	 * least min_room bytes free, so most events need no capacity checks. */
	uint8_t *cb[EVC_NCOLS];  /* column buffers */
	uint8_t *cp[EVC_NCOLS];  /* column cursors */
	size_t ccap[EVC_NCOLS];
	size_t min_room;
	size_t raw_len;          /* bytes in all columns */
	uint32_t n_events;
	uint32_t by_type[EV_TYPE_MAX + 1]; /* its events of each type */
	uint64_t base_ts, prev_ts;
	uint32_t prev_pid, prev_tid;
	uint64_t prev_corr;     /* correlation ids are delta-coded */
	uint64_t chunk_born_ns; /* CLOCK_MONOTONIC when its first event came */
	uint64_t seq;

	struct evt_table strs, stacks, pystacks;
	uint64_t *frames;       /* native frames of interned stacks */
	size_t frames_len, frames_cap;
	uint32_t *pyids;        /* string ids of interned Python stacks */
	size_t pyids_len, pyids_cap;
	uint32_t frames_def, pyframes_def; /* frames defined in this chunk */

	uint8_t *out;           /* chunk header + compressed payload */
	size_t out_cap;
	uint8_t *payload;       /* the chunk payload: column directory and columns */
	size_t payload_cap;

	struct evlog_writer_stats st;
	char err[512];
};

static uint64_t evw_now(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 3, 4)))
static int evw_fail(struct evlog_writer *w, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
	return -code;
}


/* ------------------------------------------------------------------ output */

/* evlog_writer_open_fd's file. A failed append may have left part of a
 * chunk: cut it off so the file stays a valid log up to its last complete
 * chunk. */
static int evw_append(struct evlog_writer *w, const uint8_t *p, size_t n)
{
	int rc = lt_write_all(w->fd, p, n);
	if (rc == 0) {
		w->st.file_bytes += n;
		return 0;
	}
	if (ftruncate(w->fd, (off_t)w->st.file_bytes) == 0)
		lseek(w->fd, (off_t)w->st.file_bytes, SEEK_SET);
	w->failed = EVLOG_EIO;
	const char *hint = (rc == -ENOSPC || rc == -EFBIG || rc == -EDQUOT)
		? " (disk full or file size limit: free space or raise the limit)" : "";
	return evw_fail(w, EVLOG_EIO,
			"writing %s: %s%s; the log keeps its %llu complete chunks (%llu bytes)",
			w->label, strerror(-rc), hint,
			(unsigned long long)w->st.chunks,
			(unsigned long long)w->st.file_bytes);
}

/* Hand bytes of the open segment to the sink (or the fd): 0 taken, 1
 * dropped by the sink, or a negative code (the writer has failed). */
static int evw_emit(struct evlog_writer *w, const uint8_t *p, size_t n, uint32_t events)
{
	if (w->fd >= 0)
		return evw_append(w, p, n);
	struct evlog_put pi = { .events = events, .by_type = w->by_type, .keep = w->keep || !events };
	int rc = w->sink->put(w->ctx, w->seg, p, n, &pi, w->err, sizeof(w->err));
	if (rc == 1 && !pi.keep) {
		w->st.dropped_chunks++;
		w->st.dropped_events += events;
		w->st.dropped_bytes += n;
		for (unsigned t = 0; t <= EV_TYPE_MAX; t++)
			w->st.dropped_by_type[t] += w->by_type[t];
		return 1;
	}
	if (rc) {
		if (rc > 0)
			evw_fail(w, EVLOG_EIO, "%s: the sink dropped bytes the log needs", w->label);
		w->failed = rc < 0 ? -rc : EVLOG_EIO;
		return -w->failed;
	}
	w->st.file_bytes += n;
	w->seg_bytes += n;
	lt_sha256_update(&w->seg_sha, p, n);
	return 0;
}

/* ------------------------------------------------------------- file header */

static uint8_t *evw_tlv(uint8_t *p, uint16_t tag, const void *v, uint32_t len)
{
	evf_put16(p, tag);
	evf_put32(p + 2, len);
	if (len)
		memcpy(p + 6, v, len);
	return p + 6 + len;
}

static uint8_t *evw_tlv_str(uint8_t *p, uint16_t tag, struct evlog_str s)
{
	return evw_tlv(p, tag, s.ptr, s.len);
}

static uint8_t *evw_tlv_u64(uint8_t *p, uint16_t tag, uint64_t v)
{
	uint8_t b[8];
	evf_put64(b, v);
	return evw_tlv(p, tag, b, 8);
}

static int evw_check_hstr(struct evlog_str s, const char *what, char *msg, size_t msgsz)
{
	if (s.len > EVLOG_STR_MAX)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "header %s: %u bytes, over the %u limit",
			       what, s.len, EVLOG_STR_MAX);
	if (s.len && !s.ptr)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "header %s: NULL pointer with length %u",
			       what, s.len);
	return 0;
}

/* The header body, kept for every segment's header (the clock anchors are
 * the log's: read once). */
static int evw_header_body(struct evlog_writer *w, const struct evlog_header *in,
			   char *msg, size_t msgsz)
{
	static const struct evlog_header empty;
	const struct evlog_header *h = in ? in : &empty;
	const struct evlog_str *s[6] = { &h->host, &h->boot_id, &h->machine,
					 &h->producer, &h->cmdline, &h->options };
	static const char *const what[6] = { "host", "boot_id", "machine",
					     "producer", "cmdline", "options" };
	static const uint16_t tags[6] = { EVF_TAG_HOST, EVF_TAG_BOOT_ID, EVF_TAG_MACHINE,
					  EVF_TAG_PRODUCER, EVF_TAG_CMDLINE, EVF_TAG_OPTIONS };
	int has_session = evlog_session_set(h->session);
	size_t body = 3 * 6 + 8 + 8 + 4 + (has_session ? 6 + EVLOG_SESSION_LEN : 0);
	for (int i = 0; i < 6; i++) {
		int rc = evw_check_hstr(*s[i], what[i], msg, msgsz);
		if (rc)
			return rc;
		body += 6 + s[i]->len;
	}
	uint8_t *p = w->hbody = malloc(body);
	if (!p)
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory for the file header");
	for (int i = 0; i < 6; i++)
		p = evw_tlv_str(p, tags[i], *s[i]);
	p = evw_tlv_u64(p, EVF_TAG_MONO_NS, h->mono_ns ? h->mono_ns : evw_now(CLOCK_MONOTONIC));
	p = evw_tlv_u64(p, EVF_TAG_REALTIME_NS,
			h->realtime_ns ? h->realtime_ns : evw_now(CLOCK_REALTIME));
	uint8_t pid[4];
	evf_put32(pid, h->producer_pid ? h->producer_pid : (uint32_t)getpid());
	p = evw_tlv(p, EVF_TAG_PRODUCER_PID, pid, 4);
	if (has_session)
		p = evw_tlv(p, EVF_TAG_SESSION, h->session, EVLOG_SESSION_LEN);
	w->hbody_len = body;
	return 0;
}

/* The open segment's file header: the body, and from the second segment
 * on its number (tag 11). */
static int evw_write_header(struct evlog_writer *w)
{
	size_t body = w->hbody_len + (w->seg >= 2 ? 6 + 4 : 0);
	uint8_t *buf = malloc(EVF_FILE_FIXED + body);
	if (!buf)
		return evw_fail(w, EVLOG_ENOMEM, "out of memory for the file header");
	memcpy(buf + EVF_FILE_FIXED, w->hbody, w->hbody_len);
	if (w->seg >= 2) {
		uint8_t seg[4];
		evf_put32(seg, w->seg);
		evw_tlv(buf + EVF_FILE_FIXED + w->hbody_len, EVF_TAG_SEGMENT, seg, 4);
	}
	memcpy(buf, EVF_MAGIC, EVF_MAGIC_LEN);
	evf_put16(buf + 8, EVLOG_VERSION_MAJOR);
	evf_put16(buf + 10, EVLOG_VERSION_MINOR);
	evf_put32(buf + 12, (uint32_t)body);
	evf_put32(buf + 16, libdeflate_crc32(0, buf + EVF_FILE_FIXED, body));
	int rc = evw_emit(w, buf, EVF_FILE_FIXED + body, 0);
	free(buf);
	return rc;
}

/* ---------------------------------------------------------------- segments */

static int evw_flush_chunk(struct evlog_writer *w);

/* Segment seg + 1 starts: the sink's begin, its header, and from the second
 * on the record of the one before, in a chunk of its own (schemas/eventlog.md
 * 5.2). */
static int evw_seg_begin(struct evlog_writer *w)
{
	int rc = w->sink->begin(w->ctx, w->seg + 1, w->err, sizeof(w->err));
	if (rc) {
		w->failed = -rc;
		return rc;
	}
	w->seg++;
	w->st.segments = w->seg;
	w->seg_bytes = 0;
	w->seg_events = 0;
	w->seg_born_ns = evw_now(CLOCK_MONOTONIC);
	w->seq = 0;
	lt_sha256_init(&w->seg_sha);
	if ((rc = evw_write_header(w)) || w->seg < 2)
		return rc;
	struct evlog_event ev = { .type = EV_SEGMENT, .ts = w->seg_born_ns,
				  .pid = (uint32_t)getpid() };
	ev.u.segment.name = evlog_s(w->prev_name);
	ev.u.segment.size = w->prev_size;
	ev.u.segment.digest = evlog_s(w->prev_digest);
	if ((rc = evlog_write(w, &ev)))
		return rc;
	w->keep = 1;
	rc = evw_flush_chunk(w);
	w->keep = 0;
	return rc;
}

/* The open segment is complete: the sink publishes it, and its record is
 * kept for the next one's first event. */
static int evw_seg_end(struct evlog_writer *w, int last)
{
	uint8_t d[LT_SHA256_LEN];
	char hex[LT_SHA256_HEX];
	int rc = w->sink->end(w->ctx, w->seg, last, w->err, sizeof(w->err));
	if (rc) {
		w->failed = -rc;
		return rc;
	}
	lt_sha256_final(&w->seg_sha, d);
	evlog_segment_name(w->name, w->seg, w->prev_name, sizeof(w->prev_name));
	snprintf(w->prev_digest, sizeof(w->prev_digest), "sha256:%s", lt_sha256_hex(d, hex));
	w->prev_size = w->seg_bytes;
	return 0;
}

static int evw_seg_old(const struct evlog_writer *w)
{
	return w->opts.segment_ns && evw_now(CLOCK_MONOTONIC) - w->seg_born_ns >= w->opts.segment_ns;
}

/* Between chunks: end the segment where it reached a bound (the next one
 * starts with its header and record, so never with a chunk half full). */
static int evw_seg_check(struct evlog_writer *w)
{
	if (w->fd >= 0 || !w->seg_events || w->failed || w->n_events)
		return 0;
	int full = w->opts.segment_bytes && w->seg_bytes >= w->opts.segment_bytes;
	if (!full && !evw_seg_old(w))
		return 0;
	int rc = evw_seg_end(w, 0);
	return rc ? rc : evw_seg_begin(w);
}

/* ---------------------------------------------------------------- open */

static void evw_free(struct evlog_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	evlog_files_close(w->files);
	ZSTD_freeCCtx(w->cctx);
	evt_free(&w->strs);
	evt_free(&w->stacks);
	evt_free(&w->pystacks);
	free(w->frames);
	free(w->pyids);
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		free(w->cb[k]);
	free(w->out);
	free(w->payload);
	free(w->hbody);
	free(w->name);
	free(w->label);
	free(w->partial_path);
	free(w);
}

static void evw_set_opts(struct evlog_writer *w, const struct evlog_writer_opts *o)
{
	if (o)
		w->opts = *o;
	if (!w->opts.chunk_bytes)
		w->opts.chunk_bytes = EVF_CHUNK_DEFAULT;
	if (w->opts.chunk_bytes > EVF_CHUNK_RAW_MAX / 2)
		w->opts.chunk_bytes = EVF_CHUNK_RAW_MAX / 2;
	if (w->opts.chunk_bytes < 4096)
		w->opts.chunk_bytes = 4096;
	if (!w->opts.flush_ns)
		w->opts.flush_ns = 1000000000ull;
	if (!w->opts.zstd_level)
		w->opts.zstd_level = 1;
}

static struct evlog_writer *evw_new(const struct evlog_writer_opts *opts)
{
	struct evlog_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->fd = -1;
	evw_set_opts(w, opts);
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx || evt_init(&w->strs, 512) || evt_init(&w->stacks, 128) ||
	    evt_init(&w->pystacks, 128)) {
		evw_free(w);
		return NULL;
	}
	return w;
}

/* A new writer handing its segments to sink; takes files (NULL or the
 * sink's own ctx, freed with the writer). */
static int evw_open_sink(struct evlog_writer **out, const char *name, const char *label,
			 const struct evlog_sink *sink, void *ctx, struct evlog_files *files,
			 const struct evlog_header *hdr, const struct evlog_writer_opts *opts,
			 char *msg, size_t msgsz)
{
	struct evlog_writer *w = evw_new(opts);
	if (!w) {
		evlog_files_close(files);
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	}
	w->sink = sink;
	w->ctx = ctx;
	w->files = files;
	w->name = strdup(name);
	w->label = strdup(label);
	int rc = !w->name || !w->label ? evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory")
				       : evw_header_body(w, hdr, msg, msgsz);
	if (!rc && (rc = evw_seg_begin(w))) {
		evf_msg(msg, msgsz, -rc, "%s", w->err);
		if (w->seg)
			sink->abort(ctx);
	}
	if (rc) {
		evw_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

/* A name sinks can publish under: one plain path component. */
static int evw_name_ok(const char *name)
{
	return name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") &&
	       strlen(name) + 12 < EVW_SEGNAME_MAX;
}

int evlog_writer_open_sink(struct evlog_writer **out, const char *name,
			   const struct evlog_sink *sink, void *ctx,
			   const struct evlog_header *hdr,
			   const struct evlog_writer_opts *opts, char *msg, size_t msgsz)
{
	if (!out)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_open_sink: NULL out");
	*out = NULL;
	if (!sink || !evw_name_ok(name))
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_open_sink: no sink, or "
			       "'%s' is no file name", name ? name : "");
	return evw_open_sink(out, name, name, sink, ctx, NULL, hdr, opts, msg, msgsz);
}

int evlog_writer_open(struct evlog_writer **out, const char *path,
		      const struct evlog_header *hdr,
		      const struct evlog_writer_opts *opts, char *msg, size_t msgsz)
{
	struct evlog_files *f;
	if (!out)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_open: NULL out");
	*out = NULL;
	if (!path || !*path)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_open: empty output path");
	int flags = (opts && opts->overwrite ? EVLOG_FILES_OVERWRITE : 0) |
		    (opts && (opts->segment_bytes || opts->segment_ns) ? EVLOG_FILES_SEGMENTS : 0);
	int rc = evlog_files_open(&f, path, flags, msg, msgsz);
	if (rc)
		return rc;
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	if (!evw_name_ok(name)) {
		evlog_files_close(f);
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "output name '%s' is too long", name);
	}
	rc = evw_open_sink(out, name, path, &evlog_files_sink, f, f, hdr, opts, msg, msgsz);
	if (!rc && asprintf(&(*out)->partial_path, "%s%s", evlog_files_dir(f),
			    evlog_files_partial(f)) < 0)
		(*out)->partial_path = NULL;
	return rc;
}

/* An fd-only writer's way to discard: an empty file, which its creator drops. */
static void evw_empty(struct evlog_writer *w)
{
	if (ftruncate(w->fd, 0) == 0)
		w->st.file_bytes = 0;
}

/* The file was made by someone else, who publishes it (the collector, for
 * the injected library): no directory, no name, nothing renamed here. */
int evlog_writer_open_fd(struct evlog_writer **out, int fd, const char *label,
			 const struct evlog_header *hdr,
			 const struct evlog_writer_opts *opts, char *msg, size_t msgsz)
{
	struct stat sb;
	if (!out) {
		if (fd >= 0)
			close(fd);
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_open_fd: NULL out");
	}
	*out = NULL;
	if (fd < 0)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_open_fd: no file");
	/* Empty and regular: the creator's fresh file, nothing else's data. */
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_size != 0 ||
	    lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "%s: not an empty regular file",
			       label ? label : "log");
	}
	struct evlog_writer *w = evw_new(opts);
	if (!w) {
		close(fd);
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	}
	w->fd = fd;
	w->opts.segment_bytes = w->opts.segment_ns = 0;
	w->label = strdup(label ? label : "log");
	int rc = w->label ? evw_header_body(w, hdr, msg, msgsz)
			  : evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	if (!rc && (rc = evw_write_header(w)))
		evf_msg(msg, msgsz, -rc, "%s", w->err);
	if (rc) {
		evw_empty(w);
		evw_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

/* --------------------------------------------------------------- chunking */

static void evw_reset_chunk(struct evlog_writer *w)
{
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		w->cp[k] = w->cb[k];
	w->raw_len = 0;
	w->n_events = 0;
	w->frames_len = 0;
	w->pyids_len = 0;
	w->frames_def = w->pyframes_def = 0;
	memset(w->by_type, 0, sizeof(w->by_type));
	evt_reset(&w->strs);
	evt_reset(&w->stacks);
	evt_reset(&w->pystacks);
}

/* The chunk payload: EVC_MARK, the column count (up to the last column in
 * use), each column's length, then the columns. */
static int evw_payload(struct evlog_writer *w, size_t *len)
{
	unsigned ncols = 0;
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		if (w->cp[k] != w->cb[k])
			ncols = k + 1;
	size_t need = 1 + 10 * (ncols + 1) + w->raw_len;
	if (need > w->payload_cap) {
		uint8_t *b = realloc(w->payload, need);
		if (!b)
			return -1;
		w->payload = b;
		w->payload_cap = need;
	}
	uint8_t *p = w->payload;
	*p++ = EVC_MARK;
	p = lt_varint_put(p, ncols);
	for (unsigned k = 0; k < ncols; k++)
		p = lt_varint_put(p, (uint64_t)(w->cp[k] - w->cb[k]));
	for (unsigned k = 0; k < ncols; k++) {
		size_t n = (size_t)(w->cp[k] - w->cb[k]);
		if (n)
			memcpy(p, w->cb[k], n);
		p += n;
	}
	*len = (size_t)(p - w->payload);
	return 0;
}

static int evw_flush_chunk(struct evlog_writer *w)
{
	if (w->failed)
		return -w->failed;
	if (!w->n_events)
		return 0;
	size_t len;
	if (evw_payload(w, &len))
		return evw_fail(w, EVLOG_ENOMEM, "out of memory laying out a chunk");
	size_t bound = ZSTD_compressBound(len) + EVF_CHUNK_HDR;
	if (bound > w->out_cap) {
		uint8_t *o = realloc(w->out, bound);
		if (!o)
			return evw_fail(w, EVLOG_ENOMEM, "out of memory compressing a chunk");
		w->out = o;
		w->out_cap = bound;
	}
	size_t c = ZSTD_compressCCtx(w->cctx, w->out + EVF_CHUNK_HDR, bound - EVF_CHUNK_HDR,
				     w->payload, len, w->opts.zstd_level);
	if (ZSTD_isError(c))
		return evw_fail(w, EVLOG_ENOMEM, "zstd: %s", ZSTD_getErrorName(c));
	uint8_t *h = w->out;
	memset(h, 0, EVF_CHUNK_HDR);
	evf_put32(h, EVF_CHUNK_MAGIC);
	evf_put32(h + 8, (uint32_t)c);
	evf_put32(h + 12, (uint32_t)len);
	evf_put32(h + 16, w->n_events);
	evf_put64(h + 24, w->seq);
	evf_put64(h + 32, w->base_ts);
	evf_put32(h + 40, libdeflate_crc32(0, h + EVF_CHUNK_HDR, c));
	evf_put32(h + 4, libdeflate_crc32(0, h + 8, EVF_CHUNK_HDR - 8));
	int rc = evw_emit(w, h, EVF_CHUNK_HDR + c, w->n_events);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		w->st.chunks++;
		w->st.raw_bytes += len;
		w->seq++;
		w->seg_events |= !w->keep; /* records kept in a stall never start a segment */
	}
	evw_reset_chunk(w);
	return 0;
}

/* Flush, then end the segment where it reached a bound. */
static int evw_flush(struct evlog_writer *w)
{
	int rc = evw_flush_chunk(w);
	return rc ? rc : evw_seg_check(w);
}

int evlog_writer_flush(struct evlog_writer *w)
{
	return w ? evw_flush(w) : -EVLOG_EINVAL;
}

int evlog_writer_flush_keep(struct evlog_writer *w)
{
	if (!w)
		return -EVLOG_EINVAL;
	w->keep = 1;
	int rc = evw_flush_chunk(w);
	w->keep = 0;
	return rc ? rc : evw_seg_check(w);
}

int evlog_writer_tick(struct evlog_writer *w)
{
	if (!w)
		return -EVLOG_EINVAL;
	if (w->failed)
		return -w->failed;
	if (w->n_events && (evw_now(CLOCK_MONOTONIC) - w->chunk_born_ns >= w->opts.flush_ns ||
			    (w->fd < 0 && evw_seg_old(w))))
		return evw_flush(w);
	return evw_seg_check(w);
}

/* --------------------------------------------------------------- interning */

/* Column k: append a varint. The caller made room (min_room). */
static inline void evw_put(struct evlog_writer *w, unsigned k, uint64_t v)
{
	uint8_t *p = w->cp[k], *q = lt_varint_put(p, v);
	w->cp[k] = q;
	w->raw_len += (size_t)(q - p);
}

/* A string reference in column k; a new string's length and bytes go to
 * EVC_STRDEF, where the interning table keeps its offset. */
static void evw_str(struct evlog_writer *w, unsigned k, struct evlog_str s, uint32_t hash,
		    uint32_t *id_out)
{
	struct lt_hmap_pos pos;
	int64_t known = evt_find_str(&w->strs, &pos, hash, s.ptr, s.len, w->cb[EVC_STRDEF]);
	if (known >= 0) {
		if (id_out)
			*id_out = (uint32_t)known;
		evw_put(w, k, (uint64_t)known);
		return;
	}
	uint32_t id = w->strs.next++;
	evw_put(w, k, id);
	evw_put(w, EVC_STRDEF, s.len);
	uint32_t off = (uint32_t)(w->cp[EVC_STRDEF] - w->cb[EVC_STRDEF]);
	if (s.len)
		memcpy(w->cp[EVC_STRDEF], s.ptr, s.len);
	w->cp[EVC_STRDEF] += s.len;
	w->raw_len += s.len;
	/* A failed insert only costs compression: the string is re-sent. */
	evt_insert(&w->strs, &pos, id, off, s.len, 0);
	if (id_out)
		*id_out = id;
}

static inline uint32_t evw_hash(const struct evlog_str *s)
{
	return s->hash ? s->hash : evt_hash(s->ptr, s->len);
}

uint32_t evlog_str_hash(const char *ptr, uint32_t len)
{
	return evt_hash(ptr, len);
}

static inline void evw_s(struct evlog_writer *w, unsigned k, struct evlog_str s)
{
	evw_str(w, k, s, evw_hash(&s), NULL);
}

static int evw_grow(void **buf, size_t *cap, size_t need, size_t elem)
{
	return lt_grow(buf, cap, need, elem, 1024);
}

/* A native stack reference in column k; a new stack goes to EVC_STKDEF. */
static void evw_stack(struct evlog_writer *w, unsigned k, const struct evlog_stack *st)
{
	uint32_t n = st->n_kernel + st->n_user;
	uint32_t hash = evt_hash(st->ips, (size_t)n * 8) ^ (st->n_kernel * 0x9e3779b1u);
	struct lt_hmap_pos pos;
	int64_t known = evt_find_u64(&w->stacks, &pos, hash, st->ips, st->n_kernel, st->n_user,
				     w->frames);
	if (known >= 0) {
		evw_put(w, k, (uint64_t)known);
		return;
	}
	uint32_t id = w->stacks.next++;
	w->frames_def += n;
	evw_put(w, k, id);
	evw_put(w, EVC_STKDEF, st->n_kernel);
	evw_put(w, EVC_STKDEF, st->n_user);
	uint64_t prev = 0;
	for (uint32_t i = 0; i < n; i++) {
		evw_put(w, EVC_STKDEF, lt_zigzag((int64_t)(st->ips[i] - prev)));
		prev = st->ips[i];
	}
	if (evw_grow((void **)&w->frames, &w->frames_cap, w->frames_len + n, 8) == 0) {
		if (n)
			memcpy(w->frames + w->frames_len, st->ips, (size_t)n * 8);
		if (evt_insert(&w->stacks, &pos, id, (uint32_t)w->frames_len,
			       st->n_kernel, st->n_user) == 0)
			w->frames_len += n;
	}
}

/* A Python stack reference in column k; a new one goes to EVC_PYDEF (its
 * length and frame string references). */
static void evw_pystack(struct evlog_writer *w, unsigned k, const struct evlog_pystack *st)
{
	uint32_t hashes[EVLOG_MAX_FRAMES], ids[EVLOG_MAX_FRAMES];
	int known = 1;
	for (uint32_t i = 0; i < st->n; i++) {
		const struct evlog_str *f = &st->frames[i];
		hashes[i] = evw_hash(f);
		struct lt_hmap_pos spos;
		int64_t id = known ? evt_find_str(&w->strs, &spos, hashes[i], f->ptr, f->len,
						  w->cb[EVC_STRDEF]) : -1;
		if (id < 0)
			known = 0;
		else
			ids[i] = (uint32_t)id;
	}
	uint32_t hash = 0x51ed270bu ^ st->n;
	struct lt_hmap_pos pos;
	int64_t found = -1;
	if (known) {
		hash ^= evt_hash(ids, (size_t)st->n * 4);
		found = evt_find_u32(&w->pystacks, &pos, hash, ids, st->n, w->pyids);
		if (found >= 0) {
			evw_put(w, k, (uint64_t)found);
			return;
		}
	}
	uint32_t id = w->pystacks.next++;
	w->pyframes_def += st->n;
	evw_put(w, k, id);
	evw_put(w, EVC_PYDEF, st->n);
	for (uint32_t i = 0; i < st->n; i++)
		evw_str(w, EVC_PYDEF, st->frames[i], hashes[i], &ids[i]);
	if (!known) {
		hash ^= evt_hash(ids, (size_t)st->n * 4);
		found = evt_find_u32(&w->pystacks, &pos, hash, ids, st->n, w->pyids);
	}
	if (found < 0 && evw_grow((void **)&w->pyids, &w->pyids_cap, w->pyids_len + st->n, 4) == 0) {
		if (st->n)
			memcpy(w->pyids + w->pyids_len, ids, (size_t)st->n * 4);
		if (evt_insert(&w->pystacks, &pos, id, (uint32_t)w->pyids_len, st->n, 0) == 0)
			w->pyids_len += st->n;
	}
}

/* ------------------------------------------------------------- validation */

static int evw_chk_str(struct evlog_writer *w, struct evlog_str s, size_t *bound,
		       const char *field)
{
	if (s.len > EVLOG_STR_MAX)
		return evw_fail(w, EVLOG_EINVAL, "%s: string of %u bytes, over the %u limit",
				field, s.len, EVLOG_STR_MAX);
	if (s.len && !s.ptr)
		return evw_fail(w, EVLOG_EINVAL, "%s: NULL string with length %u", field, s.len);
	*bound += (size_t)s.len + 20;
	return 0;
}

static int evw_chk_stack(struct evlog_writer *w, const struct evlog_stack *s, size_t *bound,
			 const char *type)
{
	if ((uint64_t)s->n_kernel + s->n_user > EVLOG_MAX_FRAMES)
		return evw_fail(w, EVLOG_EINVAL, "%s: %u+%u frames, over the %u limit",
				type, s->n_kernel, s->n_user, EVLOG_MAX_FRAMES);
	if (s->n_kernel + s->n_user && !s->ips)
		return evw_fail(w, EVLOG_EINVAL, "%s: NULL ips", type);
	*bound += (size_t)(s->n_kernel + s->n_user) * 10;
	return 0;
}

static int evw_chk_pystack(struct evlog_writer *w, const struct evlog_pystack *s, size_t *bound,
			   const char *type, const char *frame)
{
	if (s->n > EVLOG_MAX_FRAMES)
		return evw_fail(w, EVLOG_EINVAL, "%s: %u frames, over the %u limit",
				type, s->n, EVLOG_MAX_FRAMES);
	if (s->n && !s->frames)
		return evw_fail(w, EVLOG_EINVAL, "%s: NULL frames", type);
	for (uint32_t i = 0; i < s->n; i++) {
		int rc = evw_chk_str(w, s->frames[i], bound, frame);
		if (rc)
			return rc;
	}
	return 0;
}

static int evw_chk_nargs(struct evlog_writer *w, uint32_t nargs, const char *type)
{
	if (nargs > EVLOG_MAX_ARGS)
		return evw_fail(w, EVLOG_EINVAL, "%s: nargs %u, over the %u limit",
				type, nargs, EVLOG_MAX_ARGS);
	return 0;
}

/* What each field kind checks (evlog_schema.h): the variable-sized ones. */
#define CHK_RC(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)
#define CHK_U8(m, f)
#define CHK_U32(m, f)
#define CHK_U64(m, f)
#define CHK_X64(m, f)
#define CHK_SRC(m, f)
#define CHK_I64(m, f)
#define CHK_CORR(m, f)
#define CHK_U32X3(m, f)
#define CHK_STR(m, f) CHK_RC(evw_chk_str(w, ev->u.m.f, &b, #m "." #f));
#define CHK_STACK(m, f) CHK_RC(evw_chk_stack(w, &ev->u.m.f, &b, #m));
#define CHK_PYSTACK(m, f) CHK_RC(evw_chk_pystack(w, &ev->u.m.f, &b, #m, #m ".frame"));
#define CHK_ARGS(m, f) CHK_RC(evw_chk_nargs(w, ev->u.m.n##f, #m));
#define CHK_FIELD(m, kind, f) CHK_##kind(m, f)
#define CHK_TYPE(N, num, m, track, dur, corr) case EV_##N: EVLOG_FIELDS_##m(CHK_FIELD, m) break;

/* Validates the event and returns an upper bound of its encoded size. */
static int evw_bound(struct evlog_writer *w, const struct evlog_event *ev, size_t *bound)
{
	size_t b = 256;
	switch (ev->type) {
	EVLOG_TYPES(CHK_TYPE)
	default:
		return evw_fail(w, EVLOG_EINVAL, "unknown event type %u", ev->type);
	}
	if (b > EVF_CHUNK_RAW_MAX)
		return evw_fail(w, EVLOG_EINVAL, "%s event of about %zu bytes, over the %u limit",
				evlog_type_name(ev->type), b, EVF_CHUNK_RAW_MAX);
	*bound = b;
	return 0;
}

/* ---------------------------------------------------------------- encoding */

/* Each field goes to its own column, numbered in field order from the
 * type's first column (k), as evlog_schema.h declares them. */
#define V(x) evw_put(w, k++, (uint64_t)(x))
#define Z(x) evw_put(w, k++, lt_zigzag((int64_t)(x)))
/* Correlation ids mostly rise by small steps: code the signed difference
 * from the previous one in the chunk. */
#define C(x) do { uint64_t c_ = (x); Z(c_ - w->prev_corr); w->prev_corr = c_; } while (0)
#define PUT_U8(m, f) V(u->m.f);
#define PUT_U32(m, f) V(u->m.f);
#define PUT_U64(m, f) V(u->m.f);
#define PUT_X64(m, f) V(u->m.f);
#define PUT_SRC(m, f) V(u->m.f);
#define PUT_I64(m, f) Z(u->m.f);
#define PUT_CORR(m, f) C(u->m.f);
#define PUT_STR(m, f) evw_s(w, k++, u->m.f);
#define PUT_STACK(m, f) evw_stack(w, k++, &u->m.f);
#define PUT_PYSTACK(m, f) evw_pystack(w, k++, &u->m.f);
#define PUT_U32X3(m, f) V(u->m.f[0]); V(u->m.f[1]); V(u->m.f[2]);
/* An argument list: its count, then argument i in the i-th column after it. */
#define PUT_ARGS(m, f) do {                                                    \
		V(u->m.n##f);                                                  \
		for (uint32_t i_ = 0; i_ < u->m.n##f; i_++)                    \
			evw_put(w, k + i_, u->m.f[i_]);                        \
		k += EVLOG_MAX_ARGS;                                           \
	} while (0);
#define PUT_FIELD(m, kind, f) PUT_##kind(m, f)
#define PUT_TYPE(N, num, m, track, dur, corr) case EV_##N: EVLOG_FIELDS_##m(PUT_FIELD, m) break;

static void evw_fields(struct evlog_writer *w, const struct evlog_event *ev)
{
	const typeof(ev->u) *u = &ev->u;
	unsigned k = evc_base[ev->type];
	switch (ev->type) {
	EVLOG_TYPES(PUT_TYPE)
	}
	(void)k;
}

/* Grow column k to at least `room` free bytes. */
static int evw_col_room(struct evlog_writer *w, unsigned k, size_t room)
{
	size_t len = (size_t)(w->cp[k] - w->cb[k]);
	if (w->ccap[k] - len >= room)
		return 0;
	size_t cap = w->ccap[k] ? w->ccap[k] : 4096;
	while (cap - len < room)
		cap *= 2;
	uint8_t *b = realloc(w->cb[k], cap);
	if (!b)
		return -1;
	w->cb[k] = b;
	w->cp[k] = b + len;
	w->ccap[k] = cap;
	return 0;
}

/* Column slack restored when it runs low (about a thousand events). */
#define EVW_SLACK (16u << 10)

/* Slow path, when min_room is below an event's bound: every column gets
 * EVW_SLACK free bytes, the columns of this event's type `bound` (a big
 * event grows only its own columns), and min_room is recounted. */
static int evw_make_room(struct evlog_writer *w, uint32_t type, size_t bound)
{
	size_t min = SIZE_MAX;
	for (unsigned k = 0; k < EVC_NCOLS; k++) {
		int mine = k < EVC_FIELDS || (k >= evc_base[type] && k < evc_base[type] + evc_ncols[type]);
		if (evw_col_room(w, k, mine && bound > EVW_SLACK ? bound : EVW_SLACK))
			return -1;
		size_t room = w->ccap[k] - (size_t)(w->cp[k] - w->cb[k]);
		if (room < min)
			min = room;
	}
	w->min_room = min;
	return 0;
}

/* One more event could pass a per-chunk cap (3 + 512 strings, 512 frames). */
static int evw_tables_full(const struct evlog_writer *w)
{
	return w->strs.next + 3 + EVLOG_MAX_FRAMES > EVF_CHUNK_STRS_MAX ||
	       w->frames_def + EVLOG_MAX_FRAMES > EVF_CHUNK_FRAMES_MAX ||
	       w->pyframes_def + EVLOG_MAX_FRAMES > EVF_CHUNK_PYFRAMES_MAX;
}

int evlog_write(struct evlog_writer *w, const struct evlog_event *ev)
{
	if (!w || !ev)
		return -EVLOG_EINVAL;
	if (w->failed)
		return -w->failed;
	size_t bound = 0;
	int rc = evw_bound(w, ev, &bound);
	if (rc)
		return rc;
	if (w->n_events && (w->raw_len + bound > w->opts.chunk_bytes || evw_tables_full(w))) {
		rc = evw_flush(w);
		if (rc)
			return rc;
	}
	if (bound > w->min_room && evw_make_room(w, ev->type, bound))
		return evw_fail(w, EVLOG_ENOMEM, "out of memory for a %zu-byte event", bound);
	if (!w->n_events) {
		w->base_ts = w->prev_ts = ev->ts;
		w->prev_corr = 0;
		w->chunk_born_ns = evw_now(CLOCK_MONOTONIC);
	}
	size_t before = w->raw_len;
	/* Thread ids sit near their pid: the tid is coded as tid - pid. */
	int same_pid = w->n_events && ev->pid == w->prev_pid;
	int same = same_pid && ev->tid == w->prev_tid;
	*w->cp[EVC_TYPE]++ = (uint8_t)(ev->type | (same ? EVF_SAME_THREAD : same_pid ? EVF_SAME_PID : 0));
	w->raw_len++;
	evw_put(w, EVC_TS, lt_zigzag((int64_t)(ev->ts - w->prev_ts)));
	if (!same_pid)
		evw_put(w, EVC_TID, ev->pid);
	if (!same)
		evw_put(w, EVC_TID, lt_zigzag((int64_t)ev->tid - (int64_t)ev->pid));
	evw_fields(w, ev);
	/* Each column lost at most what the event wrote in all. */
	size_t wrote = w->raw_len - before;
	w->min_room = wrote < w->min_room ? w->min_room - wrote : 0;
	w->prev_ts = ev->ts;
	w->prev_pid = ev->pid;
	w->prev_tid = ev->tid;
	w->n_events++;
	w->st.events++;
	w->st.events_by_type[ev->type]++;
	w->by_type[ev->type]++;
	return 0;
}

/* ----------------------------------------------------------------- closing */

int evlog_writer_close_msg(struct evlog_writer *w, char *msg, size_t msgsz)
{
	if (!w)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_writer_close: NULL writer");
	int rc = evw_flush_chunk(w);
	/* an fd-only writer's file is published by its creator */
	if (rc == 0 && w->fd < 0)
		rc = evw_seg_end(w, 1);
	if (rc)
		evf_msg(msg, msgsz, -rc, "%s", w->err);
	evw_free(w);
	return rc;
}

int evlog_writer_close(struct evlog_writer *w)
{
	return evlog_writer_close_msg(w, NULL, 0);
}

void evlog_writer_abort(struct evlog_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		evw_empty(w);
	else
		w->sink->abort(w->ctx);
	evw_free(w);
}

const char *evlog_writer_error(const struct evlog_writer *w)
{
	return w ? w->err : "NULL writer";
}

const char *evlog_writer_partial_path(const struct evlog_writer *w)
{
	return !w ? NULL : w->partial_path ? w->partial_path : w->label;
}

void evlog_writer_stats(const struct evlog_writer *w, struct evlog_writer_stats *st)
{
	if (w && st)
		*st = w->st;
}
