"""Checks for tests/gpu/nccl_two_rank.sh (run where the converter is).

usage: nccl_check.py TRACE.json.gz LOGDIR RUNDIR
LOGDIR holds the collector's and the inject library's logs and rank<r>.json
from the workload; RUNDIR is the TensorBoard run directory.
Prints PASS/FAIL lines and figures; exit status 1 if any check fails.
"""
import bisect
import glob
import gzip
import json
import os
import subprocess
import sys

trace_path, logdir, rundir = sys.argv[1:4]
build = os.environ.get("BUILD", "build")
fails = 0


def check(ok, what):
    global fails
    print(("PASS " if ok else "FAIL ") + what)
    fails += 0 if ok else 1


def dump(path):
    out = subprocess.run([f"{build}/tests/progs/evlog_dump", path], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("#"):
            continue
        parts = line.split(" ")
        ev = {"type": parts[0]}
        for p in parts[1:]:
            k, _, v = p.partition("=")
            ev[k] = v
        yield ev


ranks = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(logdir, "rank*.json")))]
node_logs = [f for f in glob.glob(os.path.join(logdir, "*.evlog")) if "node" in os.path.basename(f)]
check(len(ranks) >= 1 and len(node_logs) == 1, f"{len(ranks)} rank results and the collector's log")

# 1. ncclAllReduce calls per rank == what the script issued in the window.
calls = {}
for ev in dump(node_logs[0]):
    if ev["type"] == "lib_call" and ev.get("symbol") in ("ncclAllReduce", "pncclAllReduce"):
        calls.setdefault(int(ev["pid"]), []).append(int(ev["ts"]))
window = None
for r in ranks:
    rec = sorted(calls.get(r["pid"], []))
    issued = r["allreduce_ns"]
    if not rec:
        check(False, f"rank {r['rank']} (pid {r['pid']}): ncclAllReduce recorded")
        continue
    # every script call between the first and the last recorded one, each
    # matched to the recorded call that follows it within 5 ms
    lo = bisect.bisect_left(issued, rec[0] - 5_000_000)
    hi = bisect.bisect_right(issued, rec[-1])
    inwin = [t for t in issued[lo:hi] if t <= rec[-1]]
    # the first issued call in the window may precede the profile start
    matched = sum(1 for t in inwin if (i := bisect.bisect_left(rec, t)) < len(rec) and rec[i] - t < 5_000_000)
    check(len(rec) == matched or len(rec) == matched - 1,
          f"rank {r['rank']}: {len(rec)} ncclAllReduce recorded, {matched} issued by the script in that window")
    window = (rec[0], rec[-1]) if window is None else (min(window[0], rec[0]), max(window[1], rec[-1]))

# 2. the merged run: GPU planes, NCCL kernels on every GPU overlapping, flows bound.
tr = json.load(gzip.open(trace_path))
evs = tr["traceEvents"] if isinstance(tr, dict) else tr
names = {}
for e in evs:
    if e.get("ph") == "M" and e.get("name") == "process_name":
        names[e["pid"]] = e["args"]["name"]
gpu_pids = sorted(p for p, n in names.items() if "GPU" in str(n))
check(len(gpu_pids) == len(ranks), f"{len(gpu_pids)} GPU processes in the trace for {len(ranks)} ranks: {[names[p] for p in gpu_pids]}")
nccl_k = {p: sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in evs
                    if e.get("ph") == "X" and e.get("cat") == "kernel" and e["pid"] == p and "nccl" in e["name"].lower())
          for p in gpu_pids}
for p in gpu_pids:
    check(len(nccl_k[p]) > 0, f"{names[p]}: {len(nccl_k[p])} NCCL kernels")
if len(gpu_pids) >= 2:
    a, b = nccl_k[gpu_pids[0]], nccl_k[gpu_pids[1]]
    starts = [s for s, _ in b]
    ov = 0
    for s, e in a:
        i = bisect.bisect_left(starts, s - 50_000)
        ov += any(bs < e and be > s for bs, be in b[i:i + 64])
    check(a and ov >= 0.9 * len(a), f"NCCL kernels overlapping across GPUs: {ov}/{len(a)}")
host_nccl = {}
for e in evs:
    if e.get("ph") == "X" and e.get("cat") == "nccl" and "AllReduce" in e["name"]:
        host_nccl[e["pid"]] = host_nccl.get(e["pid"], 0) + 1
check(len(host_nccl) == len(ranks), f"ncclAllReduce on each rank's host threads: {host_nccl}")
fs = {}
for e in evs:
    if e.get("cat") == "ac2g" and e.get("ph") in ("s", "f"):
        fs.setdefault(e["id"], set()).add(e["ph"])
bound = sum(1 for v in fs.values() if v == {"s", "f"})
check(fs and bound == len(fs), f"launch->kernel flows: {bound} of {len(fs)} bound at both ends")
files = sorted(os.listdir(rundir))
check(any(f.endswith(".xplane.pb") for f in files) and any(f.endswith(".trace.json.gz") for f in files),
      f"TensorBoard run: {files}")

# 3. steps/s per rank before, during, after.
if window:
    for r in ranks:
        ends = r["step_end_ns"]
        def rate(t0, t1):
            n = sum(1 for t in ends if t0 <= t < t1)
            return n / ((t1 - t0) / 1e9) if t1 > t0 else 0
        w0, w1 = window
        span = 4e9
        print(f"figure rank {r['rank']}: steps/s before {rate(w0 - span, w0):.1f}  during {rate(w0, w1):.1f}"
              f"  after {rate(w1 + 1e9, w1 + 1e9 + span):.1f}")
print(f"{'FAIL' if fails else 'PASS'}: {fails} check(s) failed")
sys.exit(1 if fails else 0)
