/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pyhook: Python function calls from inside the interpreter (CPython
 * 3.9-3.13), far cheaper than the USDT probes.
 *
 * Runs inside the target (libllmtracker-inject.so). It finds CPython's C
 * API in the process (dlsym; no link-time libpython) and, under the GIL,
 * registers as a sys.monitoring tool (3.12+: a free tool id other than the
 * debugger's, coverage's, the profiler's and the optimizer's; every thread
 * at once) or installs a C-level profile function on every thread state
 * (3.9-3.11, or when monitoring refuses), and writes
 * EV_PY_ENTER / EV_PY_EXIT events into its own event log, one per process,
 * in the one file the collector made for it ("llmtracker-python.HOST.PID.*").
 *
 * Control, from the library's control thread (entry.c):
 *   li_pyhook_start()  resolve, open the log, install (or wait for
 *                      Py_IsInitialized when the interpreter is starting;
 *                      with py_hold=1 leave it to li_pyhook_held);
 *   li_pyhook_held()   (not the control thread: the program's own thread
 *                      held at Py_RunMain) install there, self included;
 *   li_pyhook_tick()   every ~200 ms: install if it was waiting, cover
 *                      threads created since (profile function), let the
 *                      log reach disk;
 *   li_pyhook_drain()  every LI_PYHOOK_DRAIN_MS while running: encode the
 *                      events the callbacks left in the ring into the log;
 *   li_pyhook_stop()   unregister the tool, or remove the profile function
 *                      from every thread, under the GIL, drop the
 *                      code-object cache, publish the log.
 * Messages follow inject.h: "ok cpython=X.Y ... events=sys.monitoring|profile" / "err ...", and
 * "stopped py_enter=N py_exit=N threads=N busy=N dropped=N inline=N removed=0|1 log=ok|failed
 * events=sys.monitoring|profile". The
 * log is the file the collector made (an fd, li_config.py_fd).
 */
#ifndef LLMT_PYHOOK_H
#define LLMT_PYHOOK_H

#include <stddef.h>

struct li_config;

/* 0 and "ok ..." in msg, or -errno and "err ..." (the target untouched). */
int li_pyhook_start(const struct li_config *cfg, char *msg, size_t msgsz);
#define LI_PYHOOK_DRAIN_MS 20
void li_pyhook_drain(void);
void li_pyhook_tick(void);
/* Stop; `at_exit`: the process is exiting (no GIL is taken). Returns 1 if
 * nothing of this library can be called by the interpreter any more (it
 * may be unloaded), else 0. msg gets the "stopped ..." line. */
int li_pyhook_stop(int at_exit, char *msg, size_t msgsz);
int li_pyhook_running(void);
/* On the control thread: say in the log that this thread is ours
 * (EVLOG_MARK_OWN_THREAD). */
void li_pyhook_mark_own(void);

/* On a program thread that holds the GIL, stopped by the collector (start
 * key py_hold=1): install now, on that thread too. 0, or negative errno. */
int li_pyhook_held(void);

#endif
