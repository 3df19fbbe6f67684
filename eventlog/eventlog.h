/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eventlog: the binary event log written by the collector and the injected
 * library and read by the converter. The on-disk format is specified in
 * schemas/eventlog.md; this header is its C interface.
 *
 * Writer: evlog_writer_open() -> evlog_write() ... -> evlog_writer_close().
 *   Events are encoded into an in-memory chunk (strings and stacks interned
 *   per chunk, timestamps delta-encoded); a full chunk, or one older than the
 *   flush interval, is compressed with zstd, checksummed and appended. The
 *   file is written as "<dir>/.<name>.partial" and renamed to its final name
 *   by evlog_writer_close(); a crash leaves the partial file, from which the
 *   reader recovers every flushed chunk. With segment bounds the log is a
 *   series of files, each published once complete: "<name>.1", "<name>.2" ...
 *   and the last as "<name>" (schemas/eventlog.md 5.2). The bytes can also go
 *   to a sink of the caller's (evlog_writer_open_sink), which may drop chunks.
 *
 * Reader: evlog_reader_open() -> evlog_next() ... -> evlog_reader_close().
 *   Events come back in file order. Pointers inside a returned event (strings,
 *   stacks, args) stay valid until the next evlog_next() call. A corrupt or
 *   torn chunk is skipped and counted; reading goes on at the next good one.
 *   A segment of a log is read with the segments before it, in order, as one
 *   log (evlog_chain_open); each is checked against the record the next one
 *   keeps of it.
 *
 * Errors are values: functions return 0 or a negative EVLOG_E* code, and the
 * handle keeps a human-readable message (evlog_*_error()).
 */
#ifndef LLMT_EVENTLOG_H
#define LLMT_EVENTLOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "evlog_schema.h"
#include "evlog_sources.h" /* enum evlog_source */

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes (negated when returned). */
enum evlog_err {
	EVLOG_OK = 0,
	EVLOG_EIO = 1,      /* read/write/rename failed; errno-based message */
	EVLOG_ENOMEM = 2,
	EVLOG_EMAGIC = 3,   /* not an event log */
	EVLOG_EVERSION = 4, /* unknown major version */
	EVLOG_EHEADER = 5,  /* file header corrupt */
	EVLOG_EINVAL = 6,   /* bad argument (unknown type, oversize string...) */
	EVLOG_EEXIST = 7,   /* final path already exists (never clobbered) */
	EVLOG_END = 8,      /* evlog_next(): no more events (returned as -EVLOG_END) */
	EVLOG_ESEGMENT = 9, /* a segment of the log is missing, or not what the next one records */
};

/* Event types: EV_<NAME> = number, from EVLOG_TYPES (evlog_schema.h). Values
 * are part of the file format: never renumber. */
#define EVS_ENUM(N, num, m, track, dur, corr) EV_##N = num,
enum evlog_type {
	EVLOG_TYPES(EVS_ENUM)
	EV_TYPE_MAX = EVLOG_TYPE_MAX_NUM,
};
#undef EVS_ENUM

/* Library-call classes (EV_LIB_CALL.lib_class, EV_GPU_API.api_class). */
enum evlog_lib_class {
	EVLIB_OTHER = 0,
	EVLIB_CUDA_RUNTIME = 1,
	EVLIB_CUDA_DRIVER = 2,
	EVLIB_NCCL = 3,
	EVLIB_CUBLAS = 4,
	EVLIB_CUDNN = 5,
};

/* Memcpy kinds (EV_GPU_MEMCPY.copy_kind, EV_LIB_CALL.copy_kind): CUPTI's
 * CUpti_ActivityMemcpyKind values; those a call's arguments can name. */
enum evlog_copy_kind {
	EVLOG_COPY_UNKNOWN = 0,
	EVLOG_COPY_HTOD = 1,
	EVLOG_COPY_DTOH = 2,
	EVLOG_COPY_DTOD = 8,
	EVLOG_COPY_HTOH = 9,
	EVLOG_COPY_PTOP = 10,
};

/* A counted string; may hold embedded NULs and invalid UTF-8. Not
 * NUL-terminated on read (the reader does NUL-terminate in practice, but
 * callers must use len). max length EVLOG_STR_MAX. */
