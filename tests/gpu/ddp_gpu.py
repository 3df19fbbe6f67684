#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The checks of tests/gpu/ddp_gpu.sh that read traces; each prints
"PASS ..." / "FAIL ..." / "INFO ..." lines.

  ddp_gpu.py kernels OURS.json TORCH_DIR TRUTH0 TRUTH1 ...
      GPU kernels per iteration and rank: ours (OURS.json, the trace JSON of
      the profiled run) against torch.profiler's (TORCH_DIR/rankR.json, the
      same loop run again under it). A kernel belongs to the iteration whose
      step holds its launch call, on both sides: ours through the launch
      link (the flow from the launch to the kernel) and the rank's detected
      step that overlaps the iteration's true span most; torch.profiler's
      through the correlation id of its launch record and the iteration's
      ProfilerStep, taken in order (torch 1.13 numbers them off by one).
      Iteration 0 is shown, not compared (below).
  ddp_gpu.py xla XPLANE.pb OURS.json TRUTH0 TRUTH1 ...
      XLA's own reader (jax.profiler.ProfileData) reads the XPlane: one line
      of step roots per rank, each within 1 of the rank's true steps, as many
      kernels on the GPU planes as OURS.json has, as many of them linked to
      a launch on the host plane as there have a launch link.
TRUTHr is rank r's file from tests/workloads/ddp_loop.py ("train START END"
in CLOCK_REALTIME ns, "late STEP MS").
"""
import json
import re
import sys

def say(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    return ok


def info(what):
    print("INFO " + what)


def true_steps(path):
    return [(int(f[1]), int(f[2])) for f in (l.split() for l in open(path)) if f and f[0] == "train"]


def events(path):
    d = json.load(open(path))
    return (d, d["traceEvents"]) if isinstance(d, dict) else ({}, d)


def inside(spans, t):
    """The index of the span [a, b) holding t, else None (spans sorted)."""
    lo, hi = 0, len(spans)
    while lo < hi:
        mid = (lo + hi) // 2
        if spans[mid][0] <= t:
            lo = mid + 1
        else:
            hi = mid
    i = lo - 1
    return i if i >= 0 and t < spans[i][1] else None


def ours_counts(path, truths):
    """{rank: {iteration: kernels}} of our trace, and the kernels without a
    launch link or a rank."""
    d, evs = events(path)
    base = d["baseTimeNanoseconds"]
    rank_of = {}
    for e in evs:
        m = e.get("ph") == "M" and e.get("name") == "process_name" and \
            re.match(r"rank (\d+) \(pid \d+\)", e["args"]["name"])
        if m:
            rank_of[e["pid"]] = int(m.group(1))
    steps = {}  # rank -> sorted [(start_ns, end_ns, ProfilerStep number)]
    kernels, s_of = [], {}  # kernels: the id of the flow each ends, else None
    for e, nxt in zip(evs, evs[1:] + [{}]):
        ph, cat = e.get("ph"), e.get("cat")
        if cat == "step" and e["pid"] in rank_of:
            a = base + round(e["ts"] * 1000)
            steps.setdefault(rank_of[e["pid"]], []).append((a, a + round(e["dur"] * 1000),
                                                             int(e["name"].split("#")[1])))
        elif cat == "kernel" and ph == "X":
            # its flow's end follows it at its track and start (the ranks'
            # kernels share the GPU's tracks: the start alone is not a key)
            ends = nxt.get("ph") == "f" and all(nxt.get(k) == e[k] for k in ("pid", "tid", "ts"))
            kernels.append(nxt["id"] if ends else None)
        elif ph == "s":  # at the launch call
            s_of[e["id"]] = (e["pid"], base + round(e["ts"] * 1000))
    for v in steps.values():
        v.sort()
    per_step, loose = {}, 0  # (rank, ProfilerStep number) -> kernels
    for k in kernels:
        pid, at = s_of.get(k, (None, 0))
        r = rank_of.get(pid)
        i = inside(steps.get(r, []), at) if r is not None else None
        if r is None:
            loose += 1
        elif i is not None:
            n = steps[r][i][2]
            per_step[(r, n)] = per_step.get((r, n), 0) + 1
    out = {}
    for r, path_t in enumerate(truths):
        got, out[r] = steps.get(r, []), {}
        for i, (s, e) in enumerate(true_steps(path_t)):
            best = max(((min(e, b) - max(s, a), n) for a, b, n in got), default=(0, None))
            if best[0] > 0:
                out[r][i] = per_step.get((r, best[1]), 0)
    return out, len(kernels), loose


def torch_counts(path):
    """{iteration: kernels} of one rank's torch.profiler trace, its kernels,
    and those without a launch record."""
    _, evs = events(path)
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in evs
                   if e.get("ph") == "X" and re.match(r"ProfilerStep#\d+$", e.get("name", "")) and
                   e.get("cat") != "gpu_user_annotation")
    launch = {}
    for e in evs:
        corr = e.get("ph") == "X" and (e.get("args") or {}).get("correlation")
        if corr and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            launch.setdefault(corr, e["ts"])
    kernels = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel"]
    out, loose = {}, 0
    for k in kernels:
        at = launch.get(k.get("args", {}).get("correlation"))
        i = inside(steps, at) if at is not None else None
        if at is None:
            loose += 1
        elif i is not None:
            out[i] = out.get(i, 0) + 1
    return {i: out.get(i, 0) for i in range(len(steps))}, len(kernels), loose


def kernels(ours_path, torch_dir, truths, need):
    """need: kernels must be there (the CUDA run)."""
    ours, n_ours, loose = ours_counts(ours_path, truths)
    info(f"[kernels] ours: {n_ours} kernels, {loose} without a launch link to a rank")
    ok = True
    for r, tp in enumerate(truths):
        n_true = len(true_steps(tp))
        theirs, n_theirs, t_loose = torch_counts(f"{torch_dir}/rank{r}.json")
        info(f"[kernels] rank {r} torch.profiler: {n_theirs} kernels, {t_loose} without a launch "
             f"record, {len(theirs)} ProfilerSteps for {n_true} iterations")
        # Iteration 0 is shown, not compared: it carries the job's one-time
        # CUDA set-up (cuBLAS, the caching allocator), and our first step
        # starts where the detector first saw the loop (no boundary before).
        info(f"[kernels] rank {r} iteration 0 (not compared): ours {ours[r].get(0)}, "
             f"torch.profiler {theirs.get(0)}")
        cmp = [i for i in range(1, n_true) if i in ours[r] and i in theirs]
        diff = [i for i in cmp if ours[r][i] != theirs[i]]
        tot_o, tot_t = sum(ours[r][i] for i in cmp), sum(theirs[i] for i in cmp)
        per = sorted({theirs[i] for i in cmp})
        what = (f"[kernels] rank {r}: {len(cmp)} of iterations 1-{n_true - 1} compared, "
                f"{len(cmp) - len(diff)} equal (ours {tot_o}, torch.profiler {tot_t}; per iteration "
                f"{per[:4]}{'...' if len(per) > 4 else ''})")
        if diff:
            what += "; differ at " + ", ".join(f"{i}: {ours[r][i]} vs {theirs[i]}" for i in diff[:6])
        ok &= say(len(cmp) >= n_true - 3 and not diff and (tot_t > 0 or not need), what)
    return ok


def xla(xplane, ours_path, truths, need):
    from jax.profiler import ProfileData

    def num(v):  # stats come as numbers or as their text
        try:
            return int(float(v))
        except (TypeError, ValueError):
            return None

    _, evs = events(ours_path)
    is_k = [e.get("ph") == "X" and e.get("cat") == "kernel" for e in evs]
    want_kernels = sum(is_k)
    want_linked = sum(k and n.get("ph") == "f" for k, n in zip(is_k, evs[1:] + [{}]))
    pd = ProfileData.from_file(xplane)
    planes = list(pd.planes)
    roots, launches, kern = {}, set(), []
    for plane in planes:
        for li, line in enumerate(plane.lines):
            for ev in line.events:
                st = dict(ev.stats)
                if plane.name == "/host:CPU":
                    if num(st.get("_r")) == 1 and num(st.get("step_num")) is not None:
                        roots[li] = roots.get(li, 0) + 1
                    if num(st.get("correlation_id")):
                        launches.add(num(st["correlation_id"]))
                elif plane.name.startswith("/device:GPU:") and "kernel_details" in st:
                    kern.append(num(st.get("correlation_id")))
    linked = sum(c in launches for c in kern)
    got = sorted(roots.values())
    want = sorted(len(true_steps(t)) for t in truths)
    steps_ok = len(got) == len(want) and all(abs(a - b) <= 1 for a, b in zip(got, want))
    return say(steps_ok and len(kern) == want_kernels and linked == want_linked and
               (kern or not need),
               f"[xla] XLA's reader: {len(planes)} planes ({', '.join(p.name for p in planes)}); "
               f"step roots per line {got} for true steps {want}; {len(kern)} kernels on the GPU "
               f"planes, {linked} linked to a launch on /host:CPU (trace JSON: {want_kernels}, "
               f"{want_linked} with a launch link)")


def main():
    a = sys.argv[1:]
    need = "--cuda" in a
    a = [x for x in a if x != "--cuda"]
    if len(a) >= 4 and a[0] == "kernels":
        return kernels(a[1], a[2], a[3:], need)
    if len(a) >= 4 and a[0] == "xla":
        return xla(a[1], a[2], a[3:], need)
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
