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

/* The trace files -o writes, by the ending of their name; a name no kind's
 * ending matches is the first kind's, which refuses it naming what it
 * takes. The folded stacks go beside the first -o file in this order. */
static const struct out_kind {
	const char *name;               /* "a JSON trace is already asked for" */
	const char *endings[4];         /* NULL-terminated; cut off for the folded stacks */
	const char *help;               /* what it is, for --help */
	struct conv_sink *(*open)(const char *path, int overwrite, char *err, size_t errsz);
	void (*free)(struct conv_sink *s);
	const struct fold_model *model; /* its size, for --max-trace-mb */
} out_kinds[] = {
	{ "JSON", { ".json", ".json.gz" },
	  "the trace JSON (Perfetto, chrome://tracing), gzip'ed for .gz",
	  trace_json_new_file, trace_json_free, &trace_json_model },
	{ "Perfetto", { ".pftrace", ".perfetto-trace" },
	  "Perfetto's protobuf trace (ui.perfetto.dev)",
	  perfetto_new_file, perfetto_free, &perfetto_model },
};
#define N_OUT_KINDS (sizeof(out_kinds) / sizeof(out_kinds[0]))
_Static_assert(N_OUT_KINDS <= CONV_MAX_OUTS, "struct conv_request holds a file of each kind");

/* What a --logdir run gets per host, beside its folded stacks. */
static const struct run_writer {
	const char *suffix;             /* <host><suffix>: a run holding one is taken */
	struct conv_sink *(*open)(const char *logdir, const char *run, int overwrite, char *err,
				  size_t errsz);
	void (*free)(struct conv_sink *s);
	const struct fold_model *model; /* NULL: never folded */
} run_writers[] = {
	{ ".trace.json.gz", trace_json_new_logdir, trace_json_free, &trace_json_model },
	{ ".xplane.pb", xplane_sink_new_logdir, xplane_sink_free, NULL },
};
#define N_RUN_WRITERS (sizeof(run_writers) / sizeof(run_writers[0]))

/* Every -o trace and the folded stacks beside them, every run writer and
 * the run's folded stacks. summary: one. */
#define MAX_SINKS (N_OUT_KINDS + 1 + N_RUN_WRITERS + 1)

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
	if ((size_t)s->n == MAX_SINKS) {
		f(k);
		snprintf(err, errsz, "too many outputs at once (at most %d)", (int)MAX_SINKS);
		return -1;
	}
	s->v[s->n] = s->writer[s->n] = k;
	s->free_fn[s->n] = s->writer_free[s->n] = f;
	s->n++;
	return 0;
}

/* A writer just made (NULL: it failed, err says why), behind a filter that
 * keeps it within its share of the budget where it has a size model. */
