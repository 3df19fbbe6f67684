// SPDX-License-Identifier: Apache-2.0
/*
 * `llmtracker profile` options (docs/CONTRACT.md): -p -t -o -d --delay -v
 * --cpu-buffer-size --probe-file --enable-cuda-kernel, plus --cuda-api-records, --cupti-dir,
 * --freq, --no-children, --python-method and the launch form `[--user U] -- CMD ARGS`.
 * Every bad value gets one line naming the flag, the value and what is
 * expected.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "collector/sources/probefile.h"
#include "bpf/common.h"
#include "bpf/cpusample.h"

void lt_cli_usage(FILE *f)
{
	char types[128];

	fprintf(f,
		"usage: llmtracker profile -p PID [-p PID ...] -t TYPES -o FILE [-d SEC] [--delay SEC] [-v N] [-q]\n"
		"                          [--cpu-buffer-size MB] [--probe-file FILE] [--max-probes N]\n"
		"                          [--enable-cuda-kernel true] [--cuda-api-records true]\n"
		"                          [--cupti-dir DIR] [--freq HZ] [--cpu-stack-bytes N] [--no-children]\n"
		"                          [--python-method auto|hook|usdt] [--segment-mb MB] [--segment-seconds SEC]\n"
		"                          [[--user USER[:GROUP]] -- CMD ARGS ...]\n"
		"       llmtracker export -i FILE [-i FILE ...] [--cupti-dir DIR] {-o OUT.json[.gz] | --logdir DIR [--run NAME]}\n"
		"       llmtracker generateCommand [--container-id ID | --pod-uid UID]\n"
		"       llmtracker generateProbe -p PID [-o FILE] [--force]\n"
		"\n"
		"  -p PID               process to profile (repeat for several); its descendants are followed\n"
		"  -t TYPES             comma list of %s, or all\n"
		"  -o FILE              event log to write (binary whatever the extension; default %s)\n"
		"  --segment-mb MB      the log is published in segments, FILE.1, FILE.2 ... and FILE\n"
		"                       last, each once complete: a segment ends past MB (default %g)...\n"
		"  --segment-seconds SEC ... or SEC seconds old (default %g); a crash loses at most\n"
		"                       the open one. Up to two segments wait in memory for a slow\n"
		"                       store; what does not fit is dropped and counted as lost\n"
		"  -d SEC               stop after SEC seconds (default: when every target exited, or on a signal)\n"
		"  --delay SEC          wait SEC seconds before attaching (with -- CMD, the command runs meanwhile)\n"
		"  -v N                 log level (glog-style lines on stderr)\n"
		"  -q                   no status while recording (a live line on a terminal, else one\n"
		"                       every 10 s: elapsed, events per source, MB written, lost)\n"
		"  --cpu-buffer-size MB ring buffer per CPU (default %d)\n"
		"  --probe-file FILE    CUDA library symbols to probe (-t cuda)\n"
		"  --max-probes N       functions a profile may probe (default %d; a library whose\n"
		"                       selection passes it is refused)\n"
		"  --enable-cuda-kernel true   record GPU kernels, copies and sets through the injected CUPTI\n"
		"                       library, each linked to the call that queued it (probed as -t cuda\n"
		"                       probes it; without -t cuda only those calls)\n"
		"  --cuda-api-records true     CUPTI's records of the CUDA runtime calls, synchronizations and\n"
		"                       its own overhead too (a launch-bound job runs ~20 points slower)\n"
		"  --cupti-dir DIR      where the injected library writes its logs (default: beside -o,\n"
		"                       where the converter finds them from the -o log alone)\n"
		"  --freq HZ            CPU sampling frequency (default %d)\n"
		"  --cpu-stack-bytes N  user stack copied per CPU sample to unwind code built without\n"
		"                       frame pointers (default %d, at most %u; 0: frame pointers only)\n"
		"  --no-children        do not follow processes the targets start\n"
		"  --python-method M    how -t python traces calls: auto (default: the injected hook,\n"
		"                       ~0.6 us a call; the interpreter's USDT probes, ~7 us, where the\n"
		"                       hook cannot go in), hook, or usdt\n"
		"  -- CMD ARGS          start CMD and profile it from its first instruction; it runs with\n"
		"                       llmtracker's own user and privileges (as root: every capability)\n"
		"                       unless --user is given. If llmtracker dies (even by SIGKILL)\n"
		"                       before CMD has started (exec'd), CMD is killed; after, CMD goes\n"
		"                       on running without a profile. Never left stopped.\n"
		"  --user USER[:GROUP]  run CMD as USER (name or uid) with its groups (GROUP, name or gid:\n"
		"                       its primary group instead) and no capability at all (set-uid\n"
		"                       programs still run, no_new_privs is not set, but they gain no\n"
		"                       capability). The environment stays as given (HOME, USER, LOGNAME\n"
		"                       included); CMD's own logs (--enable-cuda-kernel) need a log\n"
		"                       directory USER can write\n"
		"\n"
		"  export               convert logs (llmtracker-convert, beside this binary: --help there)\n"
		"  generateCommand      list GPU (and Python) processes and print a profile command\n"
		"  generateProbe        write a probe file for the CUDA libraries PID has loaded\n"
		"  --version            print the version\n",
		lt_t_list(LT_T_ALL, ", ", types, sizeof(types)), LT_DEFAULT_OUTPUT,
		(double)LT_DEFAULT_SEGMENT_MB, (double)LT_DEFAULT_SEGMENT_S, LT_DEFAULT_CPU_BUFFER_MB,
		LT_MAX_PROBES, LT_DEFAULT_FREQ_HZ, LT_DEFAULT_CPU_STACK_BYTES, LT_CPU_STACK_MAX);
}

int lt_cli_parse_types(const char *s, unsigned *types, bool *all, char *err, size_t errsz)
{
	char buf[256], names[128], *save = NULL, *tok;

	*types = 0;
	*all = false;
	lt_t_list(LT_T_ALL, ", ", names, sizeof(names));
	if (!s || !*s || strlen(s) >= sizeof(buf)) {
		snprintf(err, errsz, "-t needs a comma list of %s or all", names);
		return -1;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned bit = lt_t_bit(tok);

		if (!strcmp(tok, "all")) {
			*all = true;
			bit = LT_T_ALL;
		}
		if (!bit) {
			snprintf(err, errsz, "unknown profiling type '%s' in -t %s (expected %s or all)",
				 tok, s, names);
			return -1;
		}
		*types |= bit;
	}
	if (!*types) {
		snprintf(err, errsz, "-t %s names no profiling type", s);
		return -1;
	}
	return 0;
}

static int parse_number(const char *flag, const char *v, double lo, double hi, const char *unit,
			double *out, char *err, size_t errsz)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || !isfinite(d) || d < lo || d > hi) {
		snprintf(err, errsz, "%s %s: expected a number of %s from %g to %g", flag, v, unit, lo, hi);
		return -1;
	}
	*out = d;
	return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out,
			char *err, size_t errsz)
{
	return parse_number(flag, v, lo, hi, "seconds", out, err, errsz);
}

static int parse_uint(const char *flag, const char *v, unsigned long lo, unsigned long hi,
		      unsigned long *out, char *err, size_t errsz)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || n < lo || n > hi) {
		snprintf(err, errsz, "%s %s: expected a whole number from %lu to %lu", flag, v, lo, hi);
		return -1;
	}
	*out = n;
	return 0;
}

static int parse_bool(const char *flag, const char *v, bool *out, char *err, size_t errsz)
{
	if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "false") || !strcmp(v, "none") || !strcmp(v, "0") || !strcmp(v, "no") || !*v) {
		*out = false;
		return 0;
	}
	snprintf(err, errsz, "%s %s: expected true or false", flag, v);
	return -1;
}

static int parse_py_method(const char *v, int *out, char *err, size_t errsz)
{
	static const char *const names[] = { [LT_PYM_AUTO] = "auto", [LT_PYM_HOOK] = "hook",
					     [LT_PYM_USDT] = "usdt" };
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(v, names[i])) {
			*out = i;
			return 0;
		}
	snprintf(err, errsz, "--python-method %s: expected auto, hook or usdt", v);
	return -1;
}

enum { OPT_DELAY = 256, OPT_CPUBUF, OPT_PROBE, OPT_CUDAK, OPT_CUPTI, OPT_FREQ, OPT_NOCHILD,
       OPT_MAXPROBES, OPT_PYMETHOD, OPT_STACKBYTES, OPT_CUDAAPI, OPT_USER, OPT_SEGMB, OPT_SEGS };

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "type", required_argument, NULL, 't' },
	{ "output", required_argument, NULL, 'o' },
	{ "duration", required_argument, NULL, 'd' },
	{ "verbose", required_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "delay", required_argument, NULL, OPT_DELAY },
	{ "cpu-buffer-size", required_argument, NULL, OPT_CPUBUF },
	{ "probe-file", required_argument, NULL, OPT_PROBE },
	{ "max-probes", required_argument, NULL, OPT_MAXPROBES },
	{ "enable-cuda-kernel", required_argument, NULL, OPT_CUDAK },
	{ "cuda-api-records", required_argument, NULL, OPT_CUDAAPI },
	{ "cupti-dir", required_argument, NULL, OPT_CUPTI },
	{ "freq", required_argument, NULL, OPT_FREQ },
	{ "cpu-stack-bytes", required_argument, NULL, OPT_STACKBYTES },
	{ "no-children", no_argument, NULL, OPT_NOCHILD },
	{ "python-method", required_argument, NULL, OPT_PYMETHOD },
	{ "user", required_argument, NULL, OPT_USER },
	{ "segment-mb", required_argument, NULL, OPT_SEGMB },
	{ "segment-seconds", required_argument, NULL, OPT_SEGS },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int add_pid(struct lt_options *o, const char *v, char *err, size_t errsz)
{
	unsigned long pid;

	if (parse_uint("-p", v, 1, INT_MAX, &pid, err, errsz))
		return -1;
	for (int i = 0; i < o->n_pids; i++)
		if (o->pids[i] == (int)pid)
			return 0; /* given twice: profiled once */
	if (o->n_pids >= LT_MAX_TARGETS) {
		snprintf(err, errsz, "too many -p (at most %d processes)", LT_MAX_TARGETS);
		return -1;
	}
	o->pids[o->n_pids++] = (int)pid;
	return 0;
}

