/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes a GPU-only event log (what the injected library records with no
 * launch records: kernels alone) of a loop whose true steps it knows, for
 * the step detector's kernel evidence:
 *
 *   gpu_steps_genlog OUT TRUTH MODE
 *
 * MODE train: an eager training step (6 layers forward and backward, loss,
 * optimizer), launch-bound (the stream idles 4-12 us between kernels), the
 * host's work between steps 250-350 us, two warm-up steps 3x as long;
 * graph: the same step replayed as one CUDA graph (0.5-1.5 us between
 * kernels, 20-30 us between replays); variable: generation, a prefill then
 * 5-40 decode iterations a step; noloop: kernels of ten names in random
 * order after random idle times. TRUTH gets "train START END" per step (wall
 * clock ns, as the trace's baseTimeNanoseconds): from the step's first
 * kernel to the next step's first.
 * Fixed seed: the same log every time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US 1000ull
#define PID 4000
#define GENLOG_PID PID

#include "genlog.h"

#define MONO0 2000000000000ull
#define REAL0 1790000000000000000ull
#define WALL(t) ((unsigned long long)((t) - MONO0 + REAL0))

static uint64_t now = MONO0, corr;
static uint32_t seed = 12345;

static uint32_t rnd(uint32_t lo, uint32_t hi) /* in [lo, hi] */
{
	seed = seed * 1103515245u + 12345u;
	return lo + (seed >> 8) % (hi - lo + 1);
}

/* One kernel after `idle_ns` of idle stream; returns its start. */
static uint64_t kernel(const char *name, uint64_t dur_ns, uint64_t idle_ns)
{
	struct evlog_event e;

	memset(&e, 0, sizeof(e));
	now += idle_ns;
	e.type = EV_GPU_KERNEL;
	e.ts = now;
	e.pid = PID;
	e.u.gpu_kernel.dur = dur_ns;
	e.u.gpu_kernel.context = 1;
	e.u.gpu_kernel.stream = 7;
	e.u.gpu_kernel.correlation_id = ++corr;
	e.u.gpu_kernel.name = evlog_s(name);
	e.u.gpu_kernel.grid[0] = e.u.gpu_kernel.grid[1] = e.u.gpu_kernel.grid[2] = 1;
	e.u.gpu_kernel.block[0] = e.u.gpu_kernel.block[1] = e.u.gpu_kernel.block[2] = 1;
	put(&e);
	uint64_t start = now;

	now += dur_ns;
	return start;
}

/* One training step; gaps: idle between kernels [lo, hi] ns. */
static uint64_t train_step(uint64_t first_idle, uint32_t lo, uint32_t hi, int slow)
{
	static const char *fwd[] = { "ampere_bf16_gemm_fwd", "gelu_kernel", "layer_norm_fwd" };
	static const char *bwd[] = { "ampere_bf16_gemm_dgrad", "ampere_bf16_gemm_wgrad",
				     "gelu_backward_kernel" };
	uint64_t x = slow ? 3 : 1;
	uint64_t start = kernel("embedding_fwd", 12 * US * x, first_idle);

	for (int l = 0; l < 6; l++)
		for (int k = 0; k < 3; k++)
			kernel(fwd[k], (k ? 12 : 80) * US * x, rnd(lo, hi));
	kernel("cross_entropy_fwd", 20 * US * x, rnd(lo, hi));
	kernel("cross_entropy_bwd", 18 * US * x, rnd(lo, hi));
	for (int l = 0; l < 6; l++)
		for (int k = 0; k < 3; k++)
			kernel(bwd[k], (k < 2 ? 90 : 12) * US * x, rnd(lo, hi));
	kernel("embedding_bwd", 30 * US * x, rnd(lo, hi));
	for (int k = 0; k < 3; k++)
		kernel("multi_tensor_apply_adam", 40 * US * x, rnd(lo, hi));
	return start;
}

static uint64_t gen_step(void)
{
	uint64_t start = kernel("embedding_fwd", 10 * US, rnd(200 * US, 400 * US));

	for (int l = 0; l < 4; l++) {
		kernel("flash_attn_prefill", 60 * US, rnd(3000, 6000));
		kernel("mlp_prefill_gemm", 50 * US, rnd(3000, 6000));
	}
	for (uint32_t d = 0, n = rnd(5, 40); d < n; d++) {
		kernel("flash_attn_decode", 30 * US, rnd(3000, 6000));
		kernel("mlp_decode_gemm", 25 * US, rnd(3000, 6000));
		kernel("sample_token", 5 * US, rnd(3000, 6000));
	}
	return start;
}

int main(int argc, char **argv)
{
	struct evlog_header h = { 0 };
	char msg[256];

	if (argc != 4) {
		fprintf(stderr, "usage: gpu_steps_genlog OUT TRUTH train|graph|variable|noloop\n");
		return 2;
	}
	const char *mode = argv[3];
	FILE *truth = fopen(argv[2], "w");

	if (!truth) {
		perror(argv[2]);
		return 1;
	}
	h.host = evlog_s("node-g");
	h.boot_id = evlog_s("boot-g");
	h.producer = evlog_s("inject");
	h.cmdline = evlog_s("gpu_steps_genlog");
	h.mono_ns = MONO0;
	h.realtime_ns = REAL0;
	if (evlog_writer_open(&w, argv[1], &h, NULL, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "gpu_steps_genlog: %s\n", msg);
		return 1;
	}
	uint64_t prev = 0;
	int steps = !strcmp(mode, "variable") ? 25 : 30;

	if (!strcmp(mode, "noloop")) {
		static const char *names[] = { "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9" };

		for (int i = 0; i < 3000; i++)
			kernel(names[rnd(0, 9)], rnd(5, 100) * US, rnd(0, 2000) * US / 10);
		steps = 0;
	}
	for (int s = 0; s < steps; s++) {
		uint64_t start;

		if (!strcmp(mode, "train"))
			start = train_step(rnd(250 * US, 350 * US), 4000, 12000, s < 2);
		else if (!strcmp(mode, "graph"))
			start = train_step(rnd(20 * US, 30 * US), 500, 1500, 0);
		else if (!strcmp(mode, "variable"))
			start = gen_step();
		else {
			fprintf(stderr, "gpu_steps_genlog: unknown mode %s\n", mode);
			return 2;
		}
		if (s)
			fprintf(truth, "train %llu %llu\n", WALL(prev), WALL(start));
		prev = start;
	}
	if (steps)
		fprintf(truth, "train %llu %llu\n", WALL(prev), WALL(now));
	if (fclose(truth) || evlog_writer_close_msg(w, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "gpu_steps_genlog: %s\n", msg);
		return 1;
	}
	return 0;
}
