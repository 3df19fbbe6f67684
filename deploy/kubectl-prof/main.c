// SPDX-License-Identifier: Apache-2.0
/*
 * kubectl-prof: the kubectl plugin (`kubectl prof ...`) that puts the
 * llmtracker profiling pod next to a running target pod, and removes it.
 *
 *   kubectl prof deploy --image IMG --pod POD [--container C] [flags]
 *   kubectl prof delete [NAME ...] [--expired] [--pod POD]
 *
 * Exit status: 0 done, 1 the cluster or kubectl said no, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "collector/sources/sources.h"
#include "lt_version.h"
#include "kube.h"

#define EXIT_USAGE 2
#define KPROF_SELECTOR "app.kubernetes.io/managed-by=kubectl-prof"

/* A format: %s is the list of -t names. */
static const char deploy_help[] =
	"deploy the profiling tool pod\n"
	"\n"
	"Usage:\n"
	"  kubectl-prof deploy [flags]\n"
	"\n"
	"Aliases:\n"
	"  deploy, run\n"
	"\n"
	"Flags:\n"
	"      --container string        target container name\n"
	"  -d, --duration uint           seconds the profiling pod lives (default 600): time to exec\n"
	"                                in, find the PIDs, profile and convert; it is gone after\n"
	"      --dry-run                 print the pod manifest (JSON) instead of creating it\n"
	"  -h, --help                    help for deploy\n"
	"      --image string            profiling tool image\n"
	"      --kubeconfig string       path to the kubeconfig file to use\n"
	"      --memory-limit string     (default \"1Gi\")\n"
	"      --memory-request string   (default \"128Mi\")\n"
	"      --namespace string        target pod namespace (default \"default\")\n"
	"      --node string             node name\n"
	"      --pod string              target pod name\n"
	"      --region-id string        region of the cluster, recorded on the pod\n"
	"      --seccomp-profile string  RuntimeDefault, or a Localhost profile path under the\n"
	"                                kubelet's seccomp directory (default: RuntimeDefault\n"
	"                                when -t includes python, else llmtracker/collector.json)\n"
	"  -t, --sources string          the llmtracker -t sources the pod may run, which its\n"
	"                                capabilities follow: %s or all\n"
	"                                (default \"all\")\n"
	"      --tolerate-all            tolerate every taint (a NoExecute taint would evict it)\n"
	"      --ttl uint                seconds a finished profiling pod is kept before\n"
	"                                `kubectl prof delete --expired` removes it (default 60)\n";

static const char delete_help[] =
	"delete profiling tool pods\n"
	"\n"
	"Usage:\n"
	"  kubectl-prof delete [NAME ...] [flags]\n"
	"\n"
	"Without NAME, deletes every profiling pod in the namespace (or, with --pod,\n"
	"those profiling that pod).\n"
	"\n"
	"Flags:\n"
	"      --dry-run                 print what would be deleted\n"
	"      --expired                 only finished pods older than their --ttl\n"
	"  -h, --help                    help for delete\n"
	"      --kubeconfig string       path to the kubeconfig file to use\n"
	"      --namespace string        namespace (default \"default\")\n"
	"      --pod string              only profiling pods of this target pod\n";

static const char top_help[] =
	"kubectl prof: profile GPU training and inference pods with llmtracker\n"
	"\n"
	"Usage:\n"
	"  kubectl-prof [command]\n"
	"\n"
	"Commands:\n"
	"  deploy      deploy the profiling tool pod (alias: run)\n"
	"  delete      delete profiling tool pods\n"
	"\n"
	"Use \"kubectl-prof [command] --help\" for more about a command.\n";

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "Error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'kubectl-prof %s --help' for usage.\n", cmd);
	return EXIT_USAGE;
}

/* A `uint` flag: decimal digits only, no sign, no overflow. */
static int parse_uint(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end || *out > INT32_MAX ? -1 : 0;
}

/* ---------------------------------------------------------------- deploy */

enum { O_CONTAINER = 256, O_IMAGE, O_KUBECONFIG, O_MEMLIM, O_MEMREQ, O_NAMESPACE, O_NODE,
       O_POD, O_REGION, O_TTL, O_DRYRUN, O_EXPIRED, O_SECCOMP, O_TOLERATE };

