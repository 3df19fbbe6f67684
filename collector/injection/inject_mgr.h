/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inject_mgr: the one manager of libllmtracker-inject.so in targets, for
 * every feature it serves: CUDA kernels (CUPTI, --enable-cuda-kernel) and
 * Python calls (the profile hook, -t python where the hook is used).
 *
 * One copy of the library per process, one control channel, one start
 * message carrying every feature the process gets and one log fd per
 * feature (protocol: inject/inject.h). Each library writes its
 * own event logs ("llmtracker-cupti.HOST.PID.*", "llmtracker-python.HOST.
 * PID.*", the profile's session id in their headers) into the log
 * directory (--cupti-dir, default: the directory of -o), which the
 * converter takes with the collector's log of the same session.
 *
 *   launch (-- CMD, CUDA): lt_im_launch_env() gives the environment for the
 *     child (CUDA_INJECTION64_PATH: CUDA calls the library itself);
 *   attach (-p PID): lt_im_attach() injects now;
 *   processes that start or appear later (the launched command's Python,
 *     children, execs): lt_im_attach_later() injects from a thread of ours
 *     once the process can take it: at its interpreter (Python hook, with
 *     CUDA asked too: the library starts CUPTI itself once CUDA is loaded)
 *     or once it has loaded CUDA (CUDA only);
 *   end: lt_im_stop() stops every library, publishes the logs (through
 *     inject_pub.h's process, within the store's bound), unloads.
 * Messages go through opts.log, one line each; what a feature could not
 * see in a process, and why, through opts.unseen.
 */
#ifndef LLMT_INJECT_MGR_H
#define LLMT_INJECT_MGR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Features (a mask). */
#define LT_IM_CUDA 1u
#define LT_IM_PYTHON 2u

struct lt_im_opts {
	unsigned features;        /* what this profile asks for (LT_IM_*) */
	const char *lib_path;     /* NULL: found next to the collector binary */
	const char *log_dir;      /* --cupti-dir; NULL or "": the directory of output */
	const char *output;       /* -o */
	const char *host;         /* NULL: the node's name */
	const uint8_t *session;   /* the profile's session id (EVLOG_SESSION_LEN bytes), or NULL */
	int api_records;          /* CUDA: CUPTI's runtime API, synchronization and
				   * overhead records too (runtime=1: costly); else
				   * kernels, copies and sets only */
	int finalize_ms;          /* CUDA: wait for an API exit to finalize CUPTI; 0 = 3000 */
	const char *start_extra;  /* "KEY=VALUE ..." appended to the start message
				   * (inject.h), e.g. $LLMT_CUPTI_START */
	int skip_driver_check;    /* CUDA even without a GPU driver on the node (tests) */
	int follow_forks;         /* Python: a hooked process's forked children record
				   * into logs of their own (inject_mgr.c "forks") */
	int launch;               /* a command is launched (-- CMD): where the log
				   * directory is on a network file system, its
				   * libraries write theirs into a staging directory
				   * of its own (lt_ilog_stage_launch) ... */
	int launch_as;            /* ... given to launch_uid:launch_gid (--user) */
	uid_t launch_uid;
	gid_t launch_gid;
	/* 'I', 'W', 'E' lines, or 'D' (details: shown under -v only), tagged with
	 * the feature they concern; NULL: stderr */
	void (*log)(unsigned feature, char level, const char *msg);
	/* a process where `feature` records nothing, and why (short); may be
	 * NULL; called from the manager's threads too */
	void (*unseen)(unsigned feature, int pid, const char *why);
	/* a process whose library stays loaded at the end (`comm`: its name),
	 * and why; may be NULL */
	void (*kept)(int pid, const char *comm, const char *why);
	/* a library log of `pid` published in the log directory: its file
	 * name, size and digest ("sha256:HEX"), for the profile's own log
	 * (EV_LIB_LOG: the converter joins only the library logs it names);
	 * may be NULL; called from lt_im_stop(), on its threads too */
	void (*published)(unsigned feature, int pid, const char *name, uint64_t size, const char *digest);
	/* a library log of `pid` not published (or, written by a launched
	 * process, not recorded): where it is, and why; for the summary. May
	 * be NULL; called from lt_im_stop() */
	void (*unpublished)(unsigned feature, int pid, const char *path, const char *why);
};

struct lt_im;

/* Find the library, make the log directory, check for a GPU driver (CUDA
 * without one: said in one line, the feature off). NULL only without
 * memory; a manager that cannot inject says why through lt_im_usable(). */
struct lt_im *lt_im_new(const struct lt_im_opts *o);
/* 1 when `feature` can be injected; else 0 and *why (static or the
 * manager's own text). */
int lt_im_usable(const struct lt_im *im, unsigned feature, const char **why);
const char *lt_im_dir(const struct lt_im *im);

/* CUDA launch mode: the variables the launched command's environment gets
 * (NULL when CUDA is not usable); lt_im_env_set/unset put them into our own
 * environment around the fork. lt_im_launched() with the child's pid. */
char *const *lt_im_launch_env(struct lt_im *im);
void lt_im_env_set(struct lt_im *im);
void lt_im_env_unset(struct lt_im *im);
void lt_im_launched(struct lt_im *im, int pid);

/* Inject into a running process now and start `feature` (with CUDA too,
 * for the Python hook, when the profile asks for both). Python: `wait_ms`
 * is how long the library waits for a starting interpreter; 0 started (msg:
 * what the library said), -errno with msg saying why. CUDA: said through
 * opts.log/unseen; 0 started. A process that already runs the library with
 * that feature: 0. */
int lt_im_attach(struct lt_im *im, int pid, unsigned feature, int wait_ms, char *msg, size_t msgsz);

/* Can `pid` take the library now (libc mapped)? */
int lt_im_ready(int pid);

/* A process followed after the start, or one that is starting. From a
 * thread of ours, bounded in time: Python when the process can take it
 * (30 s), CUDA once it has mapped the driver or CUPTI (300 s; never touched
 * otherwise; forks of a CUDA process and launch-mode processes are left
 * alone). Asked for both, one start carries both. Returns at once: 0, or
 * -E2BIG (too many waiting), -ECANCELED (lt_im_stop has run). Flags: */
#define LT_IM_FRESH 1u  /* it has just exec'd: the Python hook goes in at Py_RunMain,
			 * before the program's first instruction */
#define LT_IM_NOW 2u    /* given by -p: CUDA at once, as lt_im_attach does */
#define LT_IM_FORKED 4u /* forked by a target since the profile began: where its parent's
			 * hook follows forks, it records by itself (Python not asked) */
int lt_im_attach_later(struct lt_im *im, int pid, unsigned feature, unsigned flags);

/* Is `pid` (forked since the profile began) the child of a process whose
 * hook follows its forks? It then records by itself from its first call. */
int lt_im_follows_forks(struct lt_im *im, int pid);

/* The launched command `pid`, stopped before its execve, is about to be
 * let go: wait (up to ms) until a thread of ours holds it for its exec
 * (inject_exec.h), where the Python hook is asked for it. */
void lt_im_before_exec(struct lt_im *im, int pid, int ms);

/* Stop every library (the waiting threads end first: nothing is added
 * after), publish the logs, unload. The logs are published by a process
 * of their own (inject_pub.h), the wait for it bounded by LT_STORE_WAIT_S
 * from the stop's start (lt_im_store_by); a log not published by then is
 * said through opts.unpublished, its events counted lost (lt_im_totals).
 * Every target is asked at once and
 * waited for at once, each within its own bound (the Python hook: 1 s;
 * CUDA: 1.5 s, the library told to answer by then whatever CUPTI does);
 * the unloads then run at once too, only in targets that answered. A
 * target that did not answer keeps the library, untouched (never stopped
 * by ptrace), named through opts.kept. Once; later calls do nothing. */
void lt_im_stop(struct lt_im *im);
void lt_im_free(struct lt_im *im);

/* lt_im_stop's deadline for the output store (lt_mono_ms), which the log's
 * own end shares: 0 where it waited on no store. */
uint64_t lt_im_store_by(const struct lt_im *im);

/* Figures of lt_im_stop(), summed over targets. */
struct lt_im_totals {
	unsigned long long kernels, memcpys, memsets, apis, dropped; /* CUDA */
	int targets, finalized, unloaded;
	unsigned long long py_events;   /* Python calls and returns the hooks wrote */
	int py_later;                   /* hooks started by lt_im_attach_later */
	int py_procs;                   /* processes whose hook wrote any */
	int py_pids[8];                 /* the first of them */
	/* events of logs not published (not in py_events; CUDA: in kernels,
	 * memcpys, memsets), lost */
	unsigned long long py_unpublished, cuda_unpublished;
};
void lt_im_totals(const struct lt_im *im, struct lt_im_totals *t);

/* What the libraries have flushed to their logs so far (read from the chunk
 * headers), for the live status line; never blocks. */
struct lt_im_so_far {
	uint64_t cuda_events, python_events, bytes;
};
void lt_im_so_far(struct lt_im *im, struct lt_im_so_far *sf);

#endif
