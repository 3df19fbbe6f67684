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
 *   reader recovers every flushed chunk.
 *
 * Reader: evlog_reader_open() -> evlog_next() ... -> evlog_reader_close().
 *   Events come back in file order. Pointers inside a returned event (strings,
 *   stacks, args) stay valid until the next evlog_next() call. A corrupt or
 *   torn chunk is skipped and counted; reading goes on at the next good one.
 *
 * Errors are values: functions return 0 or a negative EVLOG_E* code, and the
 * handle keeps a human-readable message (evlog_*_error()).
 */
#ifndef LLMT_EVENTLOG_H
#define LLMT_EVENTLOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EVLOG_VERSION_MAJOR 1
#define EVLOG_VERSION_MINOR 2

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
};

/* Event types. Values are part of the file format: never renumber. */
enum evlog_type {
	EV_PROCESS = 1,      /* process seen or exec'd: ppid, name (comm), cmdline, exe */
	EV_PROCESS_EXIT = 2, /* process exited: code */
	EV_THREAD = 3,       /* thread seen, created or renamed: name */
	EV_THREAD_EXIT = 4,
	EV_SYSCALL = 5,      /* complete system call */
	EV_CPU_SAMPLE = 6,   /* sampled native stack (kernel + user frames) */
	EV_PY_ENTER = 7,     /* Python function entered */
	EV_PY_EXIT = 8,      /* Python function returned */
	EV_PY_SAMPLE = 9,    /* sampled Python stack (frames as strings) */
	EV_LIB_CALL = 10,    /* complete library call (uprobe entry + return) */
	EV_GPU_KERNEL = 11,
	EV_GPU_MEMCPY = 12,
	EV_GPU_MEMSET = 13,
	EV_GPU_API = 14,     /* CUDA runtime/driver call as recorded by CUPTI */
	EV_GPU_DEVICE = 15,  /* GPU device properties */
	EV_LOST = 16,        /* events lost by a source */
	EV_SYMBOL = 17,      /* address -> symbol for sampled addresses */
	EV_MARKER = 18,      /* free-form marker / annotation (steps, notes) */
	EV_CLOCK = 19,       /* a fresh CLOCK_MONOTONIC <-> CLOCK_REALTIME anchor */
	EV_TYPE_MAX = 19,
};

/* Sources, for EV_LOST and summaries. Part of the file format. */
enum evlog_source {
	EVSRC_OTHER = 0,
	EVSRC_SYSCALL = 1,
	EVSRC_CPU = 2,
	EVSRC_PYTHON = 3,
	EVSRC_CUDA_LIB = 4,
	EVSRC_CUPTI = 5,
	EVSRC_PROC = 6,
	EVSRC_PYSAMPLE = 7,
	EVSRC_MAX = 7,
};

/* Library-call classes (EV_LIB_CALL.lib_class, EV_GPU_API.api_class). */
enum evlog_lib_class {
	EVLIB_OTHER = 0,
	EVLIB_CUDA_RUNTIME = 1,
	EVLIB_CUDA_DRIVER = 2,
	EVLIB_NCCL = 3,
	EVLIB_CUBLAS = 4,
	EVLIB_CUDNN = 5,
};

/* Memcpy kinds (EV_GPU_MEMCPY.copy_kind): CUPTI's CUpti_ActivityMemcpyKind values. */

/* A counted string; may hold embedded NULs and invalid UTF-8. Not
 * NUL-terminated on read (the reader does NUL-terminate in practice, but
 * callers must use len). max length EVLOG_STR_MAX. */
struct evlog_str {
	const char *ptr;
	uint32_t len;
};
#define EVLOG_STR_MAX (16u << 20)

#define EVLOG_MAX_FRAMES 512
#define EVLOG_MAX_ARGS 8

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
 * One event. `type` selects the union member. Common fields:
 *   ts   CLOCK_MONOTONIC ns (start time for events with a duration)
 *   pid  process id (tgid) as seen from the host's pid namespace; for GPU
 *        activity the host process that issued it
 *   tid  thread id (0 where not meaningful)
 */
