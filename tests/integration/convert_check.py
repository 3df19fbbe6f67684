#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent checks of a trace JSON written by llmtracker-convert (CONTRACT §4).

usage: convert_check.py TRACE.json[.gz] [--min-events N] [--expect-base NS]
                        [--expect-flows N] [--hosts N] [--stats]
Prints one line per failed check and exits 1 if any failed; --stats prints
counts as JSON on stdout.
"""
import bisect, gzip, json, sys, collections

ALLOWED = {"python_function", "syscall", "cpu_sample", "python_sample", "cuda_runtime",
           "cuda_driver", "nccl", "cublas", "cudnn", "kernel", "gpu_memcpy", "gpu_memset",
           "ac2g", "user_annotation", "cuda_sync", "overhead", "step", "folded", "gpu_memory"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
EPS = 0.0011  # µs: three decimals on both ends


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8", errors="strict") as f:
        return json.load(f)


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    opt = {}
    while args:
        k = args.pop(0)
        if k == "--stats":
            opt[k] = True
        else:
            opt[k] = int(args.pop(0))
    fails = []
    d = load(path)
    ev = d.get("traceEvents")
    if not isinstance(ev, list):
        print("no traceEvents list"); return 1
    base = d.get("baseTimeNanoseconds")
    if not isinstance(base, int) or base <= 0:
        fails.append("baseTimeNanoseconds missing or not a positive integer: %r" % (base,))
    if "--expect-base" in opt and base != opt["--expect-base"]:
        fails.append("baseTimeNanoseconds %r != expected %d" % (base, opt["--expect-base"]))
    if not isinstance(d.get("deviceProperties"), list):
        fails.append("deviceProperties missing")

    pname, tname, gpu_pids = set(), set(), set()
    for e in ev:
        if e.get("ph") == "M":
            if e["name"] == "process_name" and e["args"].get("name"):
                pname.add(e["pid"])
            if e["name"] == "thread_name" and e["args"].get("name"):
                tname.add((e["pid"], e["tid"]))
            if e["name"] == "process_labels" and str(e["args"].get("labels", "")).startswith("GPU"):
                gpu_pids.add(e["pid"])

    tracks = collections.defaultdict(list)
    flows = collections.defaultdict(lambda: {"s": [], "f": []})
    cats = collections.Counter()
    min_ts = None
    for e in ev:
        ph = e.get("ph")
        if ph == "M":
            continue
        for k in ("pid", "tid", "ts"):
            if k not in e:
                fails.append("event without %s: %r" % (k, e)); break
        if e["pid"] not in pname:
            fails.append("pid %r has no process_name" % e["pid"]); pname.add(e["pid"])
        if (e["pid"], e["tid"]) not in tname:
            fails.append("pid/tid %r/%r has no thread_name" % (e["pid"], e["tid"]))
            tname.add((e["pid"], e["tid"]))
        cat = e.get("cat")
        cats[cat] += 1
        if ph in ("X", "i"):
            if cat not in ALLOWED:
                fails.append("unknown category %r (%s)" % (cat, e.get("name")))
            if (cat in GPU_CATS) != (e["pid"] in gpu_pids):
                fails.append("%s event %r on the wrong kind of process %r" % (cat, e["name"], e["pid"]))
            if ph == "X" and (not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0):
                fails.append("bad dur: %r" % e)
            if ph == "X":
                tracks[(e["pid"], e["tid"])].append((e["ts"], e["dur"], e["name"]))
            if cat == "kernel":
                for k in ("correlation", "grid", "block", "registers per thread", "shared memory", "stream", "device"):
                    if k not in e.get("args", {}):
                        fails.append("kernel %r lacks args %r" % (e["name"], k)); break
            if cat == "syscall" and "ret" not in e.get("args", {}):
                fails.append("syscall %r lacks ret" % e["name"])
            if cat in ("cpu_sample", "python_sample"):
                if ph != "i" or not e.get("args", {}).get("stack"):
                    fails.append("sample without a stack: %r" % e)
            if cat == "python_function" and "file" not in e.get("args", {}):
                fails.append("python function %r lacks file" % e["name"])
            min_ts = e["ts"] if min_ts is None else min(min_ts, e["ts"])
        elif ph in ("s", "f"):
            if cat != "ac2g":
                fails.append("flow with category %r" % cat)
            if ph == "f" and e.get("bp") != "e":
                fails.append("flow end without bp=e")
            flows[e["id"]][ph].append(e)
        elif ph == "C":  # GPU memory's counters: bytes held, never below 0
            a = e.get("args") or {}
            if cat != "gpu_memory" or not e.get("name") or not a or \
                    not all(isinstance(v, int) and v >= 0 for v in a.values()):
                fails.append("bad counter: %r" % e)
        else:
            fails.append("unexpected phase %r" % ph)
    if min_ts is not None and not (0 <= min_ts < 1e7):
        fails.append("ts not relative to baseTimeNanoseconds (min ts %r µs)" % min_ts)

    # Nesting per thread / stream.
    nest_bad = 0
    for key, xs in tracks.items():
        xs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for ts, dur, name in xs:
            while stack and stack[-1] <= ts + EPS:
                stack.pop()
            if stack and ts + dur > stack[-1] + EPS:
                nest_bad += 1
                if nest_bad < 5:
                    fails.append("overlap on %r: %r [%r, +%r] crosses parent end %r" % (key, name, ts, dur, stack[-1]))
            stack.append(ts + dur)

    # Flows: both ends present, each bound to a slice on its track. Slices
    # per track sorted by start, with the running maximum of their ends, so
    # each look-up is a bisection and a walk back over slices that can still
    # reach the point (linear scans made this quadratic in flows).
    index = {}
    for key, xs in tracks.items():  # sorted by (ts, -dur) above
        starts = [x[0] for x in xs]
        maxend, m = [], float("-inf")
        for ts, dur, _ in xs:
            m = max(m, ts + dur)
            maxend.append(m)
        index[key] = (starts, xs, maxend)

    def encloses(e, exact):
        starts, xs, maxend = index.get((e["pid"], e["tid"]), ((), (), ()))
        t = e["ts"]
        if exact:
            i = bisect.bisect_left(starts, t - EPS)
            return i < len(starts) and starts[i] <= t + EPS
        j = bisect.bisect_right(starts, t + EPS) - 1
        while j >= 0 and maxend[j] >= t - EPS:
            if xs[j][0] + xs[j][1] + EPS >= t:
                return True
            j -= 1
        return False
    for fid, fl in flows.items():
        if len(fl["s"]) != 1 or not fl["f"]:
            fails.append("flow %r not bound at both ends (%d s, %d f)" % (fid, len(fl["s"]), len(fl["f"])))
            continue
        if not encloses(fl["s"][0], False):
            fails.append("flow %r start not on a slice" % fid)
        for f in fl["f"]:
            if not encloses(f, True):
                fails.append("flow %r end not on a slice starting there" % fid)
    if "--expect-flows" in opt and len(flows) != opt["--expect-flows"]:
        fails.append("%d flows, expected %d" % (len(flows), opt["--expect-flows"]))
    n = sum(cats.values())
    if "--min-events" in opt and n < opt["--min-events"]:
        fails.append("%d events, expected at least %d" % (n, opt["--min-events"]))
    if "--hosts" in opt:
        hosts = {e["args"]["name"].split(" @")[-1] for e in ev
                 if e.get("ph") == "M" and e["name"] == "process_name" and " @" in e["args"]["name"]}
        if opt["--hosts"] > 1 and len(hosts) != opt["--hosts"]:
            fails.append("hosts named in process names: %r" % sorted(hosts))
    for f in fails[:30]:
        print(f)
    if "--stats" in opt:
        print(json.dumps({"events": n, "flows": len(flows), "cats": cats,
                          "pids": sorted(pname, key=str), "base": base, "min_ts": min_ts}))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
