#!/bin/bash
# CUDA records of a job in a pid namespace of its own (as in a container), on
# the GPU host, in one call:
#   tests/gpu/steps_gpu.sh prepare          (here: .carry/ with the collector,
#                                            the inject library, the converter)
#   tests/gpu/pidns_cuda.sh run [OUTDIR]    (on the GPU host, as root)
# A torch loop runs under `unshare --pid --fork --mount-proc` (its tids there
# are 1, 2, ...); `llmtracker profile -p PID -t cuda --enable-cuda-kernel
# true` attaches from the node. Checks: the CUPTI log carries the namespace's
# tids (the library cannot know the node's); the collector wrote an
# ns_tid marker per thread; converted, launches seen by both the
# uprobes and CUPTI are merged ("kept once" > 0) and every CUDA record of the
# job lies on one of its node tids. Prints PASS/FAIL lines; exit 0 if all pass.
set -u
. "$(dirname "$0")/common.inc"
[ "${1:-}" = run ] || { echo "usage: $0 run [OUTDIR]  (after tests/gpu/steps_gpu.sh prepare)"; exit 2; }
OUT=${2:-/tmp/pidns-cuda}
gpu_python /opt/torch/.venv/bin/python3
COLL=$CARRY/bin/llmtracker CONV=$CARRY/bin/llmtracker-convert
gpu_carry_libs
mkdir -p "$OUT"
gpu_need "$COLL" "$CONV"
[ "$(id -u)" = 0 ] || { echo "FAIL needs root (a pid namespace, BPF)"; exit 1; }
gpu_host

unshare --pid --fork --mount-proc "$PY" -c '
import sys, time, torch
x = torch.randn(1024, 1024, device="cuda"); w = torch.randn(1024, 1024, device="cuda") / 32
torch.cuda.synchronize()
open(sys.argv[1], "w").close()
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for _ in range(50):
        x = torch.tanh(x @ w)
    torch.cuda.synchronize()
' "$OUT/ready" 20 > "$OUT/job.log" 2>&1 &
UP=$!
tap_at_exit 'kill $UP 2>/dev/null'
wait_until 60 '[ -e "$OUT/ready" ]'
JP=$(pgrep -P "$UP" | head -1)
[ -n "$JP" ] && [ -e "$OUT/ready" ] || { echo "FAIL the job did not start"; tail -5 "$OUT/job.log"; exit 1; }
echo "INFO job: node pid $JP, $(awk '/^NSpid/ { print "NSpid " $2 "," $3 }' /proc/"$JP"/status)"
"$COLL" profile -p "$JP" -t cuda --enable-cuda-kernel true -d 6 -q -o "$OUT/p.evlog" --cupti-dir "$OUT" \
	> "$OUT/collector.log" 2>&1 & CP=$!
sleep 3
for t in /proc/"$JP"/task/*; do
	echo "$(basename "$t") $(awk '/^NSpid/ { print $NF }' "$t/status")"
done > "$OUT/tids"
wait $CP && say "PASS profile -p (pid namespace) -t cuda --enable-cuda-kernel exits 0" ||
	say "FAIL profile: $(tail -3 "$OUT/collector.log" | tr '\n' ' ')"
echo "INFO $(wc -l < "$OUT/tids") threads (node tid, namespace tid): $(tr '\n' ' ' < "$OUT/tids" | cut -c1-200)"
cupti=$(ls "$OUT"/llmtracker-cupti.*.evlog 2>/dev/null | head -1)
[ -n "$cupti" ] && say "PASS the CUPTI log is published ($(basename "$cupti"))" || say "FAIL no CUPTI log"
n_markers=$("$CONV" dump "$OUT/p.evlog" 2>/dev/null | grep -cE '^marker .* kind=1$') # EVLOG_MARK_NS_TID
[ "$n_markers" -ge 1 ] && say "PASS $n_markers ns_tid markers in the collector's log" ||
	say "FAIL no ns_tid marker"
"$CONV" -i "$OUT/p.evlog" --cupti-dir "$OUT" -o "$OUT/p.json" > "$OUT/conv.out" 2> "$OUT/conv.err" ||
	say "FAIL convert: $(tail -2 "$OUT/conv.err")"
kept=$(grep -o '[0-9]* CUDA calls seen by both uprobes and CUPTI, kept once' "$OUT/conv.err" | cut -d' ' -f1)
[ "${kept:-0}" -gt 0 ] && say "PASS $kept CUDA calls seen by both the uprobes and CUPTI merged" ||
	say "FAIL no call merged ($(head -1 "$OUT/conv.err"))"
python3 - "$OUT/p.json" "$OUT/tids" "$JP" <<'PY' && say "PASS every CUDA record of the job on a node tid of its" || say "FAIL CUDA records off the job's node tids"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
node = {int(l.split()[0]) for l in open(sys.argv[2])}
pid = int(sys.argv[3])
cuda = [e for e in ev if e.get("pid") == pid and e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"]
off = sorted({e["tid"] for e in cuda} - node)
print("INFO %d CUDA records of the job on tids %s; off the node's: %s" % (len(cuda), sorted({e["tid"] for e in cuda})[:8], off[:8]))
sys.exit(0 if cuda and not off else 1)
PY
echo "INFO files in $OUT"
gpu_done
