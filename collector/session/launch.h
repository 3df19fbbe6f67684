/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The launch form `llmtracker profile ... -- CMD ARGS`: CMD is forked
 * waiting before its execve (in a read of a socket whose other end only
 * the collector holds), made a target, and only then let run, so its very first system
 * calls (the execve itself, brk, mmap ...) are seen. Its parent is a small
 * keeper process of ours, not the collector itself.
 *
 * The command runs as the collector's user with the collector's privileges
 * (root, every capability), or as the user given (runas.h: no capability).
 *
 * When the collector ends, even by SIGKILL, the keeper ends too, and a
 * command that has not exec'd yet is ended: it never started its real
 * work, and nobody is left to release it (its release socket's end of file
 * ends it, whatever became of the keeper). A command that has exec'd is the
 * user's job and goes on running, without a profile. A keeper killed alone
 * changes nothing for it: the collector releases it as before (its exit
 * status is then unknown). A kill of the whole process group ends the
 * command with the rest. Nothing is ever left waiting.
 */
#ifndef LLMT_LAUNCH_H
#define LLMT_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "runas.h"

struct lt_launch {
	pid_t pid;          /* 0 when nothing was launched */
	char path[4096];    /* the file it will execve (PATH resolved) */
	bool released;      /* its release byte written */
	bool reaped;        /* waited for */
	int status;         /* wait status, once reaped */
	pid_t keeper;       /* the command's parent (launch.c says why) */
	int keeper_fd;      /* its reports: ready, ended */
	int release_fd;     /* our end of the command's release socket: a byte lets it exec */
};

/* Resolve argv[0] through PATH, fork, switch to the user `as` (NULL: stay
 * the collector's), hold the child before its execve. 0, or -1 with err
 * set (nothing left running). */
int lt_launch_start(struct lt_launch *l, char *const argv[], const struct lt_runas *as, char *err,
		    size_t errsz);

/* Let the held child exec and run. */
int lt_launch_release(struct lt_launch *l);

/* Reap the child if it has exited (block: wait for it). True once reaped. */
bool lt_launch_reap(struct lt_launch *l, bool block);

/* Error path before release: the command never ran, so kill and reap it. */
void lt_launch_abort(struct lt_launch *l);

/* Is `pid` still our own fork, a launched command that has not exec'd yet
 * (its executable is this program's)? */
bool lt_launch_is_own_fork(int pid);

/* "exited with status N" / "killed by signal N" */
const char *lt_launch_status_str(const struct lt_launch *l, char *buf, size_t sz);

#endif
