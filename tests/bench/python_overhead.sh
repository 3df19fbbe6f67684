#!/bin/bash
# Cost of -t python on a call-heavy loop (tests/workloads/py_callheavy.py): calls/s
# alone, under `llmtracker profile -t python`, and alone again after, side
# by side in one run. Prints figures; asserts nothing.
set -u
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
PY=/usr/bin/python3.11
CALLS=${PY_BENCH_CALLS:-200000}
[ -x "$LT" ] || { echo "python_overhead: $LT not built"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "python_overhead: needs root (eBPF); skipped"; exit 0; }
readelf -n $PY 2>/dev/null | grep -q function__entry ||
	{ echo "python_overhead: $PY has no USDT function probes; skipped"; exit 0; }
T=$(mktemp -d /tmp/pybench.XXXXXX)
trap 'rm -rf "$T"' EXIT
S=$PWD/tests/workloads/py_callheavy.py

rate() { sed -n 's/^calls_per_s \([0-9]*\).*/\1/p'; }
best() { # command...: best of 3 runs, calls/s
	local b=0 r
	for _ in 1 2 3; do
		r=$("$@" 2>/dev/null | rate); [ "${r:-0}" -gt "$b" ] && b=$r
		rm -f "$T/p.log"
	done
	echo $b
}
base=$(best $PY "$S" $((CALLS * 10)))   # untraced calls are ~100x cheaper: time as long a run
traced=$(best "$LT" profile -t python -o "$T/p.log" -- $PY "$S" "$CALLS")
after=$(best $PY "$S" $((CALLS * 10)))
"$LT" profile -t python -o "$T/p.log" -- $PY "$S" "$CALLS" > /dev/null 2> "$T/err"
events=$(sed -n 's/^ *python *\([0-9]*\) *\([0-9]*\).*/\1 \2/p' "$T/err")
echo "python calls/s of a 1-line function (best of 3; $CALLS calls traced, $((CALLS * 10)) untraced):"
printf '  %-28s %12s\n' "alone" "$base" "-t python" "$traced" "alone again" "$after"
awk -v a="$base" -v t="$traced" 'BEGIN { if (t > 0) printf "  slowdown under -t python: %.1fx (%.2f us per traced call)\n", a / t, (1e6 / t - 1e6 / a) }'
echo "  python events, lost: ${events:-?}"
