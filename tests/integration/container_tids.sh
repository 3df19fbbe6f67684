#!/bin/bash
# Thread ids of a job in its own pid namespace (podman), as the node numbers
# them wherever they end up: the injected Python hook (a pyenv CPython
# without USDT probes, bind-mounted into the container) writes gettid(), the
# container's tids; the collector writes an ns_tid marker per
# thread and the converter maps them. tests/workloads/py_threads.py runs the
# f/g call tree on 4 threads.
set -u
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/container.inc"
need_bpf
need_podman
CONV=$BUILD/bin/llmtracker-convert
PY=$(ls -d "$HOME"/.pyenv/versions/3.1[0-3]* 2>/dev/null | tail -1)
[ -n "$PY" ] && [ -x "$PY/bin/python3" ] ||
	skip "no pyenv CPython 3.10-3.13 (a Python without USDT probes) to run in the container"
ct_image py311 python3.11 dash strace ||
	skip "cannot build the test image (no Debian mirror reachable?)"
N=300

mkdir -p "$T/share" "$T/out"
# The main thread waits for /share/go; each worker, once started, for
# /share/listed (the test has read the threads' ids by then).
ct_run -v "$T/share:/share" -v "$PWD/tests/workloads:/w:ro" -v "$PY:$PY:ro" "$CT_IMAGE" "$PY/bin/python3" -c "
import os, runpy, sys, threading, time
while not os.path.exists('/share/go'): time.sleep(0.02)
_run = threading.Thread.run
def run(self):
    while not os.path.exists('/share/listed'): time.sleep(0.01)
    _run(self)
threading.Thread.run = run
sys.argv = ['py_threads.py', '4', '$N']
runpy.run_path('/w/py_threads.py', run_name='__main__')
" || { nok "container starts"; tap_done; }
pid=$(ct_pid)
"$LT" profile -p "$pid" -t python -v 1 -o "$T/out/c.evlog" > "$T/out.txt" 2> "$T/err" & cp=$!
tap_bg "$cp"
wait_for "$T/err" "tracing functions through the injected" 60 || sed 's/^/# /' "$T/err"
touch "$T/share/go"
# the job's threads, node tid and container tid, while the workers run
tids() {
	for t in /proc/"$pid"/task/*; do
		echo "$(basename "$t") $(awk '/^NSpid/ { print $NF }' "$t/status" 2>/dev/null)"
	done
}
wait_until 30 'tids > "$T/tids"; [ "$(wc -l < "$T/tids")" -ge 5 ]'
touch "$T/share/listed"
wait "$cp"
check "profile -p (container, Python hook) -t python exits 0" [ $? = 0 ]
sed 's/^/# node tid, container tid: /' "$T/tids"
check "the main thread and 4 workers (and the hook's own) seen, numbered otherwise inside the container" \
	awk 'END { exit !(NR >= 5 && n == NR) } $1 != $2 { n++ }' "$T/tids"
hook=$(ls "$T/out"/llmtracker-python.*.evlog 2>/dev/null | head -1)
check "the hook's log is published" [ -n "$hook" ]
"$DUMP" "$T/out/c.evlog" | grep -E '^marker .* kind=1$' > "$T/markers" # EVLOG_MARK_NS_TID
check "the collector wrote an ns_tid marker for each thread ($(wc -l < "$T/markers"))" \
	[ "$(wc -l < "$T/markers")" -ge 5 ]
"$CONV" -q -i "$T/out/c.evlog" --cupti-dir "$T/out" -o "$T/t.json" > "$T/conv" 2>&1
check "converts" [ $? = 0 ]
python3 - "$T/t.json" "$T/tids" "$pid" "$N" > "$T/check" <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
node = {int(l.split()[0]) for l in open(sys.argv[2])}
pid, n = int(sys.argv[3]), int(sys.argv[4])
py = [e for e in ev if e.get("cat") == "python_function" and e.get("ph") == "X"]
per_tid = collections.Counter(e["tid"] for e in py if e["name"] == "f")
print("f calls per tid:", dict(per_tid))
print("tids of Python events outside the job's node tids:", sorted({e["tid"] for e in py} - node))
ok = (len(per_tid) == 4 and all(c == n for c in per_tid.values())
      and {e["tid"] for e in py} <= node and all(e["pid"] == pid for e in py)
      and not any(e.get("name") == "<marker>" for e in ev))
sys.exit(0 if ok else 1)
PY
check "converted: f=$N on each of 4 worker threads, every Python event on a node tid of the job, no marker shown" [ $? = 0 ]
sed 's/^/# /' "$T/check"
tap_done
