#!/bin/bash
# Two data-parallel ranks on one GPU, in one call:
#   tests/gpu/ddp_gpu.sh prepare        (here: .carry/ as steps_gpu.sh prepare
#                                        makes it)
#   tests/gpu/ddp_gpu.sh run [OUTDIR]   (on the GPU host)
# tests/workloads/ddp_loop.py inline --device cuda: two gloo ranks, both on
# cuda:0, their gradients CUDA tensors all-reduced by gloo; rank 1 made 60 ms
# late at steps 5, 9, 13 and 21 of 30. Each rank runs under its own
# `llmtracker profile -t python --enable-cuda-kernel true --`, then again
# under torch.profiler alone (a ProfilerStep per iteration). Checks:
#  - each rank's steps against the truth it wrote (steps_check.py --rank:
#    count within 1, at least 90% of the boundaries within 2% of the mean
#    step); the straggler report, summary and summary --json (ranks_check.py:
#    rank 1 named at all but at most one late step, no rank at 90% of the
#    others);
#  - GPU kernels per iteration and rank equal to torch.profiler's (ddp_gpu.py
#    kernels; the first iteration is shown, not compared);
#  - XLA's own XPlane reader (jax.profiler.ProfileData) reads the XPlane of
#    the job (ddp_gpu.py xla).
# DEVICE=cpu runs every part but CUDA where there is no GPU (PY= a Python
# with torch and gloo; the XPlane check then needs a jax there).
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
prepare) exec bash tests/gpu/steps_gpu.sh prepare ;;
run) ;;
*) echo "usage: $0 prepare | run [OUTDIR]"; exit 2;;
esac

OUT=${2:-/tmp/ddp-gpu}
DEVICE=${DEVICE:-cuda}
STEPS=30 LATE=1:60:5,9,13,21 RANK_S=${RANK_S:-90} # each run's cap per rank
gpu_python python3
gpu_carry_libs
LT=$CARRY/bin/llmtracker CONV=$CARRY/bin/llmtracker-convert
WL=tests/workloads/ddp_loop.py
gpu_need "$LT" "$CONV" "$CARRY/lib/libllmtracker-inject.so"
gpu_need_torch "$([ "$DEVICE" = cuda ] && echo cuda)"
mkdir -p "$OUT"
tap_tmpdir W ddp-gpu
L=$W/logs TP=$W/torch
mkdir -p "$L" "$TP"
gpu_host
gpu_torch_python | sed 's/^/INFO /'

