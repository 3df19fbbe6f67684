// SPDX-License-Identifier: Apache-2.0
/*
 * `llmtracker profile`: the run from checks to summary.
 *
 *   checks (privileges, BTF, PIDs) -> the injected library's manager ->
 *   launch CMD stopped (if `--`) -> --delay -> open log, create maps, start
 *   sources, add targets -> release CMD -> main loop -> stop the injected
 *   libraries -> finish, detach, publish the log, summary
 *
 * Every exit path after the first attach goes through lt_session_stop(),
 * so nothing stays attached; the kernel also drops every BPF link when the
 * collector dies, even by SIGKILL.
 */
#include <errno.h>
#include <pthread.h>
#include <libgen.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "collector/injection/inject_mgr.h"
#include "launch.h"
#include "profile.h"
#include "runas.h"
#include "collector/target/targets.h"

#define CLOCK_EVERY_NS (10ull * 1000000000ull)
#define SWEEP_EVERY_NS (200ull * 1000000ull)
#define POLL_MS 100

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: wake poll() */

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* ----------------------------------------------------------------- checks */

static int check_caps(char *err, size_t sz)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { 0 };
	static const struct { int cap; const char *name; } need[] = {
		{ 39, "CAP_BPF" }, { 38, "CAP_PERFMON" }, { CAP_SYS_PTRACE, "CAP_SYS_PTRACE" },
	};
	char missing[128] = "";
	bool admin;

	if (syscall(SYS_capget, &hdr, d))
		return 0; /* cannot tell: let the BPF calls report */
	admin = d[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32));
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		int c = need[i].cap;
		bool has = d[c / 32].effective & (1u << (c % 32));

		if (!has && !(admin && c != CAP_SYS_PTRACE)) /* CAP_SYS_ADMIN covers BPF and PERFMON */
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
				 missing[0] ? ", " : "", need[i].name);
	}
	if (!missing[0])
		return 0;
	snprintf(err, sz, "profiling needs root or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE (missing: %s); run it as root",
		 missing);
	return -1;
}

static int preflight(const struct lt_options *o, char *err, size_t sz)
{
	if (check_caps(err, sz))
		return -1;
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		snprintf(err, sz, "this kernel has no BTF (/sys/kernel/btf/vmlinux: %s); llmtracker needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
			 strerror(errno));
		return -1;
	}
	for (int i = 0; i < o->n_pids; i++) {
		if (o->pids[i] == getpid()) {
			snprintf(err, sz, "-p %d is llmtracker itself", o->pids[i]);
			return -1;
		}
		if (!lt_proc_alive(o->pids[i])) {
			snprintf(err, sz, "PID %d does not exist (no running process with that id in /proc)",
				 o->pids[i]);
			return -1;
		}
	}
	return 0;
}

/* --delay: sleep in short steps so a signal ends it at once. */
static int wait_delay(double seconds)
{
	uint64_t end = lt_now_ns() + (uint64_t)(seconds * 1e9);

	LT_INFO(1, "waiting %.3g s before attaching", seconds);
	while (!stop_signal && lt_now_ns() < end) {
		struct timespec ts = { 0, 50 * 1000000 };

		nanosleep(&ts, NULL);
	}
	return stop_signal ? -1 : 0;
}

/* ---------------------------------------------------------------- targets */

static int add_one(struct lt_session *s, int pid)
{
	if (lt_session_add_target(s, pid))
		return -1;
	/* After the map update: threads born from now on are seen by BPF. */
	lt_targets_snapshot(s, pid);
	return 0;
}

static int add_targets(struct lt_session *s)
{
	int alive[LT_MAX_TARGETS], n = 0, kids[4096], n_kids;

	for (int i = 0; i < s->opt.n_pids; i++) {
		int pid = s->opt.pids[i], tgid;

		if (!lt_proc_alive(pid)) {
			LT_WARN("PID %d exited before profiling started", pid);
			continue;
		}
		/* A thread id given as -p stands for its whole process. */
		tgid = lt_proc_read_tgid(pid);
		if (tgid > 0 && tgid != pid) {
			LT_WARN("-p %d is a thread of process %d: profiling the whole process", pid, tgid);
			pid = s->opt.pids[i] = tgid;
		}
		if (add_one(s, pid))
			return -1;
		alive[n++] = pid;
	}
	if (!n)
		return lt_session_errorf(s, "no target is running any more: every PID exited before profiling started");
	if (!s->opt.follow_children)
		return 0;
	n_kids = lt_targets_descendants(alive, n, kids, 4096);
	for (int i = 0; i < n_kids; i++) {
		LT_INFO(1, "following existing descendant %d", kids[i]);
		if (lt_proc_alive(kids[i]) && add_one(s, kids[i]))
			return -1;
	}
	return 0;
}

