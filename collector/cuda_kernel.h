/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda_kernel: the collector side of --enable-cuda-kernel.
 *
 * GPU activity is recorded inside each target by libllmtracker-inject.so
 * (CUPTI), which writes its own event log per process into the CUPTI
 * directory (--cupti-dir, default: the directory of -o), with the
 * profile's session id in its header; the converter takes the logs of the
 * session and merges them by their clock anchors. This module gets the library in
 * and out:
 *   launch (-- CMD): lt_ck_launch_env() gives the environment for the child
 *     (CUDA_INJECTION64_PATH: CUDA calls the library's InitializeInjection);
 *   attach (-p PID, after --delay): lt_ck_attach() injects it with ptrace;
 *     processes followed later (children, execs): lt_ck_attach_later()
 *     injects each once it has loaded CUDA;
 *   end (before the collector's log closes): lt_ck_stop() flushes, detaches
 *     CUPTI (cuptiFinalize at an API exit) and unloads the library.
 * Without a GPU driver on the node it says so in one line and touches no
 * target. Every message goes through opts.log, one line each.
 */
#ifndef LLMT_CUDA_KERNEL_H
#define LLMT_CUDA_KERNEL_H

#include <stddef.h>
#include <stdint.h>

struct lt_ck_opts {
	const char *lib_path;     /* NULL: found next to the collector binary */
	const char *cupti_dir;    /* the library's output directory (created if missing) */
	const char *host;         /* NULL: gethostname() */
	const uint8_t *session;   /* the profile's session id (EVLOG_SESSION_LEN bytes), or
				   * NULL: none (the library's logs then say none) */
	int driver_api;           /* also record every driver API call: pairs the kernels
				   * cuBLAS launches through cuLaunchKernel, at a much
				   * higher cost (see collector/inject/cupti.c) */
	int kernels_only;         /* no API records at all (lightest; kernels then have
				   * no launch to pair with) */
	int finalize_ms;          /* wait for an API exit to finalize CUPTI; 0 = 3000 */
	const char *start_extra;  /* "KEY=VALUE ..." appended to the library's start
				   * message (inject.h), overriding the above; lt_ck_open
				   * takes it from $LLMT_CUPTI_START */
	int skip_driver_check;    /* inject even without a GPU driver on the node (tests) */
	void (*log)(char level, const char *msg); /* 'I', 'W', 'E'; NULL: stderr */
	void (*unseen)(int pid, const char *why); /* a process whose kernels are not
						   * recorded, and why (short); may be NULL */
};

struct lt_cuda_kernel;

/* Check the node and the library. Returns 0 and *out, or -errno with err
 * set (e.g. the library is missing). No GPU driver is not an error here:
 * lt_ck_available() says so and the other calls do nothing. */
int lt_ck_new(struct lt_cuda_kernel **out, const struct lt_ck_opts *o, char *err, size_t errsz);
int lt_ck_available(const struct lt_cuda_kernel *ck);

/* The collector's one-call set-up: options as given on the command line
 * (cupti_dir NULL: the directory of `output`) and the session id. Logs and
 * returns NULL when CUDA kernel profiling cannot start; every call below
 * accepts NULL. */
struct lt_cuda_kernel *lt_ck_open(const char *cupti_dir, const char *output,
				  const uint8_t *session, void (*log)(char level, const char *msg),
				  void (*unseen)(int pid, const char *why));

/* Launch mode, for a fork that inherits the environment: put the variables
 * of lt_ck_launch_env() into our own environment around the fork. */
void lt_ck_env_set(struct lt_cuda_kernel *ck);
void lt_ck_env_unset(struct lt_cuda_kernel *ck);

/* Launch mode. Before fork: a NULL-terminated list of "NAME=VALUE" strings
 * the child must add to its environment (putenv) before exec, or NULL when
 * CUDA kernel profiling is unavailable. After fork, the parent calls
 * lt_ck_launched() with the child's pid. */
char *const *lt_ck_launch_env(struct lt_cuda_kernel *ck);
int lt_ck_launched(struct lt_cuda_kernel *ck, int pid);

/* Attach mode: inject into a running process and start recording.
 * 0 started; -errno when it could not (said through opts.log; the target
 * is left as it was). */
int lt_ck_attach(struct lt_cuda_kernel *ck, int pid);

/* A process followed after the start (a child forked after attach, an
 * exec, a descendant found at the start): from a thread of ours, bounded in
 * time, wait until it has mapped the CUDA driver or CUPTI, then inject and
 * start as lt_ck_attach() does (again a little later if the library finds
 * no driver loaded yet). A process that never maps CUDA is never touched,
 * nor counted; one whose environment already makes CUDA load the library
 * (launch mode) is left to it. Returns at once: 0, or -errno (too many
 * processes waiting). Unavailable CUDA kernel profiling: nothing. */
int lt_ck_attach_later(struct lt_cuda_kernel *ck, int pid);

/* Stop recording in every target, detach CUPTI, unload the library (the
 * threads of lt_ck_attach_later() end first: nothing is added after). */
void lt_ck_stop(struct lt_cuda_kernel *ck);
void lt_ck_free(struct lt_cuda_kernel *ck);

/* Figures of the last lt_ck_stop(), summed over targets. */
struct lt_ck_totals {
	unsigned long long kernels, memcpys, memsets, apis, dropped;
	int targets, finalized, unloaded;
};
void lt_ck_totals(const struct lt_cuda_kernel *ck, struct lt_ck_totals *t);

#endif
