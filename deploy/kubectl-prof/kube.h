/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubectl-prof: running kubectl, and the target/manifest model.
 *
 * The plugin never talks to the API server itself: every read and write goes
 * through the user's kubectl (KUBECTL or PATH), with the user's kubeconfig
 * and credentials, so it works wherever `kubectl get pod` works.
 */
#ifndef KPROF_KUBE_H
#define KPROF_KUBE_H

#include <stddef.h>
#include <stdint.h>

struct json_object;

/* Flags of `kubectl prof deploy` (the seed's, plus --dry-run, -t, --tolerate-all,
 * --seccomp-profile). */
struct kprof_opts {
	const char *container;
	uint64_t duration_s;        /* -d/--duration, default 600: the pod's lifetime */
	const char *image;
	const char *kubeconfig;
	const char *memory_limit;   /* default "1Gi" */
	const char *memory_request; /* default "128Mi" */
	const char *namespace;      /* default "default" */
	const char *node;
	const char *pod;
	const char *region_id;
	uint64_t ttl_s;             /* default 60 */
	const char *sources;        /* -t/--sources: llmtracker -t list, default "all" */
	const char *seccomp;        /* --seccomp-profile: NULL = what the sources need */
	int tolerate_all;           /* --tolerate-all: tolerate every taint */
	int dry_run;
};

/* What we learned about the target pod. */
struct kprof_target {
	char node[256];
	char container[256];
	char container_id[256];     /* "containerd://..." or "" */
	char pod_uid[64];
};

/* Output of one kubectl run. */
struct kprof_run {
	int status;                 /* exit code; 127: could not run */
	char *out, *err;            /* NUL-terminated, owned */
};

/* Error text for the caller to print, set by every function below. */
extern char kprof_err[1024];

/* Path of kubectl ($KUBECTL, else the first `kubectl` on PATH), or NULL
 * with kprof_err set. */
const char *kprof_kubectl(void);

/* Run kubectl [--kubeconfig K] ARGS..., feeding `in` (may be NULL) on
 * stdin. 0 when it ran (check r->status), -1 when it could not be run. */
int kprof_run_kubectl(const char *kubeconfig, const char *const *args, const char *in,
		      struct kprof_run *r);
void kprof_run_free(struct kprof_run *r);

/* Look up --pod in --namespace and fill `t`. 0, or -1 with kprof_err. */
int kprof_find_target(const struct kprof_opts *o, struct kprof_target *t);

/* Pick the target container from a pod object (exposed for clarity of
 * errors: several containers and no --container is an error). */
int kprof_pick_container(struct json_object *pod, const char *want, struct kprof_target *t);

/* Validate a Kubernetes quantity ("128Mi", "1G", "1.5Gi") and give its
 * value in bytes. 0, or -1. */
int kprof_quantity(const char *s, double *bytes);

/* The profiling pod's name: ai-profiler-<15 hex of a hash of the target>-<5 random>. */
void kprof_pod_name(const struct kprof_opts *o, const struct kprof_target *t, char *out, size_t sz);

/* Check a -t list (llmtracker's -t names, or all). 0, or -1 with
 * kprof_err naming the bad entry. */
int kprof_sources_check(const char *sources);

/* Build the profiling pod (a new json object, caller puts it). */
struct json_object *kprof_manifest(const struct kprof_opts *o, const struct kprof_target *t,
				   const char *name);

/* Why a kubectl run that exited non-zero failed, in our words (cannot
 * reach the cluster, credentials refused, not allowed, ...), then kubectl's
 * own first line: "DOING failed: WHY (kubectl said: ...)". */
const char *kprof_explain(const struct kprof_run *r, const char *doing, const char *namespace,
			  char *buf, size_t sz);

#endif
