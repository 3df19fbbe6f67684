// SPDX-License-Identifier: Apache-2.0
/*
 * kubectl-prof: the profiling pod.
 *
 * One pod on the target's node, container `debugger`, sharing the host's
 * PID namespace (so the target's processes, and /proc/PID/root into its
 * container, are visible). It is not privileged: it drops every capability
 * and adds back only those the chosen -t sources need (the caps column of
 * LT_SOURCES, collector/sources/sources.h, measured: docs/MEASUREMENTS.md,
 * containers, capabilities and seccomp),
 * under a seccomp profile, with no
 * hostPath mounts. It sleeps for --duration and is stopped by
 * activeDeadlineSeconds at the latest; `kubectl prof delete --expired`
 * removes finished ones once --ttl has passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "collector/sources/sources.h"
#include "kube.h"

#define J_STR(s) json_object_new_string(s)
#define J_ADD(o, k, v) json_object_object_add((o), (k), (v))

/* LT_CAPS's names, in their bits' order. */
#define CAP_NAME_(name) #name,
static const char *const kprof_cap_names[] = { LT_CAPS(CAP_NAME_) };
#undef CAP_NAME_

/* What each source needs, by row of LT_SOURCES (as lt_t_names). */
#define SOURCE_CAPS_(id, ID, bit, t, evsrc, caps) (caps),
static const unsigned kprof_source_caps[] = { LT_SOURCES(SOURCE_CAPS_) };
#undef SOURCE_CAPS_

/* The seccomp profile to install on nodes (deploy/seccomp/), as a path
 * under the kubelet's seccomp directory. */
#define KPROF_SECCOMP_LOCALHOST "llmtracker/collector.json"

/* Capabilities of a -t list, or -1 with kprof_err set. "all" is every source. */
static int kprof_caps_of(const char *sources)
{
	char buf[256], names[128], *tok, *save = NULL;
	unsigned caps = 0, named = 0;

	lt_t_list(LT_T_ALL, ", ", names, sizeof(names));
	if (!sources || !*sources || strlen(sources) >= sizeof(buf)) {
		snprintf(kprof_err, sizeof(kprof_err), "-t needs a comma list of %s or all", names);
		return -1;
	}
	strcpy(buf, sources);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned bit = strcmp(tok, "all") ? lt_t_bit(tok) : LT_T_ALL;

		if (!bit) {
			snprintf(kprof_err, sizeof(kprof_err), "unknown source \"%s\" in -t %s "
				 "(expected %s or all)", tok, sources, names);
			return -1;
		}
		named |= bit;
	}
	if (!named) {
		snprintf(kprof_err, sizeof(kprof_err), "-t %s names no source", sources);
		return -1;
	}
	/* the sources -t names, and proc, which always runs */
	for (size_t i = 0; i < LT_N_SOURCES; i++)
		if (!lt_t_names[i].bit || (named & lt_t_names[i].bit))
			caps |= kprof_source_caps[i];
	return (int)caps;
}

int kprof_sources_check(const char *sources)
{
	return kprof_caps_of(sources) < 0 ? -1 : 0;
}

/* Label values: <= 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
static int kprof_label_ok(const char *v)
{
	size_t n = strlen(v);

	if (!n || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return 0;
	}
	return 1;
}

static struct json_object *kprof_labels(const struct kprof_opts *o, const struct kprof_target *t)
{
	struct json_object *l = json_object_new_object();

	J_ADD(l, "app.kubernetes.io/name", J_STR("ai-profiler"));
	J_ADD(l, "app.kubernetes.io/managed-by", J_STR("kubectl-prof"));
	if (o->pod && kprof_label_ok(o->pod))
		J_ADD(l, "llmtracker.io/target-pod", J_STR(o->pod));
	if (kprof_label_ok(t->node))
		J_ADD(l, "llmtracker.io/node", J_STR(t->node));
	return l;
}

static struct json_object *kprof_annotations(const struct kprof_opts *o, const struct kprof_target *t)
{
	struct json_object *a = json_object_new_object();
	char buf[1024];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->ttl_s);
	J_ADD(a, "llmtracker.io/ttl-seconds", J_STR(buf));
	J_ADD(a, "llmtracker.io/sources", J_STR(o->sources));
	if (o->pod) {
		snprintf(buf, sizeof(buf), "%s/%s/%s", o->namespace, o->pod, t->container);
		J_ADD(a, "llmtracker.io/target", J_STR(buf));
	}
	if (t->container_id[0])
		J_ADD(a, "llmtracker.io/container-id", J_STR(t->container_id));
	if (t->pod_uid[0])
		J_ADD(a, "llmtracker.io/pod-uid", J_STR(t->pod_uid));
	if (o->region_id)
		J_ADD(a, "llmtracker.io/region-id", J_STR(o->region_id));
	return a;
}

static void kprof_env_add(struct json_object *env, const char *name, const char *value)
{
	struct json_object *e;

	if (!value || !*value)
		return;
	e = json_object_new_object();
	J_ADD(e, "name", J_STR(name));
	J_ADD(e, "value", J_STR(value));
	json_object_array_add(env, e);
}

/* What `llmtracker generateCommand` in the pod needs to find the target. */
static struct json_object *kprof_env(const struct kprof_opts *o, const struct kprof_target *t)
{
	struct json_object *env = json_object_new_array();
	const char *id = strstr(t->container_id, "://");