struct evlog_str {
	const char *ptr;
	uint32_t len;
	/* evlog_str_hash(ptr, len), or 0: the writer hashes the string. A
	 * producer that writes one string many times (a code object's name on
	 * every call) hashes it once; a wrong hash costs only compression (the
	 * writer compares the bytes before it reuses a string). */
	uint32_t hash;
};
uint32_t evlog_str_hash(const char *ptr, uint32_t len);
#define EVLOG_STR_MAX (16u << 20)

#define EVLOG_MAX_FRAMES 512
#define EVLOG_MAX_ARGS 8
/* EV_LIB_CALL.kernel: at most this many bytes, a longer name cut (the
 * converter compares a GPU kernel's name cut alike). */
#define EVLOG_CALL_KERNEL_MAX 511

struct evlog_stack {
	uint32_t n_kernel;      /* kernel frames come first, leaf first */
	uint32_t n_user;        /* then user frames, leaf first */
	const uint64_t *ips;    /* n_kernel + n_user addresses */
};

struct evlog_pystack {
	uint32_t n;             /* frames, leaf first */
	const struct evlog_str *frames; /* "qualname (file:line)" */
};

/*
 * One event. `type` selects the union member, named as the type
 * (evlog_type_name()); each member holds the type's fields in file order, as
 * EVLOG_FIELDS_<member> in evlog_schema.h declares them (meanings there).
 * Common fields:
 *   ts   CLOCK_MONOTONIC ns (start time for events with a duration)
 *   pid  process id (tgid) as seen from the host's pid namespace; for GPU
 *        activity the host process that issued it
 *   tid  thread id (0 where not meaningful)
 * A marker whose kind is not EVLOG_MARK_NOTE is metadata: see there.
 */
#define EVS_FIELD(m, kind, f) EVS_MEMBER_##kind(f)
#define EVS_UNION(N, num, m, track, dur, corr) struct { EVLOG_FIELDS_##m(EVS_FIELD, m) } m;
struct evlog_event {
	uint32_t type;
	uint64_t ts;
	uint32_t pid;
	uint32_t tid;
	union {
		EVLOG_TYPES(EVS_UNION)
	} u;
};
#undef EVS_UNION
#undef EVS_FIELD

/* Each type's timeline traits (EVLOG_TYPES): its track (enum evlog_track),
 * and the offsets in struct evlog_event of its duration and correlation id
 * fields (u64; 0: it has none) and, on a GPU stream track, of its device and
 * stream fields (u32; a device track's: its device field). Indexed by type;
 * unknown types are all zero. */
struct evlog_traits {
	uint8_t track;
	uint16_t dur_off, corr_off;
	uint16_t device_off, stream_off;
};
extern const struct evlog_traits evlog_traits[EV_TYPE_MAX + 1];

static inline const struct evlog_traits *evlog_type_traits(uint32_t type)
{
	static const struct evlog_traits none;
	return type <= EV_TYPE_MAX ? &evlog_traits[type] : &none;
}

/* A field the type's traits locate (offset 0: the type has none, read as 0). */
static inline uint64_t evlog_trait_u64(const struct evlog_event *e, uint16_t off)
{
	uint64_t v = 0;
	if (off)
		memcpy(&v, (const char *)e + off, sizeof(v));
	return v;
}

static inline uint32_t evlog_trait_u32(const struct evlog_event *e, uint16_t off)
{
	uint32_t v = 0;
	if (off)
		memcpy(&v, (const char *)e + off, sizeof(v));
	return v;
}

/* The event's duration in ns (0 for instants and metadata). */
static inline uint64_t evlog_dur(const struct evlog_event *e)
{
	return evlog_trait_u64(e, evlog_type_traits(e->type)->dur_off);
}

/* The GPU device and stream of an event on a stream track, the device of
 * one on a device track (0 elsewhere). */
static inline uint32_t evlog_device(const struct evlog_event *e)
{
	return evlog_trait_u32(e, evlog_type_traits(e->type)->device_off);
}

static inline uint32_t evlog_stream(const struct evlog_event *e)
{
	return evlog_trait_u32(e, evlog_type_traits(e->type)->stream_off);
}

