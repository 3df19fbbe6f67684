/* SPDX-License-Identifier: Apache-2.0 */
/*
 * conv_convert(): inputs -> pass 1 -> sinks chosen by the request ->
 * pass 2 -> publish (or discard everything on failure) -> one closing line.
 * conv_summary_main(): the same core feeding only the summary sink.
 */
#include "converter/convert.h"
#include "converter/conv_int.h"
#include "converter/output/fold.h"
#include "converter/output/folded.h"
#include "converter/pairing/launchpair.h"
#include "converter/output/perfetto.h"
#include "converter/output/summary.h"
#include "converter/output/trace_json.h"
#include "converter/output/xplane.h"
#include "tb_layout/tb_layout.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* -o: trace JSON and/or Perfetto trace + folded; --logdir: trace JSON +
 * XPlane + folded; both may be given at once. summary: one. */
#define MAX_SINKS 8

/* Each sink as the core sees it (v, maybe a budget's filter) and the
 * writer behind it (for its figures). */
struct sinks {
	struct conv_sink *v[MAX_SINKS], *writer[MAX_SINKS];
	void (*free_fn[MAX_SINKS])(struct conv_sink *);
	void (*writer_free[MAX_SINKS])(struct conv_sink *);
	int n;
};

static int sinks_add(struct sinks *s, struct conv_sink *k, void (*f)(struct conv_sink *),
		     char *err, size_t errsz)
{
	if (s->n == MAX_SINKS) {
		f(k);
		snprintf(err, errsz, "too many outputs at once (at most %d)", MAX_SINKS);
		return -1;
	}
	s->v[s->n] = s->writer[s->n] = k;
	s->free_fn[s->n] = s->writer_free[s->n] = f;
	s->n++;
	return 0;
}

/* A trace writer, behind a filter that keeps it within the budget. */
static int sinks_add_trace(struct sinks *s, struct conv_sink *k, void (*f)(struct conv_sink *),
			   uint64_t budget, const struct fold_model *m, char *err, size_t errsz)
{
	struct conv_sink *outer;

	if (budget == UINT64_MAX)
		return sinks_add(s, k, f, err, errsz);
	if (!budget)
		budget = CONV_TRACE_BUDGET_DEFAULT;
	if (m == &fold_model_perfetto)
		budget *= PERFETTO_BUDGET_FACTOR;
	if (!(outer = fold_new(k, f, budget, m))) {
		f(k);
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	if (sinks_add(s, outer, fold_free, err, errsz))
		return -1;
	s->writer[s->n - 1] = k;
	s->writer_free[s->n - 1] = f;
	return 0;
}

static int sinks_finish(struct sinks *s, int ok, char *err, size_t errsz)
{
	int rc = 0;

	for (int i = 0; i < s->n; i++) {
		if (s->v[i]->finish && s->v[i]->finish(s->v[i]->ctx, ok && !rc) && ok && !rc) {
			snprintf(err, errsz, "%s output: %s", s->v[i]->name, s->v[i]->err);
			rc = -1;
		}
	}
	/* A later sink failing to publish leaves earlier ones published: say so. */
	return rc;
}

static void sinks_free(struct sinks *s)
{
	for (int i = 0; i < s->n; i++)
		s->free_fn[i](s->v[i]);
	s->n = 0;
}

static int load(struct cv_core *c, const struct conv_request *req, char *err, size_t errsz)
{
	for (int i = 0; i < req->n_inputs; i++)
		if (cv_inputs_add(&c->in, req->inputs[i], CV_FROM_INPUT, err, errsz))
			return -1;
	if (req->cupti_dir && cv_inputs_add(&c->in, req->cupti_dir, CV_FROM_CUPTI, err, errsz))
		return -1;
	if (cv_inputs_select(&c->in, req->cupti_dir, err, errsz))
		return -1;
	if (c->in.notes.len && !req->quiet)
		fprintf(stderr, "%.*s", (int)c->in.notes.len, c->in.notes.p);
	c->in.notes.len = 0;
	if (!c->in.n) {
		snprintf(err, errsz, "no event logs found in the inputs given (%llu files skipped); "
			 "pass the collector's -o file or a directory holding it",
			 (unsigned long long)c->in.skipped);
		return -1;
	}
	if (cv_pass1(c)) {
		snprintf(err, errsz, "%s", c->err);
		return -1;
	}
	size_t good = 0;

	for (size_t i = 0; i < c->in.n; i++)
		good += !c->in.logs[i].bad;
	if (c->in.notes.len && !req->quiet)
		fprintf(stderr, "%.*s", (int)c->in.notes.len, c->in.notes.p);
	c->in.notes.len = 0;
	if (!good) {
		snprintf(err, errsz, "none of the %zu inputs could be read as an event log", c->in.n);
		return -1;
	}
	return 0;
}

static int open_dir(const char *file, char *err, size_t errsz)
{
	char *copy = strdup(file);
	int fd;

	if (!copy) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && err)
		snprintf(err, errsz, "output directory of %s cannot be opened", file);
	free(copy);
	return fd;
}

