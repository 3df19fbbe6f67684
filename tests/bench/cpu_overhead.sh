#!/bin/bash
# Cost of -t cpu on the target: rounds of CPU work done in a fixed time,
# alone and under the profiler at 99 Hz and 999 Hz (side by side, one run).
# Also the collector's own CPU time. Prints figures; asserts nothing.
set -u
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker PROG=$BUILD/tests/progs/cpu_two_funcs
SECS=${CPU_BENCH_SECONDS:-3}
[ "$(id -u)" = 0 ] || { echo "cpu_overhead: needs root, skipped"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
rounds() { sed -n 's/^rounds=//p' "$1"; }

"$PROG" "$SECS" 0 >"$tmp/base1"
"$LLMT" profile -t cpu -o "$tmp/a.evlog" -- "$PROG" "$SECS" 0 >"$tmp/p99" 2>"$tmp/e99"
"$LLMT" profile -t cpu --freq 999 -o "$tmp/b.evlog" -- "$PROG" "$SECS" 0 >"$tmp/p999" 2>"$tmp/e999"
"$PROG" "$SECS" 0 >"$tmp/base2"
b=$(( ($(rounds "$tmp/base1") + $(rounds "$tmp/base2")) / 2 ))
for f in 99 999; do
	r=$(rounds "$tmp/p$f")
	awk -v b="$b" -v r="$r" -v f="$f" -v s="$SECS" 'BEGIN {
		printf "cpu sampling %4d Hz: %d rounds vs %d alone in %ds: %.2f%% slower\n",
			f, r, b, s, (b - r) * 100.0 / b }'
	grep -h "collector CPU" "$tmp/e$f" | sed 's/^/  /'
done
ls -l "$tmp/a.evlog" "$tmp/b.evlog" | awk '{print "  log bytes:", $5, $NF}'
