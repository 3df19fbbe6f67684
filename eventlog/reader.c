// SPDX-License-Identifier: Apache-2.0
/*
 * Event log reader. The file is read with pread() into reused buffers (chunk
 * header, then payload), or given in memory; chunks are verified (header
 * crc, payload crc, zstd frame size) before decoding, and every field is
 * decoded with bounds checks. A bad region is skipped by scanning for the
 * next chunk magic whose header crc verifies. Allocations are bounded by
 * EVF_CHUNK_RAW_MAX whatever the file says.
 *
 * Why not mmap: a mapped file that another process truncates (a cleanup job
 * on a shared directory, a writer cutting a torn chunk after ENOSPC) kills
 * the reader with SIGBUS. pread() sees a short read instead, and the reader
 * stops cleanly at that point ("file shrank").
 *
 * A log in segments is read file after file (evlog_reader_open_chain): the
 * header is the first file's, each later file's header is checked and
 * skipped, and the counts run on over all of them.
 */
#include "eventlog/eventlog.h"
#include "eventlog/evlog_columns.h"
#include "eventlog/evlog_format.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

struct evr_stack {
	uint32_t nk, nu;
	size_t off;             /* into frames */
};

struct evr_pystack {
	uint32_t n;
	size_t off;             /* into pyframes */
};

/* Damaged-region scans read the file in windows of this size. */
#define EVR_SCAN_WIN (256u << 10)

struct evlog_reader {
	const uint8_t *buf;     /* the log, when given in memory */
	size_t len;             /* file size at open (or memory length) */
	int fd;                 /* the log file, or -1 for memory */
	int stop;               /* the file shrank or failed: read no further */
	int io_err;             /* a read failed: evlog_next reports it once */
	uint8_t *hbuf, *cbuf, *sbuf; /* file mode: header, payload, scan window */
	size_t hbuf_cap, cbuf_cap, sbuf_cap;
	char *name;             /* the file being read, in messages */
	int *next_fd;           /* a chain's files after it (evlog_reader_open_chain) */
	char **next_name;
	size_t n_next, i_next;
	struct evlog_header hdr;
	char *hdr_strs[6];

	size_t pos;             /* next chunk candidate */
	ZSTD_DCtx *dctx;

	/* current chunk */
	uint8_t *raw;
	size_t raw_cap;
	const uint8_t *c[EVC_NCOLS], *ce[EVC_NCOLS]; /* column cursors and ends */
	uint32_t left;          /* events still to decode */
	int in_chunk;
	uint64_t prev_ts;
	uint32_t prev_pid, prev_tid;
	uint64_t prev_corr;

	struct evlog_str *strs;
	uint32_t nstrs, strs_cap;
	char *sarena;           /* NUL-terminated copies; sized per chunk, never moves */
	size_t sarena_len, sarena_cap;
	struct evr_stack *stacks;
	uint32_t nstacks, stacks_cap;
	uint64_t *frames;
	size_t frames_len, frames_cap;
	struct evr_pystack *pystacks;
	uint32_t npystacks, pystacks_cap;
	struct evlog_str *pyframes;
	size_t pyframes_len, pyframes_cap;

	struct evlog_event ev;
	struct evlog_reader_stats st;
	char err[512];
};

/* ------------------------------------------------------------------ bytes */

static int evr_reserve(void **buf, size_t *cap, size_t need, size_t elem)
{
	return lt_grow(buf, cap, need, elem, 256);
}

/* The file ended before `off` though it was longer at open: another process
 * cut it. Stop here; what was returned stays returned. */
static void evr_shrank(struct evlog_reader *r, size_t off)
{
	struct stat sb;
	long long now = fstat(r->fd, &sb) == 0 ? (long long)sb.st_size : -1;
	r->stop = 1;
	r->st.shrank = 1;
	r->st.truncated = 1;
	snprintf(r->err, sizeof(r->err), "%s: file shrank while being read (%zu bytes at open, "
		 "%lld now: another process cut it); stopped at offset %zu after %llu events",
		 r->name, r->len, now, off, (unsigned long long)r->st.events);
}

/* Bytes [off, off + n) of the log, off + n <= r->len: a pointer into the
 * memory image, or read into *buf (grown as needed). NULL when the file no
 * longer holds them (r->stop set) or on an error (r->io_err set too). */
