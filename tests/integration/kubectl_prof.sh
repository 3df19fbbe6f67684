#!/bin/bash
# kubectl-prof against a fake kubectl that records its argv and stdin and
# answers `get pod` from canned JSON: the manifest, the flags' defaults, the
# kubectl calls made, and the errors.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
KP=$(realpath -m "$BUILD/bin/kubectl-prof")
need_built "$KP"
command -v python3 >/dev/null || skip "python3 missing: cannot parse manifests"

tap_tmpdir T kprof-test
export FAKE_KUBE_DIR=$T/kube
mkdir -p "$T/bin" "$FAKE_KUBE_DIR/pods"
cat > "$T/bin/kubectl" <<'FAKE'
#!/bin/bash
d=$FAKE_KUBE_DIR
n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 )); echo $n > "$d/count"
printf '%s\n' "$@" > "$d/argv.$n"
a=("$@")
[ "${a[0]}" = --kubeconfig ] && a=("${a[@]:2}")
case "${a[0]} ${a[1]}" in
"get pod")
	# what real kubectl prints when the cluster cannot be reached or refuses
	if [ "${a[2]}" = unreachable ]; then
		echo 'E1206 05:38:12.555354 5285 memcache.go:265] "Unhandled Error" err="couldn'"'"'t get current server API group list: Get \"http://localhost:8080/api?timeout=32s\": dial tcp 127.0.0.1:8080: connect: connection refused"' >&2; exit 1
	elif [ "${a[2]}" = forbidden ]; then
		echo 'Error from server (Forbidden): pods "forbidden" is forbidden: User "dev" cannot get resource "pods" in API group "" in the namespace "ml"' >&2; exit 1
	elif [ -f "$d/pods/${a[2]}.json" ]; then cat "$d/pods/${a[2]}.json"
	else echo "Error from server (NotFound): pods \"${a[2]}\" not found" >&2; exit 1; fi ;;
"get pods") cat "$d/list.json" ;;
"apply -f") cat > "$d/stdin.$n"; echo "pod/created" ;;
"delete pod") echo "deleted: ${a[*]:2}" ;;
*) echo "fake kubectl: unexpected: $*" >&2; exit 3 ;;
esac
FAKE
chmod +x "$T/bin/kubectl"
export PATH=$T/bin:$PATH
unset KUBECTL KUBECTL_PROF_IMAGE KUBECTL_PROF_RESULTS_PVC

pod_json() { # name phase node
	cat <<JSON
{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"$1","namespace":"default","uid":"0b9c4d2e-1111-2222-3333-444455556666"},
 "spec":{"nodeName":"$3","containers":[{"name":"pytorch","image":"torch"},{"name":"log-agent","image":"fluent"}]},
 "status":{"phase":"$2","containerStatuses":[
   {"name":"log-agent","containerID":"containerd://ffff0000"},
   {"name":"pytorch","containerID":"containerd://abcdef0123456789"}]}}
JSON
}
pod_json pytorch-train-worker-sample Running gpu-node-7 > "$FAKE_KUBE_DIR/pods/pytorch-train-worker-sample.json"
pod_json pending-worker Pending "" > "$FAKE_KUBE_DIR/pods/pending-worker.json"
sed 's/,{"name":"log-agent","image":"fluent"}//' "$FAKE_KUBE_DIR/pods/pytorch-train-worker-sample.json" \
	> "$FAKE_KUBE_DIR/pods/single.json"

reset_calls() { rm -f "$FAKE_KUBE_DIR"/count "$FAKE_KUBE_DIR"/argv.* "$FAKE_KUBE_DIR"/stdin.*; }
calls() { cat "$FAKE_KUBE_DIR/count" 2>/dev/null || echo 0; }

# 1. help shows exactly the seed's flags with their defaults
"$KP" deploy -h > "$T/help" 2>&1; rc=$?
miss=0
for f in '--container string' '-d, --duration uint' '(default 600)' '--image string' '--kubeconfig string' \
	'--memory-limit string' '(default "1Gi")' '--memory-request string' '(default "128Mi")' \
	'--namespace string' '(default "default")' '--node string' '--pod string' '--region-id string' \
	'--ttl uint' 'Aliases:' 'deploy, run' '-h, --help' '--dry-run' '-t, --sources string' '(default "all")' \
	'--tolerate-all' '--seccomp-profile string'; do
	grep -qF -- "$f" "$T/help" || { echo "# help lacks: $f"; miss=1; }
done
check_rc $((rc | miss)) "deploy -h lists the seed's flags and defaults"
"$KP" run --help | cmp -s - "$T/help"; check_rc $? "run is an alias of deploy"

