/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A profiling session: the options, the shared BPF maps, the ring buffer,
 * the event log writer and the sources that feed it.
 *
 * Every source (syscall, cpu, cuda, python, ...) is a `struct lt_source`:
 * it opens its BPF skeleton, hands the session's shared maps to it with
 * lt_session_share_maps() before load, attaches, and turns the ring-buffer
 * records of its kinds into event-log events. The session owns the lifetime
 * order: start all -> poll -> quiesce all (probes off) -> finish all (flush
 * tables such as symbols) -> stop all (detach, free) -> close the log.
 * stop() is called on every exit path
 * for every source whose start() was attempted, so it must cope with a
 * half-started state.
 */
#ifndef LLMT_SESSION_H
#define LLMT_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>

#include "bpf/common.h"
#include "collector/sources/sources.h"
#include "eventlog/eventlog.h"

struct bpf_object;
struct ring_buffer;
struct lt_session;
struct lt_im;

#define LT_MAX_TARGETS 256

/* How -t python traces calls (--python-method). */
enum lt_python_method {
	LT_PYM_AUTO = 0,             /* the injected hook, else the USDT probes */
	LT_PYM_HOOK,                 /* the injected hook only */
	LT_PYM_USDT,                 /* the USDT probes only */
};

struct lt_options {
	int pids[LT_MAX_TARGETS];
	int n_pids;
	unsigned types;              /* enum lt_type_bit */
	bool types_all;              /* -t all: unavailable sources warn, not fail */
	const char *output;          /* -o */
	double segment_mb;           /* --segment-mb: a segment of the log ends past this size... */
	double segment_s;            /* --segment-seconds: ... or this age */
	double duration_s;           /* -d; 0 = until targets exit or a signal */
	double delay_s;              /* --delay */
	int verbosity;               /* -v */
	bool quiet;                  /* -q: no status while recording */
	unsigned cpu_buffer_mb;      /* --cpu-buffer-size, per CPU */
	const char *probe_file;      /* --probe-file */
	bool cuda_kernel;            /* --enable-cuda-kernel true */
	bool cuda_api_records;       /* --cuda-api-records true: CUPTI's API records too */
	/* Not an option: kernels recorded without -t cuda. The cuda source then
	 * probes only the probe file's calls that queue GPU work, which the
	 * converter links kernels, copies and sets to; it may fail to start
	 * (the kernels are recorded without links). */
	bool cuda_launches_only;
	const char *cupti_dir;       /* --cupti-dir */
	unsigned freq_hz;            /* --freq (cpu sampling), default 99 */
	unsigned cpu_stack_bytes;    /* --cpu-stack-bytes: user stack copied per sample
				      * for CFI unwinding; 0 = frame pointers only */
	bool follow_children;        /* default true; --no-children */
	unsigned max_probes;         /* --max-probes; 0: LT_MAX_PROBES */
	int python_method;           /* --python-method: enum lt_python_method */
	char **launch_argv;          /* -- CMD ARGS, NULL if none */
	const char *user;            /* --user USER[:GROUP] CMD runs as; NULL: ours */
	/* Not an option: drawn by lt_profile() before anything starts, and
	 * written into the header of every log of this run (the collector's
	 * and each injected library's), so the converter takes them together. */
	uint8_t session[EVLOG_SESSION_LEN];
};

/* One kind of activity: its code. Static, const instances, one per line of
 * LT_SOURCES (collector/sources/sources.h), which gives its name, its -t
 * bit and its lost counter; state lives in *state. */
struct lt_source {
	uint32_t kind_lo, kind_hi;   /* ring-buffer record kinds it handles */
	/* Open, share maps, load, attach. Return 0, or -errno with a message
	 * set through lt_session_errorf(). */
	int (*start)(struct lt_session *s, void **state);
	/* A new target process appeared (given, launched or a followed child):
	 * per-process attachments (uprobes) happen here. May be NULL. */
	int (*add_target)(struct lt_session *s, void *state, int pid);
	/* pid's per-process attachments no longer apply: a thread other than
	 * its leader exec'd (the old leader task, which links are bound to, is
	 * gone). add_target follows. May be NULL. */
	void (*drop_target)(struct lt_session *s, void *state, int pid);
	/* A launched target (already added), held before its execve of
	 * `path`: arm what can be armed before it runs. May be NULL. */
	int (*prepare_exec)(struct lt_session *s, void *state, int pid, const char *path);
	/* One ring-buffer record of this source's kinds. */
	int (*handle)(struct lt_session *s, void *state, const struct lt_rec_hdr *rec, size_t size);
	/* Time is up: stop making events (probes, tracepoints, perf events
	 * off), keeping the state for finish. Every source quiesces before any
	 * finishes, so no target pays for probes while tables are written
	 * (symbolization can take seconds). May be NULL. */
	void (*quiesce)(struct lt_session *s, void *state);
	/* Targets stopped or time is up; quiesced. Write tables (symbols) to
	 * the log here. May be NULL. */
	int (*finish)(struct lt_session *s, void *state);
	/* Detach and free. Must cope with a half-started state. */
	void (*stop)(struct lt_session *s, void *state);
};

