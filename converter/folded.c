/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Folded-stack files beside the trace, in Brendan Gregg's format
 * ("root;frame;leaf count" per line) for flamegraph.pl, speedscope and
 * friends: <host>.cpu.folded from CPU samples, <host>.python.folded from
 * sampled Python stacks. Python enter/exit spans are not samples and are
 * not counted. A file is written only when its host has such samples.
 */
#include "folded.h"
#include "cv_util.h"
#include "jsonw.h"
#include "../tb_layout/tb_layout.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fs {
	struct conv_sink sink;
	int dirfd, overwrite, keep_existing;
	const struct conv_host_meta *meta;
	struct cv_map counts[2];    /* folded string pointer -> samples; [0] cpu, [1] python */
	struct cv_out *done;
	size_t n_done;
	uint64_t files, kept;
};

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

struct line {
	const char *stack;
	uint64_t n;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->stack, ((const struct line *)b)->stack);
}

static int write_one(struct fs *f, struct cv_map *m, const char *suffix)
{
	char name[TB_NAME_MAX + 32];
	struct line *v;
	size_t n = 0;
	struct cv_out o;
	int rc = 0;

	if (!m->n)
		return 0;
	if (tb_host_filename(f->meta->host, name, sizeof(name) - 20))
		return -1;
	strcat(name, suffix);
	struct stat st;

	if (f->keep_existing && !f->overwrite && fstatat(f->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		f->kept++;
		return 0;
	}
	if (!(v = malloc(m->n * sizeof(*v))))
		return -1;
	for (size_t i = 0; i < m->cap; i++)
		if (m->ents[i].used)
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

	if (write_one(f, &f->counts[0], ".cpu.folded") ||
	    write_one(f, &f->counts[1], ".python.folded")) {
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
	f->n_done = 0;
	return rc;
}

struct conv_sink *folded_new(int dirfd, int overwrite, char *err, size_t errsz)
{
	struct fs *f = calloc(1, sizeof(*f));

	if (!f || (f->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		snprintf(err, errsz, "cannot open the folded-stack directory");
		free(f);
		return NULL;
	}
	f->overwrite = overwrite;
	f->sink.name = "folded stacks";
	f->sink.ctx = f;
	f->sink.begin_host = fs_begin;
	f->sink.item = fs_item;
	f->sink.end_host = fs_end;
	f->sink.finish = fs_finish;
	return &f->sink;
}

void folded_keep_existing(struct conv_sink *s)
{
	((struct fs *)s->ctx)->keep_existing = 1;
}

uint64_t folded_kept(const struct conv_sink *s)
{
	return ((const struct fs *)s->ctx)->kept;
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
	close(f->dirfd);
	free(f);
}
