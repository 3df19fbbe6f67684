#!/bin/bash
# The product's case: a Python job in a container of its own (podman, runc,
# its own pid and mount namespaces, kubelet-style cgroup), profiled by the
# collector on the node with -t python,syscall,cpu and -t all.
#   - generateCommand --container-id / --pod-uid finds the job;
#   - Python calls equal the workload's own count (Debian's python3.11 in the
#     image, with USDT probes);
#   - syscalls equal `strace -f -c` run inside the same container on the same
#     run of the workload;
#   - CPU samples are symbolized from the container's own python3.11, a
#     different build than the node's (another Debian point release): every
#     named frame lies inside that symbol in the container's file;
#   - pids and tids are the node's.
set -u
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/container.inc"
need_bpf
need_podman
CHECK=$PWD/tests/integration/python_check.py
N=${CT_CALLS:-20000}

ct_image py311 python3.11 dash strace ||
	skip "cannot build the test image (no Debian mirror reachable?)"
echo "# image $CT_IMAGE"
pod=$(cat /proc/sys/kernel/random/uuid)
cg_parent=/kubepods/besteffort/pod$pod
ct_test_cleanup() { # the pod's cgroups podman leaves behind (conmon's within), once empty
	local d
	for d in /sys/fs/cgroup/*/kubepods/besteffort/pod"$pod" /sys/fs/cgroup/kubepods/besteffort/pod"$pod"; do
		[ -d "$d" ] || continue
		rmdir "$d"/*/ 2> /dev/null
		rmdir "$d" "${d%/*}" "${d%/*/*}" 2> /dev/null # and kubepods/besteffort, if empty
	done
}

# run_job SHARE: the job waits for SHARE/start, then runs under strace -f -c
# the call tree of py_calltree.py, which itself waits for SHARE/go.
run_job() {
	local share=$1
	mkdir -p "$share"
	ct_run --cgroup-parent="$cg_parent" -v "$share:/share" -v "$PWD/tests/workloads:/w:ro" "$CT_IMAGE" \
		python3.11 -c "
import os, time
while not os.path.exists('/share/start'): time.sleep(0.02)
os.execvp('strace', ['strace', '-f', '-c', '-o', '/share/strace.txt',
                     'python3.11', '/w/py_calltree.py', '$N', '/share/go'])"
}

# profile_job SHARE TYPES LOG: the collector on the node, attached to the
# container's first process before the job starts; releases the call tree
# once the job's interpreter is probed.
profile_job() {
	local share=$1 types=$2 log=$3 pid cp
	pid=$(ct_pid)
	"$LT" profile -p "$pid" -t "$types" -o "$log" -v 1 > "$T/out" 2> "$log.err" & cp=$!
	tap_bg "$cp"
	wait_for "$log.err" "python: pid $pid: tracing functions" 60 || echo "# waiter not probed"
	touch "$share/start"
	wait_until 60 '[ "$(grep -c ": tracing functions" "$log.err")" -ge 2 ]'
	touch "$share/go"
	wait "$cp"
}

# 1. generateCommand finds the job by container id and by pod uid.
run_job "$T/a" || { nok "container starts"; tap_done; }
host_pid=$(ct_pid)
check "the container's first process has its own pid namespace (NSpid $(awk '/^NSpid/ {print $2 "," $3}' /proc/"$host_pid"/status))" \
	grep -qE '^NSpid:[[:space:]]+'"$host_pid"'[[:space:]]+1$' /proc/"$host_pid"/status
"$LT" generateCommand --container-id "$CT_ID" > "$T/gen.c" 2>&1
check "generateCommand --container-id lists the job's host pid" grep -q "PID: $host_pid," "$T/gen.c"
"$LT" generateCommand --pod-uid "$pod" > "$T/gen.p" 2>&1
check "generateCommand --pod-uid lists the job's host pid" grep -q "PID: $host_pid," "$T/gen.p"
check "generateCommand --pod-uid names the pod, not a container" grep -q "in pod $pod" "$T/gen.p"
check "the Python path hint names the job's interpreter as the node sees it, /proc/PID/root/..." grep -q "/proc/$host_pid/root/usr/bin/python3.11" "$T/gen.c"
sed 's/^/# /' "$T/gen.p" | cut -c1-200 | head -4

# 2. -t python,syscall,cpu
profile_job "$T/a" python,syscall,cpu "$T/a.evlog"
check "profile -p (container) -t python,syscall,cpu exits 0" [ $? = 0 ]
sed 's/^/# /' "$T/a.evlog.err" | grep -v 'tracing functions' | tail -12
"$DUMP" "$T/a.evlog" > "$T/a.txt" 2> /dev/null
python3 "$CHECK" f=$N g=$((3 * N)) < "$T/a.txt" > "$T/a.check"
check "Python calls: f=$N g=$((3 * N)), as the workload made them" [ $? = 0 ]
sed 's/^/# /' "$T/a.check"

# The job's interpreter: the process the collector saw exec python3.11 under strace.
job=$(awk '$1 == "process" && / is_exec=1/ && /exe=\/usr\/bin\/python3.11/ { p = $0 } END {
	n = split(p, f, " "); for (i = 1; i <= n; i++) if (f[i] ~ /^pid=/) print substr(f[i], 5) }' "$T/a.txt")
echo "# job interpreter: host pid $job"
check "the job's interpreter was recorded under a node pid" [ -n "$job" ]