static const uint8_t *evr_bytes(struct evlog_reader *r, size_t off, size_t n,
				uint8_t **buf, size_t *cap)
{
	if (r->fd < 0)
		return r->buf + off;
	if (evr_reserve((void **)buf, cap, n ? n : 1, 1)) {
		snprintf(r->err, sizeof(r->err), "%s: out of memory reading %zu bytes", r->name, n);
		r->stop = r->io_err = EVLOG_ENOMEM;
		return NULL;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(r->fd, *buf + got, n - got, (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(r->err, sizeof(r->err), "%s: read at offset %zu: %s", r->name,
				 off + got, strerror(errno));
			r->stop = r->io_err = EVLOG_EIO;
			return NULL;
		}
		if (k == 0) {
			evr_shrank(r, off + got);
			return NULL;
		}
		got += (size_t)k;
	}
	return *buf;
}

/* ----------------------------------------------------------------- header */

static int evr_hdr_str(struct evlog_reader *r, int idx, struct evlog_str *dst,
		       const uint8_t *v, uint32_t len)
{
	char *s = malloc((size_t)len + 1);
	if (!s)
		return -1;
	memcpy(s, v, len);
	s[len] = 0;
	free(r->hdr_strs[idx]);
	r->hdr_strs[idx] = s;
	dst->ptr = s;
	dst->len = len;
	return 0;
}

static int evr_tlv(struct evlog_reader *r, uint16_t tag, const uint8_t *v, uint32_t len)
{
	struct evlog_header *h = &r->hdr;
	struct evlog_str *strs[6] = { &h->host, &h->boot_id, &h->machine,
				      &h->producer, &h->cmdline, &h->options };
	if (tag >= EVF_TAG_HOST && tag <= EVF_TAG_OPTIONS)
		return evr_hdr_str(r, tag - 1, strs[tag - 1], v, len) ? -EVLOG_ENOMEM : 0;
	if (tag == EVF_TAG_MONO_NS || tag == EVF_TAG_REALTIME_NS) {
		if (len != 8)
			return -EVLOG_EHEADER;
		*(tag == EVF_TAG_MONO_NS ? &h->mono_ns : &h->realtime_ns) = evf_get64(v);
	} else if (tag == EVF_TAG_PRODUCER_PID) {
		if (len != 4)
			return -EVLOG_EHEADER;
		h->producer_pid = evf_get32(v);
	} else if (tag == EVF_TAG_SESSION) {
		if (len != EVLOG_SESSION_LEN)
			return -EVLOG_EHEADER;
		memcpy(h->session, v, EVLOG_SESSION_LEN);
	} else if (tag == EVF_TAG_SEGMENT) {
		if (len != 4)
			return -EVLOG_EHEADER;
		h->segment = evf_get32(v);
	}
	return 0; /* unknown tags: skipped (forward compatible) */
}

/* The header could not be read (the file shrank at once, or a read failed). */
static int evr_header_lost(struct evlog_reader *r, char *msg, size_t msgsz)
{
	return evf_msg(msg, msgsz, r->io_err ? r->io_err : EVLOG_EHEADER, "%s", r->err);
}

/* The file header at offset 0: checked, and its fields taken when parse
 * (a chain's later files are only checked). r->pos is set after it. */
static int evr_header(struct evlog_reader *r, int parse, char *msg, size_t msgsz)
{
	const char *n = r->name;
	if (r->len == 0)
		return evf_msg(msg, msgsz, EVLOG_EMAGIC, "%s: empty file, not an event log", n);
	size_t fixed = r->len < EVF_FILE_FIXED ? r->len : EVF_FILE_FIXED;
	const uint8_t *b = evr_bytes(r, 0, fixed, &r->hbuf, &r->hbuf_cap);
	if (!b)
		return evr_header_lost(r, msg, msgsz);
	size_t cmp = r->len < EVF_MAGIC_LEN ? r->len : EVF_MAGIC_LEN;
	if (memcmp(b, EVF_MAGIC, cmp))
		return evf_msg(msg, msgsz, EVLOG_EMAGIC, "%s: not an llmtracker event log "
			       "(bad magic)", n);
	if (r->len < EVF_FILE_FIXED)
		return evf_msg(msg, msgsz, EVLOG_EHEADER, "%s: file header cut short (%zu bytes)",
			       n, r->len);
	uint16_t major = evf_get16(b + 8), minor = evf_get16(b + 10);
	if (major != EVLOG_VERSION_MAJOR)
		return evf_msg(msg, msgsz, EVLOG_EVERSION, "%s: event log version %u.%u; this "
			       "reader supports %u.x (use a matching llmtracker)", n, major, minor,
			       EVLOG_VERSION_MAJOR);
	uint32_t blen = evf_get32(b + 12);
	if (blen > EVF_HEADER_BODY_MAX || blen > r->len - EVF_FILE_FIXED)
		return evf_msg(msg, msgsz, EVLOG_EHEADER, "%s: file header length %u exceeds the "
			       "file (%zu bytes): truncated or corrupt", n, blen, r->len);
	uint32_t crc = evf_get32(b + 16);
	const uint8_t *p = evr_bytes(r, EVF_FILE_FIXED, blen, &r->hbuf, &r->hbuf_cap);
	if (!p)
		return evr_header_lost(r, msg, msgsz);
	const uint8_t *end = p + blen;
	if (libdeflate_crc32(0, p, blen) != crc)
		return evf_msg(msg, msgsz, EVLOG_EHEADER, "%s: file header checksum mismatch", n);
	if (parse) {
		r->hdr.version_major = major;
		r->hdr.version_minor = minor;
	}
	while (p < end) {
		if (end - p < 6)
			return evf_msg(msg, msgsz, EVLOG_EHEADER, "%s: header field cut short", n);
		uint16_t tag = evf_get16(p);
		uint32_t len = evf_get32(p + 2);
		if (len > (size_t)(end - p) - 6)
			return evf_msg(msg, msgsz, EVLOG_EHEADER, "%s: header field %u overruns the "
				       "header", n, tag);
		int rc = parse ? evr_tlv(r, tag, p + 6, len) : 0;
		if (rc)
			return evf_msg(msg, msgsz, -rc, "%s: header field %u: %s", n, tag,
				       evlog_strerror(rc));
		p += 6 + len;
	}
	r->pos = EVF_FILE_FIXED + blen;
	return 0;
}

/* ------------------------------------------------------------------- open */

static int evr_init(struct evlog_reader *r, const char *name, char *msg, size_t msgsz)
{
	static const char empty[1];
	struct evlog_str *s[6] = { &r->hdr.host, &r->hdr.boot_id, &r->hdr.machine,
				   &r->hdr.producer, &r->hdr.cmdline, &r->hdr.options };
	for (int i = 0; i < 6; i++)
		s[i]->ptr = empty;
	r->name = strdup(name ? name : "(memory)");
	r->dctx = ZSTD_createDCtx();
	if (!r->name || !r->dctx)
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory opening %s",
			       name ? name : "(memory)");
	return evr_header(r, 1, msg, msgsz);
}