static int parse_one(struct lt_options *o, int c, const char *v, bool *have_t, char *err, size_t errsz)
{
	unsigned long n;

	switch (c) {
	case 'p':
		return add_pid(o, v, err, errsz);
	case 't':
		*have_t = true;
		return lt_cli_parse_types(v, &o->types, &o->types_all, err, errsz);
	case 'o':
		if (!*v) {
			snprintf(err, errsz, "-o needs a file name");
			return -1;
		}
		o->output = v;
		return 0;
	case 'd':
		return parse_double("-d", v, 0, 1e7, &o->duration_s, err, errsz);
	case OPT_DELAY:
		return parse_double("--delay", v, 0, 1e7, &o->delay_s, err, errsz);
	case OPT_SEGMB:
		return parse_number("--segment-mb", v, LT_SEGMENT_MB_MIN, LT_SEGMENT_MB_MAX, "MiB",
				    &o->segment_mb, err, errsz);
	case OPT_SEGS:
		return parse_double("--segment-seconds", v, 1, 86400, &o->segment_s, err, errsz);
	case 'q':
		o->quiet = true;
		return 0;
	case 'v':
		if (parse_uint("-v", v, 0, 100, &n, err, errsz))
			return -1;
		o->verbosity = (int)n;
		return 0;
	case OPT_CPUBUF:
		if (parse_uint("--cpu-buffer-size", v, 1, 1024, &n, err, errsz))
			return -1;
		o->cpu_buffer_mb = (unsigned)n;
		return 0;
	case OPT_FREQ:
		if (parse_uint("--freq", v, 1, 100000, &n, err, errsz))
			return -1;
		o->freq_hz = (unsigned)n;
		return 0;
	case OPT_STACKBYTES:
		if (parse_uint("--cpu-stack-bytes", v, 0, LT_CPU_STACK_MAX, &n, err, errsz))
			return -1;
		if (n % 8) {
			snprintf(err, errsz, "--cpu-stack-bytes must be a multiple of 8 (got %lu)", n);
			return -1;
		}
		o->cpu_stack_bytes = (unsigned)n;
		return 0;
	case OPT_PROBE:
		o->probe_file = v;
		return 0;
	case OPT_MAXPROBES:
		if (parse_uint("--max-probes", v, 1, LT_MAX_PROBES_FORCED, &n, err, errsz))
			return -1;
		o->max_probes = (unsigned)n;
		return 0;
	case OPT_CUPTI:
		o->cupti_dir = v;
		return 0;
	case OPT_CUDAK:
		return parse_bool("--enable-cuda-kernel", v, &o->cuda_kernel, err, errsz);
	case OPT_CUDAAPI:
		return parse_bool("--cuda-api-records", v, &o->cuda_api_records, err, errsz);
	case OPT_NOCHILD:
		o->follow_children = false;
		return 0;
	case OPT_PYMETHOD:
		return parse_py_method(v, &o->python_method, err, errsz);
	case OPT_USER:
		if (!*v) {
			snprintf(err, errsz, "--user needs a user name or uid (USER or USER:GROUP)");
			return -1;
		}
		o->user = v;
		return 0;
	}
	snprintf(err, errsz, "unknown option (see llmtracker profile --help)");
	return -1;
}

