/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_log: the event-log files the collector makes for an injected
 * library (collector/inject/), one per target and source.
 *
 * The library gets an fd of one private staging file and nothing else: no
 * directory, no path that leads up. The collector creates ".NAME.partial"
 * in its output directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, never over
 * anything there), keeps a read fd of its own, and passes a write-only fd
 * in the "start" message. Nothing the target ever held is published: once
 * the library has said "stopped" or the target is gone, the collector
 * copies what the file holds then (through its own fd, at most
 * LT_ILOG_MAX_BYTES) into ".NAME.copy", a file it creates itself (0644 by
 * fchmod, its own owner), syncs it, publishes that under NAME (never over
 * anything) and removes the staging file. Whatever the target does with its
 * fd afterwards (write on, fchmod, ftruncate) reaches only the staging file.
 * The copy's size and SHA-256 go into the collector's own log (EV_LIB_LOG),
 * which is how the converter knows the file is this profile's. NAME comes
 * from the collector's own state only; nothing the library says picks or
 * changes a file. A collector that dies leaves ".NAME.partial", every chunk
 * the library flushed readable.
 */
#ifndef LLMT_INJECT_LOG_H
#define LLMT_INJECT_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/digest.h"

/* The most of a staging file published: a target can make its file as
 * large (or sparse) as it likes; a real log this large is cut there, said
 * in a line, the reader keeping its complete chunks. */
#define LT_ILOG_MAX_BYTES (64ull << 30)

struct lt_ilog {
	char name[192];        /* PREFIX.HOST.PID.STAMP.NS.evlog */
	char partial[208];     /* ".NAME.partial", the target's */
	char copy[208];        /* ".NAME.copy", ours, published as NAME */
	dev_t dev;             /* the staging file we made */
	ino_t ino;
	int rfd;               /* our read fd of it (valid while live) */
	int live;              /* made, neither published nor dropped */
	uint64_t size;         /* published: the bytes of NAME */
	int capped;            /* published: cut at LT_ILOG_MAX_BYTES */
	char digest[8 + LT_SHA256_HEX]; /* published: "sha256:HEX" of NAME */
	int tail_fd;           /* lt_ilog_events_so_far's own read fd (>= 3; 0: none) */
	uint32_t pid_from, pid_to; /* publish with every event of pid_from as pid_to's (a fork
				    * in a container wrote its own pid there, not the node's); 0: as is */
	uint64_t tail_off;     /* ... the next chunk header's offset */
	uint64_t tail_events;  /* ... and the events of the chunks before it */
};

/* The output directory, opened once (the collector keeps it; it is never
 * handed to a target). fd or -errno. */
int lt_ilog_dir(const char *dir);

/* Make the staging file for `prefix` ("llmtracker-cupti", ...) of `pid`.
 * Returns a write-only O_CLOEXEC fd of it for the library (the caller closes
 * its copy once sent), or -errno with err set. */
int lt_ilog_create(struct lt_ilog *l, int dirfd, const char *prefix, const char *host, int pid,
		   char *err, size_t errsz);

/* The events in the chunks the library has flushed so far, read from their
 * headers (only the ones new since the last call, at most a few per call),
 * for the live status line. The target writes the file: a forged header can
 * only make this display number wrong; the converter checks every chunk. */
uint64_t lt_ilog_events_so_far(struct lt_ilog *l);
void lt_ilog_tail_close(struct lt_ilog *l);

/* Publish a copy under the final name: 1 published (l->size, l->digest),
 * 0 dropped (empty: the library wrote no header), -errno: nothing published,
 * the staging file kept as ".NAME.partial" (err says why). */
int lt_ilog_publish(struct lt_ilog *l, int dirfd, char *err, size_t errsz);

/* A forked child's log comes in a memfd of its own (inject_mgr.c "forks"):
 * append what `src` holds past *off (up to LT_ILOG_MAX_BYTES in all) to the
 * staging file through `dst` (lt_ilog_create's fd, kept by the collector),
 * then free what was copied in src (its pages, punched out). 0 or -errno. */
int lt_ilog_feed(int dst, int src, uint64_t *off);

/* The library may still write it: leave ".NAME.partial" as it is. */
void lt_ilog_keep(struct lt_ilog *l);

/* The library never started: remove the staging file if it is still ours
 * and empty (anything written stays, as ".NAME.partial"). */
void lt_ilog_drop(struct lt_ilog *l, int dirfd);

/* A log the library published itself (launch mode: the user's own command,
 * started by the collector with its rights, names and publishes its log):
 * `name` in dirfd, a plain "llmtracker-cupti.*.evlog" name, a regular file.
 * Its size and "sha256:HEX" as they are now, for the collector's log.
 * 0, or -errno with err set. */
int lt_ilog_describe(int dirfd, const char *name, uint64_t *size, char *digest, size_t digestsz,
		     char *err, size_t errsz);

#endif
