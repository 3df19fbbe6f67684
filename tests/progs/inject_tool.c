// SPDX-License-Identifier: Apache-2.0
/*
 * Drives the injector and the inject_mgr module (CUDA) on their own, for tests
 * and for GPU hosts without the rest of the collector.
 *   inject_tool cycle PID N LIB        load + start + stop + unload, N times;
 *                                      checks the memfd mapping comes and goes
 *   inject_tool hold PID LIB           load, print "loaded", wait for a stdin
 *                                      line, unload
 *   inject_tool attach PID LIB DIR SEC [KEY=VALUE...]
 *                                      lt_im_attach, sleep, lt_im_stop; totals;
 *                                      KEY=VALUE: start-message keys (inject.h);
 *                                      CUPTI's API records on unless runtime=0
 *   inject_tool launch LIB DIR -- CMD ...
 *                                      lt_im_launch_env + fork/exec, wait, stop
 * Set LLMT_SKIP_DRIVER_CHECK=1 to inject on a node without a GPU driver.
 */
#include "collector/injection/inject_mgr.h"
#include "collector/injection/injector.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int memfd_mapped(int pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "/memfd:llmtracker-inject"))
			n++;
	if (f)
		fclose(f);
	return n;
}

static int reply(int sock, char *buf, size_t len, int ms)
{
	struct pollfd p = { sock, POLLIN, 0 };
	if (poll(&p, 1, ms) <= 0)
		return -1;
	ssize_t n = recv(sock, buf, len - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/* Running, not a zombie waiting to be reaped. */
static int alive(int pid)
{
	char path[64], st[512] = "";
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	if (f) {
		if (!fgets(st, sizeof(st), f))
			st[0] = 0;
		fclose(f);
	}
	const char *p = strrchr(st, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* One full round: load, protocol start/stop, unload. */
static int one_cycle(int pid, const char *lib, int i, int *seen)
{
	struct lt_inj inj;
	char err[512], buf[1024];
	int rc = lt_inj_load(&inj, pid, lib, err, sizeof(err));
	if (rc) {
		printf("cycle %d: load failed: %s\n", i, err);
		return rc;
	}
	if (memfd_mapped(pid))
		(*seen)++;
	const char *start = "start driver=1 finalize_ms=100";
	send(inj.sock, start, strlen(start), MSG_NOSIGNAL);
	if (reply(inj.sock, buf, sizeof(buf), 5000) == 0 && i == 0)
		printf("start reply: %s\n", buf);
	send(inj.sock, "stop", 4, MSG_NOSIGNAL);
	if (reply(inj.sock, buf, sizeof(buf), 5000) || strncmp(buf, "stopped", 7))
		printf("cycle %d: no stop reply%s\n", i, alive(pid) ? "" : " (process exited)");
	rc = lt_inj_unload(&inj, err, sizeof(err));
	if (rc != 1) {
		printf("cycle %d: unload: %s\n", i, rc ? err : "library stayed loaded");
		return rc ? rc : -EBUSY;
	}
	return 0;
}

static int cmd_cycle(int pid, int n, const char *lib)
{
	int ok = 0, seen = 0, rc = 0;
	for (int i = 0; i < n; i++) {
		if ((rc = one_cycle(pid, lib, i, &seen)))
			break;
		ok++;
	}
	printf("cycles=%d ok=%d memfd_seen=%d memfd_left=%d\n", n, ok, seen, memfd_mapped(pid));
	return ok == n ? 0 : 1;
}

static int cmd_hold(int pid, const char *lib)
{
	struct lt_inj inj;
	char err[512], line[64];
	if (lt_inj_load(&inj, pid, lib, err, sizeof(err))) {
		printf("load failed: %s\n", err);
		return 1;
	}
	printf("loaded\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	int rc = lt_inj_unload(&inj, err, sizeof(err));
	printf("unloaded %d%s%s\n", rc, rc < 0 ? " " : "", rc < 0 ? err : "");
	return rc == 1 ? 0 : 1;
}

static void logline(unsigned feature, char level, const char *msg)
{
	(void)feature;
	printf("%c %s\n", level, msg);
	fflush(stdout);
}

static void print_totals(struct lt_im *ck)
{
	struct lt_im_totals t;
	lt_im_totals(ck, &t);
	printf("totals targets=%d kernels=%llu memcpy=%llu memset=%llu api=%llu dropped=%llu "
	       "finalized=%d unloaded=%d\n", t.targets, t.kernels, t.memcpys, t.memsets, t.apis,
	       t.dropped, t.finalized, t.unloaded);
}

static struct lt_im *make_ck(const char *lib, const char *dir, const char *extra)
{
	struct lt_im_opts o = { .features = LT_IM_CUDA, .lib_path = lib, .log_dir = dir, .log = logline,
				.api_records = 1, .start_extra = extra };
	o.skip_driver_check = getenv("LLMT_SKIP_DRIVER_CHECK") != NULL;
	struct lt_im *ck = lt_im_new(&o);
	const char *why;
	if (!ck || (!lt_im_usable(ck, LT_IM_CUDA, &why) && strstr(why, "not found"))) {
		printf("E %s\n", ck ? why : "out of memory");
		lt_im_free(ck);
		return NULL;
	}
	return ck;
}

static int cmd_attach(int pid, const char *lib, const char *dir, double sec, const char *extra)
{
	struct lt_im *ck = make_ck(lib, dir, extra);
	char msg[512];
	if (!ck)
		return 1;
	int rc = lt_im_usable(ck, LT_IM_CUDA, NULL) ? lt_im_attach(ck, pid, LT_IM_CUDA, 0, msg, sizeof(msg)) : -ENODEV;
	struct timespec ts = { (time_t)sec, (long)((sec - (time_t)sec) * 1e9) };
	if (rc == 0)
		nanosleep(&ts, NULL);
	lt_im_stop(ck);
	print_totals(ck);
	lt_im_free(ck);
	return rc ? 3 : 0;
}

static int cmd_launch(const char *lib, const char *dir, char **argv)
{
	struct lt_im *ck = make_ck(lib, dir, NULL);
	if (!ck)
		return 1;
	char *const *env = lt_im_launch_env(ck);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		execvp(argv[0], argv);
		_exit(127);
	}
	lt_im_launched(ck, pid);
	int st = 0;
	waitpid(pid, &st, 0);
	lt_im_stop(ck);
	print_totals(ck);
	lt_im_free(ck);
	printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 5 && !strcmp(argv[1], "cycle"))
		return cmd_cycle(atoi(argv[2]), atoi(argv[3]), argv[4]);
	if (argc >= 4 && !strcmp(argv[1], "hold"))
		return cmd_hold(atoi(argv[2]), argv[3]);
	if (argc >= 6 && !strcmp(argv[1], "attach")) {
		char extra[512] = "";
		for (int i = 6; i < argc; i++) {
			size_t n = strlen(extra);
			if (strchr(argv[i], '='))
				snprintf(extra + n, sizeof(extra) - n, "%s%s", n ? " " : "", argv[i]);
		}
		return cmd_attach(atoi(argv[2]), argv[3], argv[4], atof(argv[5]), extra);
	}
	if (argc >= 6 && !strcmp(argv[1], "launch") && !strcmp(argv[4], "--"))
		return cmd_launch(argv[2], argv[3], argv + 5);
	fprintf(stderr, "usage: see the comment at the top of tests/progs/inject_tool.c\n");
	return 2;
}
