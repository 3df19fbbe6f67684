/* SPDX-License-Identifier: Apache-2.0 */
/* llmtracker-convert: event logs -> trace JSON, TensorBoard run directories,
 * folded stacks, summaries. See docs/CONTRACT.md §3 and docs/ARCHITECTURE.md. */
#include "lt_version.h"
#include "converter/convert.h"
#include "eventlog/eventlog.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Subcommands living in their own modules, linked when present. */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: llmtracker-convert [-i] LOG [[-i] LOG ...] [--cupti-dir DIR]\n"
		"                          [-o OUT ...] [--logdir DIR [--run NAME]] [--max-trace-mb N]\n"
		"       llmtracker-convert batch --in DIR --logdir DIR\n"
		"       llmtracker-convert pack --logdir DIR --run NAME -o FILE.tar.zst\n"
		"       llmtracker-convert summary [-n TOP] LOG ...\n"
		"       llmtracker-convert dump LOG ...\n"
		"\n"
		"  [-i] LOG        an event log, a directory of logs, or a .tar/.tar.gz/.tar.zst;\n"
		"                  a profile's log brings the injected library's logs of its\n"
		"                  session from its directory (logs of other profiles are left out)\n"
		"  --cupti-dir DIR also take those logs from DIR (where profile --cupti-dir put them)\n"
		"  -o OUT          a trace of the kind its name ends in, one of each kind at most:\n");
	conv_out_help(f, 18);
	fprintf(f,
		"                  OUT.cpu.folded / OUT.python.folded go beside the first (its\n"
		"                  extension cut off)\n"
		"  --logdir DIR    TensorBoard layout: DIR/plugins/profile/<run>/<host>.xplane.pb\n"
		"                  and <host>.trace.json.gz\n"
		"  --run NAME      run name (default: the profile's start time)\n"
		"  --max-trace-mb N  keep a trace JSON under N MB (10^6 bytes; default 100) and a\n"
		"                  Perfetto trace under 5N MB; 0: no limit. Past it the shortest\n"
		"                  calls fold, each run of them into a slice \"N calls folded, X us\"\n"
		"  --force         replace existing output files (-o, --logdir)\n"
		"  -q              quiet: no notes on skipped input, no closing line\n"
		"  --no-progress   no progress bar (it is only shown when stderr is a terminal)\n"
		"  --version       print the version\n");
}

static int dump_main(int argc, char **argv)
{
	int rc = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: llmtracker-convert dump LOG ...\n");
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		printf("usage: llmtracker-convert dump LOG ...\n"
		       "  Prints each log's header, then every event, one a line.\n");
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		struct evlog_reader *r;
		const struct evlog_event *e;
		char msg[512];
		int n;

		if (evlog_reader_open(&r, argv[i], msg, sizeof(msg))) {
			fprintf(stderr, "llmtracker-convert dump: %s\n", msg);
			rc = 1;
			continue;
		}
		evlog_dump_header(stdout, evlog_reader_header(r));
		while ((n = evlog_next(r, &e)) == 0)
			if (evlog_dump_event(stdout, e))
				break;
		if (n != -EVLOG_END && n != 0) {
			fprintf(stderr, "llmtracker-convert dump: %s: %s\n", argv[i],
				evlog_reader_error(r));
			rc = 1;
		}
		struct evlog_reader_stats st;

		evlog_reader_stats(r, &st);
		if (st.chunks_bad || st.truncated)
			fprintf(stderr, "%s: %llu corrupt chunks skipped%s\n", argv[i],
				(unsigned long long)st.chunks_bad, st.truncated ? ", truncated" : "");
		evlog_reader_close(r);
	}
	return fflush(stdout) ? 1 : rc;
}

/* The first SIGINT/SIGTERM asks the conversion to stop cleanly (its
 * temporaries removed, nothing published); a second one kills at once
 * (what it leaves, the next conversion there removes). */
static void on_stop(int sig)
{
	conv_stop_signal = sig;
	signal(sig, SIG_DFL);
}

