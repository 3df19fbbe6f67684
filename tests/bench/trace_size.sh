#!/bin/bash
# Trace sizes on the demo's workload (examples/train_sim.py, Python calls by
# USDT, as `make demo` profiles it): the trace JSON and the Perfetto trace of
# one conversion side by side, whole (--max-trace-mb 0) and within the
# default budget (the shortest calls folded), with the CPU time of each
# conversion. Prints figures; asserts nothing.
#   TRACE_BENCH_STEPS=100 (default: the demo's)
set -u
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
PY=/usr/bin/python3.11
ROOT=${LLMT_ROOT:-$PWD}
steps=${TRACE_BENCH_STEPS:-100}
for p in "$LT" "$CONV"; do [ -x "$p" ] || { echo "trace_size: $p not built"; exit 0; }; done
if [ "$(id -u)" != 0 ] || ! readelf -n $PY 2>/dev/null | grep -q function__entry; then
	echo "trace_size: needs root and $PY with USDT probes; skipped"
	exit 0
fi
T=$(mktemp -d /tmp/trace-size.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$LT" profile -t syscall,cpu,pysample,python -o "$T/p.evlog" -- \
	$PY "$ROOT/examples/train_sim.py" --steps "$steps" --data "$T/w" >/dev/null 2>"$T/err" ||
	{ echo "trace_size: profile failed"; tail -3 "$T/err"; exit 0; }
cpu() { # command...: user+sys seconds
	/usr/bin/time -f '%U %S' -o "$T/time" "$@" >/dev/null 2>"$T/conv.err" || { echo fail; return; }
	awk '{ printf "%.1f", $1 + $2 }' "$T/time"
}
whole=$(cpu "$CONV" -i "$T/p.evlog" -o "$T/w.json" -o "$T/w.pftrace" --max-trace-mb 0)
budget=$(cpu "$CONV" -i "$T/p.evlog" -o "$T/b.json" -o "$T/b.pftrace")
folded=$(grep -oE 'trace JSON: [0-9]+ calls shorter than [0-9.]+ us folded into [0-9]+ slices' "$T/conv.err")
calls=$(grep -oE 'converted [0-9]+ events' "$T/conv.err")
sz() { stat -c %s "$1" 2>/dev/null || echo 0; }
awk -v s="$steps" -v c="$calls" -v wj="$(sz "$T/w.json")" -v wp="$(sz "$T/w.pftrace")" \
	-v bj="$(sz "$T/b.json")" -v bp="$(sz "$T/b.pftrace")" -v tw="$whole" -v tb="$budget" \
	-v f="$folded" 'BEGIN {
	printf "train_sim.py --steps %d (-t syscall,cpu,pysample,python): %s\n", s, c
	printf "  whole (--max-trace-mb 0):  JSON %7.1f MB, Perfetto %6.1f MB, Perfetto/JSON %.3f  (cpu %s s, both from one pass)\n", wj / 1e6, wp / 1e6, (wj ? wp / wj : 0), tw
	printf "  default budget:            JSON %7.1f MB, Perfetto %6.1f MB  (cpu %s s)\n", bj / 1e6, bp / 1e6, tb
	if (f != "") printf "    %s\n", f }'
exit 0
