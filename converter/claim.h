/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The state of one unit of `llmtracker-convert batch` (a directory of its
 * own under <logdir>/.llmtracker-batch/), and the claim that makes one
 * worker of many convert it. The protocol, and why it holds on local disks,
 * NFS and object-store mounts, is described at the top of claim.c.
 */
#ifndef LLMT_CONV_CLAIM_H
#define LLMT_CONV_CLAIM_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#define WID_MAX 96  /* a worker id: "<host>-<pid>-<8 hex>", no '.' */

/* What one listing of a unit's directory says. */
struct ustate {
	int done;            /* "done": converted and published */
	int failed;          /* "failed": the last attempt allowed failed */
	unsigned failed_n;   /* highest n of the "failed.<n>" records */
	int publishing;      /* some "publishing.<wid>": outputs may be in the run */
	int too_many;        /* more entries than are read: treated as busy */
	/* the protocol's files (claim.c) */
	struct seen *leases, *intents;
	size_t n_leases, cap_leases, n_intents, cap_intents;
	uint64_t max_ticket;
};

/* List the unit directory `key` under statefd into s (freed by
 * ustate_free). 0, or -1 with errno (ENOENT: no state yet). */
int ustate_read(int statefd, const char *key, struct ustate *s);
void ustate_free(struct ustate *s);

/* Is a lease of a worker other than `wid` live in s (now, ms)? */
int ustate_busy(const struct ustate *s, const char *wid, int64_t now);

/* Wall-clock milliseconds: lease times are compared across hosts. */
int64_t claim_now_ms(void);

struct claim {
	int statefd;
	char key[NAME_MAX + 1], wid[WID_MAX + 1];
	int64_t lease_ms;
	uint64_t ticket;
	char lease_name[2][NAME_MAX + 1]; /* the last two written, newest first */
	int64_t exp_ms;                   /* when the newest one runs out */
	int lost;
	char took_from[WID_MAX + 1];      /* a worker whose lease ran out, if any */
	int publishing;                   /* as ustate, at the winning listing */
	/* renewals */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, th_ok;
};

/* Try to become the unit's only converter. 1: ours (renewed by a thread
 * until claim_release), 0: another worker has it or it is settled, 2:
 * undecided (others were still choosing when we gave up, or we were too
 * slow to keep our lease: worth another try), -1: error with errno. */
int claim_take(struct claim *c, int statefd, const char *key, const char *wid,
	       int64_t lease_ms);

/* Still ours, by our own clock, with a quarter of the lease to spare? A
 * worker publishes only while this holds. */
int claim_held(struct claim *c);

/* Stop renewing and remove our lease files. */
void claim_release(struct claim *c);

/* Remove the leases and intents of other workers that ran out, and when
 * `done` every "publishing.*" marker. */
void claim_tidy(int statefd, const char *key, const char *wid, int done);

/* Create `name` in the unit's directory with `text`, never replacing a
 * file (O_EXCL); its content is information only, its existence the fact.
 * 0, or -1 with errno. */
int ustate_write(int statefd, const char *key, const char *name, const char *text);

/* Remove a file of the unit's directory. */
void ustate_remove(int statefd, const char *key, const char *name);

#endif
