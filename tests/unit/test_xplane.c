/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The XPlane sink, driven directly with conv_items as the core would, then
 * decoded twice: by protoc (an independent decoder, checks the hand-written
 * framing) and by protobuf-c (structured checks: planes, ids, metadata,
 * order and nesting, launch/kernel correlation).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "converter/output/xplane.h"
#include "tb_layout/tb_layout.h"
#include "xplane.pb-c.h"
#include "unit/unit_util.h"

typedef Tensorflow__Profiler__XSpace XSpace;
typedef Tensorflow__Profiler__XPlane XPlane;
typedef Tensorflow__Profiler__XLine XLine;
typedef Tensorflow__Profiler__XEvent XEvent;
typedef Tensorflow__Profiler__XStat XStat;

#define T0 5000000000ull /* mono ns of the profile start */

static char tmpdir[256];

static int setup(void **state)
{
	(void)state;
	return ut_mkdtemp(tmpdir, sizeof(tmpdir), "test_xplane");
}

static int teardown(void **state)
{
	(void)state;
	return ut_rmtree(tmpdir);
}

/* ------------------------------------------------------------ a profile */

static struct evlog_event gpu_dev, api, kern, copy, mset, sys;
static const uint32_t streams[] = { 7, 14 };
static const struct conv_process procs[] = { { 100, "python3", "python3 train.py", -1, 0, "" } };
static const struct conv_thread threads[] = { { 100, 100, "python3", 0 }, { 100, 101, "loader", 0 } };
static struct conv_gpu gpus[] = { { 0, &gpu_dev, 2, streams } };

static struct conv_host_meta meta(void)
{
	struct conv_host_meta m = {
		.host = "node-1:gpu", .base_mono_ns = T0, .base_realtime_ns = 1700000000000000000ull,
		.start_ns = T0, .stop_ns = T0 + 1000000, .n_processes = 1, .n_threads = 2,
		.n_gpus = 1, .processes = procs, .threads = threads, .gpus = gpus,
	};

	gpu_dev.type = EV_GPU_DEVICE;
	gpu_dev.u.gpu_device.name = evlog_s("NVIDIA H200");
	gpu_dev.u.gpu_device.sm_count = 132;
	gpu_dev.u.gpu_device.clock_khz = 1980000;
	gpu_dev.u.gpu_device.memory_bytes = 150109880320ull;
	gpu_dev.u.gpu_device.memory_bandwidth = 4814304000000ull;
	gpu_dev.u.gpu_device.cc_major = 9;
	gpu_dev.u.gpu_device.max_threads_per_sm = 2048;
	gpu_dev.u.gpu_device.max_regs_per_sm = 65536;
	gpu_dev.u.gpu_device.max_smem_per_sm = 233472;
	return m;
}

static struct conv_item thr(uint32_t tid, uint64_t start, uint64_t dur, const char *name)
{
	struct conv_item it = { .track = CONV_TRACK_THREAD, .pid = 100, .tid = tid,
				.start_ns = T0 + start, .dur_ns = dur, .name = name,
				.category = "python_function" };
	return it;
}

static struct conv_item strm(uint32_t stream, uint64_t start, uint64_t dur, const char *name,
			     const struct evlog_event *ev)
{
	struct conv_item it = { .track = CONV_TRACK_STREAM, .device = 0, .stream = stream,
				.start_ns = T0 + start, .dur_ns = dur, .name = name,
				.category = "kernel", .ev = ev };
	return it;
}

