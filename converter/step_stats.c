/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-step table and breakdown for the summary. Steps (markers or detected)
 * arrive first on their thread; GPU time is then added to the step(s) it
 * overlaps, found by binary search, clipped to each step. Time on several
 * streams at once is counted per stream, so the parts are capped in a fixed
 * order (collectives, compute, copies, host launching) and the rest is idle:
 * they always add up to the step time.
 */
#include "step_stats.h"
#include "steps.h"

#include <stdlib.h>
#include <string.h>

#define STEPS_MAX (1u << 16)

enum part { P_NCCL, P_COMPUTE, P_COPY, P_LAUNCH, P_N };

struct step {
	uint64_t start, end;
	uint64_t part[P_N];
};

struct step_stats {
	const struct conv_host_meta *m;
	struct step *v;
	uint32_t n, cap;
	uint32_t pid, tid;           /* the thread the steps are on */
	uint64_t dropped;            /* steps past STEPS_MAX */
};

struct step_stats *step_stats_new(void)
{
	return calloc(1, sizeof(struct step_stats));
}

void step_stats_free(struct step_stats *s)
{
	if (s)
		free(s->v);
	free(s);
}

void step_stats_begin(struct step_stats *s, const struct conv_host_meta *m)
{
	s->m = m;
	s->n = 0;
	s->dropped = 0;
}

