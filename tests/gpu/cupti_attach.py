#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GPU validation of --enable-cuda-kernel by attach (run by cupti_attach.sh).

  cupti_attach.py train DIR      the workload: a launch-bound training loop
      (nn.TransformerEncoder, 4 layers, d_model 256, batch 16x128, AdamW).
      Writes DIR/ready after warm-up, records CLOCK_MONOTONIC start/end of
      every step until DIR/stop appears, then profiles STEPS_CMP steps with
      torch.profiler (CUDA activity only) in the same process and writes
      DIR/train.json.
  cupti_attach.py analyze DIR    reads DIR/train.json, DIR/*.tsv (the logs
      as inject_logdump prints them) and DIR/marks.txt; prints PASS/FAIL
      lines and the figures.
"""
import collections
import ctypes
import glob
import json
import os
import sys
import time

STEPS_CMP = 20


def train(d):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    dev = "cuda"
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=4).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 128, 256, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    t_end = time.monotonic() + 5
    while time.monotonic() < t_end:  # warm-up: allocator, cuBLAS handles, autotuning
        step()
    torch.cuda.synchronize()
    open(os.path.join(d, "ready"), "w").close()
    starts, ends = [], []
    stop = os.path.join(d, "stop")
    n = 0
    while True:
        s = time.monotonic_ns()
        step()
        if n % 8 == 7:
            torch.cuda.synchronize()  # keep the CPU within a few steps of the GPU
        ends.append(time.monotonic_ns())
        starts.append(s)
        n += 1
        if n % 50 == 0 and os.path.exists(stop):
            break
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS_CMP):
            step()
        torch.cuda.synchronize()
    names = collections.Counter()
    for ev in prof.events():
        dt = str(getattr(ev, "device_type", ""))
        if "CUDA" in dt and not ev.name.startswith(("Memcpy", "Memset", "cuda", "Activity Buffer")):
            names[ev.name] += 1
    with open(os.path.join(d, "train.json"), "w") as f:
        json.dump({"starts": starts, "ends": ends, "torch_kernels": names, "steps_cmp": STEPS_CMP}, f)


_cxa = None


def demangle(name):
    global _cxa
    if not name.startswith("_Z"):
        return name
    if _cxa is None:
        lib = ctypes.CDLL("libstdc++.so.6")
        _cxa = lib.__cxa_demangle
        _cxa.restype = ctypes.c_void_p
        _cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    st = ctypes.c_int(0)
    p = _cxa(name.encode(), None, None, ctypes.byref(st))
    if st.value != 0 or not p:
        return name
    s = ctypes.string_at(p).decode(errors="replace")
    ctypes.CDLL(None).free(ctypes.c_void_p(p))
    return s


def load_tsv(path):
    ev = collections.defaultdict(list)
    for line in open(path, errors="replace"):
        f = line.rstrip("\n").split("\t")
        ev[f[0]].append(f[1:])
    return ev


def rate(starts, lo, hi):
    n = sum(1 for s in starts if lo <= s < hi)
    return n / ((hi - lo) / 1e9) if hi > lo else 0.0


class Verdict:
    def __init__(self):
        self.failed = 0

    def __call__(self, ok, what):
        print(("PASS " if ok else "FAIL ") + what)
        if not ok:
            self.failed += 1


def analyze_window(v, tag, ev, tr, marks):
    starts, ends = tr["starts"], tr["ends"]
    api = ev["A"]
    kern = ev["K"]
    v(len(kern) > 0, f"[{tag}] CUPTI log has kernels ({len(kern)} kernels, {len(api)} API records, "
      f"{len(ev['M'])} memcpy, {len(ev['S'])} memset)")
    lost = sum(int(x[1]) for x in ev["L"] if x[0] == "5")
    v(lost == 0, f"[{tag}] zero dropped CUPTI records ({lost})")
    for d in ev["D"]:
        print(f"INFO [{tag}] device {d[0]}: {d[7]} SMs={d[1]} clock={d[2]}kHz mem={int(d[3]) >> 20}MiB "
              f"bw={int(d[4]) / 1e9:.0f}GB/s cc={d[5]}.{d[6]}")
    v(len(ev["D"]) > 0, f"[{tag}] device properties recorded")
    if not kern:
        return None
    if not api:
        print(f"INFO [{tag}] no API records (kernels-only recording): launch checks skipped")
        return min(int(k[0]) for k in kern), max(int(k[0]) for k in kern)
    lo = min(int(a[0]) for a in api)
    hi = max(int(a[0]) for a in api)
    # Launch -> kernel: same correlation id, launch first, plausible lag.
    launch = {a[4]: int(a[0]) for a in api}
    lags, bad = [], 0
    for k in kern:
        t = launch.get(k[2])
        if t is None:
            continue
        lag = int(k[0]) - t
        lags.append(lag)
        if lag < 0 or lag > 2_000_000_000:
            bad += 1
    lags.sort()
    matched = len(lags)
    v(matched >= 0.95 * len(kern), f"[{tag}] kernels with their runtime launch record: {matched}/{len(kern)}")
    if lags:
        print(f"INFO [{tag}] launch->kernel start lag: p50 {lags[len(lags) // 2] / 1e3:.1f} us, "
              f"p99 {lags[int(len(lags) * 0.99)] / 1e3:.1f} us, max {lags[-1] / 1e3:.1f} us")
    v(matched > 0 and bad == 0, f"[{tag}] every launch precedes its kernel within 2 s ({bad} out of order)")
    # Clock: CUPTI API timestamps (CUPTI's clock callback) vs the loop's own
    # CLOCK_MONOTONIC step bounds: launches fall inside steps.
    main_tid = collections.Counter(a[3] for a in api if a[7] == "cudaLaunchKernel").most_common(1)
    inside = total = 0
    if main_tid:
        tid = main_tid[0][0]
        import bisect
        for a in api:
            if a[3] != tid or a[7] != "cudaLaunchKernel":
                continue
            t = int(a[0])
            i = bisect.bisect_right(starts, t) - 1
            if i < 0 or i >= len(ends):
                continue
            total += 1
            if starts[i] <= t <= ends[i]:
                inside += 1
    v(total > 0 and inside >= 0.99 * total,
      f"[{tag}] CUPTI launch timestamps fall inside the loop's CLOCK_MONOTONIC steps: {inside}/{total}")
    # Uprobe (eBPF, bpf_ktime_get_ns) vs CUPTI for the same launches.
    up = [u for u in ev["U"] if u[5] == "cudaLaunchKernel"]
    if up:
        import bisect
        cap = sorted(int(a[0]) for a in api if a[7] == "cudaLaunchKernel")
        d = []
        for u in up:
            t = int(u[0])
            i = bisect.bisect_left(cap, t)
            if i < len(cap):
                d.append(cap[i] - t)
        d.sort()
        if d:
            p50 = d[len(d) // 2]
            print(f"INFO [{tag}] uprobe entry -> CUPTI API start of the same launch: p50 {p50 / 1e3:.2f} us, "
                  f"p90 {d[int(len(d) * 0.9)] / 1e3:.2f} us ({len(d)} launches)")
            v(0 <= p50 < 50_000, f"[{tag}] uprobe and CUPTI timestamps of the same launches align (p50 "
              f"{p50 / 1e3:.2f} us)")
    return lo, hi


def kernel_match(v, ev, tr):
    starts, ends = tr["starts"], tr["ends"]
    api = ev["A"]
    kern_by_corr = {k[2]: k[5] for k in ev["K"]}
    launches = sorted((int(a[0]), a[4]) for a in api)
    if not launches:
        v(False, "kernel names and counts match torch.profiler (no launches)")
        return
    lo, hi = launches[0][0], launches[-1][0]
    idx = [i for i in range(len(starts)) if starts[i] > lo and ends[i] < hi]
    n = tr["steps_cmp"]
    if len(idx) < n + 2:
        v(False, f"kernel names and counts match torch.profiler (only {len(idx)} steps in the window)")
        return
    mid = idx[len(idx) // 2 - n // 2:len(idx) // 2 - n // 2 + n]
    t0, t1 = starts[mid[0]], ends[mid[-1]]
    ours = collections.Counter(demangle(kern_by_corr[c]) for t, c in launches if t0 <= t <= t1 and c in kern_by_corr)
    theirs = collections.Counter(tr["torch_kernels"])
    same = ours == theirs
    print(f"INFO kernels in {n} steps: ours {sum(ours.values())} ({len(ours)} names), "
          f"torch.profiler {sum(theirs.values())} ({len(theirs)} names)")
    if not same:
        for k in sorted(set(ours) | set(theirs)):
            if ours[k] != theirs[k]:
                print(f"  diff {ours[k]:5d} ours vs {theirs[k]:5d} torch: {k[:150]}")
    v(same, f"kernel names and counts match torch.profiler over {n} steps")


def analyze(d):
    v = Verdict()
    tr = json.load(open(os.path.join(d, "train.json")))
    marks = {}
    for line in open(os.path.join(d, "marks.txt")):
        k, val = line.split()
        marks[k] = int(val)
    starts = tr["starts"]
    print(f"INFO steps recorded: {len(starts)}")
    windows = {}
    for tag in ("A", "C", "D", "B"):
        p = os.path.join(d, f"{tag}.tsv")
        if not os.path.exists(p):
            continue
        ev = load_tsv(p)
        for e in ev["E"]:
            print(f"WARN [{tag}] {e}")
        w = analyze_window(v, tag, ev, tr, marks)
        if w:
            windows[tag] = w
        if tag == "A":
            kernel_match(v, ev, tr)
    if "A" not in windows:
        v(False, "profiling window A found")
        return 1
    before = rate(starts, marks["A_begin"] - 5_000_000_000, marks["A_begin"])
    what = {"A": "llmtracker -t cpu --enable-cuda-kernel", "C": "CUPTI alone, default",
            "D": "CUPTI alone, kernels/copies only (no API records)", "B": "llmtracker -t cuda (uprobes) --enable-cuda-kernel"}
    figs = {}
    for tag, (lo, hi) in windows.items():
        during = rate(starts, lo + 200_000_000, hi - 200_000_000)
        end = marks.get(f"{tag}_end", hi)
        after = rate(starts, end + 500_000_000, end + 4_500_000_000) \
            if end + 4_500_000_000 < starts[-1] else float("nan")
        figs[tag] = (during, after)
        print(f"FIGURES [{tag}] steps/s before {before:.1f} | during {during:.1f} "
              f"({(during / before - 1) * 100:+.1f}%) | after {after:.1f} ({(after / before - 1) * 100:+.1f}%)"
              f"   {what[tag]}")
    during, after = figs["A"]
    v(during >= 0.95 * before, f"at most 5% fewer steps/s while profiling ({during:.1f} vs {before:.1f})")
    v(after >= 0.99 * before, f"after detach within 1% of before ({after:.1f} vs {before:.1f})")
    print(f"RESULT {'PASS' if v.failed == 0 else 'FAIL'} ({v.failed} failed)")
    return 1 if v.failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("train", "analyze"):
        print(__doc__)
        sys.exit(2)
    if sys.argv[1] == "train":
        train(sys.argv[2])
    else:
        sys.exit(analyze(sys.argv[2]))