static void feed(struct conv_sink *s)
{
	struct conv_host_meta m = meta();
	struct conv_item it;

	api.type = EV_GPU_API;
	api.u.gpu_api.correlation_id = 5;
	kern.type = EV_GPU_KERNEL;
	kern.u.gpu_kernel.registers = 168;
	kern.u.gpu_kernel.dynamic_smem = 231424;
	kern.u.gpu_kernel.grid[0] = 128, kern.u.gpu_kernel.grid[1] = kern.u.gpu_kernel.grid[2] = 1;
	kern.u.gpu_kernel.block[0] = 384, kern.u.gpu_kernel.block[1] = kern.u.gpu_kernel.block[2] = 1;
	kern.u.gpu_kernel.context = 1;
	copy.type = EV_GPU_MEMCPY;
	copy.u.gpu_memcpy.bytes = 4096;
	copy.u.gpu_memcpy.src_kind = 3, copy.u.gpu_memcpy.dst_kind = 2;
	mset.type = EV_GPU_MEMSET;
	mset.u.gpu_memset.bytes = 64;
	sys.type = EV_SYSCALL;
	sys.u.syscall.ret = 4096;

	assert_int_equal(s->begin_host(s->ctx, &m), 0);
	it = thr(100, 1000, 20000, "train"); it.step = 3;          /* step 2 */
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = thr(100, 2000, 5000, "forward");
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = thr(100, 3000, 500, "cudaLaunchKernel");
	it.flow_id = 77, it.flow_start = 1, it.ev = &api, it.category = "cuda_runtime";
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = thr(100, 6000, 20000, "overlaps_parent");             /* cut to 7000 */
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = thr(100, 1500, 10, "out_of_order");                   /* dropped */
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = thr(100, 8000, 0, "leaf_fn"); it.stack_folded = "main;train;leaf_fn";
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = thr(101, 500, 100, "read"); it.ev = &sys, it.category = "syscall";
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = strm(7, 4000, 3000, "gemm_kernel", &kern); it.flow_id = 77;
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = strm(7, 8000, 1000, "Memcpy DtoH", &copy);
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = strm(14, 9000, 100, "Memset", &mset);
	assert_int_equal(s->item(s->ctx, &it), 0);
	assert_int_equal(s->end_host(s->ctx), 0);
}

/* ------------------------------------------------------------- decoding */

static XSpace *load(const char *path)
{
	size_t n = 0;
	char *buf = ut_slurp(path, &n);
	XSpace *xs;

	assert_non_null(buf);
	xs = tensorflow__profiler__xspace__unpack(NULL, n, (const uint8_t *)buf);
	free(buf);
	return xs;
}

static const XPlane *plane(const XSpace *xs, const char *name)
{
	for (size_t i = 0; i < xs->n_planes; i++)
		if (!strcmp(xs->planes[i]->name, name))
			return xs->planes[i];
	return NULL;
}

static const char *stat_name(const XPlane *p, int64_t id)
{
	for (size_t i = 0; i < p->n_stat_metadata; i++)
		if (p->stat_metadata[i]->key == id && p->stat_metadata[i]->value->id == id)
			return p->stat_metadata[i]->value->name;
	return NULL;
}

static const char *event_name(const XPlane *p, int64_t id)
{
	for (size_t i = 0; i < p->n_event_metadata; i++)
		if (p->event_metadata[i]->key == id && p->event_metadata[i]->value->id == id)
			return p->event_metadata[i]->value->name;
	return NULL;
}

static const XStat *find_stat(const XPlane *p, XStat *const *stats, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		const char *sn = stat_name(p, stats[i]->metadata_id);

		if (sn && !strcmp(sn, name))
			return stats[i];
	}
	return NULL;
}