int evlog_reader_open_mem(struct evlog_reader **out, const void *buf, size_t len,
			  const char *name, char *msg, size_t msgsz)
{
	if (!out || (!buf && len))
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_reader_open_mem: bad arguments");
	*out = NULL;
	struct evlog_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	r->fd = -1;
	r->buf = buf;
	r->len = len;
	int rc = evr_init(r, name, msg, msgsz);
	if (rc) {
		evlog_reader_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

int evlog_reader_open_fd(struct evlog_reader **out, int fd, const char *name, char *msg,
			 size_t msgsz)
{
	if (!out || fd < 0 || !name) {
		if (fd >= 0)
			close(fd);
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_reader_open_fd: bad arguments");
	}
	*out = NULL;
	struct stat sb = { 0 };
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		int e = errno;
		close(fd);
		if (S_ISDIR(sb.st_mode))
			return evf_msg(msg, msgsz, EVLOG_EIO, "%s: is a directory, not an event log "
				       "file", name);
		return evf_msg(msg, msgsz, EVLOG_EIO, "%s: %s", name,
			       e ? strerror(e) : "not a regular file");
	}
	/* Reads are sequential: let the kernel read ahead (a hint only). */
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	struct evlog_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		return evf_msg(msg, msgsz, EVLOG_ENOMEM, "out of memory");
	}
	r->fd = fd;
	r->len = (size_t)sb.st_size;
	int rc = evr_init(r, name, msg, msgsz);
	if (rc) {
		evlog_reader_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

int evlog_reader_open_chain(struct evlog_reader **out, const struct evlog_chain *c, char *msg,
			    size_t msgsz)
{
	size_t n = evlog_chain_count(c);
	if (!out || !n)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_reader_open_chain: bad arguments");
	*out = NULL;
	int fd = fcntl(evlog_chain_fd(c, 0), F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return evf_msg(msg, msgsz, EVLOG_EIO, "%s: %s", evlog_chain_name(c, 0), strerror(errno));
	struct evlog_reader *r;
	int rc = evlog_reader_open_fd(&r, fd, evlog_chain_name(c, 0), msg, msgsz);
	if (rc || n == 1) {
		*out = r;
		return rc;
	}
	r->next_fd = calloc(n - 1, sizeof(*r->next_fd));
	r->next_name = calloc(n - 1, sizeof(*r->next_name));
	rc = r->next_fd && r->next_name ? 0 : -EVLOG_ENOMEM;
	for (size_t i = 1; i < n && !rc; i++) {
		r->next_fd[i - 1] = -1;
		r->next_name[i - 1] = strdup(evlog_chain_name(c, i));
		r->next_fd[i - 1] = fcntl(evlog_chain_fd(c, i), F_DUPFD_CLOEXEC, 0);
		r->n_next = i;
		rc = !r->next_name[i - 1] ? -EVLOG_ENOMEM : r->next_fd[i - 1] < 0 ? -EVLOG_EIO : 0;
	}
	if (rc) {
		evlog_reader_close(r);
		return evf_msg(msg, msgsz, -rc, "%s: %s", evlog_chain_name(c, 0),
			       rc == -EVLOG_ENOMEM ? "out of memory" : strerror(errno));
	}
	*out = r;
	return 0;
}

/* The chain's next file: its header checked and skipped. 0, or a code
 * with r->err set (reading stops). */
static int evr_next_file(struct evlog_reader *r)
{
	struct stat sb;
	char msg[sizeof(r->err)];
	size_t i = r->i_next++;

	close(r->fd);
	r->fd = r->next_fd[i];
	r->next_fd[i] = -1;
	free(r->name);
	r->name = r->next_name[i];
	r->next_name[i] = NULL;
	r->pos = 0;
	r->len = fstat(r->fd, &sb) == 0 ? (size_t)sb.st_size : 0;
	int rc = evr_header(r, 0, msg, sizeof(msg));
	if (rc) {
		memcpy(r->err, msg, sizeof(msg));
		r->stop = 1;
		return -rc;
	}
	posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

/* The directory fd of path, for its segments; -1 if none can be opened
 * (a log of one file needs none). */
static int evr_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	free(dir);
	return fd;
}

int evlog_reader_open(struct evlog_reader **out, const char *path, char *msg, size_t msgsz)
{
	if (!out || !path)
		return evf_msg(msg, msgsz, EVLOG_EINVAL, "evlog_reader_open: bad arguments");
	*out = NULL;
	/* O_NONBLOCK: a FIFO given as a log must not block the open. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return evf_msg(msg, msgsz, EVLOG_EIO, "%s: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) /* the plain open says why */
		return evlog_reader_open_fd(out, fd, path, msg, msgsz);
	struct evlog_chain *c;
	int dirfd = evr_dir_of(path);
	int rc = evlog_chain_open(&c, fd, path, evlog_chain_lookup_at, &dirfd, msg, msgsz);
	if (dirfd >= 0)
		close(dirfd);
	if (rc)
		return rc;
	rc = evlog_reader_open_chain(out, c, msg, msgsz);
	evlog_chain_close(c);
	return rc;
}

void evlog_reader_close(struct evlog_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	for (size_t i = 0; i < r->n_next; i++) {
		if (r->next_fd[i] >= 0)
			close(r->next_fd[i]);
		free(r->next_name[i]);
	}
	free(r->next_fd);
	free(r->next_name);
	free(r->hbuf);
	free(r->cbuf);
	free(r->sbuf);
	for (int i = 0; i < 6; i++)
		free(r->hdr_strs[i]);
	ZSTD_freeDCtx(r->dctx);
	free(r->raw);
	free(r->strs);
	free(r->sarena);
	free(r->stacks);
	free(r->frames);
	free(r->pystacks);
	free(r->pyframes);
	free(r->name);
	free(r);
}

const struct evlog_header *evlog_reader_header(const struct evlog_reader *r)
{
	return r ? &r->hdr : NULL;
}

void evlog_reader_stats(const struct evlog_reader *r, struct evlog_reader_stats *st)
{
	if (r && st)
		*st = r->st;
}

const char *evlog_reader_error(const struct evlog_reader *r)
{
	return r ? r->err : "NULL reader";
}

/* ------------------------------------------------------------------ chunks */

static int evr_hdr_ok(const uint8_t *h)
{
	return evf_get32(h) == EVF_CHUNK_MAGIC &&
	       libdeflate_crc32(0, h + 8, EVF_CHUNK_HDR - 8) == evf_get32(h + 4);
}

/* Offset of the next verified chunk header at or after `from`, or r->len
 * (also when the file shrank meanwhile: r->stop is then set). Reads windows
 * of EVR_SCAN_WIN bytes that overlap by a header less one byte, so a header
 * across two windows is still seen whole. */
static size_t evr_scan(struct evlog_reader *r, size_t from)
{
	const uint8_t first = EVF_CHUNK_MAGIC & 0xff;
	while (from + EVF_CHUNK_HDR <= r->len) {
		size_t n = r->len - from < EVR_SCAN_WIN ? r->len - from : EVR_SCAN_WIN;
		if (r->fd < 0)
			n = r->len - from;
		const uint8_t *b = evr_bytes(r, from, n, &r->sbuf, &r->sbuf_cap);
		if (!b)
			return r->len;
		size_t last = n - EVF_CHUNK_HDR; /* last start whose header fits */
		for (size_t i = 0; i <= last; i++) {
			const uint8_t *q = memchr(b + i, first, last + 1 - i);
			if (!q)
				break;
			i = (size_t)(q - b);
			if (evr_hdr_ok(q))
				return from + i;
		}
		from += last + 1;
	}
	return r->len;
}

/* Skip a damaged region starting at r->pos. A verified header whose payload
 * runs past the end, with nothing after it, is a torn tail (a writer killed
 * mid-append), not damage. */
static void evr_skip(struct evlog_reader *r, int torn_candidate)
{
	size_t next = evr_scan(r, r->pos + 1);
	if (r->stop)
		return;
	if (next == r->len && (torn_candidate || r->len - r->pos < EVF_CHUNK_HDR))
		r->st.truncated = 1;
	else
		r->st.chunks_bad++;
	r->st.bytes_skipped += next - r->pos;
	r->pos = next;
}

/* Column cursors from a column payload's directory: 0, -1 damaged, -2
 * columns this reader does not know (a later minor version). */
static int evr_directory(struct evlog_reader *r, const uint8_t *b, size_t n)
{
	const uint8_t *p = b + 1, *end = b + n, *dir;
	uint64_t ncols, len;
	if (!(p = lt_varint_get(p, end, &ncols)))
		return -1;
	if (ncols > EVC_NCOLS)
		return -2;
	dir = p;
	for (unsigned k = 0; k < ncols; k++) /* skip to the data */
		if (!(p = lt_varint_get(p, end, &len)))
			return -1;
	for (unsigned k = 0; k < EVC_NCOLS; k++) {
		len = 0;
		if (k < ncols)
			dir = lt_varint_get(dir, end, &len);
		if (len > (size_t)(end - p))
			return -1;
		r->c[k] = p;
		r->ce[k] = p + len;
		p += len;
	}
	return p == end ? 0 : -1;
}

/* Set up the decoding of a chunk's `raw` payload bytes, a column payload.
 * One whose first byte is not the column mark is of a layout this version
 * does not define (schemas/eventlog.md 2): skipped like a later minor
 * version's columns. 0, or -1 when not one event can be decoded (counted). */
static int evr_layout(struct evlog_reader *r, uint32_t raw, uint32_t count)
{
	r->left = count;
	int rc = raw && r->raw[0] == EVC_MARK ? evr_directory(r, r->raw, raw) : -2;
	if (rc == 0)
		return 0;
	if (rc == -2)
		r->st.chunks_unknown++;
	else
		r->st.chunks_bad++;
	return -1;
}

/* Try the chunk at r->pos: 1 loaded, 0 skipped (bad) or stopped (r->stop). */
static int evr_try_chunk(struct evlog_reader *r)
{
	size_t room = r->len - r->pos;
	const uint8_t *h = room < EVF_CHUNK_HDR ? NULL
			 : evr_bytes(r, r->pos, EVF_CHUNK_HDR, &r->hbuf, &r->hbuf_cap);
	if (r->stop)
		return 0;
	if (!h || !evr_hdr_ok(h)) {
		evr_skip(r, 0);
		return 0;
	}
	uint32_t comp = evf_get32(h + 8), raw = evf_get32(h + 12), count = evf_get32(h + 16);
	uint32_t pcrc = evf_get32(h + 40);
	uint64_t base_ts = evf_get64(h + 32);
	if (comp > room - EVF_CHUNK_HDR) {
		evr_skip(r, 1);
		return 0;
	}
	/* Checked before reading the payload: bounds what it may allocate. */
	if (raw > EVF_CHUNK_RAW_MAX || !count || count > raw || comp > ZSTD_compressBound(raw)) {
		evr_skip(r, 0);
		return 0;
	}
	const uint8_t *payload = evr_bytes(r, r->pos + EVF_CHUNK_HDR, comp, &r->cbuf, &r->cbuf_cap);
	if (!payload)
		return 0;
	if (libdeflate_crc32(0, payload, comp) != pcrc) {
		evr_skip(r, 0);
		return 0;
	}
	size_t arena = (size_t)raw + raw / 2 + 16;
	if (evr_reserve((void **)&r->raw, &r->raw_cap, raw + 1, 1) ||
	    evr_reserve((void **)&r->sarena, &r->sarena_cap, arena, 1)) {
		snprintf(r->err, sizeof(r->err), "%s: out of memory for a %u-byte chunk", r->name, raw);
		return -EVLOG_ENOMEM;
	}
	size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, raw, payload, comp);
	if (ZSTD_isError(got) || got != raw) {
		evr_skip(r, 0);
		return 0;
	}
	r->pos += EVF_CHUNK_HDR + comp;
	if (evr_layout(r, raw, count))
		return 0;
	r->in_chunk = 1;
	r->prev_ts = base_ts;
	r->prev_pid = r->prev_tid = 0;
	r->prev_corr = 0;
	r->nstrs = r->nstacks = r->npystacks = 0;
	r->sarena_len = r->frames_len = r->pyframes_len = 0;
	return 1;
}

/* ---------------------------------------------------------------- decoding */

/* Each field is read from its own column: k is the column of the next field
 * of the event being decoded (evlog_columns.h). Cursors live in r->c: stores
 * into the event (integers) cannot alias them, so they stay in registers
 * between fields. */
#define GETV_AT(col, dst) do { uint64_t v_; const unsigned c_ = (col); \
		const uint8_t *q_ = lt_varint_get(r->c[c_], r->ce[c_], &v_); \
		if (!q_) \
			return -1; \
		r->c[c_] = q_; \
		(dst) = v_; \
	} while (0)
#define GETN_AT(col, dst, max) do { uint64_t n_; \
		GETV_AT(col, n_); \
		if (n_ > (max)) \
			return -1; \
		(dst) = n_; \
	} while (0)
