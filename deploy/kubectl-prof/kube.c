// SPDX-License-Identifier: Apache-2.0
/*
 * kubectl-prof: running kubectl and reading the target pod.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "kube.h"

extern char **environ;

char kprof_err[1024];

#define KPROF_ERR(...) snprintf(kprof_err, sizeof(kprof_err), __VA_ARGS__)

/* ---------------------------------------------------------------- kubectl */

const char *kprof_kubectl(void)
{
	static char found[4096];
	const char *env = getenv("KUBECTL"), *path = getenv("PATH");

	if (env && *env) {
		if (access(env, X_OK) == 0)
			return env;
		KPROF_ERR("KUBECTL=%s is not an executable file", env);
		return NULL;
	}
	for (const char *p = path ? path : ""; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(found, sizeof(found), "%.*s/kubectl", (int)(n ? n : 1), n ? p : ".");
		if (access(found, X_OK) == 0)
			return found;
		p += n;
		if (*p == ':')
			p++;
	}
	KPROF_ERR("kubectl not found on PATH: install kubectl "
		  "(https://kubernetes.io/docs/tasks/tools/) or set KUBECTL=/path/to/kubectl");
	return NULL;
}

/* A growing buffer for a child's output. */
struct kprof_buf {
	char *p;
	size_t n, cap;
};

static int kprof_buf_read(struct kprof_buf *b, int fd)
{
	char tmp[8192];
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n <= 0)
		return n < 0 && errno == EINTR ? 1 : 0;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, tmp, n);
	b->n += n;
	b->p[b->n] = 0;
	return 1;
}

/* Shuttle stdin / stdout / stderr until the child closes both outputs. */
static void kprof_pump(int fds[3], const char *in, struct kprof_buf *out, struct kprof_buf *err)
{
	size_t in_len = in ? strlen(in) : 0, in_off = 0;

	if (!in_len) {
		close(fds[0]);
		fds[0] = -1;
	}
	while (fds[1] >= 0 || fds[2] >= 0) {
		struct pollfd p[3] = {
			{ .fd = fds[0], .events = POLLOUT },
			{ .fd = fds[1], .events = POLLIN },
			{ .fd = fds[2], .events = POLLIN },
		};

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[0] >= 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = write(fds[0], in + in_off, in_len - in_off);

			if (w > 0)
				in_off += w;
			if (w < 0 || in_off == in_len) {
				close(fds[0]);
				fds[0] = -1;
			}
		}
		for (int i = 1; i < 3; i++) {
			if (fds[i] >= 0 && (p[i].revents & (POLLIN | POLLERR | POLLHUP)) &&
			    !kprof_buf_read(i == 1 ? out : err, fds[i])) {
				close(fds[i]);
				fds[i] = -1;
			}
		}
	}
	if (fds[0] >= 0)
		close(fds[0]);
}

static int kprof_spawn(const char *const *argv, int fds[3], pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	int pin[2], pout[2], perr[2], rc;

	if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC))
		return KPROF_ERR("pipe: %s", strerror(errno)), -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
	posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
	posix_spawn_file_actions_adddup2(&fa, perr[1], 2);
	rc = posix_spawn(pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	fds[0] = pin[1];
	fds[1] = pout[0];
	fds[2] = perr[0];
	if (rc) {
		for (int i = 0; i < 3; i++)
			close(fds[i]);
		return KPROF_ERR("cannot run %s: %s", argv[0], strerror(rc)), -1;
	}
	return 0;
}

int kprof_run_kubectl(const char *kubeconfig, const char *const *args, const char *in,
		      struct kprof_run *r)
{
	const char *argv[64];
	struct kprof_buf out = { 0 }, err = { 0 };
	const char *kubectl = kprof_kubectl();
	int n = 0, fds[3], ws;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (!kubectl)
		return -1;
	argv[n++] = kubectl;
	if (kubeconfig) {
		argv[n++] = "--kubeconfig";
		argv[n++] = kubeconfig;
	}
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	signal(SIGPIPE, SIG_IGN); /* kubectl may exit without reading stdin */
	if (kprof_spawn(argv, fds, &pid))
		return -1;
	kprof_pump(fds, in, &out, &err);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	r->out = out.p ? out.p : strdup("");
	r->err = err.p ? err.p : strdup("");
	return 0;
}

