#!/bin/bash
# The launch form on the GPU host, in one call (after tests/gpu/steps_gpu.sh
# prepare): `llmtracker profile -t python,cuda --enable-cuda-kernel true --
# python launch_kernels.py` records, in 10 training steps between two stamps,
# the kernels (names and counts) torch.profiler records in the same 10 steps
# of an unprofiled run of the same deterministic loop (not the same process:
# CUPTI takes one client per process); the Python hook traces the script
# from its start (train_step 15 times), and the CUDA library uprobes record;
# every kernel, copy and set is linked to its launch call. A second run with
# --cuda-api-records true: CUPTI's synchronization and overhead records come
# out as event types of their own.
#   tests/gpu/launch_kernels.sh run [OUTDIR]
set -u
. "$(dirname "$0")/common.inc"
[ "${1:-}" = run ] || { echo "usage: $0 run [OUTDIR]"; exit 2; }
OUT=${2:-/tmp/launch-kernels}
gpu_python python3
gpu_carry_libs
tap_tmpdir T launch-kernels
mkdir -p "$OUT"
"$PY" tests/gpu/launch_kernels.py ref "$T/ref.json" >"$T/ref.out" 2>&1 ||
	{ say "FAIL the unprofiled reference run: $(tail -2 "$T/ref.out")"; exit 1; }
"$CARRY/bin/llmtracker" profile -t python,cuda --enable-cuda-kernel true -o "$T/p.log" --cupti-dir "$T" \
	-- "$PY" tests/gpu/launch_kernels.py prof "$T/prof.json" >"$T/prof.out" 2>"$T/err"
rc=$?
cp "$T/err" "$OUT/collector.log"
[ $rc = 0 ] && say "PASS profile exits 0" || say "FAIL profile exits $rc: $(tail -3 "$T/err" | tr '\n' ' ')"
job_exited_0 "$T/err" && say "PASS the job exited 0 (its own status)" ||
	say "FAIL the job: $(job_status "$T/err")"
sed -n '/^  source /,$p' "$T/err"
awk '$1 == "python" && $2 > 0 { f = 1 } END { exit !f }' "$T/err" && say "PASS the script's interpreter traced" ||
	say "FAIL the script's interpreter not traced"
calls=$(COLUMNS=1000 "$CARRY/bin/llmtracker-convert" summary -n 100000 "$T/p.log" 2>/dev/null |
	awk 'NF > 4 && $(NF-1) == "train_step" { print $(NF-3) }' | head -1)
[ "${calls:-0}" = 15 ] && say "PASS train_step recorded 15 times from the first" ||
	say "FAIL train_step recorded ${calls:-0} times, want 15"
copies=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("lib_copies", 0))' "$T/prof.json" 2>/dev/null)
[ "${copies:-0}" = 1 ] && grep -q "started once it loaded CUDA" "$T/err" &&
	say "PASS one copy of the library for the hook and CUDA, CUPTI started in it at cuInit" ||
	say "FAIL library copies mapped: ${copies:-?}; $(grep -c "started once it loaded CUDA" "$T/err") start(s) at cuInit said"
cudaev=$(awk '$1 == "cuda" { print $2 }' "$T/err")
[ "${cudaev:-0}" -gt 0 ] && say "PASS CUDA library calls recorded ($cudaev events)" ||
	say "FAIL no CUDA library call recorded"
"$CARRY/bin/inject_logdump" "$T"/llmtracker-cupti.*.evlog >"$T/k.tsv" 2>&1
python3 - "$T/k.tsv" "$T/prof.json" "$T/ref.json" <<'PY' | tee "$T/cmp"
import collections, json, sys
sys.path.insert(0, "tests/gpu")
from cupti_attach import demangle  # CUPTI names kernels mangled, torch.profiler demangled
prof, ref = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
ours = collections.Counter()
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[0] == "K" and prof["t0"] <= int(f[1]) <= prof["t1"]:
        ours[demangle(f[6])] += 1
