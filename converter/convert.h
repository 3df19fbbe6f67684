/* SPDX-License-Identifier: Apache-2.0 */
/* The converter's entry points, shared by its subcommands. */
#ifndef LLMT_CONVERT_H
#define LLMT_CONVERT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Set (to the signal) by the caller's SIGINT/SIGTERM handler: the conversion
 * then stops at its next progress point, removes its temporaries and
 * publishes nothing. */
extern volatile sig_atomic_t conv_stop_signal;

struct conv_request {
	const char *const *inputs;  /* log files, directories of logs, .tar/.tar.gz/.tar.zst */
	int n_inputs;
	const char *cupti_dir;      /* extra directory of logs (the inject library's) or NULL */
	const char *json_out;       /* -o: .json or .json.gz, or NULL */
	const char *pftrace_out;    /* -o: .pftrace or .perfetto-trace (Perfetto's protobuf), or NULL */
	const char *logdir;         /* --logdir: TensorBoard layout root, or NULL */
	const char *run;            /* --run, or NULL: the profile's start time */
	uint64_t trace_budget;      /* bytes a trace (JSON, Perfetto) may take: 0 the default
				     * (fold.h), UINT64_MAX none; past it short calls fold */
	int overwrite;              /* replace existing outputs */
	int progress;               /* progress: a bar on a terminal, else plain lines */
	int quiet;                  /* no final line */
	int caller_says_where;      /* no "wrote PATH" line: the caller publishes (batch) */
};

/* Convert; 0 on success, -1 with a message in err. Outputs are published
 * atomically; nothing partial is left on failure. */
int conv_convert(const struct conv_request *req, char *err, size_t errsz);

/* Subcommands: argv[0] is the subcommand name. Return the exit status. */
int conv_batch_main(int argc, char **argv);   /* batch --in DIR --logdir DIR */
int conv_pack_main(int argc, char **argv);    /* pack --logdir DIR --run NAME -o FILE.tar.zst */
int conv_summary_main(int argc, char **argv); /* summary LOG ... */

#endif