void kprof_run_free(struct kprof_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* ------------------------------------------------------------ target pod */

static const char *kprof_jstr(struct json_object *o, const char *path)
{
	char key[128];
	const char *dot;
	struct json_object *v;

	while ((dot = strchr(path, '.'))) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		if (!json_object_object_get_ex(o, key, &o))
			return NULL;
		path = dot + 1;
	}
	if (!json_object_object_get_ex(o, path, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* The container's id from status.containerStatuses (empty if not started). */
static void kprof_container_id(struct json_object *pod, const char *name, char *out, size_t sz)
{
	struct json_object *st, *arr;

	out[0] = 0;
	if (!json_object_object_get_ex(pod, "status", &st) ||
	    !json_object_object_get_ex(st, "containerStatuses", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *c = json_object_array_get_idx(arr, i);
		const char *n = kprof_jstr(c, "name"), *id = kprof_jstr(c, "containerID");

		if (n && id && !strcmp(n, name))
			snprintf(out, sz, "%s", id);
	}
}

int kprof_pick_container(struct json_object *pod, const char *want, struct kprof_target *t)
{
	struct json_object *spec, *arr;
	char names[512] = "";
	size_t n;

	if (!json_object_object_get_ex(pod, "spec", &spec) ||
	    !json_object_object_get_ex(spec, "containers", &arr) ||
	    !json_object_is_type(arr, json_type_array) || !(n = json_object_array_length(arr)))
		return KPROF_ERR("the pod object has no spec.containers"), -1;
	for (size_t i = 0; i < n; i++) {
		const char *nm = kprof_jstr(json_object_array_get_idx(arr, i), "name");
		size_t len = strlen(names);

		if (!nm)
			continue;
		if ((want && !strcmp(nm, want)) || (!want && n == 1)) {
			snprintf(t->container, sizeof(t->container), "%s", nm);
			kprof_container_id(pod, nm, t->container_id, sizeof(t->container_id));
			return 0;
		}
		snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "", nm);
	}
	if (want)
		return KPROF_ERR("the pod has no container named \"%s\" (it has: %s)", want, names), -1;
	return KPROF_ERR("the pod has %zu containers (%s): choose one with --container", n, names), -1;
}

/* First line of kubectl's stderr, for messages. */
static const char *kprof_first_line(const char *s, char *buf, size_t sz)
{
	snprintf(buf, sz, "%.*s", (int)strcspn(s, "\n"), s);
	return buf;
}

static int kprof_check_pod(struct json_object *pod, const struct kprof_opts *o, struct kprof_target *t)
{
	const char *node = kprof_jstr(pod, "spec.nodeName");
	const char *phase = kprof_jstr(pod, "status.phase");
	const char *uid = kprof_jstr(pod, "metadata.uid");

	if (!node || !*node)
		return KPROF_ERR("pod %s/%s is not scheduled on a node yet (phase %s): wait until it runs",
				 o->namespace, o->pod, phase ? phase : "unknown"), -1;
	if (o->node && strcmp(o->node, node) != 0)
		return KPROF_ERR("pod %s/%s runs on node %s, not on --node %s: drop --node or fix it",
				 o->namespace, o->pod, node, o->node), -1;
	if (phase && strcmp(phase, "Running") != 0)
		return KPROF_ERR("pod %s/%s is %s, not Running: there is no process to profile",
				 o->namespace, o->pod, phase), -1;
	snprintf(t->node, sizeof(t->node), "%s", node);
	snprintf(t->pod_uid, sizeof(t->pod_uid), "%s", uid ? uid : "");
	if (kprof_pick_container(pod, o->container, t)) {
		char m[512];

		snprintf(m, sizeof(m), "%.511s", kprof_err);
		return KPROF_ERR("pod %.200s/%.200s: %s", o->namespace, o->pod, m), -1;
	}
	return 0;
}

int kprof_find_target(const struct kprof_opts *o, struct kprof_target *t)
{
	const char *args[] = { "get", "pod", o->pod, "--namespace", o->namespace, "-o", "json", NULL };
	struct json_tokener *tok;
	struct json_object *pod;
	struct kprof_run r;
	char line[512];
	int rc;

	memset(t, 0, sizeof(*t));
	if (!o->pod) {
		/* --node alone: profile anything on that node. */
		snprintf(t->node, sizeof(t->node), "%s", o->node);
		return 0;
	}
	if (kprof_run_kubectl(o->kubeconfig, args, NULL, &r))
		return -1;
	if (r.status != 0) {
		if (strstr(r.err, "NotFound") || strstr(r.err, "not found"))
			KPROF_ERR("pod \"%s\" not found in namespace \"%s\" (check --pod and --namespace; "
				  "kubectl get pods -n %s lists them)", o->pod, o->namespace, o->namespace);
		else
			KPROF_ERR("%s", kprof_explain(&r, "reading the pod", o->namespace, line,
						      sizeof(line)));
		kprof_run_free(&r);
		return -1;
	}
	tok = json_tokener_new();
	pod = tok ? json_tokener_parse_ex(tok, r.out, (int)strlen(r.out)) : NULL;
	if (!pod || !json_object_is_type(pod, json_type_object)) {
		KPROF_ERR("kubectl get pod %s -o json did not print a JSON object (%s)", o->pod,
			  tok ? json_tokener_error_desc(json_tokener_get_error(tok)) : "out of memory");
		rc = -1;
	} else {
		rc = kprof_check_pod(pod, o, t);
	}
	json_object_put(pod);
	if (tok)
		json_tokener_free(tok);
	kprof_run_free(&r);
	return rc;
}

/* ------------------------------------------------------------ quantities */

int kprof_quantity(const char *s, double *bytes)
{
	static const struct { const char *sfx; double mul; } units[] = {
		{ "Ki", 1024.0 }, { "Mi", 1048576.0 }, { "Gi", 1073741824.0 },
		{ "Ti", 1099511627776.0 }, { "Pi", 1125899906842624.0 }, { "Ei", 1152921504606846976.0 },
		{ "k", 1e3 }, { "M", 1e6 }, { "G", 1e9 }, { "T", 1e12 }, { "P", 1e15 }, { "E", 1e18 },
		{ "", 1.0 },
	};
	char *end;
	double v;

	if (!s || !*s || !((*s >= '0' && *s <= '9') || *s == '.'))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || v <= 0 || end == s)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(end, units[i].sfx)) {
			*bytes = v * units[i].mul;
			return 0;
		}
	}
	return -1;
}

