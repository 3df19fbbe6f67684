/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The output store: where the event log's files are written, which may be a
 * FUSE mount of an object store (s3fs, ossfs) or a NAS that stalls for
 * minutes. The collector never touches it itself: a writer process, forked
 * when the log is opened, does every call on it (create, write, close,
 * rename: eventlog/files.c), and takes the log's bytes from a queue in
 * memory both share. A thread blocked in a FUSE request the daemon has
 * received waits for its answer even through SIGKILL and exit, so a writer
 * thread would hold the collector's exit for as long as the store stalls
 * (docs/MEASUREMENTS.md); a process can be left behind.
 *
 * The collector's side never blocks: a chunk that finds the queue holding
 * LT_STORE_QUEUE of unwritten bytes is dropped, and the event log writer
 * counts its events as lost (by type). File headers and segment records
 * (and chunks the session marks keep) use a reserve beyond the cap. At the
 * end the collector waits at most LT_STORE_WAIT_S for the log to be
 * published; past that it exits, and the writer process goes on alone for
 * at most LT_STORE_LINGER_S more (a call blocked in the store returns when
 * the store answers or its own timeouts end it), then gives up, leaving the
 * open segment as its partial file. A writer whose collector died (SIGKILL)
 * writes what the queue holds and stops there, publishing nothing more.
 */
#ifndef LLMT_STORE_H
#define LLMT_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "eventlog/eventlog.h"

/* The longest the collector waits on the store: for it to check and
 * create the log at the start, and to publish it at the end. */
#define LT_STORE_WAIT_S 10
/* How long a writer left behind goes on trying before it gives up. */
#define LT_STORE_LINGER_S 600
/* The smallest queue cap; the default is two segments. */
#define LT_STORE_QUEUE_MIN (1ull << 20)

struct lt_store;

/* Fork the writer process for the log at path and wait (LT_STORE_WAIT_S at
 * most) for it to open the directory and create the first segment's file.
 * queue_bytes: the cap on unwritten bytes. 0, or a negative EVLOG_E* code
 * (-EVLOG_EEXIST: the log's name is taken), or -1, with err set. */
int lt_store_open(struct lt_store **out, const char *path, uint64_t queue_bytes, char *err,
		  size_t errsz);

/* The sink for evlog_writer_open_sink (ctx: the store). */
extern const struct evlog_sink lt_store_sink;

/* The log's last records follow: chunks may use the reserve too. */
void lt_store_final(struct lt_store *st);

struct lt_store_state {
	int failed;                 /* a store call failed: the log cannot go on */
	char msg[512];              /* why */
	uint64_t busy_ns;           /* how long the call in progress has taken (0: idle) */
	uint64_t longest_ns;        /* the longest call so far (the one in progress too) */
	uint64_t queued;            /* bytes given and not yet written */
	uint64_t written;           /* bytes written to the store */
	uint64_t cap;               /* the cap on queued bytes */
};
void lt_store_state(const struct lt_store *st, struct lt_store_state *out);
pid_t lt_store_pid(const struct lt_store *st);

/* Wait (wait_ms at most) for the writer to finish what it was given: 0 done
 * (the log published, or discarded after an abort), 1 still at it when the
 * wait ran out (it goes on alone, LT_STORE_LINGER_S at most; *state says
 * how far it got), -1 failed (state->msg). Frees st. */
int lt_store_close(struct lt_store *st, uint64_t wait_ms, struct lt_store_state *state);

/* In a child forked to make calls on the store (the writer, the library
 * logs' publisher: inject_pub.h), before anything else: its own session
 * and name, the terminal's signals ignored, stdin and stdout on /dev/null,
 * stderr kept only where it is a terminal or a file, and no fd of the
 * collector's but keep[0..n-1] (n <= 8), which become 3, 4, ... (keep[] is
 * updated). */
void lt_store_child(const char *name, int *keep, int n);

#endif
