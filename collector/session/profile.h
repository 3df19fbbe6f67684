/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Session mechanics (session.c) used by the profile flow (profile.c):
 * creating the shared maps, starting and stopping the sources, polling the
 * ring buffer, the lost-event table and the end summary.
 */
#ifndef LLMT_PROFILE_H
#define LLMT_PROFILE_H

#include "session.h"

void lt_session_init(struct lt_session *s, const struct lt_options *opt);
/* Open the event log (partial file until closed). cmdline: our own argv. */
int lt_session_open_log(struct lt_session *s, const char *cmdline);
/* Create targets, events (ring buffer sized from --cpu-buffer-size) and lost. */
int lt_session_create_maps(struct lt_session *s);
/* Start proc and every source -t asks for. -t all: an unavailable source
 * warns and the rest go on. 0 or -1 with s->err set. */
int lt_session_start_sources(struct lt_session *s);
/* Poll the ring buffer up to timeout_ms; <0 only on a hard error. */
int lt_session_poll(struct lt_session *s, int timeout_ms);
/* The output store, from the main loop: a failed store stops the profile,
 * a stall is said (once, and when it ends); count_lost: write the events
 * the store could not take as EV_LOST. */
void lt_session_store_tick(struct lt_session *s, bool count_lost);
/* Write an EV_CLOCK anchor now. */
int lt_session_emit_clock(struct lt_session *s);
/* Tell the started sources about a target (after exec too); the map is not touched. */
void lt_session_notify_target(struct lt_session *s, int pid);
/* finish() every source, drain the ring buffer, write EV_LOST. */
void lt_session_finish(struct lt_session *s);
/* Detach every source (safe on every exit path, idempotent), free the maps. */
void lt_session_stop(struct lt_session *s);
/* Publish the log (its last segment) and wait for the store writer
 * (LT_STORE_WAIT_S at most). 0 or -1 with s->err set. */
int lt_session_close_log(struct lt_session *s);
/* Discard an unfinished log (error before anything was profiled). */
void lt_session_abort_log(struct lt_session *s);
/* Events and lost events per source, bytes written, output path. */
/* One status line for the user while recording: events (per source), MB
 * written, lost. 0, or -1 if cut short. */
int lt_session_status(struct lt_session *s, char *buf, size_t n);
void lt_session_summary(struct lt_session *s, double seconds, const char *extra);
/* Free what the session still holds (after stop and close/abort). */
void lt_session_free(struct lt_session *s);

/* The whole `llmtracker profile` run (profile.c). Returns the exit status. */
int lt_profile(const struct lt_options *opt, const char *cmdline);

#endif