# 2. dry run: the manifest, with defaults
reset_calls
"$KP" deploy --dry-run --image reg.example/llmtracker:1 --pod pytorch-train-worker-sample \
	--container pytorch > "$T/m.json" 2> "$T/err"; rc=$?
check_rc $rc "deploy --dry-run exits 0"
python3 - "$T/m.json" <<'PY' > "$T/check" 2>&1
import json, re, sys
m = json.load(open(sys.argv[1]))
s = m["spec"]; c = s["containers"][0]; md = m["metadata"]
def want(cond, what):
    print(("ok " if cond else "FAIL ") + what)
want(m["kind"] == "Pod" and m["apiVersion"] == "v1", "a v1 Pod")
want(re.fullmatch(r"ai-profiler-[0-9a-f]{15}-[a-z0-9]{5}", md["name"]) is not None, "name ai-profiler-<hash>-<rand>: " + md["name"])
want(md["namespace"] == "default", "namespace default")
want(s["nodeName"] == "gpu-node-7", "on the target's node")
want(s["hostPID"] is True, "hostPID")
want(s["activeDeadlineSeconds"] == 600, "deadline = default duration 600")
want(s["restartPolicy"] == "Never", "never restarted")
want(c["name"] == "debugger" and c["image"] == "reg.example/llmtracker:1", "container debugger with the image")
want(c["command"] == ["sleep", "600"], "sleeps for the duration")
sc = c["securityContext"]
want(sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False, "not privileged, no privilege escalation")
want(sc["capabilities"]["drop"] == ["ALL"], "drops every capability")
want(sc["capabilities"]["add"] == ["BPF", "PERFMON", "SYS_PTRACE", "SYSLOG", "SYS_ADMIN"], "-t all adds BPF PERFMON SYS_PTRACE SYSLOG SYS_ADMIN: %s" % sc["capabilities"]["add"])
want(sc["seccompProfile"] == {"type": "RuntimeDefault"}, "seccomp RuntimeDefault (SYS_ADMIN lets it allow bpf)")
want(c["imagePullPolicy"] == "Always", "a tag is pulled Always")
want("tolerations" not in s, "no tolerations unless asked")
want(c["resources"] == {"limits": {"memory": "1Gi"}, "requests": {"memory": "128Mi"}}, "memory 1Gi / 128Mi defaults")
mounts = {v["mountPath"]: v["name"] for v in c["volumeMounts"]}
vols = {v["name"]: v for v in s["volumes"]}
want(list(mounts) == ["/data"] and not any("hostPath" in v for v in s["volumes"]), "no hostPath; only the results volume")
want("emptyDir" in vols[mounts["/data"]], "results volume at /data")
want(md["annotations"]["llmtracker.io/sources"] == "all", "sources annotation")
env = {e["name"]: e.get("value") for e in c["env"]}
node = [e for e in c["env"] if e["name"] == "LLMT_NODE_NAME"]
want(node and node[0].get("valueFrom") == {"fieldRef": {"fieldPath": "spec.nodeName"}},
     "the node's name passed on (LLMT_NODE_NAME from spec.nodeName)")
want(env.get("LLMT_TARGET_CONTAINER_ID") == "abcdef0123456789", "target container id passed on")
want(env.get("LLMT_TARGET_POD") == "pytorch-train-worker-sample", "target pod passed on")
want(md["labels"]["app.kubernetes.io/managed-by"] == "kubectl-prof", "cleanup label")
want(md["annotations"]["llmtracker.io/ttl-seconds"] == "60", "ttl annotation default 60")
want(md["annotations"]["llmtracker.io/target"] == "default/pytorch-train-worker-sample/pytorch", "target annotation")
PY
grep -q '^FAIL' "$T/check"; [ $? -ne 0 ]; check_rc $? "manifest: $(grep -c '^ok' "$T/check") checks passed"
grep '^FAIL' "$T/check" | sed 's/^/# /'
[ "$(calls)" = 1 ] && grep -qx 'get' "$FAKE_KUBE_DIR/argv.1" && tr '\n' ' ' < "$FAKE_KUBE_DIR/argv.1" |
	grep -q 'get pod pytorch-train-worker-sample --namespace default -o json'
check_rc $? "dry run only reads the pod (kubectl get pod ... -o json), applies nothing"

# 2b. capabilities, seccomp, pull policy and tolerations follow the flags
sc_case() { # what python-check -- deploy args
	local what=$1 check=$2; shift 3
	"$KP" deploy --dry-run --pod single "$@" > "$T/sc.json" 2> "$T/err" &&
		python3 -c "import json,sys
m = json.load(open(sys.argv[1])); s = m['spec']; c = s['containers'][0]; sc = c['securityContext']
caps = sc['capabilities']['add']; sp = sc['seccompProfile']
assert $check, (caps, sp, c['imagePullPolicy'], s.get('tolerations'))" "$T/sc.json" > "$T/err" 2>&1
	local rc=$?; [ $rc -eq 0 ] || sed 's/^/# /' "$T/err"; check_rc $rc "$what"
}
L='{"type": "Localhost", "localhostProfile": "llmtracker/collector.json"}'
sc_case "-t cpu: BPF PERFMON SYS_PTRACE SYSLOG, Localhost seccomp" \
	"caps == ['BPF', 'PERFMON', 'SYS_PTRACE', 'SYSLOG'] and sp == $L" -- --image I -t cpu
