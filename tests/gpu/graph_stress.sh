#!/bin/bash
# Attach/detach stress of CUDA kernel recording on a training loop that
# replays a CUDA graph every step (tests/gpu/graph_train.py), in one call:
#   tests/gpu/cupti_attach.sh prepare          (here: builds .carry/)
#   tests/gpu/graph_stress.sh run [OUTDIR]     (on the GPU host)
# MODES: space-separated recording modes, each a comma-separated list of
# start keys for the injected library (inject/inject.h), or
# "collector:TYPES[:START]" for `llmtracker profile -t TYPES
# --enable-cuda-kernel true` with LLMT_CUPTI_START=START.
# CYCLES per mode, WIN seconds recording each, RECAPTURE=S to capture a new
# graph every S seconds, EAGER=1 for the same loop without graphs. After
# every detach the loop must keep replaying
# (its steps advance for SETTLE seconds); a death is counted, the kernel log
# searched for Xid lines, and a new loop started. At the end the surviving
# loop's losses are compared with an unprofiled run of the same steps
# (deterministic algorithms, fixed seed): they must be equal.
set -u
. "$(dirname "$0")/common.inc"
[ "${1:-}" = run ] || { echo "usage: $0 run [OUTDIR]"; exit 2; }
OUT=${2:-/tmp/graph-stress}
gpu_python python3
MODES=${MODES:-"runtime=1 runtime=0"}
CYCLES=${CYCLES:-10}
WIN=${WIN:-8}
SETTLE=${SETTLE:-2}
REF_STEPS=${REF_STEPS:-20000}
mkdir -p "$OUT"
tap_tmpdir W graph-stress
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
gpu_host
dmesg >/dev/null 2>&1 || echo "INFO kernel log not readable here: deaths only"

TP= TD= runs=0
start_loop() {
	runs=$((runs + 1))
	TD=$W/loop$runs
	mkdir -p "$TD"
	"$PY" tests/gpu/graph_train.py train "$TD" >"$TD/log" 2>&1 &
	TP=$!
	wait_until 120 '[ -e "$TD/ready" ] || ! kill -0 $TP 2>/dev/null' && [ -e "$TD/ready" ] && return 0
	echo "FAIL the training loop did not start"; tail -5 "$TD/log"; exit 1
}
alive_after() { # SECONDS: the loop stays alive that long (a fault kills it within a few steps)
	local t=$1
	for _ in $(seq $((t * 10))); do kill -0 $TP 2>/dev/null || return 1; sleep 0.1; done
	kill -0 $TP 2>/dev/null
}
tap_at_exit '[ -z "$TP" ] || kill $TP 2>/dev/null'
x0=$(xid_count)
start_loop
IDLE=${IDLE:-6}
sleep "$IDLE" # steps/s before anything is attached (rate.txt)
for mode in $MODES; do
	deaths=0 xid=0 ok=0 fin=0
	for i in $(seq "$CYCLES"); do
		kill -0 $TP 2>/dev/null || start_loop
		d=$W/c.$runs.$i; mkdir -p "$d"
		xb=$(xid_count)
		t0=$(date +%s.%N)
		case $mode in
		collector:*)
			IFS=: read -r _ types start <<<"$mode"
			LLMT_CUPTI_START="${start//,/ }" "$CARRY/bin/llmtracker" profile -p $TP -t "$types" \
				--enable-cuda-kernel true -d "$WIN" -o "$d/c.evlog" --cupti-dir "$d" >"$d/tool.log" 2>&1;;
		*)
			"$CARRY/bin/inject_tool-static" attach $TP "$CARRY/lib/libllmtracker-inject.so" "$d" "$WIN" \
				${mode//,/ } >"$d/tool.log" 2>&1;;
		esac
		t1=$(date +%s.%N)
		grep -q "finalized=1" "$d/tool.log" && fin=$((fin + 1))
		if alive_after "$SETTLE"; then
			ok=$((ok + 1))
		else
			deaths=$((deaths + 1))
			wait $TP 2>/dev/null
			echo "INFO [$mode] cycle $i: the loop died $(awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s or less after detach; its last lines:"
			grep -v "^ *$" "$TD/log" | tail -3 | sed 's/^/INFO     /'
			cp "$d/tool.log" "$OUT/death.$deaths.$(echo "$mode" | tr -c 'A-Za-z0-9\n' _).log" 2>/dev/null
		fi
		xa=$(xid_count)
		[ "$xa" -gt "$xb" ] && { xid=$((xid + xa - xb)); dmesg | grep Xid | tail -2 | sed 's/^/INFO     /'; }
		head -c 300 "$d/tool.log" | grep -E "totals|W |E " | head -2 | sed "s/^/INFO [$mode] $i: /"
	done
	echo "RESULT mode=$mode cycles=$CYCLES alive=$ok deaths=$deaths xid=$xid finalized=$fin window=${WIN}s"
done
# The losses of the last loop against an unprofiled run of as many steps.
sleep "$IDLE" # steps/s after the last detach
touch "$TD/stop"
wait $TP; TP=
if [ $runs = 1 ]; then # one loop throughout: its rate before the first attach and after the last detach
	awk -v idle="$IDLE" '{ t[NR] = $1; r[NR] = $3 } END {
		for (i = 1; i <= NR; i++) if (t[i] > 1.5 && t[i] < idle - 0.5) { b += r[i]; nb++ }
		for (i = NR - int(idle) + 2; i <= NR; i++) if (i > 0) { a += r[i]; na++ }
		if (nb && na) printf "INFO steps/s before the first attach %.0f, after the last detach %.0f (%.3fx)\n", b / nb, a / na, (a / na) / (b / nb) }' "$TD/rate.txt"
fi
n=$(wc -l <"$TD/losses.txt")
m=$((n < REF_STEPS ? n : REF_STEPS))
mkdir -p "$W/ref"
"$PY" tests/gpu/graph_train.py train "$W/ref" "$m" >"$W/ref/log" 2>&1
if cmp -s <(head -n "$m" "$TD/losses.txt") "$W/ref/losses.txt"; then
	echo "PASS losses of the profiled loop equal an unprofiled run's, $m steps (bit for bit)"
else
	echo "FAIL losses differ from an unprofiled run's within $m steps:" \
		"$(diff <(head -n "$m" "$TD/losses.txt") "$W/ref/losses.txt" | head -3 | tr '\n' ' ')"
fi
echo "INFO kernel log Xid lines during the run: $(( $(xid_count) - x0 ))"
tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.evlog' . 2>/dev/null
exit 0
