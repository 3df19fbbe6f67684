/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Folded-stack files beside the trace, in Brendan Gregg's format
 * ("root;frame;leaf count" per line) for flamegraph.pl, speedscope and
 * friends: <host>.cpu.folded from CPU samples, <host>.python.folded from
 * sampled Python stacks. Python enter/exit spans are not samples and are
 * not counted. A file is written only when its host has such samples.
 * Beside a -o trace they are named after it (<stem>.cpu.folded, or
 * <stem>.<host>.cpu.folded for several hosts), so two traces in one folder
 * never share them, and a replaced trace (--force) takes its old ones along.
 */
#include "converter/output/folded.h"
#include "converter/cv_util.h"
#include "converter/output/jsonw.h"
#include "tb_layout/tb_layout.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fs {
	struct conv_sink sink;
	int dirfd, overwrite;
	const char *stem;           /* -o's name without .json[.gz], or NULL: <host>.X.folded */
	size_t n_hosts;
	const struct conv_host_meta *meta;
	struct cv_map counts[2];    /* folded string pointer -> samples; [0] cpu, [1] python */
	struct cv_out *done;
	size_t n_done;
	char (*stale)[FOLDED_NAME_MAX]; /* ours from a replaced trace, not rewritten now */
	size_t n_stale;
	uint64_t files;
};

static const char *const suffixes[2] = { ".cpu.folded", ".python.folded" };

/* The file name of one host's stacks of kind k (0 cpu, 1 python). */
static int file_name(const struct fs *f, const char *host, int k, char *out, size_t n)
{
	char h[TB_NAME_MAX + 1];
	int len;

	if (tb_host_filename(host, h, sizeof(h)))
		return -1;
	if (!f->stem)
		len = snprintf(out, n, "%s%s", h, suffixes[k]);
	else if (f->n_hosts == 1)
		len = snprintf(out, n, "%s%s", f->stem, suffixes[k]);
	else
		len = snprintf(out, n, "%s.%s%s", f->stem, h, suffixes[k]);
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

static int fs_begin(void *ctx, const struct conv_host_meta *m)
{
	struct fs *f = ctx;

	f->meta = m;
	cv_map_free(&f->counts[0]);
	cv_map_free(&f->counts[1]);
	return 0;
}

static int fs_item(void *ctx, const struct conv_item *it)
{
	struct fs *f = ctx;
	int k;

	if (!it->stack_folded || !it->ev)
		return 0;
	if (it->ev->type == EV_CPU_SAMPLE)
		k = 0;
	else if (it->ev->type == EV_PY_SAMPLE)
		k = 1;
	else
		return 0;
	/* The core interns folded stacks: equal stacks share one pointer. */
	uint64_t *v = cv_map_put(&f->counts[k], (uint64_t)(uintptr_t)it->stack_folded, 0, NULL);

	if (!v) {
		snprintf(f->sink.err, sizeof(f->sink.err), "out of memory counting stacks");
		return -1;
	}
	(*v)++;
	return 0;
}

/* A file of ours (named after the -o being replaced) this conversion does not
 * rewrite: removed once the new trace is published, so none of the old
 * trace's stacks stay beside the new one. */
static int note_stale(struct fs *f, const char *name)
{
	struct stat st;
	char (*ns)[FOLDED_NAME_MAX];

	if (fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return 0;
	if (!(ns = realloc(f->stale, (f->n_stale + 1) * sizeof(*ns))))
		return -1;
	f->stale = ns;
	snprintf(f->stale[f->n_stale++], FOLDED_NAME_MAX, "%s", name);
	return 0;
}

struct line {
	const char *stack;
	uint64_t n;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->stack, ((const struct line *)b)->stack);
}

static int write_one(struct fs *f, int k)
{
	struct cv_map *m = &f->counts[k];
	char name[FOLDED_NAME_MAX];
	struct line *v;
	size_t n = 0;
	struct cv_out o;
	int rc = 0;

	if (file_name(f, f->meta->host, k, name, sizeof(name)))
		return -1;
	if (!m->n)
		return f->stem && f->overwrite ? note_stale(f, name) : 0;
	if (!(v = malloc(m->n * sizeof(*v))))
		return -1;
	for (size_t i = 0; i < m->n; i++)
		v[n++] = (struct line){ (const char *)(uintptr_t)m->ents[i].a, m->ents[i].val };
	qsort(v, n, sizeof(*v), cmp_line); /* stable output for diffs */
	if (cv_out_open(&o, f->dirfd, name, 0, f->overwrite, f->sink.err, sizeof(f->sink.err))) {
		free(v);
		return -1;
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = cv_out_str(&o, v[i].stack) || CV_OUT_LIT(&o, " ") || cv_json_u64(&o, v[i].n) ||
		     CV_OUT_LIT(&o, "\n");
	free(v);
	if (rc || cv_out_close(&o)) {
		snprintf(f->sink.err, sizeof(f->sink.err), "%.250s", o.err[0] ? o.err : "write failed");
		cv_out_discard(&o);
		return -1;
	}
	struct cv_out *nd = realloc(f->done, (f->n_done + 1) * sizeof(*nd));

	if (!nd) {
		cv_out_discard(&o);
		return -1;
	}
	f->done = nd;
	f->done[f->n_done++] = o;
	return 0;
}

static int fs_end(void *ctx)
{
	struct fs *f = ctx;

	if (write_one(f, 0) || write_one(f, 1)) {
		if (!f->sink.err[0])
			snprintf(f->sink.err, sizeof(f->sink.err), "out of memory");
		return -1;
	}
	return 0;
}

static int fs_finish(void *ctx, int ok)
{
	struct fs *f = ctx;
	int rc = 0;

	for (size_t i = 0; i < f->n_done; i++) {
		if (ok && !rc) {
			if (cv_out_publish(&f->done[i], f->overwrite, f->sink.err, sizeof(f->sink.err)))
				rc = -1;
			else
				f->files++;
		} else {
			cv_out_discard(&f->done[i]);
		}
	}
	for (size_t i = 0; ok && !rc && i < f->n_stale; i++)
		unlinkat(f->dirfd, f->stale[i], 0);
	f->n_done = 0;
	f->n_stale = 0;
	return rc;
}

struct conv_sink *folded_new(int dirfd, int overwrite, const char *stem, size_t n_hosts,
			     char *err, size_t errsz)
{
	struct fs *f = calloc(1, sizeof(*f));

	if (!f || (f->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		snprintf(err, errsz, "cannot open the folded-stack directory");
		free(f);
		return NULL;
	}
	f->overwrite = overwrite;
	f->stem = stem;
	f->n_hosts = n_hosts;
	f->sink.name = "folded stacks";
	f->sink.ctx = f;
	f->sink.begin_host = fs_begin;
	f->sink.item = fs_item;
	f->sink.end_host = fs_end;
	f->sink.finish = fs_finish;
	return &f->sink;
}

int folded_existing(const struct conv_sink *s, const char *host, char *name, size_t n)
{
	const struct fs *f = s->ctx;
	struct stat st;

	for (int k = 0; k < 2; k++)
		if (!file_name(f, host, k, name, n) && !fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
			return 1;
	return 0;
}

uint64_t folded_files(const struct conv_sink *s)
{
	return ((const struct fs *)s->ctx)->files;
}

void folded_free(struct conv_sink *s)
{
	if (!s)
		return;
	struct fs *f = s->ctx;

	fs_finish(f, 0);
	cv_map_free(&f->counts[0]);
	cv_map_free(&f->counts[1]);
	free(f->done);
	free(f->stale);
	close(f->dirfd);
	free(f);
}
