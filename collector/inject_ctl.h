/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector's side of the control socket to libllmtracker-inject.so
 * (protocol in collector/inject/entry.c): one-line text messages
 * "verb key=value ...", the first one carrying the log directory as an fd so
 * the target needs no path of ours (it may live in another mount namespace).
 */
#ifndef LLMT_INJECT_CTL_H
#define LLMT_INJECT_CTL_H

#include <stddef.h>

/* Send `msg`, with `dir` (opened here) as an fd if dir is non-NULL and
 * opens. 0 or -errno. */
int lt_ictl_send(int sock, const char *msg, const char *dir);

/* One reply within ms: its length, 0 on EOF, -ETIMEDOUT. NUL-terminated. */
int lt_ictl_recv(int sock, char *buf, size_t len, int ms);

/* The numeric value of " key=" in msg, 0 if absent. */
unsigned long long lt_ictl_field(const char *msg, const char *key);

/* "err pid=N text" -> "text" */
const char *lt_ictl_text(const char *msg);

#endif