sc_case "-t syscall: BPF PERFMON SYS_PTRACE" "caps == ['BPF', 'PERFMON', 'SYS_PTRACE'] and sp == $L" -- --image I -t syscall
sc_case "-t cuda,pysample: BPF PERFMON SYS_PTRACE" "caps == ['BPF', 'PERFMON', 'SYS_PTRACE'] and sp == $L" -- --image I -t cuda,pysample
sc_case "-t python: adds SYS_ADMIN, RuntimeDefault" \
	"caps == ['BPF', 'PERFMON', 'SYS_PTRACE', 'SYS_ADMIN'] and sp == {'type': 'RuntimeDefault'}" -- --image I --sources python
sc_case "--seccomp-profile RuntimeDefault is honoured" "sp == {'type': 'RuntimeDefault'}" -- --image I -t cpu --seccomp-profile RuntimeDefault
sc_case "--seccomp-profile PATH is a Localhost profile" "sp == {'type': 'Localhost', 'localhostProfile': 'sec/p.json'}" -- --image I -t python --seccomp-profile sec/p.json
sc_case "an image by digest is pulled IfNotPresent" "c['imagePullPolicy'] == 'IfNotPresent'" -- --image "reg/l@sha256:$(printf '%064d' 0)"
sc_case "a tag is pulled Always" "c['imagePullPolicy'] == 'Always'" -- --image reg/l:latest
sc_case "--tolerate-all tolerates every taint" "s['tolerations'] == [{'operator': 'Exists'}]" -- --image I --tolerate-all

# 3. the seed's example, applied
reset_calls
"$KP" deploy --image IMG --duration 100000 --namespace default --pod pytorch-train-worker-sample \
	--container pytorch --memory-limit 10G --memory-request 1G --kubeconfig /etc/kc --ttl 300 \
	--region-id cn-hangzhou > "$T/out" 2> "$T/err"; rc=$?
check_rc $rc "deploy with the seed's example flags exits 0"
[ "$(calls)" = 2 ] && [ "$(head -2 "$FAKE_KUBE_DIR/argv.2" | tr '\n' ' ')" = "--kubeconfig /etc/kc " ] &&
	[ "$(tail -n +3 "$FAKE_KUBE_DIR/argv.2" | tr '\n' ' ')" = "apply -f - " ]
check_rc $? "applied with kubectl --kubeconfig /etc/kc apply -f -"
python3 - "$FAKE_KUBE_DIR/stdin.2" <<'PY'; check_rc $? "applied manifest has duration 100000, memory 10G/1G, ttl 300, region"
import json, sys
m = json.load(open(sys.argv[1])); c = m["spec"]["containers"][0]
assert m["spec"]["activeDeadlineSeconds"] == 100000
assert c["resources"]["limits"]["memory"] == "10G" and c["resources"]["requests"]["memory"] == "1G"
assert m["metadata"]["annotations"]["llmtracker.io/ttl-seconds"] == "300"
assert m["metadata"]["annotations"]["llmtracker.io/region-id"] == "cn-hangzhou"
PY
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["name"])' "$FAKE_KUBE_DIR/stdin.2")
grep -qF "kubectl --kubeconfig /etc/kc exec -ti $name -n default -c debugger -- bash" "$T/out" &&
	grep -qF "llmtracker generateCommand --container-id abcdef0123456789" "$T/out"
check_rc $? "prints the kubectl exec line and the generateCommand to run next"