/* -------------------------------------------------------------- main loop */

/* What the user sees while recording: a line redrawn every second on a
 * terminal, else a plain line every LLMT_PROGRESS_SECONDS (10); none with -q. */
struct status {
	bool tty, shown;
	uint64_t every, next;
};

static void status_init(struct status *st, const struct lt_session *s, uint64_t start)
{
	const char *e = getenv("LLMT_PROGRESS_SECONDS");
	double v = e ? strtod(e, NULL) : 0;

	st->tty = isatty(2);
	st->shown = false;
	st->every = s->opt.quiet ? UINT64_MAX : st->tty ? 1000000000ull
		    : (uint64_t)((v > 0 && v < 86400 ? v : 10) * 1e9);
	st->next = s->opt.quiet ? UINT64_MAX : start + st->every;
}

static void status_tick(struct status *st, struct lt_session *s, uint64_t start, uint64_t now)
{
	char line[512], dur[32] = "";

	if (now < st->next)
		return;
	st->next = now + st->every;
	lt_session_status(s, line, sizeof(line));
	if (s->opt.duration_s > 0)
		snprintf(dur, sizeof(dur), " / %.0f s", s->opt.duration_s);
	fprintf(stderr, "%sllmtracker: %.0f s%s: %s; Ctrl-C to stop%s", st->tty ? "\r" : "",
		(now - start) / 1e9, dur, line, st->tty ? "\033[K" : "\n");
	st->shown = true;
}

static void status_end(struct status *st)
{
	if (st->tty && st->shown)
		fputs("\r\033[K", stderr);
}

/* Poll until -d, a signal, a write error or every target gone. Returns why. */
static const char *poll_until(struct lt_session *s, struct lt_launch *l, struct status *st)
{
	uint64_t start = lt_now_ns(), now;
	uint64_t end = s->opt.duration_s > 0 ? start + (uint64_t)(s->opt.duration_s * 1e9) : UINT64_MAX;
	uint64_t next_clock = start + CLOCK_EVERY_NS, next_sweep = start + SWEEP_EVERY_NS;

	status_init(st, s, start);
	for (;;) {
		if (stop_signal)
			return stop_signal == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
		if (s->stopping)
			return "the event log could not be written";
		if (lt_session_poll(s, POLL_MS) < 0) {
			LT_ERR("%s", s->err);
			return "ring buffer error";
		}
		evlog_writer_tick(s->log);
		now = lt_now_ns();
		lt_session_store_tick(s, now >= next_clock);
		if (now >= end)
			return "duration reached";
		if (now >= next_clock) {
			lt_session_emit_clock(s);
			next_clock += CLOCK_EVERY_NS;
		}
		if (now >= next_sweep) {
			next_sweep = now + SWEEP_EVERY_NS;
			lt_launch_reap(l, false);
			if (lt_targets_sweep(s) == 0)
				return "every target exited";
		}
		status_tick(st, s, start, now);
	}
}

