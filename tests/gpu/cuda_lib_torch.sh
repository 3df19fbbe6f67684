#!/bin/bash
# GPU machine check of -t cuda with the default probe file, in one call:
#   1. a PyTorch training loop: launch calls recorded (cudaLaunchKernel /
#      cuLaunchKernel, not nested in one another) == kernels torch.profiler
#      reports for the same steps;
#   2. all_reduce on a one-rank NCCL communicator: every ncclAllReduce
#      recorded with its count, datatype and op.
# Prints PASS/FAIL lines and figures; exit 0 only if all pass. Needs, built
# here and carried: $BUILD/bin/llmtracker-static (or llmtracker),
# $BUILD/share/llmtracker/probes.json, $BUILD/tests/progs/cuda_logcount.
set -u
. "$(dirname "$0")/common.inc"
BUILD=${BUILD:-build}
gpu_python python3
gpu_build_collector
COUNT=$BUILD/tests/progs/cuda_logcount
HERE=tests/gpu/cuda_lib_torch.py

gpu_need "$LT" "$COUNT" "$BUILD/share/llmtracker/probes.json"
gpu_need_torch cuda
tap_tmpdir T cuda_lib_torch
echo "collector: $LT; python: $("$PY" -c 'import torch; print(torch.__file__, torch.__version__, torch.version.cuda)')"

# 1. kernels: without, then with the collector (same script, same steps)
"$PY" "$HERE" kernels --meta "$T/alone.json" --steps 20 >"$T/alone.out" 2>&1 || {
	echo "FAIL: the workload alone failed:"; tail -20 "$T/alone.out"; exit 1; }
s=$(date +%s.%N)
"$LT" profile -t cuda -o "$T/k.log" -v 1 -- "$PY" "$HERE" kernels --meta "$T/k.json" --steps 20 \
	>"$T/k.out" 2>"$T/k.err"
rc=$?
e=$(date +%s.%N)
cat "$T/k.out"
grep -E 'cuda: pid|links|W[0-9]{4}' "$T/k.err" | head -20
tail -6 "$T/k.err"
if [ $rc != 0 ] || [ ! -s "$T/k.log" ]; then
	bad "profile -t cuda of the torch loop (rc $rc)"
else
	"$COUNT" "$T/k.log" --dump >"$T/k.dump"
	"$PY" "$HERE" check-kernels "$T/k.json" "$T/k.dump" || gpu_fails=$((gpu_fails + 1))
	"$PY" -c "import json; a=json.load(open('$T/alone.json')); b=json.load(open('$T/k.json'));
print('figure: loop %.1f steps/s alone, %.1f steps/s under -t cuda (x%.2f); profile run %.1f s, log %d bytes'
      % (a['steps_per_s'], b['steps_per_s'], b['steps_per_s']/a['steps_per_s'], $e-$s, $(stat -c %s "$T/k.log")))"
fi

# 2. NCCL all_reduce, one rank
"$LT" profile -t cuda -o "$T/n.log" -- "$PY" "$HERE" nccl --meta "$T/n.json" --iters 10 \
	>"$T/n.out" 2>"$T/n.err"
rc=$?
cat "$T/n.out"
if [ $rc != 0 ] || [ ! -s "$T/n.log" ]; then
	bad "profile -t cuda of the NCCL all_reduce (rc $rc)"; tail -20 "$T/n.err"
else
	"$COUNT" "$T/n.log" --dump >"$T/n.dump"
	"$PY" "$HERE" check-nccl "$T/n.json" "$T/n.dump" || gpu_fails=$((gpu_fails + 1))
fi
gpu_done