# 4. names: same target -> same hash, fresh random suffix
a=$("$KP" deploy --dry-run --image I --pod single | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
b=$("$KP" deploy --dry-run --image I --pod single | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["name"])')
[ "${a%-*}" = "${b%-*}" ] && [ "$a" != "$b" ]; check_rc $? "one target: same hash, new suffix ($a, $b)"
"$KP" deploy --dry-run --image I --pod single > /dev/null; check_rc $? "a single-container pod needs no --container"
"$KP" deploy --dry-run --image I --node gpu-node-3 | python3 -c '
import json,sys; m=json.load(sys.stdin); assert m["spec"]["nodeName"]=="gpu-node-3"'
check_rc $? "--node alone deploys on that node"

# 5. errors: clear message, right exit code, nothing applied
err_case() { # want_rc pattern what -- args
	local want=$1 pat=$2 what=$3; shift 4
	reset_calls
	"$KP" "$@" > "$T/out" 2> "$T/err"; local rc=$?
	if [ $rc -eq "$want" ] && grep -qF -- "$pat" "$T/err" && ! ls "$FAKE_KUBE_DIR"/stdin.* >/dev/null 2>&1; then
		ok "$what"
	else
		nok "$what (rc $rc, stderr: $(head -c 300 "$T/err"))"
	fi
}
err_case 1 'pod "nope" not found in namespace "default"' "missing pod" -- deploy --image I --pod nope
err_case 1 "reading the pod failed: cannot reach the cluster's API server" "an unreachable cluster, said in our words" -- deploy --image I --pod unreachable --dry-run
err_case 1 'your account is not allowed to do this in namespace ml' "a forbidden read, said in our words" -- deploy --image I --pod forbidden --namespace ml
err_case 1 'choose one with --container' "several containers, no --container" -- deploy --image I --pod pytorch-train-worker-sample
err_case 1 'no container named "tf"' "unknown container" -- deploy --image I --pod pytorch-train-worker-sample --container tf
err_case 1 'not scheduled on a node' "pending pod" -- deploy --image I --pod pending-worker --container pytorch
err_case 1 'runs on node gpu-node-7, not on --node other' "--node disagrees with the pod" -- deploy --image I --pod single --node other
err_case 2 '--image is required' "no --image" -- deploy --pod single
err_case 2 'invalid argument "abc" for "-d, --duration"' "bad duration" -- deploy --image I --pod single -d abc
err_case 2 'invalid argument "-5" for "--ttl"' "negative ttl" -- deploy --image I --pod single --ttl -5
err_case 2 'invalid --memory-limit "10X"' "bad memory quantity" -- deploy --image I --pod single --memory-limit 10X
err_case 2 'is more than --memory-limit' "request above limit" -- deploy --image I --pod single --memory-request 2Gi
err_case 2 'unknown flag: --bogus' "unknown flag" -- deploy --image I --pod single --bogus
err_case 2 'say what to profile' "no --pod nor --node" -- deploy --image I
err_case 2 'unknown source "gpu" in -t cpu,gpu' "unknown -t source" -- deploy --image I --pod single -t cpu,gpu
err_case 2 'names no source' "empty -t" -- deploy --image I --pod single -t ,
err_case 2 'invalid --seccomp-profile "Unconfined"' "no unconfined seccomp" -- deploy --image I --pod single --seccomp-profile Unconfined
err_case 2 'invalid --seccomp-profile "../x.json"' "seccomp path stays under the kubelet's directory" -- deploy --image I --pod single --seccomp-profile ../x.json
reset_calls; mkdir -p "$T/empty"
env PATH="$T/empty" "$KP" deploy --image I --pod single > "$T/out" 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -qF 'kubectl not found on PATH' "$T/err"; check_rc $? "kubectl missing"
KUBECTL=/nonexistent/kubectl err_case 1 'KUBECTL=/nonexistent/kubectl is not an executable' "KUBECTL unusable" -- deploy --image I --pod single

# 6. delete
reset_calls
"$KP" delete --namespace ml > "$T/out" 2>&1
[ "$(tr '\n' ' ' < "$FAKE_KUBE_DIR/argv.1")" = "delete pod --namespace ml -l app.kubernetes.io/managed-by=kubectl-prof " ]
check_rc $? "delete removes this plugin's pods by label"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cat > "$FAKE_KUBE_DIR/list.json" <<JSON
{"items":[
 {"metadata":{"name":"ai-profiler-old-aaaaa","annotations":{"llmtracker.io/ttl-seconds":"60"}},
  "status":{"phase":"Succeeded","containerStatuses":[{"state":{"terminated":{"finishedAt":"2024-03-14T11:42:42Z"}}}]}},
 {"metadata":{"name":"ai-profiler-run-bbbbb","annotations":{"llmtracker.io/ttl-seconds":"60"}},
  "status":{"phase":"Running"}},
 {"metadata":{"name":"ai-profiler-new-ccccc","annotations":{"llmtracker.io/ttl-seconds":"3600"}},
  "status":{"phase":"Failed","containerStatuses":[{"state":{"terminated":{"finishedAt":"$now"}}}]}}]}
JSON
reset_calls
"$KP" delete --expired > "$T/out" 2>&1
[ "$(tr '\n' ' ' < "$FAKE_KUBE_DIR/argv.2")" = "delete pod --namespace default ai-profiler-old-aaaaa " ]
check_rc $? "delete --expired removes only finished pods past their ttl"
err_case 2 'is not a profiling pod' "delete refuses other pods" -- delete pytorch-train-worker-sample
tap_done