/* -o's file name without its directory and extension: the folded files' stem. */
static void out_stem(const char *out, char *stem, size_t n)
{
	static const char *const ext[] = { ".json.gz", ".json", ".pftrace", ".perfetto-trace" };
	const char *b = strrchr(out, '/');
	size_t len;

	b = b ? b + 1 : out;
	len = strlen(b);
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);

		if (len > e && !strcmp(b + len - e, ext[i])) {
			len -= e;
			break;
		}
	}
	snprintf(stem, n, "%.*s", (int)len, b);
}

/* The -o file the folded stacks go beside: the JSON's, else the Perfetto one's. */
static const char *first_out(const struct conv_request *req)
{
	return req->json_out ? req->json_out : req->pftrace_out;
}

/* Without --force, the folded files a -o trace would get must be free, as
 * the trace itself: checked before the long part, like the trace. */
static int folded_free_check(const struct cv_core *c, const struct conv_sink *k, const char *out,
			     char *err, size_t errsz)
{
	char name[FOLDED_NAME_MAX];

	for (size_t i = 0; i < c->n_hosts; i++)
		if (folded_existing(k, c->hosts[i].meta.host, name, sizeof(name))) {
			snprintf(err, errsz, "%s already exists beside %s (the folded stacks of a trace "
				 "named like it); pass --force to replace it", name, out);
			return -1;
		}
	return 0;
}

static int make_sinks(struct sinks *s, const struct cv_core *c, const struct conv_request *req,
		      const char *run, const char *stem, char *err, size_t errsz)
{
	struct conv_sink *k;
	int dirfd;

	if (req->json_out) {
		if (!(k = trace_json_new_file(req->json_out, req->overwrite, err, errsz)))
			return -1;
		if (sinks_add_trace(s, k, trace_json_free, req->trace_budget, &fold_model_json, err,
				    errsz))
			return -1;
	}
	if (req->pftrace_out) {
		if (!(k = perfetto_new_file(req->pftrace_out, req->overwrite, err, errsz)))
			return -1;
		if (sinks_add_trace(s, k, perfetto_free, req->trace_budget, &fold_model_perfetto, err,
				    errsz))
			return -1;
	}
	if (first_out(req)) {
		if ((dirfd = open_dir(first_out(req), err, errsz)) < 0)
			return -1;
		k = folded_new(dirfd, req->overwrite, stem, c->n_hosts, err, errsz);
		close(dirfd);
		if (!k)
			return -1;
		if (sinks_add(s, k, folded_free, err, errsz))
			return -1;
		if (!req->overwrite && folded_free_check(c, k, first_out(req), err, errsz))
			return -1;
	}
	if (req->logdir) {
		if (!(k = trace_json_new_logdir(req->logdir, run, req->overwrite, err, errsz)))
			return -1;
		if (sinks_add_trace(s, k, trace_json_free, req->trace_budget, &fold_model_json, err,
				    errsz))
			return -1;
		if (!(k = xplane_sink_new_logdir(req->logdir, run, req->overwrite, err, errsz)))
			return -1;
		if (sinks_add(s, k, xplane_sink_free, err, errsz))
			return -1;
		if ((dirfd = tb_open_run_dir(req->logdir, run, 1, err, errsz)) < 0)
			return -1;
		k = folded_new(dirfd, req->overwrite, NULL, c->n_hosts, err, errsz);
		close(dirfd);
		if (!k)
			return -1;
		if (sinks_add(s, k, folded_free, err, errsz))
			return -1;
	}
	return 0;
}

