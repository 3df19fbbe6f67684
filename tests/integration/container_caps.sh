#!/bin/bash
# Least privilege, measured: the collector in a container of its own with
# --pid=host (as the profiling pod's hostPID), every capability dropped and
# only those named added back, under the project's seccomp profile
# (deploy/seccomp/llmtracker-collector.json) as kubectl-prof deploys it, or
# the runtime's default where SYS_ADMIN is granted; the job (Debian's
# python3.11, USDT probes) in another container.
#   - BPF+PERFMON+SYS_PTRACE: cpu, syscall, pysample record, the job's
#     python3.11 frames named (its files opened inside its root: openat2);
#   - -t python (its default method, the injected hook) records there too;
#     --python-method usdt fails (USDT uprobes need SYS_ADMIN): non-zero exit,
#     one line naming CAP_SYS_ADMIN, nothing published; with SYS_ADMIN it
#     records; -t all --python-method usdt records the rest and lists python
#     as not recorded;
#   - without SYS_PTRACE the collector refuses, naming it;
#   - logs name the node (its /etc/hostname), not the collector's container.
set -u
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/container.inc"
need_bpf
need_podman
SECCOMP=$PWD/deploy/seccomp/llmtracker-collector.json SECNAME="project seccomp"
if ldd "$LT" | grep -q libasan; then
	# the sanitizers' runtime opens files with open(2), which the profile
	# (the collector's own calls) refuses: it can then neither read its
	# options nor finish; the plain build's run checks the profile
	SECCOMP=unconfined SECNAME="seccomp unconfined"
	echo "# sanitizer build: seccomp unconfined (the profile is checked with the plain build)"
fi
ct_image py311 python3.11 dash strace ||
	skip "cannot build the test image (no Debian mirror reachable?)"
JOB_IMAGE=$CT_IMAGE
# the collector's own libraries, as packages (the image then has nothing else)
pkgs=$(for l in $(ldd "$LT" | awk '/=>/ { print $3 }'); do
	p=$(dpkg -S "$l" 2> /dev/null || dpkg -S "/usr$l" 2> /dev/null || dpkg -S "${l#/usr}" 2> /dev/null)
	echo "${p%%:*}"
done | sort -u)
# shellcheck disable=SC2086
ct_image collector-rt $pkgs ||
	skip "cannot build the collector's image (no Debian mirror reachable?)"
COLL_IMAGE=$CT_IMAGE
echo "# collector image $COLL_IMAGE ($(echo $pkgs))"
BUILD_ABS=$(realpath "$BUILD")

# calls, system calls, CPU time, until stopped
ct_run "$JOB_IMAGE" python3.11 -c "
import os
def g(x):
    return x * 2
def f(i):
    return sum(g(i + k) for k in range(3))
while True:
    f(1)
    os.getppid()" || { nok "job container starts"; tap_done; }
job=$(ct_pid)
echo "# job: host pid $job"

# collect NAME CAPS SECCOMP TYPES [ARGS...]: the collector in its container, 2 s; sets rc
collect() {
	local name=$1 caps=$2 sec=$3 types=$4 add=()
	shift 4
	mkdir -p "$T/$name"
	[ -n "$caps" ] && add+=(--cap-add="$caps")
	[ -n "$sec" ] && add+=(--security-opt seccomp="$sec")
	# an ASan build's leak check cannot stop its threads without ptrace
	# rights over itself in there: the other tests check leaks
	ct_run --pid=host --cap-drop=all "${add[@]}" -e ASAN_OPTIONS=detect_leaks=0 \
		-v "$BUILD_ABS:$BUILD_ABS:ro" -v "$T/$name:/out" "$COLL_IMAGE" \
		"$BUILD_ABS/bin/llmtracker" profile -p "$job" -t "$types" "$@" -d 2 -q -o /out/c.evlog ||
		{ rc=125; return; }
	podman wait "$CT_ID" > /dev/null 2>&1 # its answer was 0 for a container that had just failed
	rc=$(podman inspect -f '{{.State.ExitCode}}' "$CT_ID")
	podman logs "$CT_ID" > "$T/$name/err" 2>&1
	podman rm -f -t 0 "$CT_ID" > /dev/null 2>&1
	sed "s/^/# $name: /" "$T/$name/err" | grep -v '^# [a-z0-9-]*: *$' | head -12
}
row() { awk -v s="$2" '$1 == s' "$T/$1/err"; }
events_of() { row "$1" "$2" | awk '{ print $2 + 0 }'; }

