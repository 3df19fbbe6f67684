// SPDX-License-Identifier: Apache-2.0
/* The collector's option parsing, launch helper and /proc readers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/session/cli.h"
#include "collector/session/launch.h"
#include "collector/target/targets.h"

/* Static: o->launch_argv points into it after parsing. */
static char *argv[32];

static int parse(struct lt_options *o, char *err, const char *const *args, int n)
{
	for (int i = 0; i < n; i++)
		argv[i] = (char *)args[i];
	argv[n] = NULL;
	return lt_cli_parse_profile(n, argv, o, err, 256);
}
#define PARSE(o, err, ...) parse(o, err, (const char *const[]){ __VA_ARGS__ }, \
				 sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(char *))

static void types_ok(void **st)
{
	unsigned t;
	bool all;
	char err[256];

	(void)st;
	assert_int_equal(lt_cli_parse_types("syscall,cpu", &t, &all, err, sizeof(err)), 0);
	assert_int_equal(t, LT_T_SYSCALL | LT_T_CPU);
	assert_false(all);
	assert_int_equal(lt_cli_parse_types("all", &t, &all, err, sizeof(err)), 0);
	assert_int_equal(t, LT_T_ALL);
	assert_true(all);
	assert_int_equal(lt_cli_parse_types("pysample", &t, &all, err, sizeof(err)), 0);
	assert_int_equal(t, LT_T_PYSAMPLE);
}

/* The -t names come from LT_SOURCES in bit order; proc and gpu have none. */
static void types_names(void **st)
{
	char buf[128];

	(void)st;
	assert_string_equal(lt_t_list(LT_T_ALL, ",", buf, sizeof(buf)), "python,cuda,syscall,cpu,pysample");
	assert_string_equal(lt_t_list(LT_T_CPU | LT_T_GPU | LT_T_PYTHON, ", ", buf, sizeof(buf)), "python, cpu");
	assert_string_equal(lt_t_list(LT_T_ALL, ",", buf, 10), "python,cu"); /* cut, terminated */
	assert_int_equal(lt_t_bit("syscall"), LT_T_SYSCALL);
	assert_int_equal(lt_t_bit("gpu"), 0);
	assert_int_equal(lt_t_bit("proc"), 0);
	assert_int_equal(LT_T_ALL & LT_T_GPU, 0);
}

static void types_bad(void **st)
{
	unsigned t;
	bool all;
	char err[256];

	(void)st;
	assert_int_equal(lt_cli_parse_types("syscall,gpu", &t, &all, err, sizeof(err)), -1);
	assert_string_equal(err, "unknown profiling type 'gpu' in -t syscall,gpu "
				 "(expected python, cuda, syscall, cpu, pysample or all)");
	assert_int_equal(lt_cli_parse_types(",", &t, &all, err, sizeof(err)), -1);
	assert_int_equal(lt_cli_parse_types("", &t, &all, err, sizeof(err)), -1);
}

static void seed_flags(void **st)
{
	struct lt_options o;
	char err[256];

	(void)st;
	assert_int_equal(PARSE(&o, err, "profile", "-p", "12", "-p", "34", "-t", "all", "-o", "/tmp/d.json",
			       "-v", "5", "--enable-cuda-kernel", "true", "--cpu-buffer-size", "20",
			       "--probe-file", "probe.json", "--delay", "3", "-d", "5", "--freq", "49",
			       "--cupti-dir", "/tmp"), 0);
	assert_int_equal(o.n_pids, 2);
	assert_int_equal(PARSE(&o, err, "profile", "-p", "7", "-p", "7", "-t", "cpu"), 0);
	assert_int_equal(o.n_pids, 1); /* a PID given twice is profiled once */
	assert_int_equal(PARSE(&o, err, "profile", "-p", "12", "-p", "34", "-t", "all", "-o", "/tmp/d.json",
			       "-v", "5", "--enable-cuda-kernel", "true", "--cpu-buffer-size", "20",
			       "--probe-file", "probe.json", "--delay", "3", "-d", "5", "--freq", "49",
			       "--cupti-dir", "/tmp"), 0);
	assert_int_equal(o.pids[1], 34);
	assert_true(o.types_all);
	assert_string_equal(o.output, "/tmp/d.json");
	assert_int_equal(o.verbosity, 5);
	assert_true(o.cuda_kernel);
	assert_int_equal(o.cpu_buffer_mb, 20);
	assert_string_equal(o.probe_file, "probe.json");
	assert_true(o.delay_s == 3 && o.duration_s == 5);
	assert_int_equal(o.freq_hz, 49);
	assert_string_equal(o.cupti_dir, "/tmp");
	assert_true(o.follow_children);
	assert_null(o.launch_argv);
}

