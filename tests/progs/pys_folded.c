// SPDX-License-Identifier: Apache-2.0
/*
 * pys_folded: the sampled Python stacks (EV_PY_SAMPLE) of an event log,
 * folded root first, for the -t pysample checks on hosts without our
 * libraries (built static).
 *
 *   pys_folded LOG [--no-lines]
 *
 * Prints "COUNT PID TID root;...;leaf" per distinct (pid, tid, stack), in
 * log order of first appearance. --no-lines drops " (file:line)" from the
 * frames. Exit 1 if the log cannot be read to its end.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventlog/eventlog.h"

#define MAX_STACKS 65536
#define MAX_TEXT 16384

struct stack {
	uint32_t pid, tid;
	uint64_t n;
	char *text;
};

static struct stack stacks[MAX_STACKS];
static size_t n_stacks;

/* frame text without a trailing " (file:line)" */
static size_t frame_len(const struct evlog_str *f, int no_lines)
{
	size_t n = f->len;

	if (no_lines && n && f->ptr[n - 1] == ')')
		for (size_t i = n; i-- > 0;)
			if (f->ptr[i] == '(' && i && f->ptr[i - 1] == ' ')
				return i - 1;
	return n;
}

static void fold(const struct evlog_pystack *s, int no_lines, char *out)
{
	size_t w = 0;

	for (uint32_t i = s->n; i-- > 0;) {
		size_t n = frame_len(&s->frames[i], no_lines);

		if (w + n + 2 >= MAX_TEXT)
			break;
		if (w)
			out[w++] = ';';
		memcpy(out + w, s->frames[i].ptr, n);
		w += n;
	}
	out[w] = 0;
}

static int count(uint32_t pid, uint32_t tid, const char *text)
{
	for (size_t i = 0; i < n_stacks; i++) {
		if (stacks[i].pid == pid && stacks[i].tid == tid && !strcmp(stacks[i].text, text)) {
			stacks[i].n++;
			return 0;
		}
	}
	if (n_stacks == MAX_STACKS || !(stacks[n_stacks].text = strdup(text)))
		return -1;
	stacks[n_stacks].pid = pid;
	stacks[n_stacks].tid = tid;
	stacks[n_stacks++].n = 1;
	return 0;
}

int main(int argc, char **argv)
{
	static char text[MAX_TEXT];
	const struct evlog_event *ev;
	struct evlog_reader *r;
	char msg[512];
	int rc, no_lines = argc > 2 && !strcmp(argv[2], "--no-lines");

	if (argc < 2) {
		fprintf(stderr, "usage: pys_folded LOG [--no-lines]\n");
		return 2;
	}
	if (evlog_reader_open(&r, argv[1], msg, sizeof(msg))) {
		fprintf(stderr, "pys_folded: %s\n", msg);
		return 1;
	}
	while ((rc = evlog_next(r, &ev)) == 0) {
		if (ev->type != EV_PY_SAMPLE)
			continue;
		fold(&ev->u.py_sample.stack, no_lines, text);
		if (count(ev->pid, ev->tid, text)) {
			fprintf(stderr, "pys_folded: too many distinct stacks\n");
			break;
		}
	}
	evlog_reader_close(r);
	for (size_t i = 0; i < n_stacks; i++) {
		printf("%" PRIu64 " %u %u %s\n", stacks[i].n, stacks[i].pid, stacks[i].tid, stacks[i].text);
		free(stacks[i].text);
	}
	return rc == -EVLOG_END ? 0 : 1;
}