/* Temporaries of an earlier conversion killed where we write (SIGKILL, a
 * crash): provably a dead one's (tb_clean_stale), they go now. */
static void clean_stale(const struct conv_request *req)
{
	int n = 0, fd;

	if (req->json_out && (fd = open_dir(req->json_out, NULL, 0)) >= 0) {
		n += tb_clean_stale(fd);
		close(fd);
	}
	if (req->pftrace_out && (fd = open_dir(req->pftrace_out, NULL, 0)) >= 0) {
		n += tb_clean_stale(fd);
		close(fd);
	}
	if (req->logdir)
		n += tb_clean_stale_logdir(req->logdir);
	if (n && !req->quiet)
		fprintf(stderr, "removed %d temporary files of an earlier conversion that was killed\n", n);
}

/* A failed (or interrupted) conversion leaves no run directory it made:
 * rmdir removes it only while it is empty. */
static void remove_run_dir(const char *logdir, const char *run)
{
	char path[4096];

	if (snprintf(path, sizeof(path), "%s/%s/%s", logdir, TB_PLUGIN_DIR, run) < (int)sizeof(path))
		rmdir(path);
}

static void final_line(struct cv_core *c, const struct sinks *s)
{
	const struct cv_stats *st = &c->st;
	uint64_t dropped = st->py_unmatched_exit + st->py_too_deep + st->unknown_type +
			   st->uretprobe + st->dup_merged;
	uint64_t lost = 0;
	struct trace_json_stats js = { 0 };

	for (int i = 0; i <= EVSRC_MAX; i++)
		lost += st->lost[i];
	for (int i = 0; i < s->n; i++)
		if (s->writer_free[i] == trace_json_free) {
			struct trace_json_stats one;

			trace_json_stats(s->writer[i], &one);
			js.events += one.events;
			js.bytes_file += one.bytes_file;
			js.bytes_json += one.bytes_json;
		}
	fprintf(stderr, "converted %llu events from %zu logs (written %llu, dropped %llu",
		(unsigned long long)st->read, c->in.n, (unsigned long long)(st->read - dropped),
		(unsigned long long)dropped);
	/* Only the reasons that happened, so a clean run reads short. */
	const struct { uint64_t n; const char *why; } r[] = {
		{ st->py_unmatched_exit, "python exits without an entry" },
		{ st->py_too_deep, "python calls nested too deep" },
		{ st->unknown_type, "events of unknown type" },
		{ st->uretprobe, "uretprobe syscalls (the profiler's own return probes)" },
		{ st->dup_merged, "CUDA calls seen by both uprobes and CUPTI, kept once" },
		{ st->overlaps_cut, "overlaps cut" },
		{ st->unbound_flows, "unbound flows" },
		{ st->bad_time, "bad durations zeroed" },
		{ st->py_unclosed, "python calls still open at the end, closed there" },
	};
	const char *sep = ": ";

	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		if (!r[i].n)
			continue;
		fprintf(stderr, "%s%llu %s", sep, (unsigned long long)r[i].n, r[i].why);
		sep = ", ";
	}
	fputs(")", stderr);
	if (lost) {
		fprintf(stderr, "; lost at the source:");
		for (int i = 0; i <= EVSRC_MAX; i++)
			if (st->lost[i])
				fprintf(stderr, " %s %llu", evlog_source_name((uint32_t)i),
					(unsigned long long)st->lost[i]);
	}
	if (st->chunks_bad || st->truncated_logs)
		fprintf(stderr, "; %llu corrupt chunks skipped, %llu truncated logs",
			(unsigned long long)st->chunks_bad, (unsigned long long)st->truncated_logs);
	if (c->in.skipped)
		fprintf(stderr, "; %llu inputs skipped", (unsigned long long)c->in.skipped);
	if (js.events) {
		fprintf(stderr, "; %llu trace events, %llu bytes", (unsigned long long)js.events,
			(unsigned long long)js.bytes_file);
		if (js.bytes_json != js.bytes_file)
			fprintf(stderr, " (%llu uncompressed)", (unsigned long long)js.bytes_json);
	}
	for (int i = 0; i < s->n; i++)
		if (s->writer_free[i] == perfetto_free) {
			struct perfetto_stats ps;

			perfetto_stats(s->writer[i], &ps);
			fprintf(stderr, "; Perfetto: %llu slices, %llu instants, %llu bytes",
				(unsigned long long)ps.slices, (unsigned long long)ps.instants,
				(unsigned long long)ps.bytes);
			if (ps.reordered)
				fprintf(stderr, " (%llu out-of-order items moved to their track's time)",
					(unsigned long long)ps.reordered);
		}
	for (int i = 0; i < s->n; i++)
		if (s->free_fn[i] == fold_free)
			fold_report(s->v[i], stderr);
	fputs("\n", stderr);
	cv_lp_print(c, stderr);
}