# syscalls of the job after its exec, by name, against strace -c's table
python3 - "$T/a.txt" "$T/a/strace.txt" "$job" "$BUILD/tests/progs/sys_names" > "$T/a.sys" <<'PY'
import re, subprocess, sys
dump, strace_out, job, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
nr_name = dict(l.split()[:2] for l in subprocess.run([names], capture_output=True, text=True).stdout.splitlines())
ours, seen_exec = {}, False
for line in open(dump):
    kv = dict(re.findall(r"(\w+)=(\S*)", line))
    if kv.get("pid") != job:
        continue
    if line.startswith("process ") and kv.get("is_exec") == "1":
        seen_exec = True
        continue
    if seen_exec and line.startswith("syscall "):
        n = nr_name.get(kv["nr"], kv["nr"])
        ours[n] = ours.get(n, 0) + 1
theirs = {}
for line in open(strace_out):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls = int(f[3]); name = f[-1]
        theirs[name] = calls
# strace -c counts a call when it returns: exit_group never does
exits = ours.pop("exit_group", 0)
print("exit_group: collector %d (strace -c never counts it: the call does not return)" % exits)
names_all = sorted(set(ours) | set(theirs))
bad = [(n, ours.get(n, 0), theirs.get(n, 0)) for n in names_all if ours.get(n, 0) != theirs.get(n, 0)]
print("strace -f -c: %d calls of %d syscalls; collector: %d calls" % (sum(theirs.values()), len(theirs), sum(ours.values())))
for n, a, b in bad:
    print("differs: %s collector=%d strace=%d" % (n, a, b))
sys.exit(1 if bad or not theirs or exits != 1 else 0)
PY
check "syscalls of the job equal strace -f -c's inside the container, per syscall" [ $? = 0 ]
sed 's/^/# /' "$T/a.sys" | head -12

# CPU samples symbolized from the container's python3.11.
podman run --rm --network=none "$CT_IMAGE" python3.11 -c \
	'import shutil, sys; shutil.copyfileobj(open("/usr/bin/python3.11", "rb"), sys.stdout.buffer)' > "$T/ct-python3.11"
bid() { readelf -n "$1" | awk '/Build ID/ { print $3 }'; }
echo "# build-id: container $(bid "$T/ct-python3.11"), node $(bid /usr/bin/python3.11)"
check "the container's python3.11 is another build than the node's" [ "$(bid "$T/ct-python3.11")" != "$(bid /usr/bin/python3.11)" ]
check "the container's python3.11 is ET_EXEC (addresses are ELF addresses)" grep -q 'Type:.*EXEC' <(readelf -h "$T/ct-python3.11")
python3 - "$T/a.txt" "$T/ct-python3.11" /usr/bin/python3.11 "$job" > "$T/a.sym" <<'PY'
# Debian's python3.11 is ET_EXEC (no load bias): a frame's address is its ELF
# address. Each frame must be what the container's file says there (the
# function covering it, or no name where none does); the node's file, another
# build, must disagree somewhere.
import re, subprocess, sys
dump, ct, node, job = sys.argv[1:5]
def table(path):
    out = subprocess.run(["nm", "-D", "--defined-only", "-S", path], capture_output=True, text=True).stdout
    t = []
    for l in out.splitlines():
        f = l.split()
        if len(f) == 4 and f[2] in "TtWwi":
            t.append((int(f[0], 16), int(f[1], 16), f[3]))
    return t
def names_at(t, addr):
    return {n for a, s, n in t if a <= addr < a + s}
ct_t, node_t = table(ct), table(node)
frames = named = ct_ok = node_ok = samples = 0
for line in open(dump):
    kv = dict(re.findall(r"(\w+)=(\S*)", line))
    if line.startswith("cpu_sample ") and kv.get("pid") == job:
        samples += 1
    if not line.startswith("symbol ") or kv.get("module") != "/usr/bin/python3.11":
        continue
    addr, name = int(kv["addr"], 0), kv.get("name", "")
    frames += 1
    named += bool(name)
    for t, ok in ((ct_t, "ct"), (node_t, "node")):
        at = names_at(t, addr)
        good = (name in at and int(kv["offset"], 0) == addr - min(a for a, s, n in t if n == name and a <= addr < a + s)) if name else not at
        if ok == "ct":
            ct_ok += good
        else:
            node_ok += good
print("samples of the job %d; python3.11 frames %d (%d named): as the container's file says %d, as the node's %d"
      % (samples, frames, named, ct_ok, node_ok))
sys.exit(0 if samples > 0 and named > 0 and ct_ok == frames and node_ok < frames else 1)
PY
check "CPU frames in python3.11 are the container's symbols (the node's build puts them elsewhere)" [ $? = 0 ]
sed 's/^/# /' "$T/a.sym"

# 3. -t all on a second run of the same job
podman rm -f -t 0 "$CT_ID" > /dev/null 2>&1
run_job "$T/b" || { nok "second container starts"; tap_done; }
profile_job "$T/b" all "$T/b.evlog"
check "profile -p (container) -t all exits 0" [ $? = 0 ]
"$DUMP" "$T/b.evlog" > "$T/b.txt" 2> /dev/null
python3 "$CHECK" f=$N g=$((3 * N)) < "$T/b.txt" > "$T/b.check"
check "-t all: Python calls f=$N g=$((3 * N))" [ $? = 0 ]
both() { grep -q '^syscall ' "$T/b.txt" && grep -q '^cpu_sample ' "$T/b.txt"; }
check "-t all: syscalls and CPU samples recorded" both
tap_done
