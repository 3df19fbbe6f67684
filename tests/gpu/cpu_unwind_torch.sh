#!/bin/bash
# GPU machine check of whole native CPU stacks (-t cpu: user stacks unwound
# from the binaries' CFI over a copied stack slice) on a PyTorch training
# loop (tests/workloads/pys_torch_loop.py: python3, libtorch, CUDA
# libraries, none built with frame pointers), in one call:
#   1. profiled 4 s at 999 Hz: >= 95% of the samples reach their thread's
#      root (main/_start/__libc_start_call_main, start_thread/clone3 for the
#      other threads); libtorch frames under _PyEval_EvalFrameDefault;
#   2. where perf is installed, `perf record -e cpu-clock --call-graph
#      dwarf,16384` on the same run: the inclusive shares of its top 10
#      functions within 3 points of ours;
#   3. figures: steps/s alone and under -t cpu at 999 Hz, the collector's
#      CPU, libdwfl sessions and frames per sample;
#   4. -t cpu,pysample: Python frames merged at the eval-loop frames, so a
#      kernel launch reads train_step -> forward_pass (Python) -> libtorch
#      (C++) -> cudaLaunchKernel.
# Prints PASS/FAIL lines and figures; exit 0 only if all pass. Needs, built
# here and carried: $BUILD/bin/llmtracker-static (or llmtracker) and
# $BUILD/tests/progs/evlog_dump.
set -u
. "$(dirname "$0")/common.inc"
BUILD=${BUILD:-build}
gpu_python python3
gpu_build_collector
DUMP=$BUILD/tests/progs/evlog_dump
CHECK="python3 tests/integration/cpu_unwind_check.py"
LOOP=tests/workloads/pys_torch_loop.py

gpu_need "$LT" "$DUMP"
"$DUMP" /dev/null >/dev/null 2>&1; [ $? -le 2 ] ||
	{ echo "FAIL: $DUMP does not run here (its shared libraries?)"; exit 1; }
gpu_need_torch
tap_tmpdir T cpu_unwind_torch
echo "collector: $LT; python: $(gpu_torch_python)"
PERF=()
if command -v perf >/dev/null; then
	PERF=(perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -o "$T/p.data" --)
else
	echo "perf is not installed: no comparison (step 2 skipped)"
fi

"$PY" "$LOOP" --seconds 4 --meta "$T/alone.json" >"$T/alone.out" 2>&1 ||
	{ echo "FAIL: the loop alone failed:"; tail -20 "$T/alone.out"; exit 1; }
"$LT" profile -t cpu --freq 999 -v 1 -o "$T/a.log" -- "${PERF[@]}" "$PY" "$LOOP" --seconds 4 \
	--meta "$T/a.json" >"$T/a.out" 2>"$T/a.err"
rc=$?
grep -E 'cpu:|collector CPU' "$T/a.err" | cut -c1-220
[ $rc = 0 ] && [ -s "$T/a.log" ] || { bad "profile -t cpu of the torch loop (rc $rc)"; tail -5 "$T/a.err"; exit 1; }
pid=$("$PY" -c "import json; print(json.load(open('$T/a.json'))['pid'])")
"$DUMP" "$T/a.log" >"$T/a.txt" 2>&1
: >"$T/p.txt"
[ ${#PERF[@]} -gt 0 ] && perf script -i "$T/p.data" -F comm,pid,ip,sym,dso --no-inline >"$T/p.txt" 2>/dev/null
$CHECK "$T/a.txt" "$T/p.txt" "pid=$pid" 10 1 >"$T/cmp"
cat "$T/cmp" | grep '^#'
read -r _ n pn root proot diff < <(grep '^result ' "$T/cmp")
echo "samples ours $n, perf $pn; reach their thread's root: ours $root%, perf $proot%; largest difference $diff points"
[ "${n:-0}" -ge 1000 ] && pass "$n samples" || bad "only ${n:-0} samples"
# Whether a stack is whole is the unwinder's to say (the CFI marks the
# outermost frame); names only confirm it where the host's libc has symbols
# for its roots (a stripped libc leaves start_thread and clone3 unnamed).
outer=$(sed -n 's/.*, \([0-9.]*\)% to the outermost frame.*/\1/p' "$T/a.err" | tail -1)
echo "INFO $root% end in a named root (main, start_thread, clone3, ...)"
awk -v v="${outer:-0}" 'BEGIN { exit !(v >= 95) }' && pass "$outer% unwound to the outermost frame" ||
	bad "only ${outer:-0}% unwound to the outermost frame"
$CHECK "$T/a.txt" /dev/null "pid=$pid" 40 1 | grep -qi 'libtorch\|at::\|torch::' &&
	pass "libtorch frames among the 40 top functions" || bad "no libtorch frame among the 40 top functions"
if [ ${#PERF[@]} -gt 0 ]; then
	awk -v v="${diff:-100}" 'BEGIN { exit !(v <= 3) }' && pass "top-10 shares within $diff points of perf's" ||
		bad "top-10 shares differ from perf's by $diff points"
fi
"$PY" -c "
import json
a = json.load(open('$T/alone.json')); b = json.load(open('$T/a.json'))
print('steps/s alone %.1f, under -t cpu at 999 Hz%s %.1f' % (a['steps_per_s'],
      ' (and perf)' if $( [ ${#PERF[@]} -gt 0 ] && echo True || echo False) else '', b['steps_per_s']))"

# 4. merged Python + native stacks
"$LT" profile -t cpu,pysample --freq 999 -q -o "$T/m.log" -- "$PY" "$LOOP" --seconds 4 \
	--meta "$T/m.json" >"$T/m.out" 2>"$T/m.err" || { bad "profile -t cpu,pysample (rc $?)"; tail -5 "$T/m.err"; }
pid=$("$PY" -c "import json; print(json.load(open('$T/m.json'))['pid'])")
"$DUMP" "$T/m.log" >"$T/m.txt" 2>&1
$CHECK --folded "$T/m.txt" "pid=$pid" >"$T/m.folded"
echo "hottest merged stacks (root first):"
head -4 "$T/m.folded" | cut -c1-400 | sed 's/^/  /'
launch=$(grep -E 'train_step \(.*forward_pass \(.*;[^;]*(at::|c10::|torch::)[^;]*;.*(cudaLaunchKernel|cuLaunchKernel)' "$T/m.folded" |
	awk '{ s += $NF } END { print s + 0 }')
total=$(awk '{ s += $NF } END { print s + 0 }' "$T/m.folded")
echo "launch stacks train_step -> forward_pass -> libtorch -> cudaLaunchKernel: $launch of $total samples"
grep -E 'train_step \(.*forward_pass \(.*(cudaLaunchKernel|cuLaunchKernel)' "$T/m.folded" | head -1 | cut -c1-600 | sed 's/^/  /'
[ "$launch" -gt 0 ] && pass "kernel launches read train_step -> forward_pass -> libtorch -> cudaLaunchKernel ($launch samples)" ||
	bad "no stack reads train_step -> forward_pass -> libtorch -> cudaLaunchKernel"
gpu_done