#define GETV(dst) GETV_AT(k++, dst)
#define GETZ(dst) do { uint64_t z_; GETV(z_); (dst) = lt_unzigzag(z_); } while (0)
#define GETN(dst, max) GETN_AT(k++, dst, max)
#define GET32(dst) GETN(dst, UINT32_MAX)
#define GET8(dst) GETN(dst, UINT8_MAX)
#define GETC(dst) do { int64_t d_; GETZ(d_); r->prev_corr += (uint64_t)d_; (dst) = r->prev_corr; } while (0)
#define GETS(dst) do { if (evr_str(r, k++, &(dst))) return -1; } while (0)

/* A string reference from column k; a new string's bytes from EVC_STRDEF. */
static int evr_str(struct evlog_reader *r, unsigned k, struct evlog_str *out)
{
	uint64_t id, len;
	GETV_AT(k, id);
	if (id < r->nstrs) {
		*out = r->strs[id];
		return 0;
	}
	if (id != r->nstrs || id >= EVF_CHUNK_STRS_MAX)
		return -1;
	GETV_AT(EVC_STRDEF, len);
	const uint8_t *p = r->c[EVC_STRDEF];
	if (len > EVLOG_STR_MAX || len > (size_t)(r->ce[EVC_STRDEF] - p))
		return -1;
	size_t cap = r->strs_cap;
	if (evr_reserve((void **)&r->strs, &cap, r->nstrs + 1, sizeof(*r->strs)))
		return -1;
	r->strs_cap = (uint32_t)cap;
	/* Arena sized raw*1.5 at chunk load: each string costs >= 2 raw bytes. */
	char *dst = r->sarena + r->sarena_len;
	memcpy(dst, p, len);
	dst[len] = 0;
	r->sarena_len += len + 1;
	r->c[EVC_STRDEF] = p + len;
	r->strs[r->nstrs++] = (struct evlog_str){ .ptr = dst, .len = (uint32_t)len };
	*out = r->strs[id];
	return 0;
}

