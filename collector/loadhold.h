/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loadhold: hold a target's open of a probed library until its probes are in.
 *
 * Uprobes are bound to a process. A process the collector learns about only
 * when it is born (a followed child that execs and loads the library at
 * once) would run its first calls before its links exist. The dynamic linker
 * opens a library before it maps it, so the open is the point to hold it at:
 * every library file the collector has probed for some target is marked for
 * fanotify open-permission events (FAN_OPEN_PERM, on that inode only). The
 * kernel then stops the opening thread inside open() until the collector
 * answers. A thread of ours answers at once for opens by anyone but a target,
 * and for our own; a target's open is handed to the session's loop, which
 * attaches its links (through the event's fd: the very file opened) and
 * lets it go. Every hold ends after LT_HOLD_MAX_MS whatever the loop does.
 *
 * Why fanotify, not a signal or ptrace: a SIGSTOP sent from BPF holds the
 * whole process, is seen by its parent (waitpid WUNTRACED, SIGCHLD), and
 * leaves it stopped for good if the collector dies; a ptrace stop would need
 * every thread of every target traced beforehand (a tracer for the whole
 * run, in the way of debuggers and of our own injector). A pending fanotify
 * permission event is invisible to the target, holds only the opening
 * thread, and is answered "allow" by the kernel when the collector's
 * fanotify descriptor is closed, so a collector that dies (even by SIGKILL)
 * never leaves it held. Needs CAP_SYS_ADMIN; without it nothing is held.
 */
#ifndef LLMT_LOADHOLD_H
#define LLMT_LOADHOLD_H

#include <stddef.h>
#include <stdint.h>

#define LT_HOLD_MAX_MS 2000         /* the longest a target's open is held */
#define LT_HOLD_MAX_FILES 4096      /* library files watched */
#define LT_HOLD_MAX_PENDING 256     /* target opens held at once; more are let go */
#define LT_HOLD_MAX_SERVED 4096     /* (process, file) pairs known to have their links */

struct lt_hold;

struct lt_hold_stats {
	uint64_t held;              /* target opens held */
	uint64_t timed_out;         /* let go at LT_HOLD_MAX_MS before their probes were in */
	uint64_t passed;            /* opens by others (or already served), let go at once */
	uint64_t max_ns, total_ns;  /* how long the held ones waited */
};

/* Start watching (a thread of its own). targets_fd: the BPF map of target
 * pids. NULL with err when fanotify permission events are unavailable. */
struct lt_hold *lt_hold_start(int targets_fd, char *err, size_t errsz);

/* Hold targets' opens of the file open as fd (path: as targets name it,
 * kept for serve). 0, or -errno. A file already watched is a no-op. */
int lt_hold_watch(struct lt_hold *h, int fd, const char *path);

/* pid (the process started at `start`, lt_proc_read_start) has its links on
 * file (dev, ino): its opens of it are let go at once from now on. */
void lt_hold_served(struct lt_hold *h, int pid, uint64_t start, uint64_t dev, uint64_t ino);

/* Readable when held opens wait: poll it in the session's loop. */
int lt_hold_fd(const struct lt_hold *h);

/* In the session's loop: for each held open, attach(arg, pid, fd, path)
 * (fd: the file the target opened, valid during the call), then let it go. */
void lt_hold_serve(struct lt_hold *h, void (*attach)(void *arg, int pid, int fd, const char *path),
		   void *arg);

/* Let every held open go, stop the thread, close. Counts in *stats. */
void lt_hold_stop(struct lt_hold *h, struct lt_hold_stats *stats);

#endif