	kprof_env_add(env, "LLMT_TARGET_NAMESPACE", o->pod ? o->namespace : NULL);
	kprof_env_add(env, "LLMT_TARGET_POD", o->pod);
	kprof_env_add(env, "LLMT_TARGET_POD_UID", t->pod_uid);
	kprof_env_add(env, "LLMT_TARGET_CONTAINER", t->container);
	kprof_env_add(env, "LLMT_TARGET_CONTAINER_ID", id ? id + 3 : t->container_id);
	kprof_env_add(env, "LLMT_REGION_ID", o->region_id);
	kprof_env_add(env, "LLMT_OUTPUT_DIR", "/data");
	kprof_env_add(env, "LLMT_SOURCES", o->sources);
	/* the node's name for the logs (collector/session/nodename.h): the pod's own
	 * hostname is the pod's */
	struct json_object *node = json_object_new_object(), *from = json_object_new_object(),
			   *field = json_object_new_object();

	J_ADD(field, "fieldPath", J_STR("spec.nodeName"));
	J_ADD(from, "fieldRef", field);
	J_ADD(node, "name", J_STR("LLMT_NODE_NAME"));
	J_ADD(node, "valueFrom", from);
	json_object_array_add(env, node);
	return env;
}

static struct json_object *kprof_mount(const char *name, const char *path, int ro)
{
	struct json_object *m = json_object_new_object();

	J_ADD(m, "name", J_STR(name));
	J_ADD(m, "mountPath", J_STR(path));
	if (ro)
		J_ADD(m, "readOnly", json_object_new_boolean(1));
	return m;
}

/* Results: a PVC named by KUBECTL_PROF_RESULTS_PVC (shared storage for the
 * converter and TensorBoard), else scratch space copied out with kubectl cp. */
static struct json_object *kprof_results_volume(void)
{
	const char *pvc = getenv("KUBECTL_PROF_RESULTS_PVC");
	struct json_object *v = json_object_new_object(), *src = json_object_new_object();

	J_ADD(v, "name", J_STR("results"));
	if (pvc && *pvc) {
		J_ADD(src, "claimName", J_STR(pvc));
		J_ADD(v, "persistentVolumeClaim", src);
	} else {
		J_ADD(v, "emptyDir", src);
	}
	return v;
}

/* No hostPath: BTF is in the /sys every container gets (read-only), the
 * collector pins nothing in bpffs and uses no tracefs/debugfs. The results
 * volume is this pod's alone; the target pod is never changed. */
static struct json_object *kprof_volumes(void)
{
	struct json_object *v = json_object_new_array();

	json_object_array_add(v, kprof_results_volume());
	return v;
}

/* RuntimeDefault allows bpf and perf_event_open only with SYS_ADMIN
 * (containerd's, Docker's and Podman's defaults alike), so without SYS_ADMIN
 * the pod uses the Localhost profile shipped in deploy/seccomp/. */
static struct json_object *kprof_seccomp(const char *want, int caps)
{
	struct json_object *sp = json_object_new_object();

	if (!want)
		want = (caps & LT_CAP(SYS_ADMIN)) ? "RuntimeDefault" : KPROF_SECCOMP_LOCALHOST;
	if (!strcmp(want, "RuntimeDefault")) {
		J_ADD(sp, "type", J_STR("RuntimeDefault"));
	} else {
		J_ADD(sp, "type", J_STR("Localhost"));
		J_ADD(sp, "localhostProfile", J_STR(want));
	}
	return sp;
}