/* Run the core into the given sinks. */
static int run_core(struct cv_core *c, struct sinks *s, char *err, size_t errsz)
{
	int rc = cv_pass2(c, s->v, s->n);

	if (rc)
		snprintf(err, errsz, "%s", c->err[0] ? c->err : "conversion failed");
	if (sinks_finish(s, rc == 0, err, errsz))
		rc = -1;
	c->st.read = c->total_events;
	return rc;
}

/* Does the run already hold a host's outputs? Said before the conversion
 * writes anything (publishing checks again, atomically); other hosts'
 * files in the same run are fine: one run may gather several hosts. */
static int run_taken(const struct cv_core *c, const char *logdir, const char *run, char *err,
		     size_t errsz)
{
	static const char *const ext[] = { ".xplane.pb", ".trace.json.gz" };
	char dir[PATH_MAX], file[TB_NAME_MAX + 32];
	struct stat sb;

	if (snprintf(dir, sizeof(dir), "%s/plugins/profile/%s", logdir, run) >= (int)sizeof(dir))
		return 0; /* too long: the run's own checks say so */
	for (size_t h = 0; h < c->n_hosts; h++)
		for (size_t e = 0; e < sizeof(ext) / sizeof(ext[0]); e++) {
			if (tb_host_filename(c->hosts[h].name ? c->hosts[h].name : "", file,
					     sizeof(file) - 20))
				continue;
			strcat(file, ext[e]);
			char path[PATH_MAX + sizeof(file) + 1];
			snprintf(path, sizeof(path), "%s/%s", dir, file);
			if (lstat(path, &sb) == 0) {
				snprintf(err, errsz, "run %s already holds %s: nothing converted (use --force, "
					 "another --run, or remove it)", run, file);
				return -1;
			}
		}
	return 0;
}

