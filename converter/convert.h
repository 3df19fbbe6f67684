/* SPDX-License-Identifier: Apache-2.0 */
/* The converter's entry points, shared by its subcommands. */
#ifndef LLMT_CONVERT_H
#define LLMT_CONVERT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Set (to the signal) by the caller's SIGINT/SIGTERM handler: the conversion
 * then stops at its next progress point, removes its temporaries and
 * publishes nothing. */
extern volatile sig_atomic_t conv_stop_signal;

/* -o files one request may hold: one per kind of trace (convert.c's table
 * of kinds has at most this many rows). */
#define CONV_MAX_OUTS 8

struct conv_request {
	const char *const *inputs;  /* log files, directories of logs, .tar/.tar.gz/.tar.zst */
	int n_inputs;
	const char *cupti_dir;      /* extra directory of logs (the inject library's) or NULL */
	const char *out[CONV_MAX_OUTS]; /* -o: a trace file per kind, set by conv_request_out */
	const char *logdir;         /* --logdir: TensorBoard layout root, or NULL */
	const char *run;            /* --run, or NULL: the profile's start time */
	uint64_t trace_budget;      /* bytes a trace JSON may take (other traces: their
				     * model's budget_x times it): 0 the default (fold.h),
				     * UINT64_MAX none; past it short calls fold */
	int overwrite;              /* replace existing outputs */
	int progress;               /* progress: a bar on a terminal, else plain lines */
	int quiet;                  /* no final line */
	int caller_says_where;      /* no "wrote PATH" line: the caller publishes (batch) */
};

/* Ask for the trace file path (-o), of the kind its name ends in; a name no
 * kind takes is the trace JSON's, which refuses it. 0, or -1 with a
 * message in err when a trace of that kind is already asked for. */
int conv_request_out(struct conv_request *req, const char *path, char *err, size_t errsz);

/* The -o kinds for --help, one line each after indent spaces: the endings
 * and what they make. */
void conv_out_help(FILE *f, int indent);

/* Convert; 0 on success, -1 with a message in err. Outputs are published
 * atomically; nothing partial is left on failure. */
int conv_convert(const struct conv_request *req, char *err, size_t errsz);

/* Subcommands: argv[0] is the subcommand name. Return the exit status. */
int conv_batch_main(int argc, char **argv);   /* batch --in DIR --logdir DIR */
int conv_pack_main(int argc, char **argv);    /* pack --logdir DIR --run NAME -o FILE.tar.zst */
int conv_summary_main(int argc, char **argv); /* summary LOG ... */

#endif