/* A native stack reference from column k; a new stack from EVC_STKDEF. */
static int evr_stack(struct evlog_reader *r, unsigned k, struct evlog_stack *out)
{
	uint64_t id;
	GETV_AT(k, id);
	if (id > r->nstacks)
		return -1;
	if (id == r->nstacks) {
		uint32_t nk, nu;
		GETN_AT(EVC_STKDEF, nk, EVLOG_MAX_FRAMES);
		GETN_AT(EVC_STKDEF, nu, EVLOG_MAX_FRAMES - nk);
		if (r->frames_len + nk + nu > EVF_CHUNK_FRAMES_MAX)
			return -1;
		size_t cap = r->stacks_cap;
		if (evr_reserve((void **)&r->stacks, &cap, r->nstacks + 1, sizeof(*r->stacks)) ||
		    evr_reserve((void **)&r->frames, &r->frames_cap, r->frames_len + nk + nu, 8))
			return -1;
		r->stacks_cap = (uint32_t)cap;
		uint64_t prev = 0;
		for (uint32_t i = 0; i < nk + nu; i++) {
			uint64_t d;
			GETV_AT(EVC_STKDEF, d);
			prev += (uint64_t)lt_unzigzag(d);
			r->frames[r->frames_len + i] = prev;
		}
		r->stacks[r->nstacks++] = (struct evr_stack){ nk, nu, r->frames_len };
		r->frames_len += nk + nu;
	}
	const struct evr_stack *s = &r->stacks[id];
	out->n_kernel = s->nk;
	out->n_user = s->nu;
	out->ips = r->frames ? r->frames + s->off : NULL; /* empty stack, nothing allocated yet */
	return 0;
}

