#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The trace checks of tests/integration/launch_pair.sh, on one run's trace
JSON and the app's own output (tests/progs/launch_app.c: its "truth TID
CORR...", "recorded TID N..." lines). Prints one line of figures; exits 0
when the check holds.

usage: launch_pair_check.py CHECK TRACE.json APP.out N
  flows   every GPU item's flow starts at a launch call whose name fits its
          kind; N GPU items, none without one
  truth   every GPU item's flow starts at the very call the app made its
          work with (flow ids end in the stand-in's correlation id); N flows
  order   without correlation ids: a stream runs its work in the order it
          was queued, so the n-th GPU item of a stream is the work of a
          known call of its thread, which its flow must start at; N items
  layer   launches and memsets probed at the driver only: cuLaunchKernel,
          cuLaunchKernelEx and cuMemsetD8Async seen, no cudaLaunchKernel
          nor cudaMemsetAsync (N unused)
  named   each driver launch names its kernel, as a runtime launch does
          (N unused)
"""
import collections
import json
import sys

# The app's calls, by the names the trace gives them.
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch")
SETS = ("cudaMemsetAsync", "cuMemsetD8Async")
CALLS = LAUNCHES + ("cudaMemcpyAsync",) + SETS
# launch_app: the racing threads' streams are CUPTI's 21 and 22, the main
# thread's the legacy 7, in the order of its "truth" lines.
STREAMS = (21, 22, 7)


def at(e):
    return (e["pid"], e["tid"], e["ts"])


def app_lines(path, word):
    """{tid: [ints]} of the app's lines "WORD TID N...", in their order."""
    out = {}
    for line in open(path):
        f = line.split()
        if f and f[0] == word:
            out[int(f[1])] = [int(x) for x in f[2:]]
    return out


def app_calls(ev, tids):
    """The app's calls in the trace, per thread of tids."""
    calls = collections.defaultdict(list)
    for e in ev:
        if e.get("ph") == "X" and e["name"].startswith(CALLS) and e["tid"] in tids:
            calls[e["tid"]].append(e)
    return calls


def flows(ev, app, n):
    # a graph's memset nodes come from its launch
    want = {"kernel": LAUNCHES, "gpu_memcpy": ("cudaMemcpyAsync",), "gpu_memset": SETS + ("cudaGraphLaunch",)}
    starts = {e["id"]: at(e) for e in ev if e.get("ph") == "s"}
    ends = {at(e): e["id"] for e in ev if e.get("ph") == "f"}
    names = {at(e): e["name"] for e in ev if e.get("ph") == "X"}
    gpu = bad = 0
    for e in ev:
        if e.get("ph") != "X" or e.get("cat") not in want:
            continue
        gpu += 1
        fid = ends.get(at(e))
        call = names.get(starts.get(fid)) if fid is not None else None
        if not call or not call.startswith(want[e["cat"]]):
            bad += 1
    print(f"gpu items {gpu}, without a flow from a launch call of their kind {bad}")
    return gpu == n and bad == 0


def truth(ev, app, n):
    truth = app_lines(app, "truth")
    calls = app_calls(ev, truth)
    # With CUPTI's API records, the stand-in's record of a call (its bounds
    # as the app took them, around the uprobe's) is folded into the
    # uprobe's or shown beside it, overlapping: overlapping records are one call.
    which, n_calls = {}, {}
    for tid, es in calls.items():
        es.sort(key=lambda e: e["ts"])
        i, end = -1, -1
        for e in es:
            if e["ts"] >= end:
                i += 1
            end = max(end, e["ts"] + e.get("dur", 0))
            which[at(e)] = (tid, i)
        n_calls[tid] = i + 1
    starts = {e["id"]: at(e) for e in ev if e.get("ph") == "s"}
    ends = [e for e in ev if e.get("ph") == "f"]
    same = sum(1 for tid in truth if n_calls.get(tid) == len(truth[tid]))
    right, wrong = 0, []
    for f in ends:
        w = which.get(starts.get(f["id"]))
        if w and truth[w[0]][w[1]] == f["id"] & ((1 << 40) - 1):
            right += 1
        else:
            wrong.append((f["id"], starts.get(f["id"]), w))
    print(f"threads with every call in the trace {same} of {len(truth)}; flows ending on GPU items "
          f"{len(ends)}, starting at the call that made the work {right}")
    for fid, start, w in wrong[:5]:
        told = truth[w[0]][w[1]] if w and w[1] < len(truth[w[0]]) else None
        near = sorted((e for e in calls.get(start[1], []) if start and abs(e["ts"] - start[2]) < 50),
                      key=lambda e: e["ts"]) if start else []
        print(f"  flow {fid & ((1 << 40) - 1)}: starts at {start}, call {w} (the app's id there {told});"
              f" calls near: {[(e['name'], e['ts'], e.get('dur')) for e in near]}")
    return same == len(truth) and right == len(ends) == n


def order(ev, app, n):
    tids = list(app_lines(app, "truth"))
    recs = app_lines(app, "recorded")  # records of each call's work, per thread in call order
    calls = app_calls(ev, tids)
    expect = {}
    for s, tid in zip(STREAMS, tids):
        seq, mine = [], sorted(calls[tid], key=lambda e: e["ts"])
        if len(mine) != len(recs[tid]):
            print(f"thread {tid}: {len(mine)} calls in the trace, {len(recs[tid])} made")
            return False
        for e, k in zip(mine, recs[tid]):
            seq += [at(e)] * k
        expect[s] = seq
    gpu = collections.defaultdict(list)
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu[e["tid"]].append(e)
    starts = {e["id"]: at(e) for e in ev if e.get("ph") == "s"}
    ends = {at(e): e["id"] for e in ev if e.get("ph") == "f"}
    right = total = 0
    for s, items in gpu.items():
        for i, e in enumerate(sorted(items, key=lambda e: e["ts"])):
            total += 1
            fid = ends.get(at(e))
            right += fid is not None and i < len(expect.get(s, [])) and starts.get(fid) == expect[s][i]
    print(f"GPU items {total}, whose flow starts at the call that queued it {right}")
    return right == total == n


def layer(ev, app, n):
    count = collections.Counter(e["name"] for e in ev if e.get("ph") == "X")
    names = ("cuLaunchKernel", "cuLaunchKernelEx", "cuMemsetD8Async", "cudaLaunchKernel", "cudaMemsetAsync")
    print(", ".join(f"{k} {count[k]}" for k in names))
    return all(count[k] > 0 for k in names[:3]) and not any(count[k] for k in names[3:])


def named(ev, app, n):
    want = {"cuLaunchKernel": "kernel=kernel_a(float*, int) grid=",
            "cuLaunchKernelEx": "kernel=kernel_b(float*) grid="}
    ls = [e for e in ev if e.get("ph") == "X" and e["name"] in want]
    good = sum(e["args"].get("args", "").startswith(want[e["name"]]) for e in ls)
    print(f"driver launches naming their kernel {good} of {len(ls)}")
    return len(ls) > 0 and good == len(ls)


def main():
    checks = {"flows": flows, "truth": truth, "order": order, "layer": layer, "named": named}
    if len(sys.argv) != 5 or sys.argv[1] not in checks:
        print(__doc__)
        return 2
    tr = json.load(open(sys.argv[2]))
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    return 0 if checks[sys.argv[1]](ev, sys.argv[3], int(sys.argv[4])) else 1


if __name__ == "__main__":
    sys.exit(main())