static struct json_object *kprof_security(const struct kprof_opts *o)
{
	struct json_object *sc = json_object_new_object(), *caps = json_object_new_object();
	struct json_object *add = json_object_new_array(), *drop = json_object_new_array();
	int want = kprof_caps_of(o->sources);

	if (want < 0) /* checked by the caller; ask for nothing rather than everything */
		want = 0;
	for (size_t i = 0; i < sizeof(kprof_cap_names) / sizeof(kprof_cap_names[0]); i++)
		if (want & (1 << i))
			json_object_array_add(add, J_STR(kprof_cap_names[i]));
	json_object_array_add(drop, J_STR("ALL"));
	J_ADD(caps, "drop", drop);
	J_ADD(caps, "add", add);
	J_ADD(sc, "privileged", json_object_new_boolean(0));
	J_ADD(sc, "allowPrivilegeEscalation", json_object_new_boolean(0));
	J_ADD(sc, "capabilities", caps);
	J_ADD(sc, "seccompProfile", kprof_seccomp(o->seccomp, want));
	return sc;
}

static struct json_object *kprof_resources(const struct kprof_opts *o)
{
	struct json_object *r = json_object_new_object();
	struct json_object *lim = json_object_new_object(), *req = json_object_new_object();

	J_ADD(lim, "memory", J_STR(o->memory_limit));
	J_ADD(req, "memory", J_STR(o->memory_request));
	J_ADD(r, "limits", lim);
	J_ADD(r, "requests", req);
	return r;
}

static struct json_object *kprof_container(const struct kprof_opts *o, const struct kprof_target *t)
{
	struct json_object *c = json_object_new_object(), *cmd = json_object_new_array();
	struct json_object *mounts = json_object_new_array();
	char secs[32];

	snprintf(secs, sizeof(secs), "%llu", (unsigned long long)o->duration_s);
	json_object_array_add(cmd, J_STR("sleep"));
	json_object_array_add(cmd, J_STR(secs));
	json_object_array_add(mounts, kprof_mount("results", "/data", 0));
	J_ADD(c, "name", J_STR("debugger"));
	J_ADD(c, "image", J_STR(o->image));
	/* A tag can be moved; only a digest names the image that was reviewed. */
	J_ADD(c, "imagePullPolicy", J_STR(strstr(o->image, "@sha256:") ? "IfNotPresent" : "Always"));
	J_ADD(c, "command", cmd);
	J_ADD(c, "env", kprof_env(o, t));
	J_ADD(c, "resources", kprof_resources(o));
	J_ADD(c, "securityContext", kprof_security(o));
	J_ADD(c, "volumeMounts", mounts);
	J_ADD(c, "workingDir", J_STR("/data"));
	return c;
}

struct json_object *kprof_manifest(const struct kprof_opts *o, const struct kprof_target *t,
				   const char *name)
{
	struct json_object *pod = json_object_new_object(), *meta = json_object_new_object();
	struct json_object *spec = json_object_new_object(), *ctrs = json_object_new_array();

	J_ADD(meta, "name", J_STR(name));
	J_ADD(meta, "namespace", J_STR(o->namespace));
	J_ADD(meta, "labels", kprof_labels(o, t));
	J_ADD(meta, "annotations", kprof_annotations(o, t));

	json_object_array_add(ctrs, kprof_container(o, t));

	J_ADD(spec, "nodeName", J_STR(t->node));
	J_ADD(spec, "hostPID", json_object_new_boolean(1));
	J_ADD(spec, "restartPolicy", J_STR("Never"));
	J_ADD(spec, "activeDeadlineSeconds", json_object_new_int64((int64_t)o->duration_s));
	J_ADD(spec, "terminationGracePeriodSeconds", json_object_new_int(10));
	J_ADD(spec, "automountServiceAccountToken", json_object_new_boolean(0));
	if (o->tolerate_all) {
		/* Asked for: nodeName skips the scheduler's NoSchedule taints already,
		 * this also keeps NoExecute taints from evicting the pod. */
		struct json_object *tol = json_object_new_array(), *any = json_object_new_object();

		J_ADD(any, "operator", J_STR("Exists"));
		json_object_array_add(tol, any);
		J_ADD(spec, "tolerations", tol);
	}
	J_ADD(spec, "containers", ctrs);
	J_ADD(spec, "volumes", kprof_volumes());

	J_ADD(pod, "apiVersion", J_STR("v1"));
	J_ADD(pod, "kind", J_STR("Pod"));
	J_ADD(pod, "metadata", meta);
	J_ADD(pod, "spec", spec);
	return pod;
}