/* Every id resolves; lines sorted (longer first on ties) and nested. */
static void check_plane(const XPlane *p)
{
	for (size_t s = 0; s < p->n_stats; s++)
		assert_non_null(stat_name(p, p->stats[s]->metadata_id));
	for (size_t l = 0; l < p->n_lines; l++) {
		const XLine *ln = p->lines[l];
		int64_t ends[64], depth = 0, prev = -1, prev_dur = 0;

		assert_false(ln->id >= 0xdeadbeefLL && ln->id <= 0xdeadbeefLL + 289);
		for (size_t e = 0; e < ln->n_events; e++) {
			const XEvent *ev = ln->events[e];
			int64_t st = ev->offset_ps, en = st + ev->duration_ps;

			assert_non_null(event_name(p, ev->metadata_id));
			for (size_t s = 0; s < ev->n_stats; s++) {
				assert_non_null(stat_name(p, ev->stats[s]->metadata_id));
				if (ev->stats[s]->value_case == TENSORFLOW__PROFILER__XSTAT__VALUE_REF_VALUE)
					assert_non_null(stat_name(p, (int64_t)ev->stats[s]->ref_value));
			}
			assert_true(st > prev || (st == prev && ev->duration_ps <= prev_dur));
			while (depth && ends[depth - 1] <= st)
				depth--;
			if (depth)
				assert_true(en <= ends[depth - 1]);
			if (ev->duration_ps && depth < 64)
				ends[depth++] = en;
			prev = st, prev_dur = ev->duration_ps;
		}
	}
}

static void test_sink_roundtrip(void **state)
{
	char path[512], cmd[1024], err[256];
	struct conv_sink *s;
	struct xplane_stats st;
	XSpace *xs;
	const XPlane *host, *gpu, *env;

	(void)state;
	snprintf(path, sizeof(path), "%s/h.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	assert_non_null(s);
	feed(s);
	xplane_sink_stats(s, &st);
	assert_int_equal(st.events, 9);
	assert_int_equal(st.repaired, 1);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(access(path, F_OK), -1);      /* not published before finish */
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);

	/* An independent decoder reads it whole. */
	snprintf(cmd, sizeof(cmd), "protoc --decode=tensorflow.profiler.XSpace "
		 "--proto_path=%s/schemas %s/schemas/xplane.proto < %s | grep -q "
		 "'name: \"kernel_details\"'", getenv("LLMT_ROOT") ? getenv("LLMT_ROOT") : ".",
		 getenv("LLMT_ROOT") ? getenv("LLMT_ROOT") : ".", path);
	assert_int_equal(system(cmd), 0);

	xs = load(path);
	assert_non_null(xs);
	assert_int_equal(xs->n_hostnames, 1);
	assert_string_equal(xs->hostnames[0], "node-1:gpu");
	assert_int_equal(xs->n_warnings, 1);
	host = plane(xs, "/host:CPU");
	gpu = plane(xs, "/device:GPU:0");
	env = plane(xs, "Task Environment");
	assert_non_null(host);
	assert_non_null(gpu);
	assert_non_null(env);
	assert_int_equal(gpu->id, 0);
	check_plane(host);
	check_plane(gpu);
	check_plane(env);

	/* GPU plane stats, units as xprof reads them. */
	assert_int_equal(find_stat(gpu, gpu->stats, gpu->n_stats, "clock_rate")->int64_value, 1980000);
	assert_int_equal(find_stat(gpu, gpu->stats, gpu->n_stats, "core_count")->int64_value, 132);
	assert_string_equal(find_stat(gpu, gpu->stats, gpu->n_stats, "gpu_device_name")->str_value,
			    "NVIDIA H200");
	assert_true(find_stat(gpu, gpu->stats, gpu->n_stats, "memory_bandwidth")->uint64_value ==
		    4814304000000ull);
	assert_int_equal(find_stat(gpu, gpu->stats, gpu->n_stats, "compute_cap_major")->int64_value, 9);
	assert_true(find_stat(env, env->stats, env->n_stats, "profile_start_time")->uint64_value ==
		    1700000000000000000ull);
	assert_true(find_stat(env, env->stats, env->n_stats, "profile_stop_time")->uint64_value ==
		    1700000000001000000ull);

	/* Streams, kernel details and the launch <-> kernel correlation. */
	assert_int_equal(gpu->n_lines, 2);
	assert_string_equal(gpu->lines[0]->name, "Stream #7(Compute,Memcpy)");
	assert_int_equal(gpu->lines[0]->id, 7);
	assert_string_equal(gpu->lines[1]->name, "Stream #14(Memset)");
	{
		const XEvent *k = gpu->lines[0]->events[0];
		const XStat *kd = find_stat(gpu, k->stats, k->n_stats, "kernel_details");
		const XStat *kc = find_stat(gpu, k->stats, k->n_stats, "correlation_id");
		const XStat *lc = NULL;

		assert_string_equal(event_name(gpu, k->metadata_id), "gemm_kernel");
		assert_non_null(kd);
		assert_string_equal(stat_name(gpu, (int64_t)kd->ref_value),
				    "regs:168 static_shared:0 dynamic_shared:231424 grid:128,1,1 "
				    "block:384,1,1 occ_pct:18.75");
		assert_non_null(kc);
		assert_true(kc->uint64_value == 77);
		assert_string_equal(find_stat(gpu, k->stats, k->n_stats, "context_id")->str_value, "$$1");
		/* line 4000 ns into the profile, kernel at its start */
		assert_int_equal(gpu->lines[0]->timestamp_ns, 4000);
		assert_int_equal(k->offset_ps, 0);
		assert_int_equal(k->duration_ps, 3000000);
		for (size_t l = 0; l < host->n_lines && !lc; l++)
			for (size_t e = 0; e < host->lines[l]->n_events && !lc; e++) {
				const XEvent *he = host->lines[l]->events[e];

				lc = find_stat(host, he->stats, he->n_stats, "correlation_id");
				if (lc)
					assert_non_null(find_stat(host, he->stats, he->n_stats, "device_id"));
			}
		assert_non_null(lc);
		assert_true(lc->uint64_value == kc->uint64_value);
		/* interned, as xprof's CUPTI collector writes it */
		assert_non_null(strstr(stat_name(gpu, (int64_t)find_stat(gpu,
				gpu->lines[0]->events[1]->stats, gpu->lines[0]->events[1]->n_stats,
				"memcpy_details")->ref_value), "size:4096"));
	}

	/* Host lines: one per thread; the step root carries _r and step_num. */
	assert_int_equal(host->n_lines, 2);
	assert_int_equal(host->lines[0]->id, 100);
	assert_string_equal(host->lines[0]->name, "python3");
	assert_int_equal(host->lines[0]->n_events, 5);
	{
		const XEvent *step = host->lines[0]->events[0];

		assert_int_equal(find_stat(host, step->stats, step->n_stats, "_r")->int64_value, 1);
		assert_int_equal(find_stat(host, step->stats, step->n_stats, "step_num")->int64_value, 2);
		assert_int_equal(host->lines[0]->events[3]->duration_ps, 1000000); /* cut */
		assert_int_equal(host->lines[0]->events[4]->duration_ps, 0);       /* instant */
	}
	tensorflow__profiler__xspace__free_unpacked(xs, NULL);
}