static void defaults_and_launch(void **st)
{
	struct lt_options o;
	char err[256];

	(void)st;
	assert_int_equal(PARSE(&o, err, "profile", "-t", "syscall", "--no-children", "--", "sh", "-c", "x"), 0);
	assert_string_equal(o.output, LT_DEFAULT_OUTPUT);
	assert_int_equal(o.cpu_buffer_mb, LT_DEFAULT_CPU_BUFFER_MB);
	assert_int_equal(o.freq_hz, LT_DEFAULT_FREQ_HZ);
	assert_int_equal(o.cpu_stack_bytes, LT_DEFAULT_CPU_STACK_BYTES);
	assert_false(o.follow_children);
	assert_non_null(o.launch_argv);
	assert_string_equal(o.launch_argv[0], "sh");
	assert_string_equal(o.launch_argv[1], "-c"); /* the command's flags stay its own */
	assert_null(o.launch_argv[3]);
}

/* The log's segments: 20 MiB / 60 s unless told; fractions of a MiB. */
static void segments(void **st)
{
	struct lt_options o;
	char err[256];

	(void)st;
	assert_int_equal(PARSE(&o, err, "profile", "-p", "1", "-t", "cpu"), 0);
	assert_true(o.segment_mb == LT_DEFAULT_SEGMENT_MB && o.segment_s == LT_DEFAULT_SEGMENT_S);
	assert_int_equal(PARSE(&o, err, "profile", "-p", "1", "-t", "cpu", "--segment-mb", "0.25",
			       "--segment-seconds", "2"), 0);
	assert_true(o.segment_mb == 0.25 && o.segment_s == 2);
	assert_int_equal(PARSE(&o, err, "profile", "-p", "1", "-t", "cpu", "--segment-mb", "0.01"), -1);
	assert_string_equal(err, "--segment-mb 0.01: expected a number of MiB from 0.0625 to 4096");
	assert_int_equal(PARSE(&o, err, "profile", "-p", "1", "-t", "cpu", "--segment-seconds", "0"), -1);
	assert_string_equal(err, "--segment-seconds 0: expected a number of seconds from 1 to 86400");
}

static void bad_values(void **st)
{
	struct lt_options o;
	char err[256];

	(void)st;
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "abc"), -1);
	assert_non_null(strstr(err, "-p abc"));
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "-d", "-1"), -1);
	assert_non_null(strstr(err, "-d -1"));
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--cpu-buffer-size", "0"), -1);
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--enable-cuda-kernel", "maybe"), -1);
	assert_non_null(strstr(err, "expected true or false"));
	assert_int_equal(PARSE(&o, err, "profile", "-p", "1"), -1);
	assert_non_null(strstr(err, "missing -t"));
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu"), -1);
	assert_non_null(strstr(err, "nothing to profile"));
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--bogus"), -1);
	/* --cpu-stack-bytes: 0 (frame pointers only) to 65536, whole words. */
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--cpu-stack-bytes", "0"), 0);
	assert_int_equal(o.cpu_stack_bytes, 0);
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--cpu-stack-bytes", "65536"), 0);
	assert_int_equal(o.cpu_stack_bytes, 65536);
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--cpu-stack-bytes", "65544"), -1);
	assert_non_null(strstr(err, "--cpu-stack-bytes 65544: expected a whole number from 0 to 65536"));
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p", "1", "--cpu-stack-bytes", "1001"), -1);
	assert_non_null(strstr(err, "multiple of 8"));
	assert_int_equal(PARSE(&o, err, "profile", "-t", "cpu", "-p"), -1);
}

static void python_method(void **st)
{
	struct lt_options o;
	char err[256];

	(void)st;
	assert_int_equal(PARSE(&o, err, "profile", "-t", "python", "-p", "1"), 0);
	assert_int_equal(o.python_method, LT_PYM_AUTO);
	assert_int_equal(PARSE(&o, err, "profile", "-t", "python", "-p", "1", "--python-method", "hook"), 0);
	assert_int_equal(o.python_method, LT_PYM_HOOK);
	assert_int_equal(PARSE(&o, err, "profile", "-t", "python", "-p", "1", "--python-method", "usdt"), 0);
	assert_int_equal(o.python_method, LT_PYM_USDT);
	assert_int_equal(PARSE(&o, err, "profile", "-t", "python", "-p", "1", "--python-method", "fast"), -1);
	assert_string_equal(err, "--python-method fast: expected auto, hook or usdt");
}

