// SPDX-License-Identifier: Apache-2.0
/*
 * Symbolizer against ground truth: live processes (the test program, a
 * copy of it in a private mount namespace, a deleted copy, a stripped copy
 * with a separate debug file, python3.11), this process's libc (names
 * checked against `nm`), the kernel (/proc/kallsyms) and anonymous memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/target/symbolize.h"
#include "unit/unit_util.h"

struct child {
	pid_t pid;
	uint64_t alpha, beta;
};

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");

	return b && *b ? b : "build";
}

/* Absolute, because some tests run shell commands in another directory. */
static void two_funcs_path(char *buf, size_t sz)
{
	char rel[512];

	snprintf(rel, sizeof(rel), "%s/tests/progs/cpu_two_funcs", build_dir());
	if (!realpath(rel, buf) || strlen(buf) >= sz)
		snprintf(buf, sz, "%s", rel);
}

/* Run `sh -c cmd` whose first stdout line is "alpha=0x.. beta=0x..". */
static int spawn_two_funcs(const char *cmd, struct child *c)
{
	int fd[2];
	FILE *f;
	char line[256];

	if (pipe(fd))
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	if (!f || !fgets(line, sizeof(line), f) ||
	    sscanf(line, "alpha=%" SCNx64 " beta=%" SCNx64, &c->alpha, &c->beta) != 2) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

static void reap(struct child *c)
{
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
}

static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* The sampled child is the test program itself: exact addresses. */
static void check_two_funcs(int pid, const struct child *c, const char *want_mod)
{
	struct lt_sym *s;
	struct lt_sym_info in;

	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_add_pid(s, pid), 0);
	assert_int_equal(lt_sym_resolve(s, pid, c->alpha + 5, &in), 0);
	assert_string_equal(in.name, "burn_alpha");
	assert_string_equal(base_name(in.module), want_mod);
	assert_int_equal(in.offset, 5);
	assert_int_equal(lt_sym_resolve(s, pid, c->beta, &in), 0);
	assert_string_equal(in.name, "burn_beta");
	assert_int_equal(in.offset, 0);
	lt_sym_free(s);
}

static void test_two_funcs_live(void **st)
{
	char bin[512], cmd[600];
	struct child c;

	(void)st;
	two_funcs_path(bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "exec %s 5 0", bin);
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	check_two_funcs(c.pid, &c, "cpu_two_funcs");
	reap(&c);
}

/* A copy in a private tmpfs of another mount namespace: the host has no
 * such file; only /proc/PID/map_files or /proc/PID/root reach it. */
static void test_other_mount_namespace(void **st)
{
	char bin[512], cmd[1400];
	struct child c;

	(void)st;
	if (run("unshare -m true 2>/dev/null") != 0)
		skip();
	two_funcs_path(bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "exec unshare -m --propagation private sh -c '"
		 "mkdir -p /tmp/llmt-symns && mount -t tmpfs none /tmp/llmt-symns && "
		 "cp %s /tmp/llmt-symns/cpu_two_funcs && exec /tmp/llmt-symns/cpu_two_funcs 5 0'",
		 bin);
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	/* The host's /tmp/llmt-symns is empty: the copy is not visible here. */
	assert_int_not_equal(access("/tmp/llmt-symns/cpu_two_funcs", F_OK), 0);
	check_two_funcs(c.pid, &c, "cpu_two_funcs");
	reap(&c);
}

/* A copy deleted after start: map_files still opens it. */
static void test_deleted_binary(void **st)
{
	char bin[512], cmd[1400];
	struct child c;

	(void)st;
	two_funcs_path(bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "cp %s /tmp/llmt-deleted-two && exec /tmp/llmt-deleted-two 5 0",
		 bin);
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	assert_int_equal(unlink("/tmp/llmt-deleted-two"), 0);
	check_two_funcs(c.pid, &c, "llmt-deleted-two");
	reap(&c);
}

/* Stripped copy: no name without the debug file (module+offset kept),
 * the right name with it, found by build-id under a debug root. */