int lt_cli_parse_profile(int argc, char **argv, struct lt_options *o, char *err, size_t errsz)
{
	bool have_t = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->output = LT_DEFAULT_OUTPUT;
	o->segment_mb = LT_DEFAULT_SEGMENT_MB;
	o->segment_s = LT_DEFAULT_SEGMENT_S;
	o->cpu_buffer_mb = LT_DEFAULT_CPU_BUFFER_MB;
	o->freq_hz = LT_DEFAULT_FREQ_HZ;
	o->cpu_stack_bytes = LT_DEFAULT_CPU_STACK_BYTES;
	o->follow_children = true;
	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, so `-- CMD -x` keeps CMD's flags. */
	while ((c = getopt_long(argc, argv, "+p:t:o:d:v:qh", long_opts, NULL)) != -1) {
		if (c == 'h') {
			lt_cli_usage(stdout);
			return 1;
		}
		if (c == '?' || c == ':') {
			if (optopt && optopt < 256)
				snprintf(err, errsz, "option -%c %s (see llmtracker profile --help)", optopt,
					 c == ':' ? "needs a value" : "is unknown");
			else
				snprintf(err, errsz, "option %s is unknown or needs a value (see llmtracker profile --help)",
					 argv[optind - 1]);
			return -1;
		}
		if (parse_one(o, c, optarg, &have_t, err, errsz))
			return -1;
	}
	if (optind < argc) {
		if (strcmp(argv[optind - 1], "--")) {
			snprintf(err, errsz, "unexpected argument '%s' (put the command to launch after --)",
				 argv[optind]);
			return -1;
		}
		o->launch_argv = argv + optind;
	}
	if (!have_t) {
		char names[128];

		snprintf(err, errsz, "missing -t TYPES (%s or all)",
			 lt_t_list(LT_T_ALL, ", ", names, sizeof(names)));
		return -1;
	}
	if (!o->n_pids && !o->launch_argv) {
		snprintf(err, errsz, "nothing to profile: give -p PID or -- CMD ARGS");
		return -1;
	}
	if (o->user && !o->launch_argv) {
		snprintf(err, errsz, "--user %s: it is who the launched command runs as; give -- CMD ARGS",
			 o->user);
		return -1;
	}
	if (o->cuda_api_records && !o->cuda_kernel) {
		snprintf(err, errsz, "--cuda-api-records true needs --enable-cuda-kernel true (CUPTI records both)");
		return -1;
	}
	return 0;
}