theirs = collections.Counter(ref["kernels"])
print(f"INFO kernels in 10 steps: ours {sum(ours.values())} ({len(ours)} names), "
      f"torch.profiler {sum(theirs.values())} ({len(theirs)} names)")
for n in sorted(set(ours) | set(theirs)):
    if ours[n] != theirs[n]:
        print(f"  diff {ours[n]:5d} ours vs {theirs[n]:5d} torch: {n[:140]}")
print(("PASS" if ours == theirs and ours else "FAIL") + " kernel names and counts equal torch.profiler's")
PY
grep -q '^FAIL' "$T/cmp" && gpu_fails=$((gpu_fails + 1))
# Every kernel, copy and set linked to its launch call, no flow unbound.
"$CARRY/bin/llmtracker-convert" -i "$T/p.log" --cupti-dir "$T" -o "$T/t.json" 2>"$T/conv.err" >/dev/null
m=$(sed -n 's/^launch links from uprobes: \([0-9]*\) of \([0-9]*\) .*/\1 \2/p' "$T/conv.err")
if [ -n "$m" ] && [ "${m% *}" = "${m#* }" ] && [ "${m% *}" -gt 0 ] && ! grep -q "unbound flows" "$T/conv.err"; then
	say "PASS every kernel, copy and set linked to its launch call (${m% *})"
else
	say "FAIL launch links: ${m:-none} (linked, of)"
	grep -E '^launch links|unbound' "$T/conv.err" | cut -c1-600 | sed 's/^/INFO /'
	# Which calls made the work no probe saw: CUPTI's runtime and driver
	# records of the same run name each one's launching call.
	mkdir -p "$T/diag"
	LLMT_CUPTI_START="runtime=1 driver=1" "$CARRY/bin/llmtracker" profile -t python,cuda \
		--enable-cuda-kernel true -o "$T/diag/p.log" -- "$PY" tests/gpu/launch_kernels.py prof \
		"$T/diag/prof.json" >"$T/diag/out" 2>"$T/diag/err"
	"$CARRY/bin/llmtracker-convert" -i "$T/diag/p.log" -o "$T/diag/t.json" 2>"$T/diag/conv.err" >/dev/null
	grep -E '^launch links' "$T/diag/conv.err" | cut -c1-900 | sed 's/^/INFO [diag] /'
fi
# torch.cuda.synchronize(): CUPTI's synchronization records (gpu_sync
# events), shown as PyTorch's profiler shows them.
mkdir -p "$T/api"
"$CARRY/bin/llmtracker" profile -t python,cuda --enable-cuda-kernel true --cuda-api-records true \
	-o "$T/api/p.log" -- "$PY" tests/gpu/launch_kernels.py prof "$T/api/prof.json" >"$T/api/out" 2>"$T/api/err" ||
	say "FAIL profile --cuda-api-records true: $(tail -2 "$T/api/err" | tr '\n' ' ')"
"$CARRY/bin/llmtracker-convert" -q -i "$T/api/p.log" -o "$T/api/t.json" 2>/dev/null
python3 - "$T/api/t.json" <<'PY' | tee "$T/sync"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
s = [e for e in ev if e.get("cat") == "cuda_sync"]
names = sorted({e["name"] for e in s})
old = [e for e in ev if e.get("name", "").startswith(("cuda_sync:", "cupti_overhead:"))]
ok = s and not old and set(names) <= {"Event Sync", "Stream Wait Event", "Stream Sync",
                                      "Context Sync", "Unknown"} and \
     all(e["args"]["cuda_sync_kind"] == e["name"] and e["tid"] for e in s)
print(("PASS" if ok else "FAIL") + f" {len(s)} CUDA synchronizations as cat cuda_sync ({', '.join(names)}), "
      f"{sum(e.get('cat') == 'overhead' for e in ev)} CUPTI overheads as cat overhead, no marker")
PY
grep -q '^FAIL' "$T/sync" && gpu_fails=$((gpu_fails + 1))
gpu_done
