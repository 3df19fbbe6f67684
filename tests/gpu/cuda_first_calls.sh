#!/bin/bash
# GPU machine check, in one call: in launch mode, are the first CUDA runtime calls of a
# PyTorch process recorded, where torch finds its runtime at run time (site-packages)?
#   cuda_first_calls.py calls torch's own libcudart right after `import torch`, with no wait:
#   cudaDriverGetVersion x200, cudaGetDeviceCount x100 (torch makes none before its CUDA
#   init). PASS when the recorded counts are at least those, from the file torch mapped.
# Also prints how the runtime was probed (armed before load, or at its mapping) and any
# held loads. Needs, built here and carried: $BUILD/bin/llmtracker-static (or llmtracker),
# $BUILD/tests/progs/cuda_logcount.
set -u
. "$(dirname "$0")/common.inc"
BUILD=${BUILD:-build}
gpu_python python3
gpu_build_collector
COUNT=$BUILD/tests/progs/cuda_logcount
gpu_need "$LT" "$COUNT"
gpu_need_torch cuda
tap_tmpdir T cuda_first_calls
cat >"$T/p.json" <<'JSON'
{ "uprobes": [ { "library": "libcudart.so", "class": "cuda_runtime",
    "symbols": ["cudaDriverGetVersion", "cudaGetDeviceCount", "cudaMalloc", "cudaLaunchKernel"] } ] }
JSON
"$LT" profile -t cuda --probe-file "$T/p.json" -v 1 -o "$T/a.log" -- "$PY" tests/gpu/cuda_first_calls.py \
	>"$T/a.out" 2>"$T/a.err"
rc=$?
"$COUNT" "$T/a.log" --dump >"$T/a.calls" 2>&1
cat "$T/a.out"
grep -E 'libcudart.*functions probed|held|let go|not held' "$T/a.err" | sed 's/^/  /'
grep -E '^(count|total)' "$T/a.calls" | sed 's/^/  /'
[ $rc = 0 ] || say "FAIL: profile exited $rc"
cudart=$(awk '$1=="cudart" {print $2}' "$T/a.out")
for s in cudaDriverGetVersion:200 cudaGetDeviceCount:100; do
	got=$(awk -v s="${s%:*}" '$1=="call" && $9==s' "$T/a.calls" | wc -l)
	if [ "$got" -ge "${s#*:}" ]; then pass "${s%:*} recorded $got (made ${s#*:})"
	else bad "${s%:*} recorded $got of ${s#*:}"; fi
done
files=$(awk '$1=="call" {print $10}' "$T/a.calls" | sort -u | tr '\n' ' ')
echo "recorded from: $files(torch mapped $cudart)"
gpu_done
