// SPDX-License-Identifier: Apache-2.0
/*
 * The gpu hook (--enable-cuda-kernel): a source that records nothing of its
 * own, only add_target. Every process followed after the start (a child,
 * an exec, a descendant found at the start) gets the CUPTI library once it
 * has loaded CUDA (lt_ck_attach_later, off the main loop). The processes
 * given by -p are attached by lt_profile once every source is in, the
 * launched command through its environment; lt_profile also stops the
 * library and sums up the "gpu" row (collector/profile.c).
 */
#include <errno.h>
#include <string.h>

#include "cuda_kernel.h"
#include "profile.h"

static int gpu_start(struct lt_session *s, void **state)
{
	(void)s;
	*state = NULL; /* s->cuda_kernel, read at each call: lt_profile frees it before the end */
	return 0;
}

static int gpu_given(const struct lt_session *s, int pid)
{
	for (int i = 0; i < s->opt.n_pids; i++)
		if (s->opt.pids[i] == pid)
			return 1;
	return 0;
}

static int gpu_add_target(struct lt_session *s, void *state, int pid)
{
	static int said;
	int rc;

	(void)state;
	if (!s->cuda_kernel || (!s->attached && gpu_given(s, pid)))
		return 0;
	rc = lt_ck_attach_later(s->cuda_kernel, pid);
	if (rc && !said++)
		LT_WARN("CUDA kernel profiling cannot wait for pid %d (and later ones like it): %s", pid,
			rc == -E2BIG ? "too many processes waiting for CUDA" : strerror(-rc));
	if (rc)
		lt_session_unseen(s, "gpu", pid, "too many processes waiting for CUDA");
	return 0;
}

static void gpu_stop(struct lt_session *s, void *state)
{
	(void)s;
	(void)state;
}

const struct lt_source lt_source_gpu = {
	.name = "gpu",
	.type_bit = 0,
	.hook = true,
	.evsrc = EVSRC_CUPTI,
	.kind_lo = 1,
	.kind_hi = 0, /* no ring-buffer records */
	.start = gpu_start,
	.add_target = gpu_add_target,
	.stop = gpu_stop,
};
