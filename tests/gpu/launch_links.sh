#!/bin/bash
# Launch links from the -t cuda uprobes on the GPU host, in one call (after
# tests/gpu/batch.sh prepare, which builds the carried .carry/):
#   tests/gpu/launch_links.sh run|diag [OUTDIR]
# A launch-bound PyTorch training loop (tests/gpu/cupti_attach.py's model,
# without its torch.profiler tail) runs for the whole check; the static
# collector attaches to it with `profile -p PID ... -d $WIN`:
#   1. links: `-t cuda --enable-cuda-kernel true`, LLMT_CUPTI_START=runtime=1
#      (CUPTI's API records): the converter pairs every kernel, copy and set
#      with its probed launch call as it would without CUPTI's records and
#      compares with CUPTI's correlation links of the same log: PASS when
#      every comparable pair agrees and at least 95% of CUPTI's links were
#      comparable;
#   2. coverage: the same with runtime=0 (kernels only): PASS when at least
#      95% of the kernels, copies and sets get their launch from the uprobes,
#      the trace has no unbound flow, and CUPTI's correlation ids (if the
#      kernel records carry them without the RUNTIME kind) rise along each
#      thread's linked calls;
#   3. cost: $ROUNDS rounds of windows, each after an idle one of the same
#      length: kernels only (`-t cpu`, runtime=0), kernels + uprobe links
#      (`-t cpu,cuda`, runtime=0) and today's default with uprobes (`-t
#      cpu,cuda`, runtime=1); steps/s of each window against the idle one
#      before it, mean and sd over the rounds (COST lines); PASS when kernels
#      + uprobe links cost at most 5 points more than kernels only.
# diag: 1 and 2 only, with CUPTI's driver records too (driver=1, so every
# item has CUPTI's launching call), once with $PROBES and once with it and
# examples/probes-driver.json together: the converter's "launch links
# missed" lines name what no probe saw.
# OUTDIR gets result.txt (what was printed) and the converters' lines.
. "$(dirname "$0")/common.inc"
MODE=${1:-}
case $MODE in run|diag) ;; *) echo "usage: $0 run|diag [OUTDIR]"; exit 2;; esac
OUT=${2:-/tmp/launch-links}
gpu_python /opt/torch/.venv/bin/python3
WIN=${WIN:-8}
ROUNDS=${ROUNDS:-3}
PROBES=${PROBES:-$CARRY/share/llmtracker/probes.json}
COLL=$CARRY/bin/llmtracker
CONV=$CARRY/bin/llmtracker-convert
gpu_need "$COLL" "$CONV" "$PROBES"
gpu_carry_libs
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
tap_tmpdir W launch-links
LOOP=
stop_loop() {
	[ -n "$LOOP" ] || return 0
	touch "$W/stop" # the loop ends within 50 steps; a zombie is done too
	wait_until 20 '! grep -qE "^State:\s+[RSDT]" /proc/$LOOP/status 2>/dev/null' || kill "$LOOP" 2>/dev/null
	wait "$LOOP" 2>/dev/null
	LOOP=
}
tap_at_exit stop_loop
exec > >(tee "$OUT/result.txt") 2>&1
judge() { # python3 - ARGS < SCRIPT: each line it prints through say
	local l
	while IFS= read -r l; do say "$l"; done < <(python3 - "$@")
}
now() { date +%s%N; }

# The loop: writes W/ready after warm-up, then every step's end (CLOCK_REALTIME
# ns) into W/steps.txt, flushed every 50 steps, until W/stop appears.
cat > "$W/loop.py" <<'EOF'
import os, sys, time
import torch
import torch.nn as nn
d = sys.argv[1]
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
model = nn.TransformerEncoder(layer, num_layers=4).to("cuda")
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(16, 128, 256, device="cuda")
def step():
    opt.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()
    opt.step()
t_end = time.monotonic() + 5
while time.monotonic() < t_end:
    step()
torch.cuda.synchronize()
open(os.path.join(d, "ready"), "w").close()
out = open(os.path.join(d, "steps.txt"), "w")
n = 0
while True:
    step()
    n += 1
    if n % 8 == 0:
        torch.cuda.synchronize()
    out.write(f"{time.time_ns()}\n")
    if n % 50 == 0:
        out.flush()
        if os.path.exists(os.path.join(d, "stop")):
            break
EOF
"$PY" "$W/loop.py" "$W" > "$W/loop.out" 2>&1 & LOOP=$!
for _ in $(seq 600); do [ -e "$W/ready" ] && break; kill -0 "$LOOP" 2>/dev/null || break; sleep 0.1; done
[ -e "$W/ready" ] || { say "FAIL the loop did not start: $(tail -3 "$W/loop.out")"; gpu_done; }
gpu_host