/* The event's CUDA correlation id (0: none or unknown). */
static inline uint64_t evlog_corr(const struct evlog_event *e)
{
	return evlog_trait_u64(e, evlog_type_traits(e->type)->corr_off);
}

/* Set the event's CUDA correlation id (a type without one: nothing). */
static inline void evlog_set_corr(struct evlog_event *e, uint64_t v)
{
	uint16_t off = evlog_type_traits(e->type)->corr_off;
	if (off)
		memcpy((char *)e + off, &v, sizeof(v));
}

#define EVLOG_SESSION_LEN 16
#define EVLOG_SESSION_HEX (2 * EVLOG_SESSION_LEN + 1) /* text form, with its NUL */

/* What an EV_MARKER is (its field kind). Part of the file format. Every
 * kind but EVLOG_MARK_NOTE is metadata of llmtracker's own, which the
 * converter shows as no marker; a reader treats a kind it does not know
 * (a later minor version's) as such metadata and ignores it. */
enum evlog_marker_kind {
	/* An annotation (steps, notes): name, text, dur and value as given. */
	EVLOG_MARK_NOTE = 0,
	/* A thread's id in its process's own pid namespace (a container's):
	 * pid and tid are the node's, value is that thread's id there. Written
	 * by the collector for target threads whose ids differ; the converter
	 * maps the container's tids in the logs a target writes itself (CUPTI,
	 * Python hook) to the node's with them. */
	EVLOG_MARK_NS_TID = 1,
	/* A thread of the profiler's own in a target (the injected library's
	 * control thread, named EVLOG_OWN_THREAD_NAME): pid and tid are the
	 * thread's (the log's view, mapped like its other tids). Written by the
	 * injected library into its log; the converter shows that thread under
	 * that name and leaves it out of the summary's tables. */
	EVLOG_MARK_OWN_THREAD = 2,
	/* The injected CUPTI library switched recording on: ts before, ts + dur
	 * after; value: the work switched (enum evlog_cupti_work). Calls made
	 * before ts queued no recorded work of it; the converter pairs uprobe
	 * launch calls with recorded work from there (converter/pairing/launchpair.h).
	 * One per kind of work around that kind's own switch, then one for
	 * every kind around the whole. */
	EVLOG_MARK_CUPTI_ON = 3,
	/* The injected CUPTI library switched recording off: ts before, ts + dur
	 * after. Calls made after ts + dur queued nothing recorded (the
	 * converter does not wait for their work). */
	EVLOG_MARK_CUPTI_OFF = 4,
};
#define EVLOG_OWN_THREAD_NAME "llmtracker"

/* The work an EVLOG_MARK_CUPTI_ON switched on (its value). */
enum evlog_cupti_work {
	EVLOG_CUPTI_ALL = 0,
	EVLOG_CUPTI_KERNEL = 1,
	EVLOG_CUPTI_MEMCPY = 2,
	EVLOG_CUPTI_MEMSET = 3,
};

/* File header fields. Strings may be empty. */
struct evlog_header {
	uint32_t version_major, version_minor;
	struct evlog_str host;         /* hostname of the collecting node */
	struct evlog_str boot_id;      /* /proc/sys/kernel/random/boot_id */
	struct evlog_str machine;      /* uname -m of the collecting node (syscall numbering) */
	struct evlog_str producer;     /* "collector", "inject", "test" ... */
	struct evlog_str cmdline;      /* the producer's command line */
	struct evlog_str options;      /* the producer's options, free text */
	uint64_t mono_ns;              /* clock anchor: CLOCK_MONOTONIC ... */
	uint64_t realtime_ns;          /* ... and CLOCK_REALTIME read together */
	uint32_t producer_pid;
	/* The profile this log belongs to: one random id per `profile` run, in
	 * the collector's log and in every log of the libraries it injected.
	 * All zero: none (test logs). */
	uint8_t session[EVLOG_SESSION_LEN];
	/* Its place in a log written in segments: 2, 3 ... for the
	 * second segment on, whose first event records the one before it
	 * (EV_SEGMENT); 0 for a log's first or only file. Set by the writer. */
	uint32_t segment;
};

/* ---------------------------------------------------------------- writer */

