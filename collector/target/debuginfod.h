/* SPDX-License-Identifier: Apache-2.0 */
/*
 * debuginfod: separate debug files by build-id from the debuginfod servers
 * the collector's environment names (DEBUGINFOD_URLS), for objects that are
 * stripped and have no debug file inside their target's root.
 *
 * Only when DEBUGINFOD_URLS is set and not empty; elfutils' client library
 * (libdebuginfod.so.1) is loaded at the first lookup, and its absence is an
 * error message, not a failure. The file comes from the client's cache on
 * the node (DEBUGINFOD_CACHE_PATH, else ~/.cache/debuginfod_client),
 * downloaded there when missing: a node file, never one of the target's;
 * the caller checks its build-id before using it. Each build-id is asked
 * once (found or not); a lookup is cut at LT_DBGD_LOOKUP_S and all of them
 * together at LT_DBGD_TOTAL_S, after which the rest are skipped. Lookups
 * wanted while a profile runs (the unwinder's CFI) are made by a thread of
 * their own (lt_dbgd_request), never by the caller.
 */
#ifndef LLMT_DEBUGINFOD_H
#define LLMT_DEBUGINFOD_H

#include <stdint.h>

#define LT_DBGD_LOOKUP_S 30    /* one debug file: a big library's is GBs */
#define LT_DBGD_TOTAL_S 120    /* all of a profile's lookups */
#define LT_DBGD_MAX_IDS 4096   /* build-ids remembered (beyond: skipped) */

struct lt_dbgd;

/* NULL when DEBUGINFOD_URLS is unset or empty (or out of memory). */
struct lt_dbgd *lt_dbgd_new(void);
void lt_dbgd_free(struct lt_dbgd *d);

/* A read-only fd (the caller closes it) of the debug file for build_id
 * (lower-case hex), or -errno: -ENOENT no server has it (or asked before
 * without success), -ETIME the time was up, -ENOSYS the client library is
 * unavailable. Blocks up to LT_DBGD_LOOKUP_S. */
int lt_dbgd_find(struct lt_dbgd *d, const char *build_id);

/* The same without waiting: the fd when the answer is known (-ENOENT: no
 * file), else -EINPROGRESS and the lookup is made by a thread of ours
 * (started at the first request); lt_dbgd_completed() counts those that
 * found a file, so that a caller can tell when to ask again. */
int lt_dbgd_request(struct lt_dbgd *d, const char *build_id);
uint64_t lt_dbgd_completed(struct lt_dbgd *d);

struct lt_dbgd_stats {
	uint64_t found, missed;          /* build-ids: a file, none */
	uint64_t timed_out, skipped;     /* cut at the time allowed, not asked (time up) */
	uint64_t ns;                     /* spent in lookups */
	const char *error;               /* why the client is unavailable, or NULL */
};
void lt_dbgd_stats(struct lt_dbgd *d, struct lt_dbgd_stats *st);

#endif
