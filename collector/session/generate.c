// SPDX-License-Identifier: Apache-2.0
/*
 * `llmtracker generateCommand [--container-id ID | --pod-uid UID]`: list the
 * processes worth profiling (GPU ones, mapping libcuda / libcudart, then
 * Python interpreters mapping neither, under their own heading), optionally only those in one container's or pod's cgroup,
 * then print a profiling command for them that runs as printed and the
 * Python path hint, as glog lines on stdout (the seed's tool prints the
 * same lines, with a template). A scope with no process, or nothing to
 * profile, is an error (exit 1).
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"
#include "collector/target/targets.h"
#include "collector/target/tfile.h"

#define INFO(...) lt_log('I', __FILE__, __LINE__, __VA_ARGS__)

struct cand {
	int pid;
	bool own_root; /* another mount namespace: exe is a path inside it */
	bool cuda, python;
	char comm[64], exe[1024];
};

/* Does /proc/<pid>/cgroup mention `id`? Pod UIDs appear with '-' (cgroupfs)
 * or '_' (systemd driver), so both spellings are tried. */
static bool in_cgroup(int pid, const char *id)
{
	char path[64], line[4096], alt[256];
	bool hit = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	snprintf(alt, sizeof(alt), "%s", id);
	for (char *p = alt; *p; p++)
		if (*p == '-')
			*p = '_';
	if (!(f = fopen(path, "re")))
		return false;
	while (!hit && fgets(line, sizeof(line), f))
		hit = strstr(line, id) || strstr(line, alt);
	fclose(f);
	return hit;
}

static int map_is_cuda(const struct lt_tf_map *m, void *ctx)
{
	(void)ctx;
	return strstr(m->path, "/libcuda.so") || strstr(m->path, "/libcudart.so");
}

static bool maps_cuda(int pid)
{
	return lt_tf_maps_each(LT_TF_PROC, pid, map_is_cuda, NULL) > 0;
}

/* Is the process in another mount namespace than ours (a container)? */
static bool in_other_mntns(int pid)
{
	return lt_tf_same_view(pid, false) == 0;
}

static bool is_python(const char *comm, const char *exe)
{
	const char *b = strrchr(exe, '/');

	return !strncmp(comm, "python", 6) || (b && !strncmp(b + 1, "python", 6));
}

/* Candidates of the scope into *out (their number returned, -1: no /proc);
 * *in_scope: processes looked at in the scope, candidates or not. */
static int scan(const char *cgroup_id, struct cand **out, int *in_scope)
{
	struct cand *v = NULL;
	int n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		struct cand c = { .pid = atoi(de->d_name) };

		if (c.pid <= 0 || c.pid == getpid() || (cgroup_id && !in_cgroup(c.pid, cgroup_id)))
			continue;
		if (lt_proc_read_comm(c.pid, c.pid, c.comm, sizeof(c.comm)))
			continue;
		(*in_scope)++;
		lt_proc_read_exe(c.pid, c.exe, sizeof(c.exe));
		c.cuda = maps_cuda(c.pid);
		c.python = is_python(c.comm, c.exe);
		c.own_root = in_other_mntns(c.pid);
		if (!c.cuda && !c.python)
			continue;
		if (n == cap) {
			struct cand *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		v[n++] = c;
	}
	closedir(d);
	*out = v;
	return n;
}