static void test_debug_file_by_build_id(void **st)
{
	char bin[512], cmd[2048], root[64];
	const char *roots[] = { root, NULL };
	struct lt_sym_opts o = { .debug_roots = roots };
	struct lt_sym_opts none = { .debug_roots = (const char *const[]){ "/nonexistent", NULL } };
	struct child c;

	(void)st;
	assert_int_equal(ut_mkdtemp(root, sizeof(root), "llmt-dbg"), 0);
	two_funcs_path(bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; id=$(readelf -n %s | sed -n 's/.*Build ID: //p'); "
		 "mkdir -p .build-id/$(echo $id | cut -c1-2); "
		 "objcopy --only-keep-debug %s .build-id/$(echo $id | cut -c1-2)/$(echo $id | cut -c3-).debug; "
		 "strip -o stripped %s", root, bin, bin, bin);
	assert_int_equal(run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "exec %s/stripped 5 0", root);
	/* stripped's file name differs: check name + offset only. */
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	{
		struct lt_sym *s;
		struct lt_sym_info in;

		assert_int_equal(lt_sym_new(&s, &none), 0);
		assert_int_equal(lt_sym_resolve(s, c.pid, c.alpha + 5, &in), 0);
		assert_string_equal(in.name, "");
		assert_string_equal(base_name(in.module), "stripped");
		assert_true(in.offset != 0); /* module + ELF address, not dropped */
		lt_sym_free(s);
		assert_int_equal(lt_sym_new(&s, &o), 0);
		assert_int_equal(lt_sym_resolve(s, c.pid, c.alpha + 5, &in), 0);
		assert_string_equal(in.name, "burn_alpha");
		assert_int_equal(in.offset, 5);
		lt_sym_free(s);
	}
	reap(&c);
	ut_rmtree(root);
}

static void resolve_alpha(int pid, const struct child *c, const char *want)
{
	struct lt_sym *s;
	struct lt_sym_info in;

	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_resolve(s, pid, c->alpha + 5, &in), 0);
	assert_string_equal(in.name, want);
	lt_sym_free(s);
}

/* Stripped copy without a build-id, its debug file in .debug/ beside it,
 * named by .gnu_debuglink and checked by the link's CRC: a debug file
 * changed since (another build) is not used. */
static void test_debug_file_by_debuglink(void **st)
{
	char bin[512], cmd[2048], root[64];
	struct child c;

	(void)st;
	assert_int_equal(ut_mkdtemp(root, sizeof(root), "llmt-dbglink"), 0);
	two_funcs_path(bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir .debug; "
		 "objcopy --only-keep-debug -R .note.gnu.build-id %s .debug/linked.dbg; "
		 "strip -R .note.gnu.build-id -o linked %s; "
		 "objcopy --add-gnu-debuglink=.debug/linked.dbg linked", root, bin, bin);
	assert_int_equal(run(cmd), 0);
	snprintf(cmd, sizeof(cmd), "exec %s/linked 5 0", root);
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	resolve_alpha(c.pid, &c, "burn_alpha");
	snprintf(cmd, sizeof(cmd), "printf x >>%s/.debug/linked.dbg", root);
	assert_int_equal(run(cmd), 0);
	resolve_alpha(c.pid, &c, "");
	reap(&c);
	ut_rmtree(root);
}

/* Names nm lists at vaddr in path (dynamic table if dyn). */
static int nm_has(const char *path, int dyn, uint64_t vaddr, const char *name)
{
	char cmd[1024], line[1024], sym[512], type;
	unsigned long long a;
	int found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm %s --defined-only '%s' 2>/dev/null", dyn ? "-D" : "", path);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %511s", &a, &type, sym) != 3 || a != vaddr)
			continue;
		sym[strcspn(sym, "@")] = 0; /* symbol version */
		if (!strcmp(sym, name))
			found = 1;
	}
	pclose(f);
	return found;
}

/* This process's libc: a public function, checked against nm -D. */
static void test_libc_dynsym(void **st)
{
	void *fn = dlsym(RTLD_DEFAULT, "getpid");
	struct lt_sym *s;
	struct lt_sym_info in;
	Dl_info di;

	(void)st;
	assert_non_null(fn);
	assert_true(dladdr(fn, &di));
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)fn + 1, &in), 0);
	assert_int_equal(in.offset, 1);
	assert_true(strstr(in.module, "libc.so"));
	/* libc maps its first segment at vaddr 0: vaddr = addr - base. */
	assert_true(nm_has(di.dli_fname, 1, (uint64_t)fn - (uint64_t)di.dli_fbase, in.name) ||
		    nm_has(in.module, 0, (uint64_t)fn - (uint64_t)di.dli_fbase, in.name));
	lt_sym_free(s);
}