struct evlog_event {
	uint32_t type;
	uint64_t ts;
	uint32_t pid;
	uint32_t tid;
	union {
		struct { uint32_t ppid; struct evlog_str name, cmdline, exe; uint8_t is_exec; } process;
		struct { int64_t code; } process_exit;
		struct { struct evlog_str name; uint8_t is_new; } thread;
		struct { uint32_t nr; uint64_t dur; int64_t ret; uint64_t arg0, arg1, arg2; } syscall;
		struct { uint32_t cpu; struct evlog_stack stack; } cpu_sample;
		struct { struct evlog_str func, file; uint32_t line; } py_enter;
		struct { struct evlog_str func; } py_exit; /* func may be empty */
		struct { struct evlog_pystack stack; } py_sample;
		struct {
			uint8_t lib_class;          /* enum evlog_lib_class */
			struct evlog_str lib;       /* library path or soname */
			struct evlog_str symbol;
			uint64_t dur;
			uint64_t ret;
			uint32_t depth;             /* nesting depth on this thread (0 = outermost) */
			uint32_t nargs;
			uint64_t args[EVLOG_MAX_ARGS];
			struct evlog_str detail;    /* decoded args "bytes=4096 kind=HtoD" (may be empty) */
			uint64_t correlation_id;    /* 0 if unknown */
		} lib_call;
		struct {
			uint64_t dur;
			uint32_t device, context, stream;
			uint64_t correlation_id;
			struct evlog_str name;      /* mangled or demangled kernel name */
			uint32_t grid[3], block[3];
			uint32_t registers;
			uint32_t static_smem, dynamic_smem;
			uint32_t graph_id;          /* 0 if not launched from a graph */
		} gpu_kernel;
		struct {
			uint64_t dur;
			uint32_t device, context, stream;
			uint64_t correlation_id;
			uint64_t bytes;
			uint8_t copy_kind;          /* CUpti_ActivityMemcpyKind */
			uint8_t src_kind, dst_kind; /* CUpti_ActivityMemoryKind */
		} gpu_memcpy;
		struct {
			uint64_t dur;
			uint32_t device, context, stream;
			uint64_t correlation_id;
			uint64_t bytes;
			uint32_t value;
		} gpu_memset;
		struct {
			uint64_t dur;
			uint8_t api_class;          /* EVLIB_CUDA_RUNTIME or EVLIB_CUDA_DRIVER */
			uint32_t cbid;
			uint64_t correlation_id;
			int64_t ret;
			struct evlog_str name;
		} gpu_api;
		struct {
			uint32_t device;
			struct evlog_str name, uuid;
			uint32_t sm_count;
			uint32_t clock_khz;
			uint64_t memory_bytes;
			uint64_t memory_bandwidth;  /* bytes/s */
			uint32_t cc_major, cc_minor;
			uint32_t max_threads_per_sm, max_regs_per_sm, max_smem_per_sm;
		} gpu_device;
		struct { uint32_t source; uint64_t count; } lost;      /* enum evlog_source */
		struct {
			uint64_t addr;              /* pid 0 = kernel address */
			struct evlog_str name;      /* symbol (demangled if possible); empty if unknown */
			struct evlog_str module;    /* object path */
			uint64_t offset;            /* addr - symbol start, or module offset if unknown */
		} symbol;
		struct { struct evlog_str name, text; uint64_t dur; uint64_t value; } marker;
		/* a marker named EVLOG_MARKER_NS_TID: see there */
		struct { uint64_t realtime_ns; } clock; /* ts is the CLOCK_MONOTONIC side */
	} u;
};

#define EVLOG_SESSION_LEN 16
#define EVLOG_SESSION_HEX (2 * EVLOG_SESSION_LEN + 1) /* text form, with its NUL */

