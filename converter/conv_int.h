/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The converter core's internal interface: inputs, pass-1 metadata, the
 * pass-2 spill of timeline records, and the naming helpers shared by sinks.
 */
#ifndef LLMT_CONV_INT_H
#define LLMT_CONV_INT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include "eventlog/eventlog.h"
#include "converter/sink.h"
#include "converter/cv_util.h"
#include "converter/pairing/cudacorr.h"

/* ------------------------------------------------------------------ inputs */

struct cv_log {
	char *name;         /* as shown to the user (archive!member for archives) */
	char *path;         /* as named (a member's extracted copy for archives) */
	int fd;             /* the log, opened once when found and read only through
			     * this fd (cv_log_reader): a name swapped afterwards
			     * changes nothing */
	uint32_t host;      /* index into cv_core.hosts */
	int64_t clock_off;  /* ns added to each ts to put it on its host's clock */
	int syscall_table;  /* syscall numbers follow our generated table */
	uint64_t events;    /* pass-1 count */
	int bad;            /* could not be opened in pass 1: skipped */
	int origin;         /* enum cv_origin: how it was found */
	int named;          /* the input named this very file (no directory, no archive) */
	uint32_t ns_pid;    /* written by a target in another pid namespace, whose pid
			     * there this is: its tids are mapped (cv_node_tid) */
	struct evlog_chain *chain; /* a log in segments: its files, this one last, found
			     * and checked when it was added (NULL: a log of one file) */
	struct evlog_reader_stats rs;
};

/* Where a candidate log came from. Directories of the last two are read
 * flat (not below) and quietly (they hold other files: /tmp). */
enum cv_origin {
	CV_FROM_INPUT,      /* -i / positional: a file, a directory or an archive */
	CV_FROM_CUPTI,      /* --cupti-dir */
	CV_FROM_SIBLING,    /* the directory of a main log given as a file */
};

struct cv_inputs {
	struct cv_log *logs;
	size_t n, cap;
	char *tmpdir;       /* extracted archive members live here; removed at the end */
	int tmpdir_fd;      /* that directory, open while tmpdir is set */
	uint64_t extracted; /* bytes of archive members written there so far */
	uint64_t skipped;   /* files that are not event logs */
	struct cv_buf notes; /* one line per skipped input, for the user */
};

/* Expand files, directories and archives into logs (checked for the magic).
 * `origin`: enum cv_origin. Returns 0 (even if some inputs were skipped: see
 * notes) or -1 on a fatal error (no such input, out of memory) with a
 * message in err. */
int cv_inputs_add(struct cv_inputs *in, const char *path, int origin, char *err, size_t errsz);
void cv_inputs_free(struct cv_inputs *in);

/* Open an input (a log, an archive, a directory) named `name` relative to
 * dirfd (AT_FDCWD: a path as given) without following its last component
 * when it is a symlink (unless follow) and without blocking (a FIFO):
 * other kinds (FIFO, socket, device) are not even opened. The fd with *st
 * filled (a regular file or a directory), or -1 with *why a one-line
 * reason. */
int cv_open_input(int dirfd, const char *name, int follow, struct stat *st, const char **why);
/* A reader on a log found by the inputs, through its fd (its segments'
 * too). 0, or -1 with msg. */
int cv_log_reader(const struct cv_log *l, struct evlog_reader **r, char *msg, size_t msgsz);
/* Add a log to the inputs, which own fd from then on (closed on failure). */
int cv_inputs_push(struct cv_inputs *in, const char *name, const char *path, int fd);
/* Close and free what one log holds. */
void cv_log_free(struct cv_log *l);
/* Close and forget logs [from, n) (and unlink them when they are
 * extracted archive members). */
void cv_inputs_drop_from(struct cv_inputs *in, size_t from, int unlink_them);
/* A skipped input, said to the user. */
void cv_inputs_note(struct cv_inputs *in, const char *path, const char *why);

/* If the regular file fd (not an event log) is a .tar[.gz|.zst] archive,
 * extract its event logs into in->tmpdir and add them (unarchive.c): 1.
 * 0: not an archive. -1 with err set: past a bound, or no room left in
 * TMPDIR for them (what this archive had extracted is removed). fd is
 * the caller's. */
