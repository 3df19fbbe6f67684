/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The launch form `llmtracker profile ... -- CMD ARGS`: CMD is forked
 * stopped (SIGSTOP before execve), made a target, and only then let run, so
 * its very first system calls (the execve itself, brk, mmap ...) are seen.
 * Its parent is a small keeper process of ours, not the collector itself.
 */
#ifndef LLMT_LAUNCH_H
#define LLMT_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct lt_launch {
	pid_t pid;          /* 0 when nothing was launched */
	char path[4096];    /* the file it will execve (PATH resolved) */
	bool released;      /* SIGCONT sent */
	bool reaped;        /* waited for */
	int status;         /* wait status, once reaped */
	pid_t keeper;       /* the command's parent (launch.c says why) */
	int keeper_fd;      /* its reports: stopped, ended */
};

/* Resolve argv[0] through PATH, fork, stop the child before its execve.
 * 0, or -1 with err set (nothing left running). */
int lt_launch_start(struct lt_launch *l, char *const argv[], char *err, size_t errsz);

/* Let the stopped child exec and run. */
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
