/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libllmtracker-inject.so internals. The library is loaded into a target
 * process either by CUDA (CUDA_INJECTION64_PATH -> InitializeInjection) or by
 * the collector's injector (llmt_inject_attach). It records CUDA activity
 * through CUPTI into its own event log, one per process, in a directory the
 * collector names.
 *
 * Control protocol on the AF_UNIX SOCK_SEQPACKET socket the collector holds
 * the other end of (text messages, one per packet, at most LI_MSG_MAX bytes):
 *   collector -> lib  "start KEY=VALUE ..." (+ SCM_RIGHTS: one fd per source
 *                     started, CUPTI's first, then Python's: each a write-only
 *                     fd of an empty file the collector made for that log;
 *                     the library writes into it and renames nothing)
 *                     keys: pid (host pid), host, session (32 hex digits: the
 *                           profile's id, written into each log's header),
 *                           runtime (0/1), driver (0/1),
 *                           finalize_ms, cuda (0/1), cuda_wait (0/1),
 *                           cuda_init (0/1: with cuda_wait, CUDA's own
 *                           InitializeInjection starts CUPTI, nothing else),
 *                           python (0/1), py_wait_ms, py_hold (pyhook.h),
 *                           fork (0/1: with python=1, a third fd follows, the
 *                           fork channel: forked children hand their own
 *                           log and control socket to the collector there,
 *                           "forked pid=N ppid=N" + SCM_RIGHTS [memfd,
 *                           socket]; pyhook.c "forks")
 *   lib -> collector  one reply per source asked, CUDA's first:
 *                     "ok src=cuda|python ..." | "err src=cuda|python MESSAGE";
 *                     with cuda_wait=1 and no driver loaded yet, "ok src=cuda
 *                     wait=1", and later, once the driver is loaded and CUPTI
 *                     started (or could not), "ok src=cuda file=..." | "err
 *                     src=cuda MESSAGE" unasked; "ok src=cuda launch=1" where
 *                     CUDA loaded this copy first (launch mode) and records
 *                     by it: its reports go to the launch socket
 *   collector -> lib  "stop [ms=N]" (ms: answer within N ms, whatever CUPTI
 *                     does: CUPTI's finalize is waited for only that long,
 *                     and a final flush still running then is given up)
 *   lib -> collector  "stopped kernels=N memcpy=N memset=N api=N dropped=N
 *                      finalized=0|1 kept=0..4 (LI_KEPT_*) cut=0|1
 *                      [cuda_wait=1] [py_enter=N py_exit=N ...]" (what each
 *                      source started says: cuda_wait=1, CUDA never came;
 *                      cut=1, the final flush had not ended by the stop's
 *                      ms: the log holds what came before, CUPTI stays
 *                      attached recording nothing, and the library loaded)
 * EOF on the socket (the collector died) stops collection the same way; the
 * log then stays as the collector's ".NAME.partial", every chunk readable.
 * The collector publishes the file; nothing the library says names a file.
 * Launch mode (InitializeInjection) has no start message: the command is the
 * user's own, started by the collector with its rights, and the library
 * writes and publishes its log by path in $LLMT_CUPTI_DIR (the output
 * directory, or a staging directory the collector copies it from), with
 * the session id of $LLMT_SESSION. One copy serves both ways in a process (entry.c:
 * two channels): a copy the injector loaded by the path CUDA opens, with
 * cuda_init=1, starts CUPTI at cuInit under that start, not launch mode's.
 */
#ifndef LLMT_INJECT_H
#define LLMT_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "eventlog/eventlog.h"

#define LI_API __attribute__((visibility("default")))

#define LI_MSG_MAX 2048        /* one control message, either way */

/* The start reply's reason when the process has no CUDA driver loaded (yet):
 * a process still starting may be tried again later (collector/injection/inject_mgr.c),
 * or, asked cuda_wait=1, starts CUPTI itself once it has. */
#define LI_ERR_NO_DRIVER "the process has not loaded the CUDA driver (libcuda.so.1)"