static int sinks_add_writer(struct sinks *s, struct conv_sink *k, void (*f)(struct conv_sink *),
			    uint64_t budget, const struct fold_model *m, char *err, size_t errsz)
{
	struct conv_sink *outer;

	if (!k)
		return -1;
	if (!m || budget == UINT64_MAX)
		return sinks_add(s, k, f, err, errsz);
	if (!budget)
		budget = CONV_TRACE_BUDGET_DEFAULT;
	budget *= m->budget_x;
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

/* The length of the ending of name some -o kind takes (the kind in *kind),
 * or 0 (the first kind); a name that is only an ending has none. */
static size_t out_ending(const char *name, size_t *kind)
{
	size_t n = strlen(name);

	for (size_t k = 0; k < N_OUT_KINDS; k++)
		for (const char *const *e = out_kinds[k].endings; *e; e++) {
			size_t len = strlen(*e);

			if (n > len && !strcmp(name + n - len, *e)) {
				*kind = k;
				return len;
			}
		}
	*kind = 0;
	return 0;
}

int conv_request_out(struct conv_request *req, const char *path, char *err, size_t errsz)
{
	size_t k;

	out_ending(path, &k);
	if (req->out[k]) {
		snprintf(err, errsz, "-o %s: a %s trace is already asked for (-o %s)", path,
			 out_kinds[k].name, req->out[k]);
		return -1;
	}
	req->out[k] = path;
	return 0;
}

void conv_out_help(FILE *f, int indent)
{
	for (size_t k = 0; k < N_OUT_KINDS; k++) {
		fprintf(f, "%*s", indent, "");
		for (const char *const *e = out_kinds[k].endings; *e; e++)
			fprintf(f, "%s%s", e == out_kinds[k].endings ? "" : ", ", *e);
		fprintf(f, ": %s\n", out_kinds[k].help);
	}
}

/* -o's file name without its directory and ending: the folded files' stem. */
static void out_stem(const char *out, char *stem, size_t n)
{
	const char *b = strrchr(out, '/');
	size_t kind;

	b = b ? b + 1 : out;
	snprintf(stem, n, "%.*s", (int)(strlen(b) - out_ending(b, &kind)), b);
}

/* The -o file the folded stacks go beside: the first in the kinds' order. */
static const char *first_out(const struct conv_request *req)
{
	for (size_t k = 0; k < N_OUT_KINDS; k++)
		if (req->out[k])
			return req->out[k];
	return NULL;
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

/* The folded stacks, into dirfd (closed here; < 0: it failed, err says
 * why), named after the first -o trace (stem) or not (NULL): the sink
 * added, or NULL with err set. */
static struct conv_sink *sinks_add_folded(struct sinks *s, const struct cv_core *c, int dirfd,
					  int overwrite, const char *stem, char *err, size_t errsz)
{
	struct conv_sink *k;

	if (dirfd < 0)
		return NULL;
	k = folded_new(dirfd, overwrite, stem, c->n_hosts, err, errsz);
	close(dirfd);
	return k && !sinks_add(s, k, folded_free, err, errsz) ? k : NULL;
}

/* Each -o trace, and the folded stacks beside the first. */
static int make_out_sinks(struct sinks *s, const struct cv_core *c, const struct conv_request *req,
			  const char *stem, char *err, size_t errsz)
{
	struct conv_sink *folded;

	for (size_t k = 0; k < N_OUT_KINDS; k++) {
		const struct out_kind *o = &out_kinds[k];

		if (req->out[k] &&
		    sinks_add_writer(s, o->open(req->out[k], req->overwrite, err, errsz), o->free,
				     req->trace_budget, o->model, err, errsz))
			return -1;
	}
	if (!first_out(req))
		return 0;
	folded = sinks_add_folded(s, c, open_dir(first_out(req), err, errsz), req->overwrite, stem,
				  err, errsz);
	if (!folded)
		return -1;
	return req->overwrite ? 0 : folded_free_check(c, folded, first_out(req), err, errsz);
}

/* --logdir: the run's writers and its folded stacks. */
static int make_run_sinks(struct sinks *s, const struct cv_core *c, const struct conv_request *req,
			  const char *run, char *err, size_t errsz)
{
	for (size_t k = 0; k < N_RUN_WRITERS; k++) {
		const struct run_writer *w = &run_writers[k];

		if (sinks_add_writer(s, w->open(req->logdir, run, req->overwrite, err, errsz), w->free,
				     req->trace_budget, w->model, err, errsz))
			return -1;
	}
	return sinks_add_folded(s, c, tb_open_run_dir(req->logdir, run, 1, err, errsz),
				req->overwrite, NULL, err, errsz) ? 0 : -1;
}

static int make_sinks(struct sinks *s, const struct cv_core *c, const struct conv_request *req,
		      const char *run, const char *stem, char *err, size_t errsz)
{
	if (make_out_sinks(s, c, req, stem, err, errsz))
		return -1;
	return req->logdir ? make_run_sinks(s, c, req, run, err, errsz) : 0;
}

/* Temporaries of an earlier conversion killed where we write (SIGKILL, a
 * crash): provably a dead one's (tb_clean_stale), they go now. */
static void clean_stale(const struct conv_request *req)
{
	int n = 0, fd;

	for (size_t k = 0; k < N_OUT_KINDS; k++)
		if (req->out[k] && (fd = open_dir(req->out[k], NULL, 0)) >= 0) {
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
	char path[PATH_MAX];
	struct stat sb;

	for (size_t h = 0; h < c->n_hosts; h++)
		for (size_t w = 0; w < N_RUN_WRITERS; w++) {
			if (tb_run_file_path(logdir, run, c->hosts[h].name ? c->hosts[h].name : "",
					     run_writers[w].suffix, path, sizeof(path)))
				continue; /* too long: the run's own checks say so */
			if (lstat(path, &sb) == 0) {
				snprintf(err, errsz, "run %s already holds %s: nothing converted (use --force, "
					 "another --run, or remove it)", run, strrchr(path, '/') + 1);
				return -1;
			}
		}
	return 0;
}

/* Refuse before reading anything: a long conversion that cannot publish
 * at the end would be wasted. (Publishing checks again, atomically.) */
static int outs_free(const struct conv_request *req, char *err, size_t errsz)
{
	struct stat sb;

	for (size_t k = 0; k < N_OUT_KINDS; k++)
		if (req->out[k] && !req->overwrite && lstat(req->out[k], &sb) == 0) {
			snprintf(err, errsz, "%s already exists; pass --force to replace it", req->out[k]);
			return -1;
		}
	return 0;
}

/* The closing "wrote" lines: where each output went. */
static void say_where(const struct conv_request *req, const char *run)
{
	if (req->logdir)
		fprintf(stderr, "wrote %s/plugins/profile/%s/\n", req->logdir, run);
	for (size_t k = 0; k < N_OUT_KINDS; k++)
		if (req->out[k])
			fprintf(stderr, "wrote %s\n", req->out[k]);
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
	if (!first_out(req) && !req->logdir) {
		snprintf(err, errsz, "no output: give -o OUT.pftrace, -o OUT.json[.gz] or --logdir DIR");
		return -1;
	}
	if ((run && tb_run_name_check(run, err, errsz)) || outs_free(req, err, errsz))
		return -1;
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
	if (rc == 0 && !req->quiet && !req->caller_says_where)
		say_where(req, run);
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