# profile NAME KEYS SOURCES [PROBE_FILE]: one window; its bounds (realtime ns) in W/NAME.win
profile() {
	local d=$W/$1
	mkdir -p "$d"
	local t0; t0=$(now)
	LLMT_CUPTI_START=$2 "$COLL" profile -p "$LOOP" -t "$3" --enable-cuda-kernel true -d "$WIN" -q \
		--probe-file "${4:-$PROBES}" -o "$d/main.evlog" > "$d/coll.out" 2> "$d/coll.err"
	local rc=$? t1; t1=$(now)
	echo "$t0 $t1 $rc" > "$d/win"
	cp "$d/coll.err" "$OUT/$1.coll.err" 2>/dev/null
	[ "$rc" = 0 ] || say "FAIL $1: the collector exited $rc: $(tail -2 "$d/coll.err" | tr '\n' ' ')"
}
convert() {
	local d=$W/$1
	"$CONV" -i "$d/main.evlog" -o "$d/trace.json.gz" > /dev/null 2> "$d/conv.err" ||
		say "FAIL $1: conversion: $(tail -2 "$d/conv.err" | tr '\n' ' ')"
	grep -E "^launch links|^converted" "$d/conv.err" | sed "s/^/INFO $1: /" | tee -a "$OUT/converter.txt"
	cp "$d/conv.err" "$OUT/$1.conv.err" 2>/dev/null
}
idle() { # NAME: a window of the same length with nothing attached
	mkdir -p "$W/$1"
	local t0; t0=$(now)
	sleep "$WIN"
	echo "$t0 $(now) 0" > "$W/$1/win"
}

# 1. links against CUPTI's
links_judge() {
judge "$W/$1/conv.err" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"\((\d+) more had CUPTI's\)", t)
c = re.search(r"checked against CUPTI's links: (\d+) of (\d+) agree", t)
cupti = int(m.group(1)) if m else 0
agree, checked = (int(c.group(1)), int(c.group(2))) if c else (0, 0)
print(f"INFO links: {cupti} GPU items with CUPTI's link, {checked} compared with the uprobe pairing, {agree} agree"
      + (f" ({100 * agree / checked:.3f}%)" if checked else ""))
print(("PASS" if checked and agree == checked else "FAIL") + " the uprobe pairing agrees with every CUPTI link compared")
print(("PASS" if cupti and checked >= 0.95 * cupti else "FAIL") + " at least 95% of CUPTI's links compared")
EOF
}

# 2. coverage with kernels only
cover_judge() {
judge "$W/$1/conv.err" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"launch links from uprobes: (\d+) of (\d+) kernels/copies/sets linked", t)
linked, work = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
print(f"INFO cover: {linked} of {work} kernels, copies and sets linked from the uprobes"
      + (f" ({100 * linked / work:.2f}%)" if work else ""))
print(("PASS" if work and linked >= 0.95 * work else "FAIL") + " at least 95% linked with CUPTI recording kernels only")
print(("FAIL" if "unbound flows" in t else "PASS") + " no unbound flow")
o = re.search(r"(\d+) of (\d+) links out of their thread's call order", t)
if o:
    print(("PASS" if o.group(1) == "0" else "FAIL") + f" CUPTI's ids rise along each thread's linked calls "
          f"({o.group(1)} falls in {o.group(2)}: a fall is a pair shifted)")
else:
    print("INFO no correlation ids in the kernel records: the order check could not run")
EOF
}

if [ "$MODE" = diag ]; then
	python3 - "$PROBES" examples/probes-driver.json > "$W/both.json" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
a["uprobes"] += b["uprobes"]
print(json.dumps(a))
EOF
	profile links runtime=1\ driver=1 cuda; convert links; links_judge links
	profile links-both runtime=1\ driver=1 cuda "$W/both.json"; convert links-both; links_judge links-both
	profile cover runtime=0 cuda; convert cover; cover_judge cover
	profile cover-both runtime=0 cuda "$W/both.json"; convert cover-both; cover_judge cover-both
	stop_loop
	gpu_done
fi
profile links runtime=1 cuda; convert links; links_judge links
profile cover runtime=0 cuda; convert cover; cover_judge cover

# 3. cost
for r in $(seq "$ROUNDS"); do
	idle "i$r.k"; profile "k$r" runtime=0 cpu
	idle "i$r.u"; profile "u$r" runtime=0 cpu,cuda
	idle "i$r.d"; profile "d$r" runtime=1 cpu,cuda
done
stop_loop
judge "$W" "$ROUNDS" <<'EOF'
import bisect, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
ends = [int(x) for x in open(f"{w}/steps.txt") if x.strip()]
def rate(name, skip_ns):
    t0, t1, _ = (int(x) for x in open(f"{w}/{name}/win").read().split())
    lo, hi = t0 + skip_ns, t1 - 500_000_000
    n = bisect.bisect_right(ends, hi) - bisect.bisect_left(ends, lo)
    return n / ((hi - lo) / 1e9) if hi > lo else float("nan")
res = {}
for tag, what in (("k", "kernels only (runtime=0, -t cpu)"), ("u", "kernels + uprobe links (runtime=0, -t cpu,cuda)"),
                  ("d", "today's default + uprobes (runtime=1, -t cpu,cuda)")):
    ch = []
    for r in range(1, rounds + 1):
        base = rate(f"i{r}.{tag}", 500_000_000)
        during = rate(f"{tag}{r}", 3_000_000_000)  # past the attach and CUPTI's start
        ch.append((during / base - 1) * 100)
    res[tag] = ch
    sd = statistics.stdev(ch) if len(ch) > 1 else 0.0
    print(f"COST {what}: {statistics.mean(ch):+.1f}% steps/s (sd {sd:.1f}, {len(ch)} windows: "
          + " ".join(f"{x:+.1f}" for x in ch) + ")")
gap = statistics.mean(res["u"]) - statistics.mean(res["k"])
print(("PASS" if gap >= -5 else "FAIL") + f" kernels + uprobe links cost {-gap:.1f} points more than kernels only (at most 5)")
EOF
for f in "$W"/*/coll.err; do grep -E "cuda|gpu" "$f" | head -3 | sed "s|^|INFO $(basename "$(dirname "$f")"): |"; done >> "$OUT/collector.txt"
gpu_done