static int add_step(struct step_stats *s, const struct conv_item *it)
{
	if (s->n == STEPS_MAX) {
		s->dropped++;
		return 0;
	}
	if (s->n && it->start_ns < s->v[s->n - 1].start)
		return 0; /* steps of a second thread: the first one's table stands */
	if (s->n == s->cap) {
		uint32_t nc = s->cap ? s->cap * 2 : 256;
		struct step *nv = realloc(s->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		s->v = nv;
		s->cap = nc;
	}
	s->v[s->n++] = (struct step){ .start = it->start_ns, .end = it->start_ns + it->dur_ns };
	s->pid = it->pid;
	s->tid = it->tid;
	return 0;
}

static int part_of(const struct conv_item *it, const struct step_stats *s)
{
	const char *c = it->category;

	if (it->track == CONV_TRACK_STREAM) {
		if (!strcmp(c, "kernel"))
			return strncmp(it->name, "nccl", 4) ? P_COMPUTE : P_NCCL;
		return strcmp(c, "gpu_memcpy") && strcmp(c, "gpu_memset") ? -1 : P_COPY;
	}
	/* The driving thread inside the CUDA runtime or driver: launching. */
	if (it->pid == s->pid && it->tid == s->tid && strstr(c, "cuda") && strcmp(c, "cuda_sync"))
		return P_LAUNCH;
	return -1;
}

/* Add [a, b) of part p to every step it overlaps. */
static void spread(struct step_stats *s, int p, uint64_t a, uint64_t b)
{
	uint32_t lo = 0, hi = s->n;

	while (lo < hi) { /* first step ending after a */
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = lo; i < s->n && s->v[i].start < b; i++) {
		uint64_t x = a > s->v[i].start ? a : s->v[i].start;
		uint64_t y = b < s->v[i].end ? b : s->v[i].end;

		if (y > x)
			s->v[i].part[p] += y - x;
	}
}

int step_stats_item(struct step_stats *s, const struct conv_item *it)
{
	if (it->step)
		return add_step(s, it);
	if (!s->n || !it->dur_ns)
		return 0;
	int p = part_of(it, s);

	if (p >= 0)
		spread(s, p, it->start_ns, it->start_ns + it->dur_ns);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The parts of one step, capped in order so that they add up to it. */
static void capped(const struct step *st, uint64_t out[P_N + 1])
{
	uint64_t left = st->end - st->start;

	for (int p = 0; p < P_N; p++) {
		out[p] = st->part[p] < left ? st->part[p] : left;
		left -= out[p];
	}
	out[P_N] = left;
}

static void print_breakdown(const struct step_stats *s, FILE *out, uint64_t total)
{
	static const char *const names[P_N + 1] = {
		"collectives (NCCL kernels)", "GPU compute (kernels)", "copies and sets",
		"GPU idle, host launching (CUDA calls, its thread)",
		"idle: no GPU work, no launch (input, Python, waits)",
	};
	uint64_t sum[P_N + 1] = { 0 };

	for (uint32_t i = 0; i < s->n; i++) {
		uint64_t one[P_N + 1];

		capped(&s->v[i], one);
		for (int p = 0; p <= P_N; p++)
			sum[p] += one[p];
	}
	fprintf(out, "  step time breakdown (adds up to the steps' %.3f ms):\n", total / 1e6);
	for (int p = 0; p <= P_N; p++)
		fprintf(out, "    %12.3f ms %6.1f%%  %s\n", sum[p] / 1e6,
			total ? 100.0 * sum[p] / total : 0.0, names[p]);
}

static void print_slowest(const struct step_stats *s, FILE *out, int top, uint64_t p50)
{
	uint32_t *idx = malloc(s->n * sizeof(*idx));

	if (!idx)
		return;
	for (uint32_t i = 0; i < s->n; i++)
		idx[i] = i;
	/* Partial selection: top is small. */
	uint32_t k = (uint32_t)top < s->n ? (uint32_t)top : s->n;

	for (uint32_t i = 0; i < k; i++)
		for (uint32_t j = i + 1; j < s->n; j++) {
			const struct step *a = &s->v[idx[i]], *b = &s->v[idx[j]];

			if (b->end - b->start > a->end - a->start) {
				uint32_t t = idx[i];

				idx[i] = idx[j];
				idx[j] = t;
			}
		}
	fprintf(out, "  slowest steps (what differs from the median step is in its parts):\n"
		     "    %7s %10s %6s %9s %9s %9s %9s %9s\n", "step", "ms", "x p50", "nccl",
		"compute", "copies", "launching", "idle");
	for (uint32_t i = 0; i < k; i++) {
		const struct step *st = &s->v[idx[i]];
		uint64_t one[P_N + 1];

		capped(st, one);
		fprintf(out, "    %7u %10.3f %6.2f %9.3f %9.3f %9.3f %9.3f %9.3f\n", idx[i],
			(st->end - st->start) / 1e6, p50 ? (double)(st->end - st->start) / p50 : 0.0,
			one[P_NCCL] / 1e6, one[P_COMPUTE] / 1e6, one[P_COPY] / 1e6,
			one[P_LAUNCH] / 1e6, one[P_N] / 1e6);
	}
	free(idx);
}

void step_stats_print(const struct step_stats *s, FILE *out, int top)
{
	const struct conv_steps *st = s->m ? s->m->steps : NULL;

	fprintf(out, "\nSteps: %s\n", st ? st->evidence : "not looked for");
	if (!s->n)
		return;
	uint64_t *d = malloc(s->n * sizeof(*d)), total = 0;

	if (!d)
		return;
	for (uint32_t i = 0; i < s->n; i++)
		total += d[i] = s->v[i].end - s->v[i].start;
	qsort(d, s->n, sizeof(*d), cmp_u64);
	uint64_t p50 = d[s->n / 2], p99 = d[(uint32_t)((s->n - 1) * 0.99 + 0.5)];

	char where[64];

	if (st && st->on_stream)
		snprintf(where, sizeof(where), "GPU %u stream %u", st->device, st->stream);
	else
		snprintf(where, sizeof(where), "thread %u", s->tid);
	/* two lines, to fit 80 columns */
	fprintf(out, "  %u steps on %s: mean %.3f ms, p50 %.3f ms, p99 %.3f ms\n"
		"    min %.3f ms, max %.3f ms%s\n", s->n, where, total / 1e6 / s->n, p50 / 1e6,
		p99 / 1e6, d[0] / 1e6, d[s->n - 1] / 1e6, s->dropped ? " (more steps not counted)" : "");
	free(d);
	print_breakdown(s, out, total);
	print_slowest(s, out, top < 5 ? top : 5, p50);
}