int conv_convert(const struct conv_request *req, char *err, size_t errsz)
{
	struct cv_core c;
	struct sinks s = { .n = 0 };
	char runbuf[64], stem[FOLDED_NAME_MAX - 32];
	const char *run = req->run;
	int rc = -1, fd = -1, made_run_dir = 0;

	memset(&c, 0, sizeof(c));
	c.progress = cv_progress_mode(req->progress);
	*err = 0;
	if (!req->json_out && !req->pftrace_out && !req->logdir) {
		snprintf(err, errsz, "no output: give -o OUT.pftrace, -o OUT.json[.gz] or --logdir DIR");
		return -1;
	}
	if (run && tb_run_name_check(run, err, errsz))
		return -1;
	/* Refuse before reading anything: a long conversion that cannot publish
	 * at the end would be wasted. (Publishing checks again, atomically.) */
	struct stat sb;

	const char *outs[2] = { req->json_out, req->pftrace_out };

	for (int i = 0; i < 2; i++)
		if (outs[i] && !req->overwrite && lstat(outs[i], &sb) == 0) {
			snprintf(err, errsz, "%s already exists; pass --force to replace it", outs[i]);
			return -1;
		}
	if (load(&c, req, err, errsz))
		goto out;
	if (!run) {
		/* A clock that cannot be a date (corrupt header) still names a run. */
		if (tb_run_name(c.run_base_rt, runbuf, sizeof(runbuf)))
			snprintf(runbuf, sizeof(runbuf), "run_%llu", (unsigned long long)c.run_base_rt);
		run = runbuf;
	}
	if (req->logdir && !req->overwrite && run_taken(&c, req->logdir, run, err, errsz))
		goto out;
	clean_stale(req);
	if (req->logdir && (fd = tb_open_run_dir(req->logdir, run, 0, err, errsz)) >= 0)
		close(fd);
	made_run_dir = req->logdir && fd < 0;
	*err = 0;
	if (first_out(req))
		out_stem(first_out(req), stem, sizeof(stem));
	if (make_sinks(&s, &c, req, run, stem, err, errsz)) {
		sinks_finish(&s, 0, err, errsz);
		goto out;
	}
	rc = run_core(&c, &s, err, errsz);
	if (!req->quiet)
		final_line(&c, &s);
	if (rc == 0 && !req->quiet && !req->caller_says_where && req->logdir)
		fprintf(stderr, "wrote %s/plugins/profile/%s/\n", req->logdir, run);
	if (rc == 0 && !req->quiet && !req->caller_says_where && req->json_out)
		fprintf(stderr, "wrote %s\n", req->json_out);
	if (rc == 0 && !req->quiet && !req->caller_says_where && req->pftrace_out)
		fprintf(stderr, "wrote %s\n", req->pftrace_out);
out:
	sinks_free(&s);
	if (rc && made_run_dir)
		remove_run_dir(req->logdir, run);
	cv_core_free(&c);
	return rc;
}

/* ------------------------------------------------------------- summary */

static void summary_usage(FILE *f)
{
	fprintf(f, "usage: llmtracker-convert summary [-n TOP] [--json] [--cupti-dir DIR] LOG|DIR ...\n"
		   "  Prints the steps and top-N tables per source: GPU kernels, copies,\n"
		   "  library calls, system calls, Python functions, hottest CPU and Python\n"
		   "  stacks; then the ranks of a distributed job and its stragglers.\n"
		   "  --json: the steps, ranks and stragglers as one JSON object instead.\n");
}

int conv_summary_main(int argc, char **argv)
{
	struct cv_core c;
	struct conv_request req = { 0 };
	const char **inputs = calloc((size_t)argc + 1, sizeof(*inputs));
	struct sinks s = { .n = 0 };
	char err[1024] = "";
	int top = 15, rc = 1, json = 0;

	if (!inputs)
		return 1;
	memset(&c, 0, sizeof(c));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			summary_usage(stdout);
			free(inputs);
			return 0;
		} else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			top = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--cupti-dir") && i + 1 < argc) {
			req.cupti_dir = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "llmtracker-convert summary: unknown option %s\n", argv[i]);
			summary_usage(stderr);
			free(inputs);
			return 2;
		} else {
			inputs[req.n_inputs++] = argv[i];
		}
	}
	if (!req.n_inputs && !req.cupti_dir) {
		summary_usage(stderr);
		free(inputs);
		return 2;
	}
	req.inputs = inputs;
	c.progress = cv_progress_mode(1);
	if (load(&c, &req, err, sizeof(err)) == 0) {
		struct conv_sink *k = summary_new(stdout, top, json);

		if (!k)
			snprintf(err, sizeof(err), "out of memory");
		else if (sinks_add(&s, k, summary_free, err, sizeof(err)) == 0)
			rc = run_core(&c, &s, err, sizeof(err)) ? 1 : 0;
	}
	if (rc)
		fprintf(stderr, "llmtracker-convert summary: %s\n", err);
	else
		final_line(&c, &s);
	sinks_free(&s);
	cv_core_free(&c);
	free(inputs);
	return rc;
}