static const char *main_loop(struct lt_session *s, struct lt_launch *l)
{
	struct status st;
	const char *why = poll_until(s, l, &st);

	status_end(&st);
	return why;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The injected library's logs are found from the -o log alone when they lie
 * beside it; --cupti-dir elsewhere needs the same option at conversion. */
static void say_where_library_logs_go(const struct lt_options *o)
{
	char out[PATH_MAX], outdir[PATH_MAX], dir[PATH_MAX];

	if (!o->cupti_dir || !*o->cupti_dir || !(o->cuda_kernel || (o->types & LT_T_PYTHON)))
		return;
	snprintf(out, sizeof(out), "%s", o->output);
	if (!realpath(dirname(out), outdir) || !realpath(o->cupti_dir, dir) || !strcmp(outdir, dir))
		return;
	lt_log('I', "profile.c", 0, "the injected library's logs go to %s, not beside %s: convert "
	       "with --cupti-dir %s (or move them beside it)", dir, o->output, dir);
}

/* The injected library's messages, in the collector's log format. */
static void im_log(unsigned feature, char level, const char *msg)
{
	(void)feature;
	if (level != 'D')
		lt_log(level, "inject_mgr.c", 0, "%s", msg);
	else if (lt_verbosity >= 1)
		lt_log('I', "inject_mgr.c", 0, "%s", msg);
}

/* The session whose rows ("gpu", "python") say what the injected library
 * could not see (one profile per process). */
static struct lt_session *im_session;

static void im_unseen(unsigned feature, int pid, const char *why)
{
	if (im_session)
		lt_session_unseen(im_session, feature == LT_IM_CUDA ? "gpu" : "python", pid, "%s", why);
}

/* A process left with the injected library loaded: named in the summary. */
static void im_kept(int pid, const char *comm, const char *why)
{
	if (im_session)
		lt_session_kept(im_session, pid, comm, why);
}

/* A library log not published: named in the summary. */
static void im_unpublished(unsigned feature, int pid, const char *path, const char *why)
{
	if (im_session)
		lt_session_unpublished(im_session, feature == LT_IM_CUDA ? "gpu" : "python", pid, path, why);
}

/* A library log published: named in our own log, with its size and
 * digest, so that the converter joins it and nothing forged in its place. */
static void im_published(unsigned feature, int pid, const char *name, uint64_t size, const char *digest)
{
	struct evlog_event ev = { .type = EV_LIB_LOG, .ts = lt_now_ns(), .pid = (uint32_t)pid,
				  .tid = (uint32_t)pid };

	/* the stop hears a launched command on a thread of its own */
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

	(void)feature;
	if (!im_session || !im_session->log)
		return;
	ev.u.lib_log.name = evlog_s(name);
	ev.u.lib_log.size = size;
	ev.u.lib_log.digest = evlog_s(digest);
	/* In a chunk of its own: a reader older than 1.4 skips only that one. */
	pthread_mutex_lock(&mu);
	evlog_writer_flush(im_session->log);
	lt_session_emit(im_session, &ev);
	evlog_writer_flush(im_session->log);
	pthread_mutex_unlock(&mu);
}

/* One manager of the injected library for every feature that uses it:
 * CUDA kernels (the gpu source, and a launched command's environment) and
 * the Python hook. NULL when neither is asked for. `as`: the user a
 * launched command runs as (--user), or NULL. */
static struct lt_im *im_open(const struct lt_options *o, const struct lt_runas *as)
{
	struct lt_im_opts io = {
		.features = (o->cuda_kernel ? LT_IM_CUDA : 0) |
			    (o->types & LT_T_PYTHON && o->python_method != LT_PYM_USDT ? LT_IM_PYTHON : 0),
		.log_dir = o->cupti_dir, .output = o->output, .session = o->session,
		.api_records = o->cuda_api_records, .follow_forks = o->follow_children,
		/* Recording options for measurements (see inject.h), e.g. "runtime=1 driver=1" (diagnosis). */
		.start_extra = getenv("LLMT_CUPTI_START"),
		.log = im_log, .unseen = im_unseen, .kept = im_kept, .published = im_published,
		.unpublished = im_unpublished,
		.launch = o->launch_argv != NULL, .launch_as = as != NULL,
		.launch_uid = as ? as->uid : 0, .launch_gid = as ? as->gid : 0,
	};

	return io.features ? lt_im_new(&io) : NULL;
}

static int finish(struct lt_session *s, struct lt_launch *l, uint64_t t0, const char *why)
{
	char extra[512], st[128];
	double secs = (lt_now_ns() - t0) / 1e9;
	int rc = 0;

	lt_session_finish(s);
	lt_session_stop(s);
	if (lt_session_close_log(s)) {
		fprintf(stderr, "llmtracker: %s\n", s->err);
		rc = 1;
	}
	snprintf(extra, sizeof(extra), "stopped: %s; collector CPU %.2f s", why, cpu_seconds());
	if (l->pid) {
		lt_launch_reap(l, false);
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "; command %s",
			 lt_launch_status_str(l, st, sizeof(st)));
	}
	lt_session_summary(s, secs, extra);
	lt_session_free(s);
	return rc;
}

