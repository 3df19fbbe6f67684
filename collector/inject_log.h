/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_log: the event-log files the collector makes for an injected
 * library (collector/inject/), one per target and source.
 *
 * The library gets an fd of one file and nothing else: no directory, no
 * path that leads up. The collector creates ".NAME.partial" in its output
 * directory (O_CREAT|O_EXCL|O_NOFOLLOW, never over anything there), passes
 * a write-only fd of it in the "start" message, and publishes it by name
 * (renameat2 RENAME_NOREPLACE) once the library has said "stopped" or the
 * target is gone. NAME comes from the collector's own state only; nothing
 * the library says picks or changes a file. A collector that dies leaves
 * ".NAME.partial", every chunk the library flushed readable.
 */
#ifndef LLMT_INJECT_LOG_H
#define LLMT_INJECT_LOG_H

#include <stddef.h>
#include <sys/types.h>

struct lt_ilog {
	char name[192];        /* PREFIX.HOST.PID.STAMP.NS.evlog */
	char partial[208];     /* ".NAME.partial" */
	dev_t dev;             /* the file we made: publish only that one */
	ino_t ino;
	int live;              /* made, neither published nor dropped */
};

/* The output directory, opened once (the collector keeps it; it is never
 * handed to a target). fd or -errno. */
int lt_ilog_dir(const char *dir);

/* Make the partial file for `prefix` ("llmtracker-cupti", ...) of `pid`.
 * Returns a write-only O_CLOEXEC fd of it for the library (the caller closes
 * its copy once sent), or -errno with err set. */
int lt_ilog_create(struct lt_ilog *l, int dirfd, const char *prefix, const char *host, int pid,
		   char *err, size_t errsz);

/* Publish under the final name: 1 published, 0 dropped (empty: the library
 * wrote no header), -errno kept as ".NAME.partial" (err says why). */
int lt_ilog_publish(struct lt_ilog *l, int dirfd, char *err, size_t errsz);

/* The library never started: remove the partial file if it is still ours
 * and empty (anything written stays, as ".NAME.partial"). */
void lt_ilog_drop(struct lt_ilog *l, int dirfd);

#endif