struct lt_session {
	struct lt_options opt;
	struct evlog_writer *log;
	int targets_fd, events_fd, lost_fd;   /* shared BPF maps */
	int pys_procs_fd, pys_threads_fd;     /* shared with -t pysample, else -1 */
	struct ring_buffer *rb;
	volatile sig_atomic_t stopping;
	char err[512];
	/* An input passed a bound, or the kernel refused a named source for
	 * lack of a privilege (lt_session_refuse): before the targets are in
	 * (attached false) the profile stops with this line; after, each such
	 * line is a warning and profiling goes on. */
	char refused[512];
	bool attached;
	/* Names a code object of pid ("qualname (file:line)"; valid until the
	 * next call), for the cpu sampler's merged Python + native stacks: set
	 * by -t pysample while it runs, else NULL. qual: the object's
	 * co_qualname pointer as sampled (a name cached for the address with
	 * another is read again). NULL when unreadable. */
	const char *(*py_code_name)(void *arg, int pid, uint64_t code, uint64_t qual);
	void *py_code_arg;
	/* The injected library's manager (inject_mgr.h: CUDA kernels for the
	 * gpu source, the Python hook for python), made by lt_profile before
	 * the sources start, stopped before they finish. NULL: none. */
	struct lt_im *inject;
	struct lt_cuda_kernel *cuda_kernel;
	/* per-source bookkeeping, owned by session.c */
	void *priv;
};

/* Make `obj` (opened, not yet loaded) use the session's shared maps named
 * targets, events and lost (and pys_procs, pys_threads with -t pysample),
 * where it declares them. */
int lt_session_share_maps(struct lt_session *s, struct bpf_object *obj);

/* Write one event to the log; errors are remembered and reported once. */
int lt_session_emit(struct lt_session *s, const struct evlog_event *ev);

/* Mark a pid as a target in the shared map (and tell the sources). */
int lt_session_add_target(struct lt_session *s, int pid);

/* pid's leader thread changed at an exec: tell the sources (drop_target). */
void lt_session_drop_target(struct lt_session *s, int pid);

/* pid (a target, held before it execs path) is about to run: tell the sources. */
void lt_session_prepare_exec(struct lt_session *s, int pid, const char *path);

/* Poll fd in the session's loop beside the ring buffer; ready(s, arg) runs
 * (in the loop's thread) when it is readable. At most LT_MAX_WATCH. */
#define LT_MAX_WATCH 4
int lt_session_watch_fd(struct lt_session *s, int fd, void (*ready)(struct lt_session *s, void *arg),
			void *arg);
void lt_session_unwatch_fd(struct lt_session *s, int fd);

/* Set the session's error message (printf-style). Returns -1. */
int lt_session_errorf(struct lt_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* An input passed a bound or a privilege is missing (see `refused` above):
 * the first such line is kept to stop the profile while starting, later
 * ones are warnings. */
void lt_session_refuse(struct lt_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* `source` (its name) could not record all it was asked to, for a reason
 * not tied to one process (a missing privilege under -t all, nothing to
 * probe): the summary lists it as not recorded, with this reason (the
 * first one). */
void lt_session_not_recorded(struct lt_session *s, const char *source, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* What `source` could not see in process `pid`, and why (a short clause):
 * the summary lists each reason under the source's row with the processes
 * it held for, so that a source that saw nothing is never read as a success.
 * Any thread may call it. */
void lt_session_unseen(struct lt_session *s, const char *source, int pid, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* `source` recorded process `pid` after all: an attempt that failed and
 * was superseded (a launched command tried before its exec, then held at
 * it) no longer names it as unseen. */
void lt_session_seen(struct lt_session *s, const char *source, int pid);

/* What `source` recorded in which processes (a short line, the last one
 * given): the summary shows it under the source's row, before what it
 * could not see. */
void lt_session_note(struct lt_session *s, const char *source, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The processes `source` could not see so far, as "pid N (why), ..." into
 * buf (cut at n); returns how many. */
unsigned lt_session_unseen_text(struct lt_session *s, const char *source, char *buf, size_t n);

/* A process left with the injected library loaded at the end (`comm`: its
 * name, printable), and why: the summary names each. Any thread may call it. */
void lt_session_kept(struct lt_session *s, int pid, const char *comm, const char *why);

/* A library log of `pid` for `source` not published at the end (or not
 * recorded in the log), where it is and why: the summary names each, the
 * events it holds being counted lost. Any thread may call it. */
void lt_session_unpublished(struct lt_session *s, const char *source, int pid, const char *path,
			    const char *why);

/* The end of the log shares a deadline for the output store (lt_mono_ms)
 * with what was published before it (the library logs, lt_im_store_by):
 * its close waits at most what is left of it now, however long the
 * collector's own work takes in between (the sources' quiesce, seconds
 * on a starved node, is not the store's); 0: LT_STORE_WAIT_S, as alone. */
void lt_session_store_by(struct lt_session *s, uint64_t mono_ms);

/* Events `source` recorded outside the ring buffer (an injected library's
 * own log): added to its row of the summary. */
void lt_session_add_events(struct lt_session *s, const char *source, uint64_t n);
/* Events `source` lost outside the ring buffer (an injected library's
 * dropped records): added to its row's lost column. */
void lt_session_add_lost(struct lt_session *s, const char *source, uint64_t n);

/* glog-style logging: I/W/E + MMDD hh:mm:ss.uuuuuu tid file:line] msg */
extern int lt_verbosity;
void lt_log(char level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Route libbpf's messages through lt_log, by verbosity (log.c). */
void lt_log_libbpf(void);
#define LT_INFO(v, ...) do { if (lt_verbosity >= (v)) lt_log('I', __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define LT_WARN(...) lt_log('W', __FILE__, __LINE__, __VA_ARGS__)
#define LT_ERR(...) lt_log('E', __FILE__, __LINE__, __VA_ARGS__)

/* The sources, each defined in its own file under collector/sources/. */
#define LT_SOURCE_EXTERN_(id, ID, bit, t, evsrc, caps) extern const struct lt_source lt_source_##id;
LT_SOURCES(LT_SOURCE_EXTERN_)
#undef LT_SOURCE_EXTERN_

#endif