int cv_unarchive(struct cv_inputs *in, int fd, const char *shown, char *err, size_t errsz);
/* Logs without a session id: drop --cupti-dir logs that
 * cannot belong to the profile given with -i: another host, or last written
 * before the profile started (an older run left in a shared directory such
 * as /tmp). Says what it dropped. Only logs marked `old_join` are judged. */
void cv_inputs_filter_cupti(struct cv_inputs *in, const unsigned char *old_join);

/* What a log's header says about the profile it belongs to (sessions.c). */
struct cv_head {
	int ok;                              /* the header could be read */
	int lib;                             /* written by the injected library */
	char host[256];
	uint8_t session[EVLOG_SESSION_LEN];  /* all zero: none */
	int records_libs;                    /* a main log that names its library logs */
};
struct cv_head cv_read_head(int fd, const char *name); /* fd stays the caller's */

/* The library logs main logs record (liblogs.c): name, size, digest. */
struct cv_liblog;
struct cv_liblogs {
	struct cv_liblog *v;
	size_t n, cap;
};
/* Add the records of the main log l, of `session`. 0 or -1 (memory). */
int cv_liblogs_read(struct cv_liblogs *v, const struct cv_log *l, const uint8_t *session);
/* NULL when the library log at path (shown as `shown`, whose base name is
 * its file name) is one that a main log of `session` records; else why not. */
const char *cv_liblogs_check(const struct cv_liblogs *v, const uint8_t *session, const char *shown,
			     const char *path);
void cv_liblogs_free(struct cv_liblogs *v);

/* Take exactly the logs of the profiles given (sessions.c): every main log
 * (the collector's, or any log not written by the injected library) named
 * or found in an -i directory, and the injected library's logs of their
 * sessions, found beside a main log named as a file, in -i directories or
 * in --cupti-dir. Logs of other sessions are left
 * out and named in one line; main logs without a session join
 * --cupti-dir by host and file time of --cupti-dir by host and file time, said in one line.
 * 0, or -1 with err set (library logs of several profiles and no main log
 * to choose, out of memory). */
int cv_inputs_select(struct cv_inputs *in, const char *cupti_dir, char *err, size_t errsz);

/* ---------------------------------------------------------------- metadata */

struct cv_sym {
	const char *name;   /* "" if unknown */
	const char *module; /* "" if unknown */
	uint64_t offset;
};

struct cv_track {
	enum conv_track_kind kind;
	uint32_t host;
	uint32_t a, b;      /* pid, tid or device, stream */
};

struct cv_host {
	char *name, *boot_id, *machine;
	uint64_t anchor_mono, anchor_rt;  /* the first log's anchor pair */
	uint64_t min_ts, max_ts;          /* aligned; min > max when no events */
	int syscall_table;
	struct cv_map procs;              /* pid -> index + 1 */
	struct cv_map threads;            /* (pid, tid) -> index + 1, then track */
	struct cv_map gpus;               /* device -> index + 1 */
	struct cv_map streams;            /* (device, stream) -> track + 1 */
	struct cv_map syms;               /* (pid, addr) -> struct cv_sym * */
	struct cv_map ns_tids;            /* (pid, tid in its pid namespace) -> node tid */
	struct conv_process *proc_v;
	struct conv_thread *thr_v;
	struct conv_gpu *gpu_v;
	struct evlog_event *gpu_props;    /* deep copies, per gpu index */
	size_t n_proc, n_thr, n_gpu, cap_proc, cap_thr, cap_gpu;
	struct cv_map stream_set;         /* (device, stream) seen */
	struct conv_host_meta meta;
	uint32_t track_base, n_tracks;
};

struct cv_stats {
	uint64_t read, written;
	uint64_t py_unmatched_exit, py_unclosed, py_too_deep;
	uint64_t overlaps_cut, unbound_flows, bad_time, unknown_type;
	uint64_t uretprobe;    /* the profiler's own return-probe syscalls, dropped */
	uint64_t dup_merged;   /* CUDA calls seen by a uprobe and by CUPTI, made one */
	uint64_t lost[EVSRC_MAX + 1];
	uint64_t chunks_bad, bytes_skipped, truncated_logs;
};