/* A Python stack reference from column k; a new one from EVC_PYDEF. */
static int evr_pystack(struct evlog_reader *r, unsigned k, struct evlog_pystack *out)
{
	uint64_t id;
	GETV_AT(k, id);
	if (id > r->npystacks)
		return -1;
	if (id == r->npystacks) {
		uint32_t n;
		GETN_AT(EVC_PYDEF, n, EVLOG_MAX_FRAMES);
		if (r->pyframes_len + n > EVF_CHUNK_PYFRAMES_MAX)
			return -1;
		size_t cap = r->pystacks_cap;
		if (evr_reserve((void **)&r->pystacks, &cap, r->npystacks + 1, sizeof(*r->pystacks)) ||
		    evr_reserve((void **)&r->pyframes, &r->pyframes_cap, r->pyframes_len + n,
				sizeof(*r->pyframes)))
			return -1;
		r->pystacks_cap = (uint32_t)cap;
		for (uint32_t i = 0; i < n; i++)
			if (evr_str(r, EVC_PYDEF, &r->pyframes[r->pyframes_len + i]))
				return -1;
		r->pystacks[r->npystacks++] = (struct evr_pystack){ n, r->pyframes_len };
		r->pyframes_len += n;
	}
	out->n = r->pystacks[id].n;
	out->frames = r->pyframes ? r->pyframes + r->pystacks[id].off : NULL;
	return 0;
}