static int deploy_flag(struct kprof_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'd':
		if (parse_uint(arg, &o->duration_s) || o->duration_s == 0)
			return usage_error("deploy", "invalid argument \"%s\" for \"-d, --duration\": "
					   "want whole seconds, 1 or more", arg);
		return 0;
	case O_TTL:
		if (parse_uint(arg, &o->ttl_s))
			return usage_error("deploy", "invalid argument \"%s\" for \"--ttl\": "
					   "want whole seconds, 0 or more", arg);
		return 0;
	case O_CONTAINER: o->container = arg; return 0;
	case O_IMAGE: o->image = arg; return 0;
	case O_KUBECONFIG: o->kubeconfig = arg; return 0;
	case O_MEMLIM: o->memory_limit = arg; return 0;
	case O_MEMREQ: o->memory_request = arg; return 0;
	case O_NAMESPACE: o->namespace = arg; return 0;
	case O_NODE: o->node = arg; return 0;
	case O_POD: o->pod = arg; return 0;
	case O_REGION: o->region_id = arg; return 0;
	case O_SECCOMP: o->seccomp = arg; return 0;
	case 't': o->sources = arg; return 0;
	case O_TOLERATE: o->tolerate_all = 1; return 0;
	case O_DRYRUN: o->dry_run = 1; return 0;
	}
	return EXIT_USAGE;
}

static int deploy_parse(int argc, char **argv, struct kprof_opts *o)
{
	static const struct option lo[] = {
		{ "container", required_argument, 0, O_CONTAINER },
		{ "duration", required_argument, 0, 'd' },
		{ "dry-run", no_argument, 0, O_DRYRUN },
		{ "help", no_argument, 0, 'h' },
		{ "image", required_argument, 0, O_IMAGE },
		{ "kubeconfig", required_argument, 0, O_KUBECONFIG },
		{ "memory-limit", required_argument, 0, O_MEMLIM },
		{ "memory-request", required_argument, 0, O_MEMREQ },
		{ "namespace", required_argument, 0, O_NAMESPACE },
		{ "node", required_argument, 0, O_NODE },
		{ "pod", required_argument, 0, O_POD },
		{ "region-id", required_argument, 0, O_REGION },
		{ "seccomp-profile", required_argument, 0, O_SECCOMP },
		{ "sources", required_argument, 0, 't' },
		{ "tolerate-all", no_argument, 0, O_TOLERATE },
		{ "ttl", required_argument, 0, O_TTL },
		{ 0, 0, 0, 0 },
	};
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":d:ht:", lo, NULL)) != -1) {
		if (c == 'h') {
			char names[128];

			printf(deploy_help, lt_t_list(LT_T_ALL, ", ", names, sizeof(names)));
			return -1;
		}
		if (c == '?')
			return usage_error("deploy", "unknown flag: %s", argv[optind - 1]);
		if (c == ':')
			return usage_error("deploy", "flag needs an argument: %s", argv[optind - 1]);
		if ((rc = deploy_flag(o, c, optarg)))
			return rc;
	}
	if (optind < argc)
		return usage_error("deploy", "unexpected argument \"%s\" (deploy takes flags only)",
				   argv[optind]);
	return 0;
}

static int deploy_validate(const struct kprof_opts *o)
{
	double lim, req;

	if (!o->image || !*o->image)
		return usage_error("deploy", "%s", "--image is required: the llmtracker image built "
				   "from deploy/Dockerfile (or set KUBECTL_PROF_IMAGE)");
	if (!o->pod && !o->node)
		return usage_error("deploy", "%s", "say what to profile: --pod POD (and --container), "
				   "or --node NODE");
	if (!*o->namespace)
		return usage_error("deploy", "%s", "--namespace must not be empty");
	if (kprof_quantity(o->memory_limit, &lim))
		return usage_error("deploy", "invalid --memory-limit \"%s\": want a Kubernetes "
				   "quantity such as 1Gi, 512Mi or 10G", o->memory_limit);
	if (kprof_quantity(o->memory_request, &req))
		return usage_error("deploy", "invalid --memory-request \"%s\": want a Kubernetes "
				   "quantity such as 128Mi, 1Gi or 1G", o->memory_request);
	if (req > lim)
		return usage_error("deploy", "--memory-request %s is more than --memory-limit; "
				   "raise the limit or lower the request", o->memory_request);
	if (kprof_sources_check(o->sources))
		return usage_error("deploy", "%s", kprof_err);
	if (o->seccomp && (!*o->seccomp || !strcmp(o->seccomp, "Unconfined") || o->seccomp[0] == '/' ||
			   strstr(o->seccomp, "..")))
		return usage_error("deploy", "invalid --seccomp-profile \"%s\": want RuntimeDefault or "
				   "a relative path under the kubelet's seccomp directory", o->seccomp);
	return 0;
}

