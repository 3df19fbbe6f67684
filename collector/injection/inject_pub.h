/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_pub: the process that publishes the injected libraries' logs
 * (inject_log.h) into the log directory, which may be a mount of an object
 * store or a NAS that stalls for minutes. The collector makes no call on
 * that directory at the end itself: a call blocked in a FUSE request holds
 * even SIGKILL and exit (store.h), and the collector must end within its
 * bound. The process is forked when the manager starts, before any thread
 * of ours, with the log directory and the staging directories; each request
 * (a sealed log to copy, sync and publish; a log a launched process
 * published itself, to hash where it is, or to copy from its staging
 * directory and publish) goes through memory both share, one slot each,
 * and is answered there.
 *
 * The collector waits for the answers until one deadline (lt_im_stop: the
 * store's bound, LT_STORE_WAIT_S) and gives up on the rest. A log given up
 * on is never left under its final name: the process takes no request
 * given up, removes the copy it was making once the store answers, or the
 * final name if its rename was under way then; the staging file stays
 * where it is, the collector names it. A process whose collector died
 * publishes nothing more. It exits once the collector is done with it and
 * its call in progress has returned.
 */
#ifndef LLMT_INJECT_PUB_H
#define LLMT_INJECT_PUB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "inject_log.h"

/* Requests in one profile: every target's two logs, and as many logs of
 * launched processes (inject_mgr.c IM_MAX: 256 targets). */
#define LT_IPUB_MAX 1024

struct lt_ipub;

/* Where the publisher works (the collector keeps its own fds). */
struct lt_ipub_dirs {
	int outfd;                     /* the output directory */
	int stagefd;                   /* the staging directory (lt_ilog_stage) */
	const char *stage;             /* ... its path: named in what it says once left alone */
	int launchfd;                  /* a launched command's (lt_ilog_stage_launch), or -1 */
	const char *launch;            /* ... its path */
	uid_t owner;                   /* ... the user whose files are taken there */
};

/* Fork the publisher. 0, or -errno with err set. */
int lt_ipub_start(struct lt_ipub **out, const struct lt_ipub_dirs *dirs, char *err, size_t errsz);
pid_t lt_ipub_pid(const struct lt_ipub *p);

/* A request: a ticket (>= 0), or -ENOSPC (LT_IPUB_MAX reached). Never blocks;
 * from any thread. Publish: a log lt_ilog_seal said to publish (the caller
 * keeps it open until answered). Describe: lt_ilog_describe of `name` in
 * the output directory. Fetch: `name` in the launched command's staging
 * directory, published by lt_ilog_copy_staged and lt_ilog_name. */
int lt_ipub_publish(struct lt_ipub *p, const struct lt_ilog *l);
int lt_ipub_describe(struct lt_ipub *p, const char *name);
int lt_ipub_fetch(struct lt_ipub *p, const char *name);

struct lt_ipub_res {
	int rc;                        /* 0 done, -errno (err says why) */
	uint64_t size;                 /* done: the bytes of the log */
	char digest[8 + LT_SHA256_HEX]; /* ... its "sha256:HEX" */
	int capped;                    /* fetch done: cut at LT_ILOG_MAX_BYTES */
	uint64_t dev, ino;             /* ... the staged file copied */
	char err[600];
};

/* The answer to `ticket`, waited for until deadline_ms (lt_mono_ms): 1
 * answered (*res), 0 not by then: given up (never published). */
int lt_ipub_result(struct lt_ipub *p, int ticket, uint64_t deadline_ms, struct lt_ipub_res *res);

/* Done: every request not answered is given up; the process ends once its
 * call in progress returns (reaped here if it already has). Frees p. */
void lt_ipub_close(struct lt_ipub *p);

#endif
