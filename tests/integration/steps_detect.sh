#!/bin/bash
# Steps found unaided, on real loops profiled with the real collector:
# Python loops (-t python: a training loop with warm-up, train/eval phases,
# variable-length generation steps, no loop at all) and a C loop of real
# libcudart calls (-t cuda, no GPU: calls fail fast). Each workload logs its
# true steps; steps_check.py compares the trace JSON's Steps track. Kernels
# alone (what the injected library records without launch records) come
# from tests/progs/gpu_steps_genlog: an eager training loop with warm-up, a
# CUDA graph replayed per step, variable-length generation, no loop.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$BUILD/bin/llmtracker CONV=$BUILD/bin/llmtracker-convert PY=/usr/bin/python3.11
PROG=$BUILD/tests/progs/cuda_calls CUDA=${CUDA_HOME:-/usr/local/cuda}
GEN=$BUILD/tests/progs/gpu_steps_genlog
D=$(dirname "$0")
[ "$(id -u)" = 0 ] || skip "needs root (BPF)"
[ -x "$PY" ] || skip "$PY not installed"
need_built "$LT" "$CONV" "$PROG" "$GEN"
tap_tmpdir T lt-steps
relay() { # renumber steps_check.py's lines (read in this shell: counts stay), prefixed with the case
	while read -r st rest; do
		if [ "$st" = ok ]; then ok "$1: ${rest#- }"; else rest=${rest#ok }; nok "$1: ${rest#- }"; fi
	done
}

for m in train twophase variable noloop; do
	"$LT" profile -t python -o "$T/$m.evlog" -- "$PY" "$D/../workloads/steps_loop.py" "$m" \
		"$T/$m.truth" >/dev/null 2>"$T/$m.err" &&
	"$CONV" -q -i "$T/$m.evlog" -o "$T/$m.json" ||
	{ nok "$m: profile and convert"; continue; }
	relay "$m" < <(python3 "$D/steps_check.py" "$T/$m.json" "$T/$m.truth" \
		$([ "$m" = noloop ] && echo none))
	sed "s/^/# $m: /" "$T/$m.err" | tail -4 # what the collector said, for a failure's log
done
"$CONV" summary "$T/noloop.evlog" >"$T/noloop.sum" 2>/dev/null
check "noloop: summary says no steps found" grep -q '^Steps: no steps found' "$T/noloop.sum"
"$CONV" summary "$T/train.evlog" >"$T/train.sum" 2>/dev/null
check "train: summary names the evidence and the step statistics" \
	"grep -q '^Steps: Python loop in main on thread .*iterations of \\[.*train_step' '$T/train.sum' &&
	 grep -q '^  30 steps on thread .*mean .*p50 .*p99' '$T/train.sum'"

for m in train graph variable noloop; do
	"$GEN" "$T/g$m.evlog" "$T/g$m.truth" "$m" && "$CONV" -q -i "$T/g$m.evlog" -o "$T/g$m.json" &&
	"$CONV" -q -i "$T/g$m.evlog" --logdir "$T/tb" --run "g$m" ||
	{ nok "kernels only, $m: generate and convert"; continue; }
	relay "kernels only, $m" < <(python3 "$D/steps_check.py" "$T/g$m.json" "$T/g$m.truth" \
		$([ "$m" = noloop ] && echo none))
done
"$CONV" summary "$T/gtrain.evlog" >"$T/gtrain.sum" 2>/dev/null
check "kernels only, train: summary names the kernel, the stream and the statistics" \
	"grep -q '^Steps: GPU kernel embedding_fwd on device 0 stream 7 starts each step' '$T/gtrain.sum' &&
	 grep -q '^  29 steps on GPU 0 stream 7: mean' '$T/gtrain.sum'"

if [ -e "$CUDA/lib64/libcudart.so.13" ]; then
	CUDA_CALLS_WAIT=10 timeout 120 "$LT" profile -t cuda -o "$T/c.evlog" -- "$PROG" loop 40 \
		"$T/c.truth" >/dev/null 2>"$T/c.err" && "$CONV" -q -i "$T/c.evlog" -o "$T/c.json" &&
	relay "C loop (-t cuda)" < <(python3 "$D/steps_check.py" "$T/c.json" "$T/c.truth")
else
	echo "# no CUDA runtime at $CUDA/lib64: C loop skipped"
fi
tap_done
