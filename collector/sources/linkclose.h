/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Uprobe links closed off the main loop. Closing one waits for the kernel's
 * grace periods: a short-lived process with a few libraries armed held the
 * loop long enough for the next exec'd interpreter to run to its end unseen
 * (docs/MEASUREMENTS.md, arming library probes). A thread closes them instead.
 */
#ifndef LLMT_LINKCLOSE_H
#define LLMT_LINKCLOSE_H

struct bpf_link;

/* Close link (may be NULL) and fd (may be -1), later, on the closer's thread
 * (here and now if that thread cannot start). */
void lt_close_later(struct bpf_link *link, int fd);

/* Return once everything handed over is closed, closing on several threads.
 * A source's stop calls it: links left to our exit are closed one by one,
 * and some after we are gone (a USDT semaphore was still raised when the
 * collector had been reaped). */
void lt_close_drain(void);

#endif
