/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA correlation in the converter, in one place:
 *
 * - CUPTI's vocabulary as the outputs spell it: copy kinds and memory kinds
 *   (Kineto's names in the trace JSON, xprof's in the XPlane), synchronization
 *   types (Kineto's, and the names older logs gave them as markers), CUPTI
 *   overhead kinds;
 * - the correlation table: which side of a launch (CUPTI's API record, a
 *   uprobe library call, GPU work) each (host, pid, correlation id) was seen
 *   on, filled in pass 1 (meta.c, launchpair.c), read in pass 2;
 * - sync binding: CUPTI's synchronization records carry no thread; pass 2
 *   puts each on the thread of the API call with its correlation id;
 * - flow ids: a launch and its GPU work get one flow id, written only when
 *   both ends exist.
 *
 * The uprobe and CUPTI records of one call are made one in dedup.c; GPU work
 * recorded without its launch is paired with the uprobes' calls in
 * launchpair.c. Both use the table here.
 */
#ifndef LLMT_CONV_CUDACORR_H
#define LLMT_CONV_CUDACORR_H

#include <stddef.h>
#include <stdint.h>

/* ----------------------------------------------------------------- names */

/* "Memcpy HtoD (Pageable -> Device)" as Kineto names a copy (trace JSON). */
const char *cv_memcpy_name(uint8_t kind, uint8_t src, uint8_t dst, char *buf, size_t bufsz);
/* A memory kind (CUpti_ActivityMemoryKind) as xprof's CUPTI collector
 * writes it in `memcpy_details` ("pageable", "device_static"). */
const char *cv_memory_kind_xprof(unsigned kind);
/* Kineto's names of a CUDA synchronization (CUpti_ActivitySynchronizationType)
 * and of a CUPTI overhead (CUpti_ActivityOverheadKind). */
const char *cv_sync_name(uint8_t kind);
const char *cv_overhead_name(uint32_t kind);
/* The synchronization type of an older log's marker name after
 * "cuda_sync:" ("stream_synchronize"); 0 (unknown) if none. */
uint8_t cv_sync_kind_of_marker(const char *s, size_t n);

#endif
