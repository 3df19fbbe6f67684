#!/bin/bash
# -t pysample on a Python in a container of its own (podman): CPython's
# native_thread_id holds the tid of the thread's own pid namespace, which
# differs from the node's tid the BPF program sees; the samples must still
# come, on the node's tids of the job's threads. tests/workloads/pys_hot.py
# spends its time in <module> -> hot_outer -> hot_inner, a thread in
# other_worker.
set -u
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/container.inc"
need_bpf
need_podman
ct_image py311 python3.11 dash strace ||
	skip "cannot build the test image (no Debian mirror reachable?)"

mkdir -p "$T/share"
ct_run -v "$T/share:/share" -v "$PWD/tests/workloads:/w:ro" "$CT_IMAGE" python3.11 -c "
import os, runpy, sys, time
while not os.path.exists('/share/go'): time.sleep(0.02)
sys.argv = ['pys_hot.py', '1.5']
runpy.run_path('/w/pys_hot.py', run_name='__main__')" || { nok "container starts"; tap_done; }
pid=$(ct_pid)
# until the job ends: it runs for 1.5 s of CPU time, however busy the machine
"$LT" profile -p "$pid" -t pysample -v 1 -o "$T/s.evlog" > "$T/out" 2> "$T/err" & cp=$!
tap_bg "$cp"
wait_for "$T/err" "source pysample attached" 30
touch "$T/share/go"
# the job's threads as the node and the container number them, while it runs
wait_until 5 '[ "$(ls /proc/"$pid"/task | wc -l)" -ge 2 ]'
for t in /proc/"$pid"/task/*; do
	echo "$(basename "$t") $(awk '/^NSpid/ { print $NF }' "$t/status")"
done > "$T/tids"
wait "$cp"
check "profile -p (container) -t pysample exits 0" [ $? = 0 ]
sed 's/^/# node tid, container tid: /' "$T/tids"
check "the job has 2 threads, numbered otherwise inside the container" \
	awk 'END { exit !(NR == 2 && n == 2) } $1 != $2 { n++ }' "$T/tids"
events "$T/s.evlog" py_sample > "$T/samples"
hot=$(grep -c 'frames=hot_inner' "$T/samples")
other=$(grep -c 'frames=other_worker' "$T/samples")
echo "# py_sample: $(wc -l < "$T/samples") samples, hot_inner leaf $hot, other_worker leaf $other"
check "Python stacks sampled in the container (hot_inner leaf: $hot)" [ "$hot" -ge 20 ]
check "the worker thread sampled too (other_worker leaf: $other)" [ "$other" -ge 1 ]
node_tids() {
	local t
	for t in $(grep -o ' tid=[0-9]*' "$T/samples" | cut -d= -f2 | sort -u); do
		grep -q "^$t " "$T/tids" || { echo "# tid $t is not a node tid of the job"; return 1; }
	done
}
check "every sample carries a node tid of the job" node_tids
tap_done
