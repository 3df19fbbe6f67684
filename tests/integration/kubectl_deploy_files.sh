#!/bin/bash
# deploy/: the manifests parse and agree with each other and with the
# converter's batch mode (the Indexed Job's pods, started as the kubelet
# would, convert each profile once); the image's runtime stage installs every shared
# library the built binaries need (checked against the binaries, via dpkg).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
D=deploy
python3 -c 'import yaml' 2>/dev/null || skip "python3 with PyYAML is needed to parse the manifests"

python3 - "$D/manifests" <<'PY' > /tmp/kdf.$$ 2>&1; rc=$?
import sys, yaml
d = sys.argv[1]
def load(f):
    return list(yaml.safe_load_all(open("%s/%s" % (d, f))))
pvc, = load("results-pvc.yaml")
job, = load("convert-job.yaml")
dep, svc = load("tensorboard.yaml")
claim = pvc["metadata"]["name"]
assert pvc["kind"] == "PersistentVolumeClaim" and "ReadWriteMany" in pvc["spec"]["accessModes"]
js = job["spec"]; pod = js["template"]["spec"]; c = pod["containers"][0]
assert job["kind"] == "Job" and js["parallelism"] > 1, "Job with parallelism N"
assert c["command"] == ["llmtracker-convert", "batch", "--in", "/data/logs", "--logdir", "/data/tb"], c["command"]
assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim
assert c["volumeMounts"][0]["mountPath"] == "/data"
tp = dep["spec"]["template"]["spec"]; tc = tp["containers"][0]
assert dep["kind"] == "Deployment" and svc["kind"] == "Service"
assert "--logdir /data/tb" in " ".join(tc["args"]) and "tensorboard-plugin-profile" in " ".join(tc["args"])
assert tp["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim
assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
print("manifests consistent: claim", claim)
PY
sed 's/^/# /' /tmp/kdf.$$; rm -f /tmp/kdf.$$
check_rc $rc "manifests parse; Job runs batch --in /data/logs --logdir /data/tb; TensorBoard and Job share the PVC"

# The Indexed Job: N pods, pod I converting shard I of N with no claims.
python3 - "$D/manifests" <<'PY' > /tmp/kdf.$$ 2>&1; rc=$?
import sys, yaml
d = sys.argv[1]
job, = yaml.safe_load_all(open(d + "/convert-indexed-job.yaml"))
pvc, = yaml.safe_load_all(open(d + "/results-pvc.yaml"))
js = job["spec"]; pod = js["template"]["spec"]; c = pod["containers"][0]
n = js["completions"]
assert job["kind"] == "Job" and js["completionMode"] == "Indexed", js.get("completionMode")
assert n > 1 and js["parallelism"] == n, ("completions = parallelism = N", n, js["parallelism"])
assert c["command"] == ["llmtracker-convert", "batch", "--in", "/data/logs", "--logdir", "/data/tb",
                        "--shard", "$(JOB_COMPLETION_INDEX)/%d" % n], c["command"]
env = {e["name"]: e for e in c["env"]}
assert env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] == \
    "metadata.annotations['batch.kubernetes.io/job-completion-index']", env
# a failed index is retried alone, by one pod at a time
assert pod["restartPolicy"] == "Never" and js["backoffLimitPerIndex"] >= 1
assert js["podReplacementPolicy"] == "Failed"
assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
assert c["volumeMounts"][0]["mountPath"] == "/data"
print("indexed job: %d shards" % n)
for a in c["command"]:
    print("ARG " + a)
PY
grep -v '^ARG ' /tmp/kdf.$$ | sed 's/^/# /'
check_rc $rc "Indexed Job: completions = parallelism = N, each pod runs batch --shard \$(JOB_COMPLETION_INDEX)/N on the PVC"
argv=(); while IFS= read -r a; do argv+=("$a"); done < <(sed -n 's/^ARG //p' /tmp/kdf.$$)
rm -f /tmp/kdf.$$