struct evlog_writer;

struct evlog_writer_opts {
	size_t chunk_bytes;        /* raw bytes per chunk before compression; 0 = default (1 MiB) */
	uint64_t flush_ns;         /* flush a non-empty chunk older than this; 0 = default (1 s) */
	int zstd_level;            /* 0 = default (1) */
	int overwrite;             /* replace an existing final file (default: refuse, EVLOG_EEXIST) */
	/* A segment ends after the first chunk that takes it to segment_bytes,
	 * or that finds it segment_ns old (and holding events): the next chunk
	 * starts the next one. 0: no bound (a log of one file, unless the other
	 * bound is set). Not for evlog_writer_open_fd. */
	uint64_t segment_bytes;
	uint64_t segment_ns;
};

/* Where a writer's bytes go, segment by segment (evlog_writer_open_sink).
 * Each function returns 0, or a negative EVLOG_E* code with the sink's
 * message in err (the writer stops there: later calls fail). */
struct evlog_put {
	uint32_t events;           /* events in these bytes (0: a file header) */
	const uint32_t *by_type;   /* how many of each type, [EV_TYPE_MAX + 1] */
	int keep;                  /* a file header, a segment record, or a chunk the
				    * caller asked to keep (evlog_writer_flush_keep):
				    * the log is unreadable without it, never dropped */
};
struct evlog_sink {
	/* Segment seg (1, 2 ...) starts; its bytes follow. Segment 1 starts
	 * before the writer's open returns. */
	int (*begin)(void *ctx, uint32_t seg, char *err, size_t errsz);
	/* The next bytes of segment seg: its file header, or one whole chunk.
	 * 1: dropped (not keep: the writer counts its events as dropped and the
	 * segment goes on without it). */
	int (*put)(void *ctx, uint32_t seg, const void *p, size_t n, const struct evlog_put *pi,
		   char *err, size_t errsz);
	/* Segment seg is complete; last: it ends the log. */
	int (*end)(void *ctx, uint32_t seg, int last, char *err, size_t errsz);
	/* The log is abandoned (evlog_writer_abort): drop the open segment. */
	void (*abort)(void *ctx);
};

/*
 * Open a writer publishing to `path` on close. hdr->mono_ns/realtime_ns may
 * be 0 to read the clocks now; version fields are ignored. Fails with
 * EVLOG_EEXIST if `path` exists (unless opts->overwrite). Never follows a
 * symlink at the partial path. On error *out is NULL and msg (if non-NULL,
 * size msgsz) holds the reason.
 */
int evlog_writer_open(struct evlog_writer **out, const char *path,
		      const struct evlog_header *hdr,
		      const struct evlog_writer_opts *opts, char *msg, size_t msgsz);

/*
 * Open a writer on `fd`: an empty regular file, opened for writing, that the
 * caller created and will publish itself (the injected library gets only such
 * an fd from the collector: no directory, no path). The writer takes fd in
 * every case. Close flushes and closes it, never renames; abort (and a failed
 * open) leaves it empty, for its creator to drop. `label` names it in messages.
 */
int evlog_writer_open_fd(struct evlog_writer **out, int fd, const char *label,
			 const struct evlog_header *hdr,
			 const struct evlog_writer_opts *opts, char *msg, size_t msgsz);

/*
 * Open a writer whose bytes go to `sink` (with ctx), in segments when opts
 * bound them; `name` is the log's final file name, from which the segments'
 * names are made (segment k is published as "<name>.k", the last as
 * "<name>": evlog_segment_name()). On error *out is NULL, msg says why.
 */
int evlog_writer_open_sink(struct evlog_writer **out, const char *name,
			   const struct evlog_sink *sink, void *ctx,
			   const struct evlog_header *hdr,
			   const struct evlog_writer_opts *opts, char *msg, size_t msgsz);

/* The file name segment `seg` of log `name` is published under when it is
 * not the last ("<name>.<seg>"), into out (size outsz). */
void evlog_segment_name(const char *name, uint32_t seg, char *out, size_t outsz);

/* Append one event. Cheap: encodes into the current chunk; may flush. */
int evlog_write(struct evlog_writer *w, const struct evlog_event *ev);