static void print_cand(const struct cand *c)
{
	char cmdline[4096];
	json_object *o = json_object_new_object();

	lt_proc_read_cmdline(c->pid, cmdline, sizeof(cmdline));
	json_object_object_add(o, "pid", json_object_new_int(c->pid));
	json_object_object_add(o, "name", json_object_new_string(c->comm));
	json_object_object_add(o, "cuda", json_object_new_boolean(c->cuda));
	json_object_object_add(o, "python", json_object_new_boolean(c->python));
	json_object_object_add(o, "cmdline", json_object_new_string(cmdline));
	INFO("PID: %d, Name: %s", c->pid,
	     json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

/* One heading and its processes: GPU ones (mapping libcuda/libcudart) or
 * Python ones mapping neither (worth -t python, but not GPU processes).
 * `scope` says where they were looked for ("container ID", "pod UID").
 * Returns how many were listed. */
static int list_cands(const struct cand *v, int n, bool gpu, const char *scope)
{
	int shown = 0;

	for (int i = 0; i < n; i++) {
		if (v[i].cuda != gpu)
			continue;
		if (!shown++) {
			if (gpu)
				INFO("GPU PIDs in %s:", scope);
			else
				INFO("Python PIDs without libcuda/libcudart (not GPU processes) in %s:", scope);
		}
		print_cand(&v[i]);
	}
	if (gpu && !shown)
		lt_log('W', __FILE__, __LINE__, "no process maps libcuda/libcudart in %s", scope);
	return shown;
}

/* EBPF_USDT_PYTHON_PATH is looked up inside the target's root first, then on
 * the node; a container's interpreter is named so that both work from the
 * node: /proc/PID/root/PATH (valid while that process lives). Only needed
 * to force the interpreter the USDT probes go into (the collector finds it
 * by itself; the default profile hook needs none). */
static void python_hint(const struct cand *c)
{
	if (!c->own_root) {
		INFO("Profiling Python Path is: %s. If you want to profile Python, please set the environment variable: export EBPF_USDT_PYTHON_PATH=%s",
		     c->exe, c->exe);
		return;
	}
	INFO("Profiling Python Path is: %s inside the container of PID %d, /proc/%d/root%s from this node. If you want to profile Python, please set the environment variable: export EBPF_USDT_PYTHON_PATH=/proc/%d/root%s (or %s: the collector looks inside the target's root first)",
	     c->exe, c->pid, c->pid, c->exe, c->pid, c->exe, c->exe);
}

/* The command for the processes listed: the GPU ones where there are any,
 * else the Python ones; runnable as printed. Its Python hint comes from
 * one of those processes only. */
#define GEN_MAX_PIDS 64
static void print_command(const struct cand *v, int n, bool gpu)
{
	char cmd[GEN_MAX_PIDS * 16 + 256];
	const struct cand *python = NULL;
	size_t k = (size_t)snprintf(cmd, sizeof(cmd), "llmtracker profile");
	int used = 0;

	for (int i = 0; i < n && used < GEN_MAX_PIDS; i++) {
		if (v[i].cuda != gpu)
			continue;
		k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " -p %d", v[i].pid);
		used++;
		if (v[i].python && v[i].exe[0] && !python)
			python = &v[i];
	}
	char out[64];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(out, sizeof(out), "/tmp/llmtracker-%Y%m%d-%H%M%S.evlog", &tm); /* not there yet */
	snprintf(cmd + k, sizeof(cmd) - k, " -t all -o %s -d 30%s", out,
		 gpu ? " --enable-cuda-kernel true" : "");
	INFO("The profiling command is: %s", cmd);
	if (python)
		python_hint(python);
}

int lt_cmd_generate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "container-id", required_argument, NULL, 'c' },
		{ "pod-uid", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *id = NULL;
	struct cand *v = NULL;
	char scope[300] = "this host's processes";
	int c, n;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			printf("usage: llmtracker generateCommand [--container-id ID | --pod-uid UID]\n");
			return 0;
		}
		if (c == '?') {
			fprintf(stderr, "llmtracker generateCommand: unknown option or missing value: %s "
				"(usage: llmtracker generateCommand [--container-id ID | --pod-uid UID])\n",
				argv[optind - 1]);
			return 2;
		}
		if (id) {
			fprintf(stderr, "llmtracker generateCommand: expected at most one of --container-id ID or --pod-uid UID\n");
			return 2;
		}
		id = optarg;
		snprintf(scope, sizeof(scope), "%s %s", c == 'c' ? "container" : "pod", id);
	}
	if (id && (!*id || strchr(id, '/'))) {
		fprintf(stderr, "llmtracker generateCommand: '%s' is not a container id or pod uid\n", id);
		return 2;
	}
	int in_scope = 0;

	n = scan(id, &v, &in_scope);
	if (n < 0) {
		fprintf(stderr, "llmtracker generateCommand: cannot read /proc\n");
		return 1;
	}
	if (id && !in_scope) {
		fprintf(stderr, "llmtracker generateCommand: no process on this node is in %s (is the id "
			"right, and does it run on this node?)\n", scope);
		free(v);
		return 1;
	}
	lt_log_fd = STDOUT_FILENO;
	int gpus = list_cands(v, n, true, scope);
	int pys = list_cands(v, n, false, scope);
	if (!gpus && !pys) {
		lt_log_fd = STDERR_FILENO;
		fprintf(stderr, "llmtracker generateCommand: no GPU or Python process in %s (%d looked at): "
			"nothing to profile\n", scope, in_scope);
		free(v);
		return 1;
	}
	print_command(v, n, gpus > 0);
	free(v);
	return 0;
}