/* Each field kind's decoding (evlog_schema.h), from column k on. */
#define GET_U8(m, f) GET8(u->m.f);
#define GET_U32(m, f) GET32(u->m.f);
#define GET_U64(m, f) GETV(u->m.f);
#define GET_X64(m, f) GETV(u->m.f);
#define GET_SRC(m, f) GET32(u->m.f);
#define GET_I64(m, f) GETZ(u->m.f);
#define GET_CORR(m, f) GETC(u->m.f);
#define GET_STR(m, f) GETS(u->m.f);
#define GET_STACK(m, f) if (evr_stack(r, k++, &u->m.f)) return -1;
#define GET_PYSTACK(m, f) if (evr_pystack(r, k++, &u->m.f)) return -1;
#define GET_U32X3(m, f) GET32(u->m.f[0]); GET32(u->m.f[1]); GET32(u->m.f[2]);
/* An argument list: its count, then argument i from the i-th column after it. */
#define GET_ARGS(m, f)                                                         \
	GETN(u->m.n##f, EVLOG_MAX_ARGS);                                       \
	for (uint32_t i_ = 0; i_ < u->m.n##f; i_++)                            \
		GETV_AT(k + i_, u->m.f[i_]);                                   \
	k += EVLOG_MAX_ARGS;
#define GET_FIELD(m, kind, f) GET_##kind(m, f)
/* k: the type's first column, a constant in each case. */
#define GET_TYPE(N, num, m, track, dur, corr) \
	case EV_##N: k = EVC_BASE_##m; EVLOG_FIELDS_##m(GET_FIELD, m) break;

static int evr_fields(struct evlog_reader *r, struct evlog_event *ev)
{
	typeof(ev->u) *u = &ev->u;
	unsigned k;
	switch (ev->type) {
	EVLOG_TYPES(GET_TYPE)
	default: return -1;
	}
	(void)k;
	return 0;
}

/* The chunk's events are all decoded: 0 if it ended cleanly (every column
 * used up), else -1 (damaged). */
static int evr_chunk_end(const struct evlog_reader *r)
{
	for (unsigned k = 0; k < EVC_NCOLS; k++)
		if (r->c[k] != r->ce[k])
			return -1;
	return 0;
}

/* 1 event decoded, 0 chunk finished cleanly, -1 damaged, -2 a later event type. */
static int evr_event(struct evlog_reader *r)
{
	if (!r->left)
		return evr_chunk_end(r);
	if (r->c[EVC_TYPE] >= r->ce[EVC_TYPE])
		return -1;
	uint8_t t = *r->c[EVC_TYPE]++;
	struct evlog_event *ev = &r->ev;
	memset(ev, 0, sizeof(*ev));
	ev->type = t & EVF_TYPE_MASK;
	/* A later minor version's event: its fields are unknown, so the rest of
	 * the chunk cannot be decoded. */
	if (ev->type == 0 || ev->type > EV_TYPE_MAX)
		return -2;
	uint64_t dt;
	GETV_AT(EVC_TS, dt);
	ev->ts = r->prev_ts + (uint64_t)lt_unzigzag(dt);
	if (t & EVF_SAME_THREAD) {
		ev->pid = r->prev_pid;
		ev->tid = r->prev_tid;
	} else {
		if (t & EVF_SAME_PID)
			ev->pid = r->prev_pid;
		else
			GETN_AT(EVC_TID, ev->pid, UINT32_MAX);
		uint64_t z;
		GETV_AT(EVC_TID, z);
		int64_t d = lt_unzigzag(z) + (int64_t)ev->pid;
		if (d < 0 || d > UINT32_MAX)
			return -1;
		ev->tid = (uint32_t)d;
	}
	if (evr_fields(r, ev))
		return -1;
	r->prev_ts = ev->ts;
	r->prev_pid = ev->pid;
	r->prev_tid = ev->tid;
	r->left--;
	return 1;
}

int evlog_next(struct evlog_reader *r, const struct evlog_event **ev)
{
	if (!r || !ev)
		return -EVLOG_EINVAL;
	for (;;) {
		if (r->in_chunk) {
			int rc = evr_event(r);
			if (rc == 1) {
				r->st.events++;
				*ev = &r->ev;
				return 0;
			}
			r->in_chunk = 0;
			if (rc == 0)
				r->st.chunks_ok++;
			else if (rc == -2)
				r->st.chunks_unknown++;
			else
				r->st.chunks_bad++;
			continue;
		}
		if (r->io_err) {
			int e = r->io_err;
			r->io_err = 0; /* reported once; later calls say END */
			return -e;
		}
		if (!r->stop && r->pos >= r->len && r->i_next < r->n_next) {
			int rc = evr_next_file(r);
			if (rc)
				return -rc;
			continue;
		}
		if (r->stop || r->pos >= r->len)
			return -EVLOG_END;
		int rc = evr_try_chunk(r);
		if (rc < 0)
			return rc;
	}
}