/* EV_MARKER naming a thread's id in its process's own pid namespace (a
 * container's): pid and tid are the node's, value is that thread's id there.
 * Written by the collector for target threads whose ids differ; the
 * converter maps the container's tids in the logs a target writes itself
 * (CUPTI, Python hook) to the node's with them, and shows no such marker. */
#define EVLOG_MARKER_NS_TID "llmtracker.ns_tid"

/* EV_MARKER written by the injected CUPTI library when it switched kernel
 * recording on: ts before, ts + dur after. Calls made before ts queued no
 * recorded work; the converter pairs uprobe launch calls with recorded
 * work from there (converter/launchpair.h), and shows no such marker. Text
 * "" spans switching every kind on; one per kind of work follows around
 * that kind's own switch, text EVLOG_CUPTI_ON_KERNEL, _MEMCPY or _MEMSET
 * (logs before those have only the first). */
#define EVLOG_MARKER_CUPTI_ON "llmtracker.cupti_on"
#define EVLOG_CUPTI_ON_KERNEL "kernel"
#define EVLOG_CUPTI_ON_MEMCPY "memcpy"
#define EVLOG_CUPTI_ON_MEMSET "memset"

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
	 * the collector's log and in every log of the libraries it injected
	 * (format 1.2). All zero: none (logs of 1.0/1.1 writers, test logs). */
	uint8_t session[EVLOG_SESSION_LEN];
};

/* ---------------------------------------------------------------- writer */

struct evlog_writer;

struct evlog_writer_opts {
	size_t chunk_bytes;        /* raw bytes per chunk before compression; 0 = default (1 MiB) */
	uint64_t flush_ns;         /* flush a non-empty chunk older than this; 0 = default (1 s) */
	int zstd_level;            /* 0 = default (1) */
	int overwrite;             /* replace an existing final file (default: refuse, EVLOG_EEXIST) */
	int row_chunks;            /* write format 1.0 row chunks, for 1.0 readers (default: 1.1
				    * column chunks, about a quarter smaller; 1.0 readers skip them) */
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

/* Append one event. Cheap: encodes into the current chunk; may flush. */
int evlog_write(struct evlog_writer *w, const struct evlog_event *ev);

/* Flush the current chunk if it is older than the flush interval. Call
 * this from an idle loop so quiet sources still reach disk within flush_ns. */
int evlog_writer_tick(struct evlog_writer *w);

/* Flush the current chunk now (if non-empty) and fsync-free write it out. */
int evlog_writer_flush(struct evlog_writer *w);

/* Flush, then rename the partial file to its final path. Frees w. */
int evlog_writer_close(struct evlog_writer *w);
/* Same, and on error msg (size msgsz) says why (w is gone by then). On a
 * failed flush or publish the partial file is kept, never removed. */
int evlog_writer_close_msg(struct evlog_writer *w, char *msg, size_t msgsz);

/* Discard: remove the partial file, free w. For error paths. */
void evlog_writer_abort(struct evlog_writer *w);

const char *evlog_writer_error(const struct evlog_writer *w);
const char *evlog_writer_partial_path(const struct evlog_writer *w);

struct evlog_writer_stats {
	uint64_t events, chunks, raw_bytes, file_bytes;
	uint64_t events_by_type[EV_TYPE_MAX + 1];
};
void evlog_writer_stats(const struct evlog_writer *w, struct evlog_writer_stats *st);

/* ---------------------------------------------------------------- reader */

struct evlog_reader;

/* Open a log from a file path (partial files included). */
int evlog_reader_open(struct evlog_reader **out, const char *path, char *msg, size_t msgsz);
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
	struct evlog_str r = { s, 0 };
	if (s)
		while (s[r.len])
			r.len++;
	return r;
}

#ifdef __cplusplus
}
#endif
#endif /* LLMT_EVENTLOG_H */