static void test_no_clobber(void **state)
{
	char path[512], err[256];
	struct conv_sink *s;
	struct stat st0, st1;

	(void)state;
	snprintf(path, sizeof(path), "%s/keep.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	feed(s);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);
	assert_int_equal(stat(path, &st0), 0);

	/* A second writer is refused at begin_host, with a reason. */
	s = xplane_sink_new(path, 0, err, sizeof(err));
	{
		struct conv_host_meta m = meta();

		assert_int_equal(s->begin_host(s->ctx, &m), -1);
		assert_non_null(strstr(s->err, "already exists"));
	}
	xplane_sink_free(s);
	assert_int_equal(stat(path, &st1), 0);
	assert_int_equal(st0.st_ino, st1.st_ino);

	/* overwrite=1 replaces it. */
	s = xplane_sink_new(path, 1, err, sizeof(err));
	feed(s);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);
	assert_int_equal(stat(path, &st1), 0);
	assert_int_not_equal(st0.st_ino, st1.st_ino);
}

static void test_failure_leaves_nothing(void **state)
{
	char path[512], err[256], cmd[600];
	struct conv_sink *s;

	(void)state;
	snprintf(path, sizeof(path), "%s/fail/x.xplane.pb", tmpdir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/fail", tmpdir);
	assert_int_equal(system(cmd), 0);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	feed(s);
	assert_int_equal(s->finish(s->ctx, 0), 0);        /* the core failed: discard */
	xplane_sink_free(s);
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s/fail)\"", tmpdir);
	assert_int_equal(system(cmd), 0);
}