static void launch_runs_after_release(void **st)
{
	struct lt_launch l;
	char err[256], buf[64];
	char *argv[] = { "sh", "-c", "exit 7", NULL };

	(void)st;
	assert_int_equal(lt_launch_start(&l, argv, NULL, err, sizeof(err)), 0);
	assert_true(l.pid > 0);
	assert_true(lt_proc_alive(l.pid)); /* stopped, not gone */
	assert_false(lt_launch_reap(&l, false));
	assert_int_equal(lt_launch_release(&l), 0);
	assert_true(lt_launch_reap(&l, true));
	assert_string_equal(lt_launch_status_str(&l, buf, sizeof(buf)), "exited with status 7");
}

static void launch_missing_command(void **st)
{
	struct lt_launch l;
	char err[256];
	char *argv[] = { "no-such-command-xyz", NULL };

	(void)st;
	assert_int_equal(lt_launch_start(&l, argv, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no-such-command-xyz"));
	assert_int_equal(l.pid, 0);
}

static void launch_abort_kills_unreleased(void **st)
{
	struct lt_launch l;
	char err[256];
	char *argv[] = { "sleep", "100", NULL };

	(void)st;
	assert_int_equal(lt_launch_start(&l, argv, NULL, err, sizeof(err)), 0);
	lt_launch_abort(&l);
	assert_true(l.reaped);
	assert_true(WIFSIGNALED(l.status));
}

/* --user resolves names and numbers; what cannot run is said in one line. */
static void runas_resolve(void **st)
{
	struct lt_runas as;
	char err[256];

	(void)st;
	if (getuid() != 0)
		skip(); /* switching users needs root's capabilities */
	assert_int_equal(lt_runas_resolve("root", &as, err, sizeof(err)), 0);
	assert_true(as.uid == 0 && as.gid == 0 && as.n_groups >= 1);
	assert_int_equal(lt_runas_resolve("4242:4343", &as, err, sizeof(err)), 0);
	assert_true(as.uid == 4242 && as.gid == 4343 && as.n_groups == 1 && as.groups[0] == 4343);
	assert_int_equal(lt_runas_resolve("0:4343", &as, err, sizeof(err)), 0);
	assert_true(as.uid == 0 && as.gid == 4343); /* root's account, another primary group */
	assert_int_equal(lt_runas_resolve("no-such-user-lt", &as, err, sizeof(err)), -1);
	assert_string_equal(err, "--user no-such-user-lt: no such user 'no-such-user-lt'");
	assert_int_equal(lt_runas_resolve("root:no-such-group-lt", &as, err, sizeof(err)), -1);
	assert_string_equal(err, "--user root:no-such-group-lt: no such group 'no-such-group-lt'");
	assert_int_equal(lt_runas_resolve("4242", &as, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no account has uid 4242"));
	assert_int_equal(lt_runas_resolve(":0", &as, err, sizeof(err)), -1);
	assert_int_equal(lt_runas_resolve("root:", &as, err, sizeof(err)), -1);
	assert_int_equal(lt_runas_resolve("4294967295", &as, err, sizeof(err)), -1); /* (uid_t)-1 */
	assert_int_equal(lt_runas_resolve("01234567890123456789012345678901234567890123456789012345678901234",
					  &as, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at most 63 characters"));
}

static void proc_readers(void **st)
{
	char buf[4096];
	int kids[8];
	pid_t child;

	(void)st;
	assert_true(lt_proc_alive(getpid()));
	assert_false(lt_proc_alive(0x3fffffff));
	assert_int_equal(lt_proc_read_ppid(getpid()), getppid());
	assert_int_equal(lt_proc_read_cmdline(getpid(), buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "test_collector_cli"));
	assert_int_equal(lt_proc_read_exe(getpid(), buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "test_collector_cli"));
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	{
		int self = getpid(), n = 0;

		for (int i = 0; i < 100 && n == 0; i++) {
			n = lt_targets_descendants(&self, 1, kids, 8);
			if (!n)
				usleep(10000);
		}
		assert_int_equal(n, 1);
		assert_int_equal(kids[0], child);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	assert_false(lt_proc_alive(child));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(types_ok),
		cmocka_unit_test(types_bad),
		cmocka_unit_test(types_names),
		cmocka_unit_test(seed_flags),
		cmocka_unit_test(defaults_and_launch),
		cmocka_unit_test(bad_values),
		cmocka_unit_test(segments),
		cmocka_unit_test(python_method),
		cmocka_unit_test(launch_runs_after_release),
		cmocka_unit_test(launch_missing_command),
		cmocka_unit_test(launch_abort_kills_unreleased),
		cmocka_unit_test(runas_resolve),
		cmocka_unit_test(proc_readers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