/* Flush the current chunk if it is older than the flush interval. Call
 * this from an idle loop so quiet sources still reach disk within flush_ns. */
int evlog_writer_tick(struct evlog_writer *w);

/* Flush the current chunk now (if non-empty) and fsync-free write it out. */
int evlog_writer_flush(struct evlog_writer *w);
/* The same, marked keep for the sink (it is never dropped): for a few
 * small records the log must not lose (the count of dropped events). */
int evlog_writer_flush_keep(struct evlog_writer *w);

/* Flush, then rename the partial file to its final path. Frees w. */
int evlog_writer_close(struct evlog_writer *w);
/* Same, and on error msg (size msgsz) says why (w is gone by then). On a
 * failed flush or publish the partial file is kept, never removed. */
int evlog_writer_close_msg(struct evlog_writer *w, char *msg, size_t msgsz);

/* Discard: remove the partial file (segments already published stay), free
 * w. For error paths. */
void evlog_writer_abort(struct evlog_writer *w);

const char *evlog_writer_error(const struct evlog_writer *w);
/* evlog_writer_open's partial file as given (the open segment's); others: their label. */
const char *evlog_writer_partial_path(const struct evlog_writer *w);

struct evlog_writer_stats {
	uint64_t events, chunks, raw_bytes, file_bytes; /* file_bytes: all segments' */
	uint64_t events_by_type[EV_TYPE_MAX + 1];
	uint32_t segments;        /* begun so far */
	/* Chunks the sink dropped, their events (also in events) and bytes. */
	uint64_t dropped_chunks, dropped_events, dropped_bytes;
	uint64_t dropped_by_type[EV_TYPE_MAX + 1];
};
void evlog_writer_stats(const struct evlog_writer *w, struct evlog_writer_stats *st);

/* The files of a log in a directory, the sink evlog_writer_open() writes
 * through (eventlog/files.c, schemas/eventlog.md 5): each segment written
 * into "<dir>/.<name>.partial", closed once and published whole, never over
 * a file. Usable on its own: the collector's store writer process gets the
 * bytes from the collector and writes them through evlog_files_sink.
 * evlog_files_open() checks the directory and that <name> does not exist,
 * nor <name>.1 for a log in segments (unless overwrite); the first begin()
 * creates the file. */
enum { EVLOG_FILES_OVERWRITE = 1, EVLOG_FILES_SEGMENTS = 2 };
struct evlog_files;
int evlog_files_open(struct evlog_files **out, const char *path, int flags, char *msg,
		     size_t msgsz);
extern const struct evlog_sink evlog_files_sink; /* ctx: the struct evlog_files */
const char *evlog_files_dir(const struct evlog_files *f);     /* "dir/" as given, or "" */
const char *evlog_files_partial(const struct evlog_files *f); /* the partial file's name */
/* Free; an open segment's file is closed and kept. */
void evlog_files_close(struct evlog_files *f);

/* ---------------------------------------------------------------- reader */

struct evlog_reader;

/* Open a log from a file path (partial files included). A segment of a log
 * is read with the segments before it, found beside it (evlog_chain_open). */
int evlog_reader_open(struct evlog_reader **out, const char *path, char *msg, size_t msgsz);
/* Open a log from a file already opened (and checked) by the caller, read
 * through that fd only: nothing is looked up by name again. The reader owns
 * fd from then on: evlog_reader_close() closes it, and so does a failed open.
 * name is only shown in messages. */
int evlog_reader_open_fd(struct evlog_reader **out, int fd, const char *name, char *msg,
			 size_t msgsz);
/*
 * The files of a log written in segments (schemas/eventlog.md 5.2), oldest
 * first, the last being the file given. A file whose header says it is
 * segment k >= 2 starts with the record (EV_SEGMENT) of segment k - 1: its
 * name, size and SHA-256. evlog_chain_open() opens that file through
 * lookup(ctx, name) (an fd of it, or -errno), checks it is a regular file
 * of that size and digest and its header says k - 1, and so on back to the
 * first. A missing or altered segment fails the open with EVLOG_ESEGMENT and
 * a message naming it and the file that records it. Takes fd; `shown` names
 * the file given in messages (the others are shown as `shown`'s directory
 * part and their names). A log of one file is a chain of one.
 */
