// SPDX-License-Identifier: Apache-2.0
/*
 * The gpu source (--enable-cuda-kernel): CUDA kernels, copies and memsets,
 * recorded by CUPTI inside each target through the injected library
 * (collector/injection/inject_mgr.h: one copy per process, whatever it serves); no
 * BPF, no ring-buffer records. Every process announced (add_target) gets
 * it: one given by -p at once (from a thread), one followed later (a child, an exec, a
 * descendant found at the start) once it has loaded CUDA, off the main
 * loop; one already traced by the Python hook got it in the hook's start.
 * The launched command gets it from CUDA (its environment: lt_profile).
 * Its row counts what the libraries recorded (lt_im_stop, before finish).
 */
#include <errno.h>
#include <string.h>

#include "collector/injection/inject_mgr.h"
#include "collector/session/launch.h"
#include "collector/session/profile.h"

static int gpu_start(struct lt_session *s, void **state)
{
	const char *why;

	*state = NULL; /* s->inject: lt_profile owns it */
	if (!lt_im_usable(s->inject, LT_IM_CUDA, &why))
		lt_session_not_recorded(s, "gpu", "%s", why);
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
	if (!lt_im_usable(s->inject, LT_IM_CUDA, NULL))
		return 0;
	if (!s->attached && gpu_given(s, pid) && lt_launch_is_own_fork(pid))
		return 0; /* the launched command: CUDA loads the library */
	/* A -p process at once (off the loop's thread: a Python one has it
	 * from its hook's start already), a followed one once it has CUDA. */
	rc = lt_im_attach_later(s->inject, pid, LT_IM_CUDA, !s->attached && gpu_given(s, pid) ? LT_IM_NOW : 0);
	if (rc == -ECANCELED) /* announced while the profile ends */
		return 0;
	if (rc && !said++)
		LT_WARN("CUDA kernel profiling cannot wait for pid %d (and later ones like it): %s", pid,
			rc == -E2BIG ? "too many processes waiting for CUDA" : strerror(-rc));
	if (rc)
		lt_session_unseen(s, "gpu", pid, "too many processes waiting for CUDA");
	return 0;
}

static int gpu_finish(struct lt_session *s, void *state)
{
	struct lt_im_totals t;

	(void)state;
	lt_im_totals(s->inject, &t);
	lt_session_add_events(s, "gpu", t.kernels + t.memcpys + t.memsets - t.cuda_unpublished);
	lt_session_add_lost(s, "gpu", t.dropped + t.cuda_unpublished);
	return 0;
}

static void gpu_stop(struct lt_session *s, void *state)
{
	(void)s;
	(void)state;
}

const struct lt_source lt_source_gpu = {
	.kind_lo = 1,
	.kind_hi = 0, /* no ring-buffer records */
	.start = gpu_start,
	.add_target = gpu_add_target,
	.finish = gpu_finish,
	.stop = gpu_stop,
};