# Its pods as the kubelet starts them ($(JOB_COMPLETION_INDEX) expanded,
# /data the volume) convert each profile once between them.
conv=$BUILD/bin/llmtracker-convert gen=$BUILD/tests/progs/xplane_genlog
if [ ${#argv[@]} -ne 8 ] || [ ! -x "$conv" ] || [ ! -x "$gen" ]; then
	ok "# SKIP the Indexed Job's pods: the manifest did not parse or the converter is not built"
else
	tap_tmpdir vol kdf-job
	mkdir -p "$vol/logs"
	for i in $(seq 1 12); do "$gen" "$vol/logs/node-$i.log" "node-$i" 1 || exit 1; done
	n=${argv[7]##*/}
	for i in $(seq 0 $((n - 1))); do
		args=("${argv[@]/\$(JOB_COMPLETION_INDEX)/$i}"); args=("${args[@]/#\/data\//$vol/}")
		JOB_COMPLETION_INDEX=$i "$(dirname "$conv")/${args[0]}" "${args[@]:1}" >"$vol/pod$i.log" 2>&1 || echo "pod $i failed"
	done >"$vol/failed"
	conv_all=$(grep -h '^batch: converted' "$vol"/pod*.log | awk '{ print $3 }' | sort)
	[ ! -s "$vol/failed" ] && [ "$conv_all" = "$(ls "$vol/logs" | sort)" ] && [ "$(ls "$vol/tb/plugins/profile" | wc -l)" = 12 ] &&
		[ -z "$(find "$vol/tb/.llmtracker-batch" -name 'lease.*' -o -name 'intent.*')" ]
	check_rc $? "the Indexed Job's $n pods, run as the kubelet would, convert 12 profiles once each, no claims"
fi

# The seccomp profile for the profiling pod: an allow list with everything
# else refused, naming what the collector calls (bpf, perf_event_open, the
# injector's ptrace, pidfd_getfd, process_vm_readv) and none of the calls
# that leave the container (mount, unshare, setns, kexec, module loading).
python3 - "$D/seccomp/llmtracker-collector.json" <<'PY' > /tmp/kdf.$$ 2>&1; rc=$?
import json, sys
p = json.load(open(sys.argv[1]))
assert p["defaultAction"] == "SCMP_ACT_ERRNO" and p["architectures"] == ["SCMP_ARCH_X86_64"], p["defaultAction"]
allow = set()
for r in p["syscalls"]:
    assert r["action"] == "SCMP_ACT_ALLOW" and not r.get("args"), r
    allow |= set(r["names"])
need = {"bpf", "perf_event_open", "ptrace", "process_vm_readv", "pidfd_open", "pidfd_getfd", "execve", "wait4"}
assert need <= allow, need - allow
deny = {"mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "kexec_load", "init_module",
        "finit_module", "delete_module", "open_by_handle_at", "name_to_handle_at", "process_vm_writev",
        "userfaultfd", "add_key", "reboot", "swapon", "syslog"}
assert not (deny & allow), deny & allow
print("seccomp profile: %d syscalls allowed" % len(allow))
PY
sed 's/^/# /' /tmp/kdf.$$; rm -f /tmp/kdf.$$
check_rc $rc "seccomp profile allows the collector's calls and none that leave the container"

grep -q '^ARG BASE=debian:12$' $D/Dockerfile && grep -q '^FROM ${BASE} AS build' $D/Dockerfile &&
	[ "$(grep -c '^FROM ${BASE}' $D/Dockerfile)" = 2 ] &&
	grep -q 'make .*all' $D/Dockerfile && grep -q 'make .*install' $D/Dockerfile
check_rc $? "Dockerfile: multi-stage on its BASE argument (default debian:12), builds and installs from this repository"
grep -qx '\.git' .dockerignore && grep -qx 'build' .dockerignore && grep -qx 'build-\*' .dockerignore
check_rc $? ".dockerignore keeps .git and build outputs out of the image's context"

# Every NEEDED soname of the built binaries comes from a package the runtime stage installs.
bins=$(ls "$BUILD"/bin/llmtracker "$BUILD"/bin/llmtracker-convert "$BUILD"/bin/kubectl-prof 2>/dev/null)
if [ -z "$bins" ] || ! command -v dpkg >/dev/null; then
	ok "# SKIP binaries not built or no dpkg"
else
	runtime=$(sed -n '/^FROM ${BASE}$/,$p' $D/Dockerfile)
	missing=""
	# Direct dependencies (NEEDED) at the path the loader resolves (ldd), each
	# owned by one package (their own dependencies come with them); sanitizer
	# runtimes belong to `make asan` builds, never to the image.
	for lib in $(for b in $bins; do
			need=$(readelf -d "$b" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
			ldd "$b" | awk -v need="$need" 'BEGIN { split(need, n, "\n"); for (i in n) want[n[i]] = 1 }
				$2 == "=>" && $3 ~ /^\// && ($1 in want) { print $1 "=" $3 }'
		done | sort -u); do
		so=${lib%%=*} path=${lib#*=}
		case $so in libasan.so*|libubsan.so*|liblsan.so*|libtsan.so*) continue ;; esac
		pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null)
		pkg=$(head -1 <<< "$pkg" | cut -d: -f1)
		case $pkg in libc6|"") continue ;; esac
		grep -qw -- "$pkg" <<< "$runtime" || missing="$missing $so($pkg)"
	done
	echo "# runtime libraries missing from the image:${missing:- none}"
	[ -z "$missing" ]; check_rc $? "the image installs every shared library the binaries need"
fi
tap_done