/* ------------------------------------------------------------ names */

static uint64_t kprof_fnv1a(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return (h ^ 0xff) * 0x100000001b3ULL; /* field separator */
}

void kprof_pod_name(const struct kprof_opts *o, const struct kprof_target *t, char *out, size_t sz)
{
	static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789"; /* as Kubernetes' generateName */
	uint64_t h = 0xcbf29ce484222325ULL;
	unsigned char rnd[5];
	char sfx[6];
	int fd;

	h = kprof_fnv1a(h, o->namespace);
	h = kprof_fnv1a(h, o->pod ? o->pod : "");
	h = kprof_fnv1a(h, t->container);
	h = kprof_fnv1a(h, t->node);
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd)) {
		uint64_t x = (uint64_t)getpid() * 2654435761u ^ (uint64_t)time(NULL);

		memcpy(rnd, &x, sizeof(rnd));
	}
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 5; i++)
		sfx[i] = alnum[rnd[i] % (sizeof(alnum) - 1)];
	sfx[5] = 0;
	snprintf(out, sz, "ai-profiler-%015llx-%s",
		 (unsigned long long)(h & 0xfffffffffffffffULL), sfx);
}

/* What kubectl's stderr says, by the phrases kubectl and the API server
 * use for each case; in the order they are tried. */
static const struct {
	const char *const said[4];
	const char *why;
} kube_failures[] = {
	{ { "connection refused", "Unable to connect to the server", "couldn't get current server API",
	    "no such host" },
	  "cannot reach the cluster's API server (is KUBECONFIG or --kubeconfig this cluster's? "
	  "`kubectl cluster-info` tells)" },
	{ { "i/o timeout", "Client.Timeout", "TLS handshake timeout", NULL },
	  "the cluster's API server did not answer in time" },
	{ { "Unauthorized", "You must be logged in", "provide credentials", NULL },
	  "the cluster does not accept your credentials (log in again, or check the kubeconfig's user)" },
	{ { "Forbidden", "forbidden", NULL, NULL },
	  "your account is not allowed to do this in namespace %s (it needs get/create/delete on pods "
	  "there: ask your cluster's admin)" },
};

const char *kprof_explain(const struct kprof_run *r, const char *doing, const char *namespace,
			  char *buf, size_t sz)
{
	char line[512], why[512];

	snprintf(why, sizeof(why), "kubectl exited with status %d", r->status);
	for (size_t i = 0; i < sizeof(kube_failures) / sizeof(kube_failures[0]); i++)
		for (int k = 0; k < 4 && kube_failures[i].said[k]; k++)
			if (r->err && strstr(r->err, kube_failures[i].said[k])) {
				snprintf(why, sizeof(why), kube_failures[i].why, namespace);
				goto found;
			}
found:
	snprintf(buf, sz, "%s failed: %s (kubectl said: %s)", doing, why,
		 kprof_first_line(r->err ? r->err : "", line, sizeof(line)));
	return buf;
}