struct cv_core {
	struct cv_inputs in;
	struct cv_host *hosts;
	size_t n_hosts;
	struct cv_track *tracks;
	uint32_t n_tracks;
	struct cv_corr corr;              /* correlation ids seen, per side (cudacorr.h) */
	uint64_t run_base_rt;             /* earliest wall time of all hosts */
	struct cv_arena arena;
	struct cv_strtab stacks;          /* folded stacks, interned */
	struct cv_strtab names;           /* demangled / derived names */
	struct cv_map demangle_cache;     /* (hash, length of mangled) -> names index of
					    * the mangled name << 32 | of the demangled */
	struct cv_stats st;
	int progress;                     /* CV_PROGRESS_* */
	int progress_last;                /* last percentage drawn */
	const char *progress_phase;
	uint64_t progress_t0, progress_next; /* CLOCK_MONOTONIC ns: start, next line or bar */
	uint64_t total_events;
	uint64_t n_lib_calls, n_gpu_api; /* pass 1: is there anything to merge? */
	/* pass 1: the last thread registered */
	uint32_t thr_memo_host;           /* host index + 1, 0: none */
	uint32_t thr_memo_pid, thr_memo_tid;
	struct cv_lp *lp;                 /* launch links from uprobes (launchpair.h) */
	char err[512];
};

int cv_pass1(struct cv_core *c);
/* Is e a marker of llmtracker's own (metadata, not shown: eventlog.h,
 * enum evlog_marker_kind)? */
static inline int cv_is_meta_marker(const struct evlog_event *e)
{
	return e->type == EV_MARKER && e->u.marker.kind != EVLOG_MARK_NOTE;
}
/* e with its tid as the node numbers it: events of a log a target wrote in
 * another pid namespace carry that namespace's tids (CUPTI's, gettid()),
 * mapped through the collector's EVLOG_MARK_NS_TID markers (read before
 * such logs in pass 1). Returns e, or tmp holding the mapped copy. */
const struct evlog_event *cv_node_tid(const struct cv_host *h, const struct cv_log *l,
				      const struct evlog_event *e, struct evlog_event *tmp);
/* Lookup helpers after pass 1. */
const struct cv_sym *cv_sym_find(const struct cv_host *h, uint32_t pid, uint64_t addr);
void cv_core_free(struct cv_core *c);

/* Pass 2: stream every log into sorted runs and feed the sinks. */
int cv_pass2(struct cv_core *c, struct conv_sink *const *sinks, int n_sinks);

/* ------------------------------------------------------------------- names */

/* A process's track of one GPU (an event type's schema track DEVICE) is a
 * thread of its own to the outputs, named "GPU <n>", with a tid no thread
 * has (Linux's tids stay below 2^22). */
#define CV_DEVICE_TID(device) (CONV_DEVICE_TID_BIT | ((device) & ~CONV_DEVICE_TID_BIT))

/* Syscall name for nr ("syscall_<nr>" in buf when unknown). */
const char *cv_syscall_name(int table, uint32_t nr, char *buf, size_t bufsz);
/* Category string (CONTRACT §4) for a library call / API class. */
const char *cv_lib_category(uint8_t lib_class, const char *lib, char *buf, size_t bufsz);
/* Demangled C++ name (interned) or the input itself. */
const char *cv_demangle(struct cv_core *c, const char *name, size_t len);
/* Folded stacks, root first, ';'-joined; frames cleaned of ';' and newlines. */
int cv_fold_cpu(const struct cv_host *h, uint32_t pid, const struct evlog_stack *st,
		struct cv_buf *out);
int cv_fold_py(const struct evlog_pystack *st, struct cv_buf *out);

/* -------------------------------------------------------------- progress */
enum { CV_PROGRESS_NONE, CV_PROGRESS_BAR, CV_PROGRESS_LINES };
/* The mode for stderr: a bar on a terminal, plain lines elsewhere. */
int cv_progress_mode(int wanted);
/* Shows progress (nothing in the first seconds; then a bar on a terminal,
 * else a line every LLMT_PROGRESS_SECONDS, default 10);
 * -1 (c->err says why) once a stop was asked (conv_stop_signal). */
int cv_progress(struct cv_core *c, const char *phase, uint64_t done, uint64_t total);
void cv_progress_end(struct cv_core *c);

#endif