/* A libc-internal (static) function only named in libc6-dbg's debug file. */
static void test_libc_debug_file(void **st)
{
	char cmd[1024], line[1024], name[512], dbg[512];
	unsigned long long vaddr = 0;
	struct lt_sym *s;
	struct lt_sym_info in;
	Dl_info di;
	FILE *f;

	(void)st;
	assert_true(dladdr(dlsym(RTLD_DEFAULT, "getpid"), &di));
	snprintf(cmd, sizeof(cmd),
		 "id=$(readelf -n '%s' | sed -n 's/.*Build ID: //p'); "
		 "echo /usr/lib/debug/.build-id/$(echo $id | cut -c1-2)/$(echo $id | cut -c3-).debug",
		 di.dli_fname);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(dbg, sizeof(dbg), f));
	pclose(f);
	dbg[strcspn(dbg, "\n")] = 0;
	if (access(dbg, R_OK))
		skip(); /* libc6-dbg not installed */
	/* A sized local function that .dynsym does not have. */
	snprintf(cmd, sizeof(cmd),
		 "nm -S --defined-only '%s' | awk '$3==\"t\" && $2 ~ /^0*[1-9a-f][0-9a-f]+$/ "
		 "{print $1, $4}' | sed -n 100p", dbg);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	assert_int_equal(sscanf(line, "%llx %511s", &vaddr, name), 2);
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)di.dli_fbase + vaddr, &in), 0);
	assert_int_equal(in.offset, 0);
	assert_true(nm_has(dbg, 0, vaddr, in.name));
	lt_sym_free(s);
}

/* python3.11 (non-PIE): the interpreter loop by its address from nm -D. */
static void test_python_interpreter(void **st)
{
	const char *py = "/usr/bin/python3.11";
	char cmd[512], line[256];
	unsigned long long addr = 0;
	struct lt_sym *s;
	struct lt_sym_info in;
	struct child c;
	FILE *f;

	(void)st;
	if (access(py, X_OK))
		skip();
	snprintf(cmd, sizeof(cmd), "nm -D %s | awk '$3==\"_PyEval_EvalFrameDefault\" {print $1}'", py);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	addr = strtoull(line, NULL, 16);
	assert_true(addr != 0);
	snprintf(cmd, sizeof(cmd), "exec %s -c 'print(\"alpha=0x1 beta=0x2\", flush=True); "
		 "import time; time.sleep(5)'", py);
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_resolve(s, c.pid, addr + 16, &in), 0);
	assert_string_equal(in.name, "_PyEval_EvalFrameDefault");
	assert_int_equal(in.offset, 16);
	assert_string_equal(in.module, py);
	lt_sym_free(s);
	reap(&c);
}

/* Kernel: pid 0, names from kallsyms when addresses are visible. */
static void test_kernel(void **st)
{
	char line[512], name[256], type;
	unsigned long long addr = 0, a;
	struct lt_sym *s;
	struct lt_sym_info in;
	FILE *f = fopen("/proc/kallsyms", "r");

	(void)st;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &a, &type, name) == 3 &&
		    !strcmp(name, "schedule") && type == 'T')
			addr = a;
	fclose(f);
	if (!addr)
		skip(); /* kptr_restrict hides addresses */
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_resolve(s, 0, addr + 3, &in), 0);
	assert_string_equal(in.name, "schedule");
	assert_int_equal(in.offset, 3);
	assert_string_equal(in.module, "[kernel.kallsyms]");
	lt_sym_free(s);
}

/* JIT-like anonymous executable memory, and a process that is gone. */
static void test_anon_and_vanished(void **st)
{
	struct lt_sym *s;
	struct lt_sym_info in;
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	pid_t dead = fork();

	(void)st;
	assert_true(p != MAP_FAILED);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)p + 100, &in), 0);
	assert_string_equal(in.name, "");
	assert_string_equal(in.module, "[anon]");
	assert_int_equal(in.offset, 100);
	assert_int_equal(lt_sym_add_pid(s, dead), -ESRCH);
	assert_int_equal(lt_sym_resolve(s, dead, 0x401000, &in), 0);
	assert_string_equal(in.name, "");
	assert_string_equal(in.module, "[unknown]");
	assert_int_equal(in.offset, 0x401000);
	lt_sym_free(s);
	munmap(p, 8192);
}

/* Hidden kernel addresses (kptr_restrict: all zero) leave kernel frames
 * unnamed but kept; a mapped file that is not ELF keeps module + offset. */
