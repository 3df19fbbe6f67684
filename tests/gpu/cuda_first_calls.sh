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
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
LT=$BUILD/bin/llmtracker-static
[ -x "$LT" ] || LT=$BUILD/bin/llmtracker
COUNT=$BUILD/tests/progs/cuda_logcount
for f in "$LT" "$COUNT"; do [ -e "$f" ] || { echo "FAIL: $f missing (build it and carry it)"; exit 1; }; done
"$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null ||
	{ echo "FAIL: $PY cannot import torch with a CUDA device (set PYTHON=...)"; exit 1; }
T=$(mktemp -d /tmp/cuda_first_calls.XXXXXX)
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
fail=0
[ $rc = 0 ] || { echo "FAIL: profile exited $rc"; fail=1; }
cudart=$(awk '$1=="cudart" {print $2}' "$T/a.out")
for s in cudaDriverGetVersion:200 cudaGetDeviceCount:100; do
	got=$(awk -v s="${s%:*}" '$1=="call" && $9==s' "$T/a.calls" | wc -l)
	if [ "$got" -ge "${s#*:}" ]; then echo "PASS: ${s%:*} recorded $got (made ${s#*:})"
	else echo "FAIL: ${s%:*} recorded $got of ${s#*:}"; fail=1; fi
done
files=$(awk '$1=="call" {print $10}' "$T/a.calls" | sort -u | tr '\n' ' ')
echo "recorded from: $files(torch mapped $cudart)"
rm -rf "$T"
exit $fail
