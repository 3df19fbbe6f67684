/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector's side of the control socket to libllmtracker-inject.so
 * (protocol in inject/inject.h): one-line text messages
 * "verb key=value ...", the "start" one carrying the log files the collector
 * made for the library as fds (collector/injection/inject_log.h): the library needs no
 * path of ours and gets no directory.
 *
 * Everything that comes back is the target's and untrusted: replies are cut
 * at the buffer, bytes that are not printable ASCII become '?', numbers are
 * parsed with a bound, and no wait is longer than the caller's deadline, so a
 * target that floods the socket or stops answering cannot hold us.
 */
#ifndef LLMT_INJECT_CTL_H
#define LLMT_INJECT_CTL_H

#include <stddef.h>

/* The most fds one message carries (one log per source, the fork channel). */
#define LT_ICTL_MAX_FDS 3

/* Send `msg` with nfds fds (never blocks). 0 or -errno. */
int lt_ictl_send(int sock, const char *msg, const int *fds, int nfds);

/* One reply within ms: its length, 0 on EOF, -ETIMEDOUT. NUL-terminated,
 * printable. */
int lt_ictl_recv(int sock, char *buf, size_t len, int ms);

/* Replies until one starts with `verb`, within ms in all: its length, 0 on
 * EOF, -ETIMEDOUT (also after too many other messages). */
int lt_ictl_await(int sock, const char *verb, char *buf, size_t len, int ms);

/* The numeric value of " key=" in msg (digits only, capped at 2^48), 0 if
 * absent. */
unsigned long long lt_ictl_field(const char *msg, const char *key);

/* "err pid=N text" -> "text" */
const char *lt_ictl_text(const char *msg);

#endif
