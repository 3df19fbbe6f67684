/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pyhook_attach: Python function calls for targets whose interpreter has no
 * USDT function probes (-t python falls back to it). The inject library is
 * loaded into the target (collector/injector.h) and started with
 * "start cuda=0 python=1 ..."; it installs a C-level profile function and
 * writes its own event log ("llmtracker-python.HOST.PID.*.evlog", the
 * profile's session id in its header) into the log directory (--cupti-dir,
 * default: the directory of -o), which the converter takes with the
 * collector's log of the same session, like the CUPTI logs. At the end
 * the library removes the profile function from every thread under the GIL,
 * publishes its log and is unloaded.
 */
#ifndef LLMT_PYHOOK_ATTACH_H
#define LLMT_PYHOOK_ATTACH_H

#include <stddef.h>
#include <stdint.h>

struct lt_pyhook;

/* The library next to the collector, the log directory and the session id
 * (EVLOG_SESSION_LEN bytes; NULL: none). NULL (and err) if the library
 * cannot be found or the directory cannot be made. */
struct lt_pyhook *lt_pyh_new(const char *log_dir, const char *output, const uint8_t *session,
			     char *err, size_t errsz);

/* Inject into `pid` and start. `wait_ms`: how long the library waits for a
 * starting interpreter before answering. 0 started (msg: what the library
 * said), -errno otherwise with msg saying why; the target is as it was. */
int lt_pyh_attach(struct lt_pyhook *ph, int pid, int wait_ms, char *msg, size_t msgsz);

/* Can `pid` be injected now (its libc is mapped)? */
int lt_pyh_ready(int pid);

/* A process that is starting (launch form, an exec, a followed child):
 * attach from a thread of ours as soon as the process can take it (libc
 * mapped; a thread asleep in a system call, or one stopped at a CPython
 * function entry), within 30 s; the library then waits up to 5 s for the
 * interpreter to finish starting. `fresh` (it has just exec'd): first at
 * Py_RunMain's entry, installed there before the program's first Python
 * instruction. Success and failure are said through `log`, and where it
 * did not go in, why through `unseen` (both called from that thread). */
int lt_pyh_attach_later(struct lt_pyhook *ph, int pid, int fresh, void (*log)(char level, const char *msg),
			void (*unseen)(int pid, const char *why));

/* Stop every target, unload the library where it lets go. One line per
 * target through `log` ('I' or 'W'). Returns how many attaches made by
 * lt_pyh_attach_later() had started. */
int lt_pyh_stop(struct lt_pyhook *ph, void (*log)(char level, const char *msg));
/* Python events (calls and returns) the stopped hooks said they wrote into
 * their logs: the python source's count in the summary. */
uint64_t lt_pyh_events(const struct lt_pyhook *ph);
void lt_pyh_free(struct lt_pyhook *ph);

/* Is `pid` hooked (started)? */
int lt_pyh_has(struct lt_pyhook *ph, int pid);
const char *lt_pyh_dir(const struct lt_pyhook *ph);

#endif
