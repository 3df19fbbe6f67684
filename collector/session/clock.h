/* SPDX-License-Identifier: Apache-2.0 */
/* The collector's one clock for waits and deadlines: CLOCK_MONOTONIC, the
 * clock of every event (bpf_ktime_get_ns). Header-only: the injector's
 * static test tool links without the rest of the collector. */
#ifndef LLMT_CLOCK_H
#define LLMT_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t lt_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t lt_mono_ms(void) { return lt_mono_ns() / 1000000; }

#endif