# Each rank and what it starts in a process group of its own (setsid), its
# id the job's: what a time cap leaves running is ended at exit.
groups=()
tap_at_exit 'for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done'
rank_env() { echo "RANK=$1 LOCAL_RANK=$1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2"; }
free_port() {
	"$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# two_ranks NAME CMD...: ranks 0 and 1 of CMD ("%r" is the rank), each
# capped at RANK_S; sets rc0 rc1. nice -10: see steps_ranks.sh.
two_ranks() {
	local name=$1 port r pids=(); shift
	port=$(free_port)
	for r in 0 1; do
		env $(rank_env $r "$port") setsid timeout -k 5 $RANK_S nice -n -10 \
			"${@//%r/$r}" >"$W/$name.out$r" 2>&1 &
		pids+=($!) groups+=($!)
	done
	wait "${pids[0]}"; rc0=$?
	wait "${pids[1]}"; rc1=$?
}

# relay TAG FILE: FILE's check lines (ok/not ok, PASS/FAIL/INFO) as PASS/FAIL/INFO
# [TAG] lines; a FAIL when it gave no verdict (its last lines then say why)
relay() {
	local l
	sed -nE "/^(PASS|FAIL|INFO) /p; s/^ok - /PASS [$1] /p; s/^not ok - /FAIL [$1] /p" "$2" >"$2.v"
	while IFS= read -r l; do say "$l"; done <"$2.v"
	grep -qE '^(PASS|FAIL) ' "$2.v" || say "FAIL [$1] no verdict: $(tail -2 "$2" | tr '\n' ' ')"
}
# finish: what OUTDIR keeps (the summaries; the small files as one tar), the result
finish() {
	cp "$W"/summary.txt "$W"/summary.json "$OUT/" 2>/dev/null
	tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.evlog' --exclude='*.json' --exclude=tb . 2>/dev/null
	gpu_done
}

t0=$SECONDS
two_ranks prof "$LT" profile -q -t python --enable-cuda-kernel true -o "$L/rank%r.evlog" --cupti-dir "$L" \
	-- "$PY" "$WL" inline "$W/truth%r" --steps $STEPS --late $LATE --device "$DEVICE"
for r in 0 1; do
	rc=rc$r
	[ "${!rc}" = 0 ] && job_exited_0 "$W/prof.out$r" && say "PASS [job] rank $r under the collector exited 0" ||
		say "FAIL [job] rank $r under the collector: exit ${!rc}, $(job_status "$W/prof.out$r"); $(tail -3 "$W/prof.out$r" | tr '\n' ' ')"
done
echo "INFO [job] profiled run: $((SECONDS - t0)) s"
t0=$SECONDS
two_ranks torch "$PY" "$WL" inline "$TP/truth%r" --steps $STEPS --late $LATE --device "$DEVICE" \
	--torch-profiler "$TP"
[ $rc0 = 0 ] && [ $rc1 = 0 ] && [ -s "$TP/rank0.json" ] && [ -s "$TP/rank1.json" ] &&
	say "PASS [job] both ranks under torch.profiler exited 0, their traces written" ||
	say "FAIL [job] under torch.profiler: exit $rc0, $rc1; $(tail -3 "$W/torch.out1" | tr '\n' ' ')"
echo "INFO [job] torch.profiler run: $((SECONDS - t0)) s"

[ -s "$W/truth0" ] && [ -s "$W/truth1" ] || { say "FAIL [job] the profiled ranks wrote no truth"; finish; }
t0=$SECONDS
"$CONV" -q -i "$L" -o "$W/p.json" &&
	"$CONV" -q -i "$L" --logdir "$W/tb" --run r &&
	"$CONV" summary "$L" >"$W/summary.txt" 2>"$W/summary.err" &&
	"$CONV" summary --json "$L" >"$W/summary.json" 2>>"$W/summary.err" ||
	{ say "FAIL [convert] trace, XPlane, summary, summary --json: $(tail -2 "$W/summary.err" | tr '\n' ' ')"
	  finish; }
echo "INFO [convert] $((SECONDS - t0)) s; $(grep -c '^Steps' "$W/summary.txt") processes with steps"
grep -E "^  [0-9]+ steps on thread" "$W/summary.txt" | sed "s/^ */INFO [summary] /"
grep -E '^Verdict:' "$W/summary.txt" | sed 's/^/INFO [summary] /'
awk '/^Stragglers:/ { on = 1 } on && (NF == 0 || /^Verdict:/) { exit } on' "$W/summary.txt" | head -12 | sed 's/^/INFO [summary] /'

# 1. each rank's steps against its truth
for r in 0 1; do
	"$PY" tests/integration/steps_check.py "$W/p.json" "$W/truth$r" --rank $r --at-least 0.9 \
		>"$W/steps$r.txt" 2>&1
	relay "steps rank $r" "$W/steps$r.txt"
done
# 2. the straggler report, text and JSON (and the ranks' steps again)
"$PY" tests/integration/ranks_check.py "$W/p.json" "$W/summary.txt" "$W/summary.json" \
	"$W/truth0" "$W/truth1" >"$W/ranks.txt" 2>&1
relay ranks "$W/ranks.txt"
grep -E '^ +(5|9|13|21) +1 ' "$W/summary.txt" | grep -c 'straggle (ddp_loop.py' |
	sed 's/^/INFO [ranks] late steps whose where names straggle(): /'
# 3. kernels per iteration and rank, ours against torch.profiler's
cuda=$([ "$DEVICE" = cuda ] && echo --cuda)
"$PY" tests/gpu/ddp_gpu.py kernels $cuda "$W/p.json" "$TP" "$W/truth0" "$W/truth1" >"$W/kernels.txt" 2>&1
relay kernels "$W/kernels.txt"
# 4. XLA's reader
xp=$(ls "$W"/tb/plugins/profile/r/*.xplane.pb 2>/dev/null | head -1)
"$PY" tests/gpu/ddp_gpu.py xla $cuda "$xp" "$W/p.json" "$W/truth0" "$W/truth1" >"$W/xla.txt" 2>&1
relay xla "$W/xla.txt"

finish