static void catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static int need_arg(int i, int argc, const char *opt)
{
	if (i + 1 < argc)
		return 0;
	fprintf(stderr, "llmtracker-convert: %s needs a value\n", opt);
	return -1;
}

/* --max-trace-mb N: N * 10^6 bytes, 0 none. */
static int parse_mb(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n > 1000000000ull) {
		fprintf(stderr, "llmtracker-convert: --max-trace-mb %s: give a whole number of MB "
			"(0: no limit)\n", v);
		return -1;
	}
	*out = n ? n * 1000000ull : UINT64_MAX;
	return 0;
}

int main(int argc, char **argv)
{
	struct conv_request req = { 0 };
	const char **inputs;
	char err[1024];

	if (argc > 1) {
		const char *cmd = argv[1];

		if (!strcmp(cmd, "batch"))
			return conv_batch_main(argc - 1, argv + 1);
		if (!strcmp(cmd, "pack"))
			return conv_pack_main(argc - 1, argv + 1);
		if (!strcmp(cmd, "summary"))
			return conv_summary_main(argc - 1, argv + 1);
		if (!strcmp(cmd, "dump"))
			return dump_main(argc - 1, argv + 1);
		if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
			printf("llmtracker-convert %s\n", LT_VERSION);
			return 0;
		}
	}
	if (!(inputs = calloc((size_t)argc + 1, sizeof(*inputs))))
		return 1;
	req.inputs = inputs;
	req.progress = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			free(inputs);
			return 0;
		} else if (!strcmp(a, "-i") || !strcmp(a, "-o") || !strcmp(a, "--cupti-dir") ||
			   !strcmp(a, "--logdir") || !strcmp(a, "--run")) {
			if (need_arg(i, argc, a)) {
				free(inputs);
				return 2;
			}
			const char *v = argv[++i];

			if (!strcmp(a, "-i"))
				inputs[req.n_inputs++] = v;
			else if (!strcmp(a, "-o")) {
				if (conv_request_out(&req, v, err, sizeof(err))) {
					fprintf(stderr, "llmtracker-convert: %s\n", err);
					free(inputs);
					return 2;
				}
			}
			else if (!strcmp(a, "--cupti-dir"))
				req.cupti_dir = v;
			else if (!strcmp(a, "--logdir"))
				req.logdir = v;
			else
				req.run = v;
		} else if (!strcmp(a, "--max-trace-mb")) {
			if (need_arg(i, argc, a) || parse_mb(argv[++i], &req.trace_budget)) {
				free(inputs);
				return 2;
			}
		} else if (!strcmp(a, "--force") || !strcmp(a, "--overwrite")) {
			req.overwrite = 1;
		} else if (!strcmp(a, "-q")) {
			req.quiet = 1;
			req.progress = 0;
		} else if (!strcmp(a, "--no-progress")) {
			req.progress = 0;
		} else if (a[0] != '-' || !a[1]) {
			inputs[req.n_inputs++] = a; /* a positional input, as summary takes */
		} else {
			fprintf(stderr, "llmtracker-convert: unknown option '%s'\n", a);
			usage(stderr);
			free(inputs);
			return 2;
		}
	}
	if (!req.n_inputs && !req.cupti_dir) {
		fprintf(stderr, "llmtracker-convert: no input: give -i LOG (or --cupti-dir DIR)\n");
		usage(stderr);
		free(inputs);
		return 2;
	}
	if (req.run && !req.logdir) {
		fprintf(stderr, "llmtracker-convert: --run only applies with --logdir\n");
		free(inputs);
		return 2;
	}
	catch_stop_signals();
	int rc = conv_convert(&req, err, sizeof(err));

	if (rc)
		fprintf(stderr, "llmtracker-convert: %s%s\n", err,
			conv_stop_signal ? "; nothing published, temporary files removed" : "");
	free(inputs);
	if (conv_stop_signal) /* the shell sees the signal, as without the handler */
		raise(conv_stop_signal);
	return rc ? 1 : 0;
}