static void test_logdir_layout(void **state)
{
	char err[256], path[600];
	struct conv_sink *s;

	(void)state;
	s = xplane_sink_new_logdir(tmpdir, "myrun", 0, err, sizeof(err));
	assert_non_null(s);
	feed(s);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);
	snprintf(path, sizeof(path), "%s/plugins/profile/myrun/node-1_gpu.xplane.pb", tmpdir);
	assert_int_equal(access(path, R_OK), 0);
	assert_null(xplane_sink_new_logdir(tmpdir, "../evil", 0, err, sizeof(err)));
	assert_non_null(strstr(err, "'/'"));
}

/* Names from targets are bytes, not UTF-8; proto3 strings must be UTF-8 or
 * readers (xprof, protoc) reject the whole file. */
static void test_invalid_utf8(void **state)
{
	char path[512], cmd[1200], err[256];
	const char *root = getenv("LLMT_ROOT") ? getenv("LLMT_ROOT") : ".";
	struct conv_host_meta m = meta();
	struct conv_thread bad_threads[] = { { 100, 100, "py\xff\xfe", 0 }, { 100, 101, "ok", 0 } };
	struct conv_item it = thr(100, 1000, 100, "fn_\xc3(");
	struct conv_sink *s;

	(void)state;
	m.host = "host\xe9";
	m.threads = bad_threads;
	snprintf(path, sizeof(path), "%s/utf8.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	assert_int_equal(s->begin_host(s->ctx, &m), 0);
	it.stack_folded = "a;\xed\xa0\x80;b";          /* a UTF-16 surrogate: invalid */
	assert_int_equal(s->item(s->ctx, &it), 0);
	it = strm(7, 2000, 100, "k\xf8\x88\x80\x80\x80", &kern);
	assert_int_equal(s->item(s->ctx, &it), 0);
	assert_int_equal(s->end_host(s->ctx), 0);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);
	snprintf(cmd, sizeof(cmd), "protoc --decode=tensorflow.profiler.XSpace --proto_path=%s/schemas "
		 "%s/schemas/xplane.proto < %s > /dev/null", root, root, path);
	assert_int_equal(system(cmd), 0);
}

/* Items track by track (the sink contract), but within a track in any order
 * and overlap (starts going back, children outliving their parents): every
 * line comes out sorted and nested, and every event is either written, cut
 * or counted as dropped. Lines of ~50 KiB-100 KiB: their length slots are
 * patched both in the write buffer and in the file. */
static void test_random_items(void **state)
{
	char path[512], err[256];
	struct conv_host_meta m = meta();
	struct xplane_stats st;
	struct conv_sink *s;
	XSpace *xs;
	uint64_t rng = 42, written = 0;
	static const char *const names[] = { "a", "b", "c", "d" };
	int fed = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/random.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	assert_int_equal(s->begin_host(s->ctx, &m), 0);
	for (int track = 0; track < 5; track++)
		for (int i = 0; i < 2000 + track * 1000; i++, fed++) {
			struct conv_item it;

			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			/* mostly forward in time, now and then back */
			uint64_t start = (uint64_t)i * 40 + ((rng >> 59) ? 0 : (rng >> 24) % 4000);

			if (track >= 2)
				it = strm(7 + (uint32_t)(track - 2), start, (rng >> 40) % 500,
					  names[(rng >> 8) % 4], &kern);
			else
				it = thr(100 + (uint32_t)track, start, (rng >> 40) % 500,
					 names[(rng >> 8) % 4]);
			assert_int_equal(s->item(s->ctx, &it), 0);
		}
	assert_int_equal(s->end_host(s->ctx), 0);
	xplane_sink_stats(s, &st);
	assert_int_equal(st.events + st.dropped, fed);
	assert_true(st.repaired > 0 && st.dropped > 0);
	assert_int_equal(st.lines, 5);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);
	xs = load(path);
	assert_non_null(xs);
	for (size_t p = 0; p < xs->n_planes; p++) {
		check_plane(xs->planes[p]);
		for (size_t l = 0; l < xs->planes[p]->n_lines; l++)
			written += xs->planes[p]->lines[l]->n_events;
	}
	assert_int_equal(written, st.events);
	tensorflow__profiler__xspace__free_unpacked(xs, NULL);
}

