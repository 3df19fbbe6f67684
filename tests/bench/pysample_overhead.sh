#!/bin/bash
# Cost of -t pysample on the target: rounds of Python work (a 40-frame deep
# recursion, so every sample walks a real stack) done in a fixed time, alone
# and under the profiler at 99 Hz and 999 Hz, side by side in one run. Also
# the samples recorded and the collector's own CPU time. Prints figures;
# asserts nothing.
set -u
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker DUMP=$BUILD/tests/progs/evlog_dump
PY=${PYSAMPLE_BENCH_PYTHON:-/usr/bin/python3.11}
SECS=${PYSAMPLE_BENCH_SECONDS:-3}
[ "$(id -u)" = 0 ] || { echo "pysample_overhead: needs root, skipped"; exit 0; }
[ -x "$PY" ] || { echo "pysample_overhead: $PY not installed, skipped"; exit 0; }
# The BPF program's own time per run (kernel.bpf_stats_enabled, restored).
stats_old=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
tmp=$(mktemp -d); trap 'sysctl -qw kernel.bpf_stats_enabled="$stats_old" 2>/dev/null; rm -rf "$tmp"' EXIT
cat >"$tmp/busy.py" <<'PY'
import sys, time
def deep(n):
    if n:
        return deep(n - 1)
    s = 0
    for i in range(200):
        s += i
    return s
end = time.monotonic() + float(sys.argv[1])
rounds = 0
while time.monotonic() < end:
    deep(40)
    rounds += 1
print("rounds=%d" % rounds)
PY
rounds() { sed -n 's/^rounds=//p' "$1"; }

"$PY" "$tmp/busy.py" "$SECS" >"$tmp/base1"
"$LLMT" profile -t pysample -o "$tmp/a.evlog" -- "$PY" "$tmp/busy.py" "$SECS" >"$tmp/p99" 2>"$tmp/e99"
sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null
"$LLMT" profile -t pysample --freq 999 -o "$tmp/b.evlog" -- "$PY" "$tmp/busy.py" "$SECS" \
	>"$tmp/p999" 2>"$tmp/e999" &
sleep "$(awk -v s="$SECS" 'BEGIN { print s - 0.5 }')"
prog=$(bpftool prog show name lt_py_sample 2>/dev/null | head -1)
wait
sysctl -qw kernel.bpf_stats_enabled="$stats_old" 2>/dev/null
"$PY" "$tmp/busy.py" "$SECS" >"$tmp/base2"
b=$(( ($(rounds "$tmp/base1") + $(rounds "$tmp/base2")) / 2 ))
echo "python busy loop alone: $(rounds "$tmp/base1") and $(rounds "$tmp/base2") rounds in ${SECS}s (mean $b)"
for f in 99 999; do
	r=$(rounds "$tmp/p$f")
	log=$tmp/a.evlog; [ "$f" = 999 ] && log=$tmp/b.evlog
	s=$("$DUMP" "$log" 2>/dev/null | grep -c '^py_sample ')
	awk -v b="$b" -v r="$r" -v f="$f" -v s="$SECS" -v n="$s" 'BEGIN {
		printf "pysample %4d Hz: %d rounds vs %d alone in %ds: %.2f%% slower; %d samples\n",
			f, r, b, s, (b - r) * 100.0 / b, n }'
	grep -h "collector CPU" "$tmp/e$f" | sed 's/^/  /'
done
echo "$prog" | awk '{ for (i = 1; i < NF; i++) { if ($i == "run_time_ns") t = $(i + 1); if ($i == "run_cnt") c = $(i + 1) }
	if (c) printf "  BPF walk (40+ frames) at 999 Hz: %.2f us per run over %d runs\n", t / c / 1000, c }'
ls -l "$tmp/a.evlog" "$tmp/b.evlog" | awk '{print "  log bytes:", $5, $NF}'
