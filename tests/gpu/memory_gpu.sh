#!/bin/bash
# GPU memory recorded by CUPTI (MEMORY2: gpu_memory events) on a real GPU,
# against PyTorch's own account of its caching allocator, in one call:
#   tests/gpu/memory_gpu.sh prepare        (here: .carry/ as steps_gpu.sh
#                                           prepare makes it)
#   tests/gpu/memory_gpu.sh run [OUTDIR]   (on the GPU host; PY=python with
#                                           torch and jax)
#   tests/gpu/memory_gpu.sh check RUNDIR   (the checks again, on a run's files)
# tests/gpu/memory_gpu.py runs under `llmtracker profile -t python --enable-cuda-kernel
# true`: after a warm-up, tensors of known sizes that take a segment each
# (one cudaMalloc apiece), pinned host memory, then all freed and
# torch.cuda.empty_cache() (one cudaFree per segment). Checks: the
# allocations recorded in the window are exactly the segments
# torch.cuda.memory_snapshot() shows appearing (address and size), their
# count and bytes torch.cuda.memory_stats()'s segment.all.allocated and
# reserved_bytes.all.allocated growth; the frees exactly the segments that
# went; the trace JSON's "GPU 0 memory allocated" counter rises and falls by
# those bytes; XLA's reader (jax.profiler.ProfileData) reads the XPlane and
# finds the MemoryAllocation / MemoryDeallocation events on /host:CPU with
# the counter's totals as bytes_allocated.
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
prepare)
	exec bash tests/gpu/steps_gpu.sh prepare;;
run|check) ;;
*) echo "usage: $0 prepare | run [OUTDIR] | check RUNDIR"; exit 2;;
esac

gpu_python python3
gpu_carry_libs
CONV=$CARRY/bin/llmtracker-convert
if [ "$1" = check ]; then
	d=${2:?usage: $0 check RUNDIR}
	OUT=$d