static void test_hidden_kallsyms_and_non_elf(void **st)
{
	char kpath[] = "/tmp/llmt-kallsyms-XXXXXX", fpath[] = "/tmp/llmt-notelf-XXXXXX";
	struct lt_sym_opts o = { .kallsyms = kpath };
	struct lt_sym *s;
	struct lt_sym_info in;
	int kfd = mkstemp(kpath), ffd = mkstemp(fpath);
	char page[8192];
	void *m;

	(void)st;
	assert_true(kfd >= 0 && ffd >= 0);
	assert_true(write(kfd, "0000000000000000 T schedule\n0000000000000000 t foo [mod]\n", 57) == 57);
	memset(page, 'x', sizeof(page));
	assert_true(write(ffd, page, sizeof(page)) == (ssize_t)sizeof(page));
	m = mmap(NULL, sizeof(page), PROT_READ | PROT_EXEC, MAP_PRIVATE, ffd, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(lt_sym_new(&s, &o), 0);
	assert_int_equal(lt_sym_resolve(s, 0, 0xffffffff81000010ull, &in), 0);
	assert_string_equal(in.name, "");
	assert_string_equal(in.module, "[kernel.kallsyms]");
	assert_true(in.offset == 0xffffffff81000010ull);
	{
		struct lt_sym_stats ss;

		lt_sym_stats(s, &ss);
		assert_non_null(ss.kernel_error);
		assert_non_null(strstr(ss.kernel_error, "kptr_restrict"));
	}
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)m + 0x1234, &in), 0);
	assert_string_equal(in.name, "");
	assert_string_equal(in.module, fpath);
	assert_int_equal(in.offset, 0x1234);
	lt_sym_free(s);
	munmap(m, sizeof(page));
	close(kfd);
	close(ffd);
	unlink(kpath);
	unlink(fpath);
}

/* JIT code named by the process's perf map (/tmp/perf-PID.map). */
static void test_perf_map_jit(void **st)
{
	char path[64];
	struct lt_sym *s;
	struct lt_sym_info in;
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	FILE *f;

	(void)st;
	assert_true(p != MAP_FAILED);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%lx 40 py::fib:/tmp/work.py\n%lx 100 _ZN5torch3jit8run_loopEv\n",
		(unsigned long)p, (unsigned long)p + 0x40);
	fclose(f);
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_note(s, getpid(), 1, (uint64_t)p + 0x10, 0), 1);
	assert_int_equal(lt_sym_note(s, getpid(), 1, (uint64_t)p + 0x50, 1), 1);
	assert_int_equal(lt_sym_note(s, getpid(), 1, (uint64_t)p + 0x1000, 0), 1);
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)p + 0x10, &in), 0);
	assert_string_equal(in.name, "py::fib:/tmp/work.py");
	assert_string_equal(in.module, "[anon]");
	assert_int_equal(in.offset, 0x10);
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)p + 0x50, &in), 0);
	assert_string_equal(in.name, "torch::jit::run_loop()");
	assert_int_equal(in.offset, 0x10);
	assert_int_equal(lt_sym_resolve(s, getpid(), (uint64_t)p + 0x1000, &in), 0);
	assert_string_equal(in.name, ""); /* past every entry: [anon]+offset */
	assert_int_equal(in.offset, 0x1000);
	lt_sym_free(s);
	unlink(path);
	munmap(p, 8192);
}

/* Mappings captured while alive resolve after the process exited. */
static int count_cb(void *arg, int pid, uint64_t addr, const struct lt_sym_info *in)
{
	int *n = arg;

	(void)pid;
	(void)addr;
	/* beta's first byte as a return address belongs to the function before it */
	if ((!strcmp(in->name, "burn_alpha") && in->offset == 1) ||
	    (strcmp(in->name, "burn_beta") && in->offset > 1))
		(*n)++;
	return 0;
}

static void test_resolve_after_exit(void **st)
{
	char bin[512], cmd[600];
	struct lt_sym *s;
	struct child c;
	int n = 0;

	(void)st;
	two_funcs_path(bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "cp %s /tmp/llmt-exit-two && exec /tmp/llmt-exit-two 5 0", bin);
	assert_int_equal(spawn_two_funcs(cmd, &c), 0);
	assert_int_equal(lt_sym_new(&s, NULL), 0);
	assert_int_equal(lt_sym_note(s, c.pid, 1, c.alpha + 1, 0), 1);
	assert_int_equal(lt_sym_note(s, c.pid, 1, c.beta, 1), 1); /* a return address */
	assert_int_equal(lt_sym_note(s, c.pid, 1, c.beta, 1), 0); /* duplicate */
	reap(&c);
	unlink("/tmp/llmt-exit-two");
	assert_int_equal(lt_sym_foreach(s, count_cb, &n), 0);
	assert_int_equal(n, 2);
	lt_sym_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_funcs_live),
		cmocka_unit_test(test_other_mount_namespace),
		cmocka_unit_test(test_deleted_binary),
		cmocka_unit_test(test_debug_file_by_build_id),
		cmocka_unit_test(test_debug_file_by_debuglink),
		cmocka_unit_test(test_libc_dynsym),
		cmocka_unit_test(test_libc_debug_file),
		cmocka_unit_test(test_python_interpreter),
		cmocka_unit_test(test_kernel),
		cmocka_unit_test(test_anon_and_vanished),
		cmocka_unit_test(test_resolve_after_exit),
		cmocka_unit_test(test_perf_map_jit),
		cmocka_unit_test(test_hidden_kallsyms_and_non_elf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