struct evlog_chain;
int evlog_chain_open(struct evlog_chain **out, int fd, const char *shown,
		     int (*lookup)(void *ctx, const char *name), void *ctx,
		     char *msg, size_t msgsz);
/* lookup for evlog_chain_open: ctx points to a directory fd; the name is
 * opened there without following a symlink or blocking. */
int evlog_chain_lookup_at(void *dirfd_ptr, const char *name);
size_t evlog_chain_count(const struct evlog_chain *c);
int evlog_chain_fd(const struct evlog_chain *c, size_t i);           /* 0: the oldest */
const char *evlog_chain_name(const struct evlog_chain *c, size_t i); /* as shown */
void evlog_chain_close(struct evlog_chain *c);
/* Read the chain's files in order as one log (their fds are duplicated:
 * the chain may be closed after). The header is the first file's. */
int evlog_reader_open_chain(struct evlog_reader **out, const struct evlog_chain *c, char *msg,
			    size_t msgsz);

/* Open a log held in memory (archives, fuzzing). The buffer must outlive the reader. */
int evlog_reader_open_mem(struct evlog_reader **out, const void *buf, size_t len,
			  const char *name, char *msg, size_t msgsz);

const struct evlog_header *evlog_reader_header(const struct evlog_reader *r);

/* Next event in file order: 0 and *ev set, -EVLOG_END at the end, or another
 * negative code on a hard I/O error. Corrupt chunks are skipped, not errors. */
int evlog_next(struct evlog_reader *r, const struct evlog_event **ev);

struct evlog_reader_stats {
	uint64_t events, chunks_ok, chunks_bad, bytes_skipped;
	int truncated;        /* the file ends inside a chunk (crash or cut) */
	uint64_t chunks_unknown; /* chunks whose tail held an event type newer than this reader */
	int shrank;           /* the file got shorter while being read (another process cut
			       * it): reading stopped there, cleanly; truncated is set too and
			       * evlog_reader_error() says where */
};
void evlog_reader_stats(const struct evlog_reader *r, struct evlog_reader_stats *st);
const char *evlog_reader_error(const struct evlog_reader *r);
void evlog_reader_close(struct evlog_reader *r);

/* ----------------------------------------------------------------- names */

const char *evlog_type_name(uint32_t type);     /* "syscall", "gpu_kernel"... or NULL */
const char *evlog_source_name(uint32_t source); /* "syscall", "cpu", "cupti"... */
const char *evlog_strerror(int err);            /* for codes, positive or negative */

/* ------------------------------------------------------------------ dump */

/* One line per event: "<type_name> ts=<ns> pid=<pid> tid=<tid> key=value ...".
 * Line format documented in eventlog/dump.c. Returns 0 or -EVLOG_EIO. */
int evlog_dump_event(FILE *out, const struct evlog_event *ev);
/* The header as "# key=value" lines. */
int evlog_dump_header(FILE *out, const struct evlog_header *h);
/* Writes s escaped (no spaces, no control or non-ASCII bytes, see dump.c). */
void evlog_dump_str(FILE *out, struct evlog_str s);

/* ------------------------------------------------------------- session */

/* A fresh random session id (getrandom). 0, or -errno. */
int evlog_session_new(uint8_t id[EVLOG_SESSION_LEN]);
/* Is it set (not all zero)? */
int evlog_session_set(const uint8_t id[EVLOG_SESSION_LEN]);
/* Its text form: 32 lowercase hex digits, in out[EVLOG_SESSION_HEX]. */
char *evlog_session_hex(const uint8_t id[EVLOG_SESSION_LEN], char out[EVLOG_SESSION_HEX]);
/* Parse the text form (exactly 32 hex digits); 0, or -EVLOG_EINVAL with id zeroed. */
int evlog_session_parse(const char *hex, uint8_t id[EVLOG_SESSION_LEN]);

/* Helpers */
static inline struct evlog_str evlog_s(const char *s)
{
	struct evlog_str r = { .ptr = s };
	if (s)
		while (s[r.len])
			r.len++;
	return r;
}

#ifdef __cplusplus
}
#endif
#endif /* LLMT_EVENTLOG_H */