int lt_profile(const struct lt_options *opt_in, const char *cmdline)
{
	struct lt_options opt = *opt_in;
	struct lt_launch l = { 0 };
	static struct lt_runas run_as; /* static: its group list is large */
	struct lt_im *im = NULL;
	struct lt_session s;
	char err[512];
	const char *why;
	uint64_t t0;
	int rc;

	lt_verbosity = opt.verbosity;
	lt_log_libbpf();
	/* An unknown --user is told before anything starts. */
	if ((opt.user && lt_runas_resolve(opt.user, &run_as, err, sizeof(err))) ||
	    preflight(&opt, err, sizeof(err))) {
		fprintf(stderr, "llmtracker: %s\n", err);
		return 1;
	}
	if ((rc = evlog_session_new(opt.session))) {
		fprintf(stderr, "llmtracker: cannot draw a session id (getrandom): %s\n", strerror(-rc));
		return 1;
	}
	if (opt.cuda_kernel)
		opt.types |= LT_T_GPU; /* the gpu source */
	if (opt.cuda_kernel && !(opt.types & LT_T_CUDA)) {
		/* each kernel, copy and set with the call that queued it */
		opt.types |= LT_T_CUDA;
		opt.cuda_launches_only = true;
	}
	im = im_open(&opt, opt.user ? &run_as : NULL);
	if (opt.launch_argv) {
		lt_im_env_set(im); /* CUDA_INJECTION64_PATH for the command only */
		int lrc = opt.n_pids >= LT_MAX_TARGETS ||
			  lt_launch_start(&l, opt.launch_argv, opt.user ? &run_as : NULL, err, sizeof(err));
		lt_im_env_unset(im);
		if (lrc) {
			fprintf(stderr, "llmtracker: %s\n", opt.n_pids >= LT_MAX_TARGETS ? "too many targets" : err);
			lt_im_free(im);
			return 1;
		}
		lt_im_launched(im, l.pid);
		opt.pids[opt.n_pids++] = l.pid;
		if (opt.delay_s > 0)
			lt_launch_release(&l); /* the command runs during the delay */
	}
	/* After the launch: the command inherits our own signal dispositions. */
	install_signals();
	if (opt.delay_s > 0 && wait_delay(opt.delay_s)) {
		fprintf(stderr, "llmtracker: interrupted before profiling started; nothing recorded\n");
		lt_im_free(im);
		lt_launch_abort(&l);
		return 1;
	}
	lt_session_init(&s, &opt);
	im_session = &s;
	s.inject = im; /* the gpu and python sources inject through it */
	if (lt_session_open_log(&s, cmdline) || lt_session_create_maps(&s) ||
	    lt_session_start_sources(&s) || add_targets(&s))
		goto fail;
	if (s.refused[0]) { /* nothing has been recorded yet: say why, keep nothing */
		lt_session_errorf(&s, "%s", s.refused);
		goto fail;
	}
	s.attached = true;
	LT_INFO(1, "profiling %d process(es) into %s (session %s)", opt.n_pids, opt.output,
		evlog_session_hex(opt.session, err));
	say_where_library_logs_go(&opt);

	/* What the command will load is armed before its first instruction. */
	if (l.pid && !l.released)
		lt_session_prepare_exec(&s, l.pid, l.path);
	lt_launch_release(&l);
	/* -d counts from here: the set-up above comes before it, each -p
	 * target's injection bounded on its own (a thread to stop: 1 s at a
	 * busy one; each remote call: LT_INJ_CALL_TIMEOUT_MS; the start's
	 * replies: 10 s + the interpreter's 5 s), one target after another. */
	t0 = lt_now_ns();
	why = main_loop(&s, &l);
	LT_INFO(1, "stopping: %s", why);

	/* The injected libraries stop before the sources finish (their
	 * figures make the gpu and python rows) and detach. */
	lt_im_stop(im);
	lt_session_store_by(&s, lt_im_store_by(im)); /* the log's end shares the store's bound */
	rc = finish(&s, &l, t0, why);
	im_session = NULL;
	lt_im_free(im);
	return rc;
fail:
	fprintf(stderr, "llmtracker: %s\n", s.err);
	lt_im_stop(im);
	im_session = NULL;
	s.inject = NULL;
	lt_session_free(&s); /* detaches whatever started (threads that use im too), removes the partial log */
	lt_im_free(im);
	lt_launch_abort(&l);
	return 1;
}

/* Our own command line, for the log header. */
static void join_argv(int argc, char **argv, char *buf, size_t sz)
{
	size_t n = snprintf(buf, sz, "llmtracker");

	for (int i = 0; i < argc && n < sz; i++)
		n += snprintf(buf + n, sz - n, " %s", argv[i]);
}

int lt_cmd_profile(int argc, char **argv)
{
	struct lt_options o;
	char err[512], cmdline[4096];
	int rc = lt_cli_parse_profile(argc, argv, &o, err, sizeof(err));

	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "llmtracker profile: %s\n", err);
		return 2;
	}
	join_argv(argc, argv, cmdline, sizeof(cmdline));
	return lt_profile(&o, cmdline);
}