else
	OUT=${2:-/tmp/memory-gpu}
	gpu_need "$CARRY/bin/llmtracker" "$CONV" "$CARRY/lib/libllmtracker-inject.so"
	gpu_need_torch cuda
	mkdir -p "$OUT"
	tap_tmpdir W memory-gpu
	gpu_host
	gpu_torch_python
	d=$W/run
	mkdir -p "$d"
	"$CARRY/bin/llmtracker" profile -q -t python --enable-cuda-kernel true -o "$d/p.evlog" --cupti-dir "$d" \
		-- "$PY" tests/gpu/memory_gpu.py "$d/truth.json" >"$d/collector.log" 2>&1 ||
		say "FAIL [profile] $(tail -2 "$d/collector.log" | tr '\n' ' ')"
	job_exited_0 "$d/collector.log" && say "PASS [job] exited 0" ||
		say "FAIL [job] $(job_status "$d/collector.log")"
	[ -s "$d/truth.json" ] || { say "FAIL [job] no truth written"; gpu_done; }
	"$CONV" -q -i "$d/p.evlog" --cupti-dir "$d" -o "$d/p.json" &&
		"$CONV" -q -i "$d/p.evlog" --cupti-dir "$d" --logdir "$d/tb" --run r ||
		{ say "FAIL [convert]"; gpu_done; }
	ls "$d"/*.evlog | grep -v '/p\.evlog$' | xargs "$CONV" dump >"$d/cupti.dump" 2>"$d/dump.err" ||
		say "FAIL [dump] $(head -2 "$d/dump.err" | tr '\n' ' ')"
fi

python3 - "$d" >"$d/check.txt" 2>&1 <<'PY'
import json, sys
d = sys.argv[1]
t = json.load(open(d + "/truth.json"))
dev = t["device"]


def fields(line):
    out = {}
    for kv in line.split()[1:]:
        k, _, v = kv.partition("=")
        try:
            out[k] = int(v, 0)
        except ValueError:
            out[k] = v
    return out


mem, on = [], []
for line in open(d + "/cupti.dump"):
    if line.startswith("gpu_memory "):
        mem.append(fields(line))
    elif line.startswith("marker ") and line.rstrip().endswith(" kind=3"):  # EVLOG_MARK_CUPTI_ON
        f = fields(line)
        on.append(f["ts"] + f["dur"])
mem.sort(key=lambda e: e["ts"])
say = print
if not on or max(on) >= t["begin"]:
    say("FAIL [recording] CUPTI recording began at %s, after the window (%d): raise WARM" % (max(on) if on else None, t["begin"]))
dev_kinds = (3, 4, 5, 6, 7)  # device, array, managed, device/managed static: the GPU's own memory
alloc = [e for e in mem if e["op"] == 1 and e["device"] == dev and e["memory_kind"] in dev_kinds
         and t["begin"] <= e["ts"] < t["allocated_end"]]
freed = [e for e in mem if e["op"] == 2 and e["device"] == dev and e["memory_kind"] in dev_kinds
         and t["pinned_end"] <= e["ts"] < t["end"]]
got_a = sorted((e["address"], e["bytes"]) for e in alloc)
got_f = sorted((e["address"], e["bytes"]) for e in freed)
want_a = sorted(tuple(s) for s in t["new_segments"])
want_f = sorted(tuple(s) for s in t["freed_segments"])
s0, s1, s2 = t["stats"]
n_seg = s1["segment.all.allocated"] - s0["segment.all.allocated"]
b_seg = s1["reserved_bytes.all.allocated"] - s0["reserved_bytes.all.allocated"]
n_free = s2["segment.all.freed"] - s1["segment.all.freed"]
b_free = s2["reserved_bytes.all.freed"] - s1["reserved_bytes.all.freed"]
say("INFO [torch] window: %d segments allocated (%d bytes), %d freed (%d bytes); requested %s" %
    (n_seg, b_seg, n_free, b_free, t["sizes"]))
say("%s [alloc] %d allocations recorded are the new segments (address, size) %s" %
    ("PASS" if got_a == want_a and want_a else "FAIL", len(got_a), "" if got_a == want_a else "got %s want %s" % (got_a, want_a)))
say("%s [alloc] their count and bytes are memory_stats' (segment.all.allocated %d, reserved_bytes.all.allocated %d; recorded %d, %d)" %
    ("PASS" if (len(alloc), sum(b for _, b in got_a)) == (n_seg, b_seg) else "FAIL", n_seg, b_seg, len(alloc), sum(b for _, b in got_a)))
say("%s [alloc] every requested size has its segment: %s" %
    ("PASS" if sorted(t["sizes"]) == sorted(b for _, b in got_a) else "FAIL", sorted(b for _, b in got_a)))
say("%s [free] %d frees recorded are the segments empty_cache released %s" %
    ("PASS" if got_f == want_f and want_f else "FAIL", len(got_f), "" if got_f == want_f else "got %s want %s" % (got_f, want_f)))
say("%s [free] their count and bytes are memory_stats' (segment.all.freed %d, reserved_bytes.all.freed %d; recorded %d, %d)" %
    ("PASS" if (len(freed), sum(b for _, b in got_f)) == (n_free, b_free) else "FAIL", n_free, b_free, len(freed), sum(b for _, b in got_f)))
pin = [e for e in mem if e["op"] == 1 and e["memory_kind"] in (1, 2) and t["allocated_end"] <= e["ts"] < t["pinned_end"]]
say("INFO [pinned] host allocations recorded while pinning %d bytes: %s" % (t["pinned_bytes"], [(e["memory_kind"], e["bytes"]) for e in pin]))

# The trace JSON: one instant per event, and the device counter after each
# event of the GPU's own memory, in time order; the window's rise and fall.
ev = json.load(open(d + "/p.json"))["traceEvents"]
inst = [e for e in ev if e.get("cat") == "gpu_memory" and e["ph"] == "i"]
name = "GPU %d memory allocated" % dev
ctr = sorted((e for e in ev if e.get("ph") == "C" and e.get("name") == name), key=lambda e: e["ts"])
devev = [e for e in mem if e["device"] == dev and e["memory_kind"] not in (1, 2)]
ok = len(inst) == len(mem) and len(ctr) == len(devev)
say("%s [json] %d gpu_memory instants (log: %d), %d \"%s\" counter events (log: %d of the GPU's memory)" %
    ("PASS" if ok else "FAIL", len(inst), len(mem), len(ctr), name, len(devev)))
if ok and alloc and freed:
    val = [c["args"]["bytes"] for c in ctr]
    ix = {id(e): i for i, e in enumerate(devev)}
    before = val[ix[id(alloc[0])] - 1] if ix[id(alloc[0])] else 0
    after_alloc = val[ix[id(alloc[-1])]]
    after_free = val[ix[id(freed[-1])]]
    say("%s [json] the counter rose by the segments' bytes (%d -> %d: %d) and fell by those freed (-> %d: %d)" %
        ("PASS" if after_alloc - before == b_seg and after_alloc - after_free == b_free else "FAIL",
         before, after_alloc, after_alloc - before, after_free, after_alloc - after_free))
    json.dump({"final": val[-1], "peak": max(val), "n": len(val)}, open(d + "/counter.json", "w"))
PY
while IFS= read -r l; do say "$l"; done <"$d/check.txt"

xp=$(ls "$d"/tb/plugins/profile/r/*.xplane.pb 2>/dev/null | head -1)
"$PY" - "$xp" "$d/counter.json" <<'PY' >"$d/xla.txt" 2>&1
import json, os, sys
try:
    from jax.profiler import ProfileData
except Exception as e:  # noqa: BLE001
    print("FAIL [xla] jax.profiler cannot be imported: %s" % e)
    sys.exit(0)
pd = ProfileData.from_file(sys.argv[1])
ctr = json.load(open(sys.argv[2])) if os.path.exists(sys.argv[2]) else None
planes = list(pd.planes)
host = [p for p in planes if p.name == "/host:CPU"]
mem = []
for p in host:
    for line in p.lines:
        for ev in line.events:
            if ev.name in ("MemoryAllocation", "MemoryDeallocation"):
                mem.append((ev.start_ns, line.name, ev.name, dict(ev.stats)))
mem.sort(key=lambda m: m[0])
dev = [m for m in mem if " host " not in str(m[3].get("allocator_name", "")) and m[3].get("allocator_name")]
print("%s [xla] XLA's reader: %d planes, %d memory events on /host:CPU (lines %s)" % (
    "PASS" if host and mem else "FAIL", len(planes), len(mem), sorted({m[1] for m in mem})))
need = ("allocator_name", "bytes_allocated", "peak_bytes_in_use", "allocation_bytes", "addr", "region_type")
lack = [m for m in mem if any(k not in m[3] for k in need)]
print("%s [xla] every memory event carries %s" % ("PASS" if mem and not lack else "FAIL", ", ".join(need)))
if ctr and dev:
    vals = [int(m[3]["bytes_allocated"]) for m in dev]
    ok = len(vals) == ctr["n"] and vals[-1] == ctr["final"] and max(vals) == ctr["peak"]
    print("%s [xla] bytes_allocated follows the trace's counter (%d events, final %d, peak %d; counter %s)" % (
        "PASS" if ok else "FAIL", len(vals), vals[-1], max(vals), ctr))
PY
while IFS= read -r l; do say "$l"; done <"$d/xla.txt"
if [ "$1" = run ]; then
	cp "$d/check.txt" "$d/xla.txt" "$d/truth.json" "$OUT/" 2>/dev/null
	tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.json' --exclude='tb' . 2>/dev/null
fi
gpu_done
