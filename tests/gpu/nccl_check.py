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
    # Probes go live library by library while the collector attaches (tens
    # of ms): compare from 200 ms after the first recorded call to the last.
    a, b = rec[0] + 200_000_000, rec[-1]
    got = [t for t in rec if a <= t <= b]
    inwin = issued[bisect.bisect_left(issued, a - 1_000_000):bisect.bisect_right(issued, b)]
    matched, j = 0, 0
    for t in inwin:  # each issued call to the next recorded one within 1 ms
        while j < len(got) and got[j] < t:
            j += 1
        if j < len(got) and got[j] - t < 1_000_000:
            matched += 1
            j += 1
    inwin = [t for t in inwin if t >= a]
    check(matched == len(got) and abs(len(inwin) - len(got)) <= 1,
          f"rank {r['rank']}: {len(got)} ncclAllReduce recorded, {len(inwin)} issued by the script "
          f"in the same window, {matched} paired")
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
    if len(ranks) > 1:
        check(len(nccl_k[p]) > 0, f"{names[p]}: {len(nccl_k[p])} NCCL kernels")
    else:  # a one-rank in-place all-reduce launches no kernel
        print(f"INFO {names[p]}: {len(nccl_k[p])} NCCL kernels (one rank)")
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
