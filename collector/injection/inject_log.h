/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_log: the event-log files the collector makes for an injected
 * library (inject/), one per target and source.
 *
 * The library gets an fd of one private staging file and nothing else: no
 * directory, no path that leads up. The collector creates ".NAME.partial"
 * (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, never over anything there) in the
 * staging directory: the output directory itself where that is on a local
 * file system, else a directory of its own on a local disk
 * ($TMPDIR/llmtracker-stage.XXXXXX, 0700), so that neither the target's
 * writes nor its close (an object-store mount uploads the whole file at
 * close) ever wait for the store. It keeps a read fd of its own and passes
 * a write-only fd in the "start" message. Nothing the target ever held is
 * published: once the library has said "stopped" or the target is gone,
 * the size the file has then is sealed, and the library logs' publisher
 * process (inject_pub.h) copies that much (at most LT_ILOG_MAX_BYTES) into
 * ".NAME.copy" in the output directory, a file it creates itself (0644 by
 * fchmod, its own owner), syncs it, publishes that under NAME (never over
 * anything); the collector then removes the staging file. Whatever the
 * target does with its fd afterwards (write on, fchmod, ftruncate) reaches
 * only the staging file. The copy's size and SHA-256 go into the
 * collector's own log (EV_LIB_LOG), which is how the converter knows the
 * file is this profile's. NAME comes from the collector's own state only;
 * nothing the library says picks or changes a file. (A launched command's
 * libraries write their logs by path instead: lt_ilog_stage_launch,
 * lt_ilog_copy_staged.) A collector that dies,
 * or whose publisher the store did not answer in time, leaves
 * ".NAME.partial" in the staging directory, every chunk the library
 * flushed readable.
 */
#ifndef LLMT_INJECT_LOG_H
#define LLMT_INJECT_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/digest.h"

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
	int rfd;               /* our read fd of it (valid while live: the file, and its
				* inode number, stay ours while we hold it) */
	int live;              /* made, neither published nor dropped */
	uint64_t len;          /* sealed: the bytes of it to publish */
	int capped;            /* sealed: cut at LT_ILOG_MAX_BYTES */
	uint64_t size;         /* published: the bytes of NAME */
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

/* Where the staging files of the output directory `dir` (outfd) go: a new
 * fd of that directory, its path in `path`. Where dir is on a network file
 * system (lt_fs_network: *kind its name, else NULL), a directory of ours
 * made on a local disk, $TMPDIR (default /var/tmp)/llmtracker-stage.XXXXXX,
 * mode 0700. fd, or -errno with err set. */
int lt_ilog_stage(const char *dir, int outfd, char *path, size_t pathsz, const char **kind,
		  char *err, size_t errsz);

/* Done with the staging directory: closed, and removed where it is ours and
 * empty (a staging file kept in it keeps it). */
void lt_ilog_unstage(int stagefd, const char *path, int ours);

/* Launch mode with the output directory `dir` on a network file system
 * (`kind`): the directory a launched command's libraries write their logs
 * into by path themselves ($LLMT_CUPTI_DIR), made as lt_ilog_stage's (mode
 * 0700) and then given to uid:gid, the user the command runs as ((uid_t)-1:
 * left the collector's). fd, or -errno with err set. */
int lt_ilog_stage_launch(const char *dir, const char *kind, uid_t uid, gid_t gid, char *path,
			 size_t pathsz, char *err, size_t errsz);

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

/* The library is done with the file: what it holds now is what gets
 * published (l->len, l->capped). 1 to publish, 0 empty (the library wrote
 * no header: drop it), -errno with err set (kept as it is). */
int lt_ilog_seal(struct lt_ilog *l, char *err, size_t errsz);

/* The publisher's part (inject_pub.c), for a sealed log: its copy made in
 * outfd (the staging file opened by name in stagefd, checked to be the
 * file made), synced and hashed (l->size, l->digest): 0 or -errno with err
 * set, nothing left. Then its name: 0 published, -errno with err set (the
 * copy removed; -EEXIST: NAME exists, never replaced). Given up between
 * the two, the copy is removed (uncopy); after, the published name (unname). */
int lt_ilog_copy(struct lt_ilog *l, int stagefd, int outfd, char *err, size_t errsz);
int lt_ilog_name(struct lt_ilog *l, int outfd, char *err, size_t errsz);
void lt_ilog_uncopy(const struct lt_ilog *l, int outfd);
void lt_ilog_unname(const struct lt_ilog *l, int outfd);

/* Published: the staging file removed (if still the one made), our fd closed. */
void lt_ilog_published(struct lt_ilog *l, int stagefd);

/* The publisher's part for a log a launched process published itself in
 * lt_ilog_stage_launch's directory (dirfd): l->name there, which its user
 * owns and may have swapped for anything. Taken only if it is a regular
 * file of `owner`'s: looked at without following a link, opened with
 * O_NOFOLLOW|O_NONBLOCK (no FIFO or lease waits), checked again on the fd
 * and its size then sealed (l->len, at most LT_ILOG_MAX_BYTES); copied
 * through that fd only, as lt_ilog_copy does (l->dev, l->ino: the file
 * copied). Then lt_ilog_name. 0, or -errno with err set, nothing left. */
int lt_ilog_copy_staged(struct lt_ilog *l, int dirfd, uid_t owner, int outfd, char *err, size_t errsz);

/* Published: that file removed, if its name still is the file copied. */
void lt_ilog_staged_done(int dirfd, const char *name, dev_t dev, ino_t ino);

/* A forked child's log comes in a memfd of its own (inject_mgr.c "forks"):
 * append what `src` holds past *off (up to LT_ILOG_MAX_BYTES in all) to the
 * staging file through `dst` (lt_ilog_create's fd, kept by the collector),
 * then free what was copied in src (its pages, punched out). 0 or -errno. */
int lt_ilog_feed(int dst, int src, uint64_t *off);

/* The library may still write it, or it is not published: leave
 * ".NAME.partial" as it is. */
void lt_ilog_keep(struct lt_ilog *l);

/* The library never started: remove the staging file if it is still ours
 * and empty (anything written stays, as ".NAME.partial"). */
void lt_ilog_drop(struct lt_ilog *l, int dirfd);

/* "llmtracker-cupti." ... ".evlog", one plain component shorter than
 * lt_ilog.name: a name a launched process's library may give its log. */
int lt_ilog_name_ok(const char *name);

/* A log the library published itself in the output directory (launch mode
 * on a local file system: the user's own command, started by the collector
 * with its rights, names and publishes its log):
 * `name` in dirfd, a plain "llmtracker-cupti.*.evlog" name, a regular file.
 * Its size and "sha256:HEX" as they are now, for the collector's log.
 * 0, or -errno with err set. */
int lt_ilog_describe(int dirfd, const char *name, uint64_t *size, char *digest, size_t digestsz,
		     char *err, size_t errsz);

#endif