static void print_next(const struct kprof_opts *o, const struct kprof_target *t, const char *name)
{
	const char *id = strstr(t->container_id, "://");

	printf("pod/%s created in namespace %s on node %s", name, o->namespace, t->node);
	if (o->pod)
		printf(" to profile %s/%s", o->pod, t->container);
	printf(" (duration %llus, ttl %llus)\n", (unsigned long long)o->duration_s,
	       (unsigned long long)o->ttl_s);
	printf("Next, once it is Running (kubectl get pod %s -n %s):\n", name, o->namespace);
	printf("  kubectl%s%s exec -ti %s -n %s -c debugger -- bash\n",
	       o->kubeconfig ? " --kubeconfig " : "", o->kubeconfig ? o->kubeconfig : "",
	       name, o->namespace);
	if (t->container_id[0])
		printf("  llmtracker generateCommand --container-id %s\n", id ? id + 3 : t->container_id);
	else if (t->pod_uid[0])
		printf("  llmtracker generateCommand --pod-uid %s\n", t->pod_uid);
	else
		printf("  llmtracker generateCommand\n");
}

static int deploy_apply(const struct kprof_opts *o, const char *json)
{
	const char *args[] = { "apply", "-f", "-", NULL };
	struct kprof_run r;
	int rc = 0;

	if (kprof_run_kubectl(o->kubeconfig, args, json, &r)) {
		fprintf(stderr, "Error: %s\n", kprof_err);
		return 1;
	}
	if (r.status != 0) {
		char why[1024];
		fprintf(stderr, "Error: %s\n", kprof_explain(&r, "creating the profiling pod",
							     o->namespace, why, sizeof(why)));
		rc = 1;
	}
	kprof_run_free(&r);
	return rc;
}

static int cmd_deploy(int argc, char **argv)
{
	const char *env_image = getenv("KUBECTL_PROF_IMAGE");
	struct kprof_opts o = {
		.duration_s = 600, .ttl_s = 60, .memory_limit = "1Gi", .memory_request = "128Mi",
		.namespace = "default", .image = env_image && *env_image ? env_image : NULL,
		.sources = "all",
	};
	struct kprof_target t;
	struct json_object *pod;
	char name[128];
	const char *json;
	int rc = deploy_parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? 0 : rc;
	if ((rc = deploy_validate(&o)))
		return rc;
	if (kprof_find_target(&o, &t)) {
		fprintf(stderr, "Error: %s\n", kprof_err);
		return 1;
	}
	kprof_pod_name(&o, &t, name, sizeof(name));
	pod = kprof_manifest(&o, &t, name);
	json = json_object_to_json_string_ext(pod, JSON_C_TO_STRING_PRETTY |
					      JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (o.dry_run)
		printf("%s\n", json);
	else if (!(rc = deploy_apply(&o, json)))
		print_next(&o, &t, name);
	json_object_put(pod);
	return rc;
}

/* ---------------------------------------------------------------- delete */

struct del_opts {
	const char *kubeconfig, *namespace, *pod;
	int expired, dry_run;
};

static int delete_parse(int argc, char **argv, struct del_opts *o)
{
	static const struct option lo[] = {
		{ "dry-run", no_argument, 0, O_DRYRUN },
		{ "expired", no_argument, 0, O_EXPIRED },
		{ "help", no_argument, 0, 'h' },
		{ "kubeconfig", required_argument, 0, O_KUBECONFIG },
		{ "namespace", required_argument, 0, O_NAMESPACE },
		{ "pod", required_argument, 0, O_POD },
		{ 0, 0, 0, 0 },
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(delete_help, stdout); return -1;
		case O_DRYRUN: o->dry_run = 1; break;
		case O_EXPIRED: o->expired = 1; break;
		case O_KUBECONFIG: o->kubeconfig = optarg; break;
		case O_NAMESPACE: o->namespace = optarg; break;
		case O_POD: o->pod = optarg; break;
		case ':': return usage_error("delete", "flag needs an argument: %s", argv[optind - 1]);
		default: return usage_error("delete", "unknown flag: %s", argv[optind - 1]);
		}
	}
	return 0;
}

static time_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	return end ? timegm(&tm) : (time_t)-1;
}

/* When a finished profiling pod stopped; -1 if it has not. */
static time_t pod_finished_at(struct json_object *pod)
{
	struct json_object *st, *cs, *c, *state, *term, *v;
	const char *phase = NULL;

	if (!json_object_object_get_ex(pod, "status", &st))
		return -1;
	if (json_object_object_get_ex(st, "phase", &v))
		phase = json_object_get_string(v);
	if (!phase || (strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0))
		return -1;
	if (json_object_object_get_ex(st, "containerStatuses", &cs) &&
	    (c = json_object_array_get_idx(cs, 0)) && json_object_object_get_ex(c, "state", &state) &&
	    json_object_object_get_ex(state, "terminated", &term) &&
	    json_object_object_get_ex(term, "finishedAt", &v))
		return parse_time(json_object_get_string(v));
	/* Stopped by its deadline before the container reported: use the start. */
	if (json_object_object_get_ex(st, "startTime", &v))
		return parse_time(json_object_get_string(v));
	return 0;
}