BASE=BPF,PERFMON,SYS_PTRACE
collect base "$BASE" "$SECCOMP" cpu,syscall,pysample
check "BPF+PERFMON+SYS_PTRACE, $SECNAME: -t cpu,syscall,pysample exits 0" [ "$rc" = 0 ]
for s in cpu syscall pysample; do
	check "... $s recorded ($(events_of base $s) events)" [ "$(events_of base $s)" -gt 0 ]
done
"$DUMP" "$T/base/c.evlog" > "$T/base/dump" 2>&1
check "... CPU frames of the job's python3.11 named" grep -q '^symbol .* name=_PyEval_EvalFrameDefault ' "$T/base/dump"
check "... Python stacks named (f, g)" grep -qE '^py_sample .*frames=(g|f|<genexpr>)' "$T/base/dump"
node=$(hostname)
check "... the log names the node ($node), not the collector's container ($(grep -m1 '^# host=' "$T/base/dump"))" \
	grep -qx "# host=$node" "$T/base/dump"

collect pyhook "$BASE" "$SECCOMP" python
check "BPF+PERFMON+SYS_PTRACE: -t python (the hook, by default) exits 0" [ "$rc" = 0 ]
"$DUMP" "$T"/pyhook/llmtracker-python.*.evlog > "$T/pyhook/dump" 2>&1
check "... the job's calls recorded ($(grep -c '^py_enter .* func=g ' "$T/pyhook/dump") of g)" \
	grep -q '^py_enter .* func=g ' "$T/pyhook/dump"

collect py "$BASE" "$SECCOMP" python --python-method usdt
failed() { [ "$rc" != 0 ] && [ "$rc" != 125 ]; }
check "BPF+PERFMON+SYS_PTRACE: -t python --python-method usdt fails (exit $rc)" failed
check "... with one line naming CAP_SYS_ADMIN" [ "$(grep -c 'CAP_SYS_ADMIN' "$T/py/err")" = 1 ]
check "... and publishes no log" [ ! -e "$T/py/c.evlog" ]

collect all "$BASE" "$SECCOMP" all --python-method usdt
check "BPF+PERFMON+SYS_PTRACE: -t all exits 0" [ "$rc" = 0 ]
check "... the summary lists python as not recorded, naming CAP_SYS_ADMIN" \
	grep -qE '^ +python +0 +[0-9]+ +not recorded: .*CAP_SYS_ADMIN' "$T/all/err"
check "... syscall recorded ($(events_of all syscall) events)" [ "$(events_of all syscall)" -gt 0 ]

collect admin "$BASE,SYS_ADMIN" "" python --python-method usdt
check "+SYS_ADMIN, the runtime's default seccomp: -t python exits 0" [ "$rc" = 0 ]
check "... python recorded ($(events_of admin python) events)" [ "$(events_of admin python)" -gt 0 ]

# The injected hook (a pyenv CPython without USDT, bind-mounted into a job
# container): ptrace and pidfd_getfd, no SYS_ADMIN.
PY=$(ls -d "$HOME"/.pyenv/versions/3.1[0-3]* 2>/dev/null | tail -1)
if [ -n "$PY" ] && [ -x "$PY/bin/python3" ]; then
	ct_run -v "$PY:$PY:ro" "$JOB_IMAGE" "$PY/bin/python3" -c "
import os, time
def g(x):
    return x * 2
while True:
    g(1)
    time.sleep(0.001)" || nok "hook job container starts"
	hook_ct=$CT_ID job=$(ct_pid)
	collect hook "$BASE" "$SECCOMP" python
	check "BPF+PERFMON+SYS_PTRACE, $SECNAME: -t python through the injected hook exits 0" [ "$rc" = 0 ]
	"$DUMP" "$T"/hook/llmtracker-python.*.evlog > "$T/hook/dump" 2>&1
	check "... its calls recorded ($(grep -c '^py_enter .* func=g ' "$T/hook/dump") of g)" \
		grep -q '^py_enter .* func=g ' "$T/hook/dump"
	check "... its log is named after the node ($(basename "$T"/hook/llmtracker-python.*.evlog))" \
		ls "$T/hook/llmtracker-python.$node.$job."*.evlog
	podman rm -f -t 0 "$hook_ct" > /dev/null 2>&1
else
	echo "# no pyenv CPython 3.10-3.13: the hook's row not measured"
fi

collect noptrace "BPF,PERFMON" "$SECCOMP" syscall
refused() { [ "$rc" = 1 ] && grep -q 'missing: CAP_SYS_PTRACE' "$T/noptrace/err"; }
check "BPF+PERFMON: the collector refuses (exit $rc), naming CAP_SYS_PTRACE" refused
tap_done