struct li_config {
	uint32_t pid;          /* pid to record events under (host view) */
	char host[256];
	uint8_t session[EVLOG_SESSION_LEN]; /* start key session / $LLMT_SESSION: the
				* profile's id, in each log's header; zero: none */
	int cupti_fd;          /* attach: the file for CUPTI's log (the collector's), or -1 */
	int py_fd;             /* attach: the file for the Python log, or -1 */
	char dir[1024];        /* launch only ($LLMT_CUPTI_DIR): where CUPTI's log goes */
	int driver;            /* 1: every driver API call too (pairs kernels launched
				* through cuLaunchKernel, e.g. cuBLAS's; costly: the runtime
				* makes ~6 driver calls per launch). Default 0 */
	int runtime;           /* runtime API calls (launch correlation): 1 = every
				* runtime call by the RUNTIME activity kind, syncs and
				* overhead (the library's default; the collector sends
				* runtime=0 unless --cuda-api-records); 0 = none:
				* kernels, copies and sets only */
	int finalize_ms;       /* how long to wait for an API exit to finalize */
	int teardown;          /* start key teardown=auto|always|never: detach CUPTI at stop
				* unless a CUDA graph ran while recording (auto, see
				* keep_cupti in cupti.c); always (unsafe with graphs); never */
	int launch;            /* loaded by CUDA at start (InitializeInjection): its log
				* by path in dir, no start message */
	int in_init;           /* CUPTI starts inside cuInit (InitializeInjection): no
				* device is queried there (the DEVICE activity tells) */
	int cuda;              /* start key cuda=0|1 (default 1): CUPTI recording */
	int cuda_wait;         /* start key cuda_wait=1: no CUDA driver loaded yet is no
				* error; CUPTI starts once it is (entry.c cuda_wait_end) */
	int cuda_init;         /* start key cuda_init=1 (with cuda_wait=1): CUPTI starts
				* only when CUDA's cuInit calls InitializeInjection in this
				* copy (launch mode, the copy loaded by that path) */
	int python;            /* start key python=0|1 (default 0): Python calls (pyhook.c) */
	int py_wait_ms;        /* start key py_wait_ms: wait this long for the interpreter
				* to finish starting before answering */
	int py_hold;           /* start key py_hold=1: a thread holding the GIL is stopped
				* by the collector, which installs through llmt_pyhook_held */
	int fork;              /* start key fork=1: forked children record into logs of
				* their own, announced on the fork channel */
	int fork_fd;           /* that channel (the start's third fd), or -1 */
};

enum { LI_TEARDOWN_AUTO, LI_TEARDOWN_ALWAYS, LI_TEARDOWN_NEVER };
/* Why CUPTI was left attached (li_stats.kept, the reply's kept=N). */
enum { LI_KEPT_NO, LI_KEPT_GRAPH, LI_KEPT_ASKED = 3, LI_KEPT_CUT }; /* 2: after launch callbacks, removed */

struct li_stats {
	uint64_t kernels, memcpys, memsets, apis, syncs, devices, dropped;
	uint64_t earlier;      /* work records left out: started before recording began */
	uint64_t untimed;      /* work records left out: CUPTI could not time them */
	int finalized;
	int kept;              /* CUPTI left attached on purpose: LI_KEPT_* */
	int cut;               /* the final flush was given up at the stop's deadline */
	char file[256];
};

/* entry.c: a forked child's own control channel on `sock` (taken), served
 * by a new thread as a started one with Python on. 0, or -errno. */
int li_chan_forked(int sock);

/* cupti.c */
int li_cupti_start(const struct li_config *cfg, char *msg, size_t msgsz);
void li_cupti_tick(void);
/* Stop: disable, flush, finalize at the next API exit (waits up to
 * cfg->finalize_ms) unless `finalize` is 0 (process exit), close the log.
 * ms > 0: return within about ms, giving up the finalize's wait and then
 * the flush (st->cut). Returns 1 if CUPTI let go of this library's code (it
 * may be unloaded), else 0. */
int li_cupti_stop(struct li_stats *st, int finalize, int ms);
int li_cupti_running(void);

#endif
