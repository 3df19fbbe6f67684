#!/bin/bash
# CPU the inject library spends per CUPTI record (buffer pool, encoder
# thread, event log), without a GPU: the stand-in CUPTI
# (tests/progs/fake_cupti.c) writes kernel records at each rate for SEC
# seconds into the library's buffers. Prints the target's CPU time per
# record over the window (fake generation + our encoding and compression),
# and how long the stop (flush, drain, finalize, publish) took.
set -u
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
SEC=${SEC:-2}
for f in "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_tool" "$LIB"; do
	[ -e "$f" ] || { echo "missing $f (make tests-bin)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "skip: needs root for ptrace"; exit 0; }
W=$(mktemp -d /tmp/llmt-bench-enc.XXXXXX)
trap 'exec 9>&- 2>/dev/null; rm -rf "$W"' EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
printf "%10s %10s %12s %12s %10s\n" "rate/s" "records" "CPU s" "ns/record" "stop ms"
for rate in 100000 300000 1000000; do
	rm -f "$W/in"; mkfifo "$W/in"
	FAKE_CUPTI_RATE=$rate "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in" >"$W/app.out" 2>&1 &
	tp=$!
	exec 9>"$W/in"
	for _ in $(seq 100); do grep -q '^ready' "$W/app.out" && break; sleep 0.05; done
	mkdir -p "$W/$rate"
	c0=$(cpu_ticks $tp); t0=$(date +%s%N)
	LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $tp "$LIB" "$W/$rate" "$SEC" >"$W/tool.out" 2>&1
	t1=$(date +%s%N); c1=$(cpu_ticks $tp)
	exec 9>&-
	wait $tp
	k=$(sed -n 's/.*totals .*kernels=\([0-9]*\) .*/\1/p' "$W/tool.out")
	# Idle app: one poll + "CUDA call" per ms, negligible next to this.
	awk -v r=$rate -v k="${k:-0}" -v c=$((c1 - c0)) -v hz=$hz -v w=$(((t1 - t0) / 1000000)) -v s=$SEC \
		'BEGIN { cs = c / hz; printf "%10d %10d %12.2f %12.0f %10d\n", r, k, cs, k ? cs * 1e9 / k : 0, w - s * 1000 }'
	rm -rf "${W:?}/$rate"
done