static long pod_ttl(struct json_object *pod)
{
	struct json_object *m, *a, *v;

	if (json_object_object_get_ex(pod, "metadata", &m) &&
	    json_object_object_get_ex(m, "annotations", &a) &&
	    json_object_object_get_ex(a, "llmtracker.io/ttl-seconds", &v))
		return strtol(json_object_get_string(v), NULL, 10);
	return 60;
}

/* Names of listed pods that finished more than their ttl ago. */
static int select_expired(const char *list_json, const char **names, int max)
{
	struct json_object *list = json_tokener_parse(list_json), *items;
	time_t now = time(NULL);
	int n = 0;

	if (!list || !json_object_object_get_ex(list, "items", &items)) {
		json_object_put(list);
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(items) && n < max; i++) {
		struct json_object *p = json_object_array_get_idx(items, i), *m, *nm;
		time_t fin = pod_finished_at(p);

		if (fin < 0 || fin + pod_ttl(p) > now || !json_object_object_get_ex(p, "metadata", &m) ||
		    !json_object_object_get_ex(m, "name", &nm))
			continue;
		names[n++] = strdup(json_object_get_string(nm));
	}
	json_object_put(list);
	return n;
}

static int run_or_say(const struct del_opts *o, const char **args)
{
	struct kprof_run r;
	int rc = 0;

	if (o->dry_run) {
		printf("would run: kubectl");
		for (int i = 0; args[i]; i++)
			printf(" %s", args[i]);
		printf("\n");
		return 0;
	}
	if (kprof_run_kubectl(o->kubeconfig, args, NULL, &r))
		return fprintf(stderr, "Error: %s\n", kprof_err), 1;
	fputs(r.out, stdout);
	if (r.status != 0) {
		char why[1024];
		fprintf(stderr, "Error: %s\n", kprof_explain(&r, "deleting the profiling pods", o->namespace,
							     why, sizeof(why)));
		rc = 1;
	}
	kprof_run_free(&r);
	return rc;
}

static int delete_expired(const struct del_opts *o, const char *selector)
{
	const char *get[] = { "get", "pods", "--namespace", o->namespace, "-l", selector, "-o", "json", NULL };
	const char *args[256 + 8], *names[256];
	struct kprof_run r;
	int n, k = 0, rc;

	if (kprof_run_kubectl(o->kubeconfig, get, NULL, &r))
		return fprintf(stderr, "Error: %s\n", kprof_err), 1;
	if (r.status != 0) {
		char why[1024];
		fprintf(stderr, "Error: %s\n", kprof_explain(&r, "listing the profiling pods", o->namespace,
							     why, sizeof(why)));
		kprof_run_free(&r);
		return 1;
	}
	n = select_expired(r.out, names, 256);
	kprof_run_free(&r);
	if (n < 0)
		return fprintf(stderr, "Error: kubectl get pods -o json did not print a pod list\n"), 1;
	if (n == 0)
		return printf("no expired profiling pods in namespace %s\n", o->namespace), 0;
	args[k++] = "delete";
	args[k++] = "pod";
	args[k++] = "--namespace";
	args[k++] = o->namespace;
	for (int i = 0; i < n; i++)
		args[k++] = names[i];
	args[k] = NULL;
	rc = run_or_say(o, args);
	for (int i = 0; i < n; i++)
		free((char *)names[i]);
	return rc;
}

static int cmd_delete(int argc, char **argv)
{
	struct del_opts o = { .namespace = "default" };
	char selector[512];
	const char *args[64];
	int k = 0, rc = delete_parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? 0 : rc;
	snprintf(selector, sizeof(selector), "%s%s%s", KPROF_SELECTOR,
		 o.pod ? ",llmtracker.io/target-pod=" : "", o.pod ? o.pod : "");
	if (o.expired)
		return delete_expired(&o, selector);
	args[k++] = "delete";
	args[k++] = "pod";
	args[k++] = "--namespace";
	args[k++] = o.namespace;
	if (optind < argc) {
		for (int i = optind; i < argc && k < 62; i++) {
			if (strncmp(argv[i], "ai-profiler-", 12) != 0)
				return usage_error("delete", "\"%s\" is not a profiling pod "
						   "(their names start with ai-profiler-)", argv[i]);
			args[k++] = argv[i];
		}
	} else {
		args[k++] = "-l";
		args[k++] = selector;
	}
	args[k] = NULL;
	return run_or_say(&o, args);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd || !strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		fputs(top_help, stdout);
		return cmd ? 0 : EXIT_USAGE;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("kubectl-prof %s\n", LT_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "deploy") || !strcmp(cmd, "run"))
		return cmd_deploy(argc - 1, argv + 1);
	if (!strcmp(cmd, "delete"))
		return cmd_delete(argc - 1, argv + 1);
	fprintf(stderr, "Error: unknown command \"%s\" for \"kubectl-prof\"\n", cmd);
	fputs(top_help, stderr);
	return EXIT_USAGE;
}
