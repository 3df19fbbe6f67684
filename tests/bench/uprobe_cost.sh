#!/bin/bash
# Added cost of one probed library call: a tight loop of cudaGetDeviceCount
# (real libcudart, no driver: returns at once) timed by the program itself,
# alone and under `llmtracker profile -t cuda` probing that one function
# (entry + return uprobes), in one run. Prints figures; asserts nothing.
set -u
BUILD=${BUILD:-build}
LT=$BUILD/bin/llmtracker
PROG=$BUILD/tests/progs/cuda_calls
COUNT=$BUILD/tests/progs/cuda_logcount
N=${UPROBE_BENCH_CALLS:-200000}

if [ "$(id -u)" != 0 ] || [ ! -x "$LT" ] || [ ! -x "$PROG" ]; then
	echo "uprobe_cost: skipped (needs root and $LT, $PROG built)"
	exit 0
fi
T=$(mktemp -d /tmp/uprobe_cost.XXXXXX)
trap 'rm -rf "$T"' EXIT
cat >"$T/p.json" <<JSON
{ "uprobes": [ { "library": "libcudart.so", "symbols": ["cudaGetDeviceCount"] } ] }
JSON

run_alone() { "$PROG" bench "$N" | awk '/ns_per_call/ {print $2}'; }
run_probed() {
	rm -f "$T/p.log"
	CUDA_CALLS_WAIT=10 "$LT" profile -t cuda --probe-file "$T/p.json" -o "$T/p.log" \
		-- "$PROG" bench "$N" 2>"$T/err" | awk '/ns_per_call/ {print $2}'
}

a1=$(run_alone); p1=$(run_probed)
recorded=$(awk '/^count cudaGetDeviceCount/ {s+=$4} END {print s+0}' <("$COUNT" "$T/p.log"))
a2=$(run_alone); p2=$(run_probed)
awk -v a1="$a1" -v a2="$a2" -v p1="$p1" -v p2="$p2" -v n="$N" -v rec="$recorded" 'BEGIN {
	a = (a1 < a2 ? a1 : a2); p = (p1 < p2 ? p1 : p2);
	printf "calls per run:                 %d (cudaGetDeviceCount, libcudart, no driver)\n", n;
	printf "alone:                         %8.1f ns/call (runs: %s, %s)\n", a, a1, a2;
	printf "probed (entry+return uprobe):  %8.1f ns/call (runs: %s, %s)\n", p, p1, p2;
	printf "added per probed call:         %8.1f ns  (x%.1f)\n", p - a, (a > 0 ? p / a : 0);
	printf "calls recorded (first run):    %d of %d\n", rec, n + 1;
}'