/* One XEventMetadata per Python function (name + file:line), its source as
 * a metadata stat; the events themselves carry no per-event strings, and
 * sampled stacks are interned (ref_value). A plain event stays small. */
static void test_python_metadata(void **state)
{
	char path[512], err[256];
	struct conv_host_meta m = meta();
	struct evlog_event py[3];
	static const char *const files[] = { "train.py", "train.py", "model.py" };
	static const char *const funcs[] = { "step", "forward", "step" };
	struct xplane_stats st;
	struct conv_sink *s;
	const XPlane *host;
	XSpace *xs;
	size_t n_events = 0, plain_bytes = 0;
	int seen[3] = { 0, 0, 0 };

	(void)state;
	for (int i = 0; i < 3; i++) {
		memset(&py[i], 0, sizeof(py[i]));
		py[i].type = EV_PY_ENTER;
		py[i].u.py_enter.func = evlog_s(funcs[i]);
		py[i].u.py_enter.file = evlog_s(files[i]);
		py[i].u.py_enter.line = 10 + (uint32_t)i;
	}
	snprintf(path, sizeof(path), "%s/py.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	assert_int_equal(s->begin_host(s->ctx, &m), 0);
	for (int i = 0; i < 3000; i++) {
		struct conv_item it = thr(100, 1000 + (uint64_t)i * 100, 50, funcs[i % 3]);

		it.ev = &py[i % 3];
		assert_int_equal(s->item(s->ctx, &it), 0);
	}
	for (int i = 0; i < 100; i++) {
		struct conv_item it = thr(101, 1000 + (uint64_t)i * 100, 0, "leaf");

		it.stack_folded = i % 2 ? "main;a;leaf" : "main;b;leaf";
		it.category = "cpu_sample";
		assert_int_equal(s->item(s->ctx, &it), 0);
	}
	assert_int_equal(s->end_host(s->ctx), 0);
	xplane_sink_stats(s, &st);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);

	xs = load(path);
	assert_non_null(xs);
	host = plane(xs, "/host:CPU");
	assert_non_null(host);
	check_plane(host);
	/* step@train.py, forward@train.py, step@model.py, leaf */
	assert_int_equal(host->n_event_metadata, 4);
	for (size_t i = 0; i < host->n_event_metadata; i++) {
		const Tensorflow__Profiler__XEventMetadata *em = host->event_metadata[i]->value;
		const XStat *src = find_stat(host, em->stats, em->n_stats, "source");

		if (!strcmp(em->name, "leaf")) {
			assert_null(src);
			continue;
		}
		assert_non_null(src);
		for (int k = 0; k < 3; k++) {
			char want[64];

			snprintf(want, sizeof(want), "%s:%d", files[k], 10 + k);
			if (!strcmp(em->name, funcs[k]) && !strcmp(src->str_value, want))
				seen[k]++;
		}
	}
	assert_true(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
	for (size_t l = 0; l < host->n_lines; l++)
		for (size_t e = 0; e < host->lines[l]->n_events; e++) {
			const XEvent *ev = host->lines[l]->events[e];

			n_events++;
			if (host->lines[l]->id == 100) {
				assert_int_equal(ev->n_stats, 0);
				plain_bytes += tensorflow__profiler__xevent__get_packed_size(ev);
			} else {
				const XStat *stk = find_stat(host, ev->stats, ev->n_stats, "stack");

				assert_non_null(stk);
				assert_int_equal(stk->value_case,
						 TENSORFLOW__PROFILER__XSTAT__VALUE_REF_VALUE);
				assert_string_equal(stat_name(host, (int64_t)stk->ref_value),
						    e % 2 ? "main;a;leaf" : "main;b;leaf");
			}
		}
	assert_int_equal(n_events, 3100);
	/* metadata id + offset (< 2^35 ps here) + duration: 1+1 + 1+5 + 1+3 */
	assert_true(plain_bytes <= 3000 * 12);
	tensorflow__profiler__xspace__free_unpacked(xs, NULL);
}

/* Past 127 names (two-byte ids) every event still resolves to its own name;
 * an item for a line or plane already written (against the contract) is
 * dropped and counted, never written into another line; planes keep their
 * order, each once, the GPU plane written even without a line. */
static void test_ids_and_late_items(void **state)
{
	char path[512], err[256], name[32];
	struct conv_host_meta m = meta();
	struct xplane_stats st;
	struct conv_sink *s;
	const XPlane *host;
	XSpace *xs;

	(void)state;
	snprintf(path, sizeof(path), "%s/ids.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	assert_int_equal(s->begin_host(s->ctx, &m), 0);
	for (int i = 0; i < 300; i++) {
		struct conv_item it;

		snprintf(name, sizeof(name), "once_%d", i);
		it = thr(100, 1000 + (uint64_t)i * 10, 5, name);
		assert_int_equal(s->item(s->ctx, &it), 0);
	}
	for (int i = 0; i < 50; i++) {
		struct conv_item it = thr(101, 10000 + (uint64_t)i * 10, 5, "warm");

		assert_int_equal(s->item(s->ctx, &it), 0);
	}
	{
		struct conv_item late = thr(100, 20000, 5, "late");   /* its line was closed */

		assert_int_equal(s->item(s->ctx, &late), 0);
	}
	assert_int_equal(s->end_host(s->ctx), 0);
	xplane_sink_stats(s, &st);
	assert_int_equal(st.events, 350);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);

	xs = load(path);
	assert_non_null(xs);
	assert_int_equal(xs->n_planes, 3);
	assert_string_equal(xs->planes[0]->name, "/host:CPU");
	assert_string_equal(xs->planes[1]->name, "/device:GPU:0");
	assert_string_equal(xs->planes[2]->name, "Task Environment");
	assert_int_equal(xs->planes[1]->n_lines, 0);
	assert_true(xs->planes[1]->n_stats > 0);
	host = xs->planes[0];
	check_plane(host);
	assert_int_equal(host->n_event_metadata, 301);
	assert_int_equal(host->n_lines, 2);
	assert_int_equal(host->lines[0]->n_events, 300);
	assert_string_equal(host->lines[0]->name, "python3");
	assert_int_equal(host->lines[0]->duration_ps, (299 * 10 + 5) * 1000);
	for (size_t e = 0; e < host->lines[0]->n_events; e++) {
		snprintf(name, sizeof(name), "once_%zu", e);
		assert_string_equal(event_name(host, host->lines[0]->events[e]->metadata_id), name);
	}
	assert_int_equal(host->lines[1]->n_events, 50);
	for (size_t e = 0; e < host->lines[1]->n_events; e++)
		assert_string_equal(event_name(host, host->lines[1]->events[e]->metadata_id), "warm");
	assert_int_equal(xs->n_warnings, 1);
	tensorflow__profiler__xspace__free_unpacked(xs, NULL);
}

/* Kernels of two shapes, alternating, then one repeated: each carries its
 * own shape's occupancy (the sink keeps the last shape's, kernel_stats). */
static void test_occupancy_per_shape(void **state)
{
	static const struct { uint32_t block, regs, smem; const char *occ; } shape[] = {
		{ 384, 168, 231424, " occ_pct:18.75" }, /* 1 block of 12 warps in 64 */
		{ 128, 24, 0, " occ_pct:100" },
		{ 384, 168, 231424, " occ_pct:18.75" },
		{ 128, 24, 0, " occ_pct:100" },
		{ 128, 24, 0, " occ_pct:100" },
		{ 256, 64, 0, " occ_pct:50" },      /* 4 blocks of 8 warps by registers: 32 of 64 */
	};
	enum { N = sizeof(shape) / sizeof(shape[0]) };
	struct evlog_event ev[N];
	struct conv_host_meta m = meta();
	char path[512], err[256], want[256];
	struct conv_sink *s;
	XSpace *xs;
	const XPlane *gpu;

	(void)state;
	snprintf(path, sizeof(path), "%s/occ.xplane.pb", tmpdir);
	s = xplane_sink_new(path, 0, err, sizeof(err));
	assert_non_null(s);
	assert_int_equal(s->begin_host(s->ctx, &m), 0);
	for (int i = 0; i < N; i++) {
		struct conv_item it;

		memset(&ev[i], 0, sizeof(ev[i]));
		ev[i].type = EV_GPU_KERNEL;
		ev[i].u.gpu_kernel.registers = shape[i].regs;
		ev[i].u.gpu_kernel.dynamic_smem = shape[i].smem;
		ev[i].u.gpu_kernel.grid[0] = ev[i].u.gpu_kernel.grid[1] = ev[i].u.gpu_kernel.grid[2] = 1;
		ev[i].u.gpu_kernel.block[0] = shape[i].block;
		ev[i].u.gpu_kernel.block[1] = ev[i].u.gpu_kernel.block[2] = 1;
		it = strm(7, 1000 + (uint64_t)i * 1000, 500, "k", &ev[i]);
		assert_int_equal(s->item(s->ctx, &it), 0);
	}
	assert_int_equal(s->end_host(s->ctx), 0);
	assert_int_equal(s->finish(s->ctx, 1), 0);
	xplane_sink_free(s);

	xs = load(path);
	assert_non_null(xs);
	gpu = plane(xs, "/device:GPU:0");
	assert_non_null(gpu);
	assert_int_equal(gpu->n_lines, 1);
	assert_int_equal(gpu->lines[0]->n_events, N);
	for (int i = 0; i < N; i++) {
		const XEvent *k = gpu->lines[0]->events[i];
		const XStat *kd = find_stat(gpu, k->stats, k->n_stats, "kernel_details");

		assert_non_null(kd);
		snprintf(want, sizeof(want), "regs:%u static_shared:0 dynamic_shared:%u grid:1,1,1 "
			 "block:%u,1,1%s", shape[i].regs, shape[i].smem, shape[i].block, shape[i].occ);
		assert_string_equal(stat_name(gpu, (int64_t)kd->ref_value), want);
	}
	tensorflow__profiler__xspace__free_unpacked(xs, NULL);
	unlink(path);
}

static void test_occupancy(void **state)
{
	(void)state;
	/* Figures of the reference H200 profile's two kernels. */
	assert_true(xplane_occupancy_pct(384, 168, 231424, 2048, 65536, 233472) == 18.75);
	assert_true(xplane_occupancy_pct(128, 24, 0, 2048, 65536, 233472) == 100.0);
	assert_true(xplane_occupancy_pct(128, 24, 0, 0, 65536, 233472) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sink_roundtrip),
		cmocka_unit_test(test_no_clobber),
		cmocka_unit_test(test_failure_leaves_nothing),
		cmocka_unit_test(test_logdir_layout),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_random_items),
		cmocka_unit_test(test_occupancy),
		cmocka_unit_test(test_occupancy_per_shape),
		cmocka_unit_test(test_python_metadata),
		cmocka_unit_test(test_ids_and_late_items),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
