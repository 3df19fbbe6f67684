#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GPU validation of --enable-cuda-kernel by attach (run by cupti_attach.sh).

  cupti_attach.py train DIR      the workload: a launch-bound training loop
      (nn.TransformerEncoder, 4 layers, d_model 256, batch 16x128, AdamW);
      LOOP=gpt: graph_train.py's bf16 GPT loop replaying one CUDA graph a
      step, LOOP=gpt-eager: the same step run eagerly.
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
import functools
import glob
import json
import os
import sys
import time

STEPS_CMP = 20


def train(d):
    import torch
    import torch.nn as nn

    loop = os.environ.get("LOOP", "encoder")
    if loop in ("gpt", "gpt-eager"):  # graph_train.py's loop: one graph replayed a step, or eager
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import graph_train

        gpt = graph_train.Loop(torch, loop == "gpt-eager")
        it = [0]

        def step():
            it[0] += 1
            return gpt.one(it[0])
    else:
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
    starts, ends, cpus = [], [], []
    stop = os.path.join(d, "stop")
    n = 0
    while True:
        s = time.monotonic_ns()
        c = time.thread_time_ns()
        step()
        if n % 8 == 7:
            torch.cuda.synchronize()  # keep the CPU within a few steps of the GPU
        cpus.append(time.thread_time_ns() - c)  # the launching thread's own time
        ends.append(time.monotonic_ns())
        starts.append(s)
        n += 1
        if n % 50 == 0 and os.path.exists(stop):
            break
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    def steps_per_s(sec):
        t0 = time.monotonic()
        k = 0
        while time.monotonic() < t0 + sec:
            step()
            k += 1
            if k % 8 == 7:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return k / (time.monotonic() - t0)

    # The yardstick: torch.profiler (CUDA activities only) on the same loop,
    # after our windows (it leaves the process slower after it stops:
    # docs/MEASUREMENTS.md, CUDA/CUPTI costs on the GPU).
    # YARD_ROUNDS rounds (default 1) of before / during / after, averaged.
    rounds = int(os.environ.get("YARD_ROUNDS", "1"))
    yard = {"before": 0.0, "during": 0.0, "after": 0.0, "rounds": rounds}
    for _ in range(rounds):
        yard["before"] += steps_per_s(4) / rounds
        with profile(activities=[ProfilerActivity.CUDA]):
            yard["during"] += steps_per_s(4) / rounds
        yard["after"] += steps_per_s(4) / rounds
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
        json.dump({"starts": starts, "ends": ends, "cpus": cpus, "torch_kernels": names, "steps_cmp": STEPS_CMP,
                   "yardstick": yard}, f)


_cxa = None


@functools.lru_cache(maxsize=None)  # a loop's few names, millions of kernels
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


def cpu_per_step(starts, cpus, lo, hi):
    """The launching thread's CPU time per step (us) of the steps in [lo, hi)."""
    c = [x for s, x in zip(starts, cpus) if lo <= s < hi]
    return sum(c) / len(c) / 1e3 if c else float("nan")


class Verdict:
    def __init__(self):
        self.failed = 0

    def __call__(self, ok, what):
        print(("PASS " if ok else "FAIL ") + what)
        if not ok:
            self.failed += 1


MODES = {
    "K": "kernels only (runtime=0)",
    "Z": "nothing attached (noise floor of the method)",
    "D": "kernels + every runtime call by activity (runtime=1 driver=0: --cuda-api-records true)",
    "F": "kernels + runtime + every driver call (runtime=1 driver=1)",
    "A": "llmtracker profile -t cpu --enable-cuda-kernel (kernels + their launch calls probed: the default)",
    "U": "llmtracker profile -t cpu,cuda --enable-cuda-kernel (uprobes on the CUDA libraries too)",
    "N": "llmtracker profile -t cpu (static, no CUDA kernels)",
    "V": "llmtracker profile -t cpu,cuda --enable-cuda-kernel, CUPTI kernels only (LLMT_CUPTI_START=runtime=0)",
    "Y": "llmtracker profile -t python (the injected hook), no CUDA kernels",
    "H": "llmtracker profile -t python --enable-cuda-kernel (the hook and kernels, one library)",
    "E": "llmtracker profile -t all --enable-cuda-kernel (everything on)",
    "S": "llmtracker profile -t cpu,syscall --enable-cuda-kernel (system calls with kernels and links)",
}
NOISY = ("cudaGetDevice", "cudaGetLastError", "cudaStreamIsCapturing", "cuDevicePrimaryCtxGetState",
         "cuKernelGetName", "cuCtxGetCurrent", "cuKernelGetFunction")


def analyze_window(v, tag, ev, tr):
    """Checks on one CUPTI log; returns its kernel time range."""
    starts, ends = tr["starts"], tr["ends"]
    api, kern = ev["A"], ev["K"]
    v(len(kern) > 0, f"[{tag}] CUPTI log has kernels ({len(kern)} kernels, {len(api)} API records, "
      f"{len(ev['M'])} memcpy, {len(ev['S'])} memset)")
    lost = sum(int(x[1]) for x in ev["L"] if x[0] == "5")
    v(lost == 0, f"[{tag}] zero dropped CUPTI records ({lost})")
    v(len(ev["D"]) > 0, f"[{tag}] device properties recorded")
    if not kern:
        return None
    names = collections.Counter(a[7] for a in api)
    print(f"INFO [{tag}] API records by name: " + ", ".join(f"{n} {c}" for n, c in names.most_common(8)))
    krange = (min(int(k[0]) for k in kern), max(int(k[0]) for k in kern))
    if not api:
        return krange
    noisy = sum(c for n, c in names.items() if n in NOISY)
    if tag[0] in "DAU":
        v(noisy == 0, f"[{tag}] none of the frequent bookkeeping calls recorded ({noisy})")
    if tag[0] == "F":
        v(names.get("cuLaunchKernel", 0) > 0, f"[{tag}] driver launches (cuBLAS) recorded: "
          f"{names.get('cuLaunchKernel', 0)} cuLaunchKernel")
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
    what = f"[{tag}] kernels with their launch record: {matched}/{len(kern)}"
    # Without driver records (D), kernels cuBLAS launches through
    # cuLaunchKernel have none (a few percent of this loop's: docs/MEASUREMENTS.md,
    # CUDA/CUPTI costs on the GPU); F takes those.
    v(matched >= (0.999 if tag[0] in "F" else 0.85) * len(kern), what)
    unpaired = collections.Counter(k[5][:60] for k in kern if k[2] not in launch)
    if unpaired:
        print(f"INFO [{tag}] kernels without a launch record: " +
              ", ".join(f"{n} {c}" for n, c in unpaired.most_common(3)))
    if lags:
        print(f"INFO [{tag}] launch->kernel start lag: p50 {lags[len(lags) // 2] / 1e3:.1f} us, "
              f"p99 {lags[int(len(lags) * 0.99)] / 1e3:.1f} us, max {lags[-1] / 1e3:.1f} us")
    v(matched > 0 and bad == 0, f"[{tag}] every launch precedes its kernel within 2 s ({bad} out of order)")
    import bisect
    inside = total = 0
    for a in api:
        if a[7] != "cudaLaunchKernel":
            continue
        t = int(a[0])
        i = bisect.bisect_right(starts, t) - 1
        if 0 <= i < len(ends):
            total += 1
            inside += starts[i] <= t <= ends[i]
    v(total > 0 and inside >= 0.99 * total,
      f"[{tag}] CUPTI launch timestamps fall inside the loop's CLOCK_MONOTONIC steps: {inside}/{total}")
    return krange


def uprobe_align(v, tag, ev, coll):
    """CUPTI's launch records (callback enter/exit on CLOCK_MONOTONIC) against
    the uprobe records of the same cudaLaunchKernel calls (entry/return, bpf
    ktime = CLOCK_MONOTONIC): each CUPTI call should sit inside one uprobe
    call on the same thread."""
    import bisect
    ups = collections.defaultdict(list)
    for u in coll["U"]:
        if u[5] == "cudaLaunchKernel":
            ups[u[3]].append((int(u[0]), int(u[0]) + int(u[1])))
    for t in ups.values():
        t.sort()
    cup = [a for a in ev["A"] if a[7] == "cudaLaunchKernel"]
    lo = min((t[0][0] for t in ups.values() if t), default=0)
    hi = max((t[-1][1] for t in ups.values() if t), default=0)
    cup = [a for a in cup if lo <= int(a[0]) <= hi]
    inside, d_enter, d_exit = 0, [], []
    for a in cup:
        t = ups.get(a[3], [])
        s0, e0 = int(a[0]), int(a[0]) + int(a[1])
        i = bisect.bisect_right(t, (s0, 1 << 62)) - 1
        if i >= 0 and t[i][0] <= s0 and e0 <= t[i][1]:
            inside += 1
            d_enter.append(s0 - t[i][0])
            d_exit.append(t[i][1] - e0)
    n_up = sum(len(t) for t in ups.values())
    print(f"INFO [{tag}] cudaLaunchKernel: {n_up} by uprobe, {len(cup)} by CUPTI in the same time span")
    if d_enter:
        d_enter.sort(), d_exit.sort()
        print(f"INFO [{tag}] CUPTI call inside its uprobe call: enter +{d_enter[len(d_enter) // 2] / 1e3:.2f} us "
              f"(p99 {d_enter[int(len(d_enter) * .99)] / 1e3:.2f}), exit -{d_exit[len(d_exit) // 2] / 1e3:.2f} us "
              f"(p99 {d_exit[int(len(d_exit) * .99)] / 1e3:.2f})")
    if not cup:
        print(f"INFO [{tag}] no CUPTI launch records (the default records none): clocks not compared")
        return
    v(inside >= 0.99 * len(cup),
      f"[{tag}] CUPTI and uprobe clocks agree: CUPTI launch calls inside a uprobe call of the same "
      f"thread: {inside}/{len(cup)}")


def compare_kernels(v, tag, ours, theirs, where):
    """Kernel names and counts, ours against torch.profiler's, over `where`."""
    print(f"INFO [{tag}] kernels in {where}: ours {sum(ours.values())} ({len(ours)} names), "
          f"torch.profiler {sum(theirs.values())} ({len(theirs)} names)")
    for k in sorted(set(ours) | set(theirs)):
        if ours[k] != theirs[k]:
            print(f"  diff {ours[k]:5d} ours vs {theirs[k]:5d} torch: {k[:150]}")
    v(ours == theirs, f"[{tag}] kernel names and counts match torch.profiler over {where}")


def kernel_match_by_sync(v, tag, ev, tr):
    """Without CUPTI's API records (the default): the loop synchronizes
    after every 8th step, so the kernels starting between the ends of steps
    j and j+40 (j % 8 == 7) are those of the 40 steps after j: twice
    torch.profiler's 20."""
    ends, n = tr["ends"], tr["steps_cmp"]
    span = 40
    kt = sorted((int(k[0]), demangle(k[5])) for k in ev["K"])
    if not kt or span % n:
        v(False, f"[{tag}] kernel names and counts match torch.profiler (no kernels)")
        return
    inside = [j for j in range(7, len(ends) - span, 8) if kt[0][0] < ends[j] and ends[j + span] < kt[-1][0]]
    if not inside:
        v(False, f"[{tag}] kernel names and counts match torch.profiler (no {span} steps in the window)")
        return
    j = inside[len(inside) // 2]
    ours = collections.Counter(name for t, name in kt if ends[j] < t <= ends[j + span])
    theirs = collections.Counter({k: c * (span // n) for k, c in collections.Counter(tr["torch_kernels"]).items()})
    compare_kernels(v, tag, ours, theirs, f"{span} steps (between syncs)")


def kernel_match(v, tag, ev, tr):
    starts, ends = tr["starts"], tr["ends"]
    kern_by_corr = {k[2]: k[5] for k in ev["K"]}
    launches = sorted((int(a[0]), a[4]) for a in ev["A"])
    if not launches:
        kernel_match_by_sync(v, tag, ev, tr)
        return
    lo, hi = launches[0][0], launches[-1][0]
    idx = [i for i in range(len(starts)) if starts[i] > lo and ends[i] < hi]
    n = tr["steps_cmp"]
    if len(idx) < n + 2:
        v(False, f"[{tag}] kernel names and counts match torch.profiler (only {len(idx)} steps in the window)")
        return
    mid = idx[len(idx) // 2 - n // 2:len(idx) // 2 - n // 2 + n]
    t0, t1 = starts[mid[0]], ends[mid[-1]]
    # Kernels launched in those steps, and the ones between them that have
    # no launch record (cuBLAS's cuLaunchKernel without driver records): the
    # loop runs on one stream, in order.
    paired = [c for t, c in launches if t0 <= t <= t1 and c in kern_by_corr]
    kt = {k[2]: int(k[0]) for k in ev["K"]}
    k0, k1 = min(kt[c] for c in paired), max(kt[c] for c in paired)
    ours = collections.Counter(demangle(k[5]) for k in ev["K"] if k0 <= int(k[0]) <= k1)
    theirs = collections.Counter(tr["torch_kernels"])
    compare_kernels(v, tag, ours, theirs, f"{n} steps")


def analyze(d):
    v = Verdict()
    tr = json.load(open(os.path.join(d, "train.json")))
    marks = {}
    for line in open(os.path.join(d, "marks.txt")):
        k, val = line.split()
        marks[k] = int(val)
    starts = tr["starts"]
    print(f"INFO steps recorded: {len(starts)}")
    # Every window the run marked, in the order it ran.
    tags = sorted((k[:-6] for k in marks if k.endswith("_begin") and k[0] in MODES),
                  key=lambda t: marks[f"{t}_begin"])
    S = 1_000_000_000
    rows = []
    steady, cpu = {}, {}
    cpus = tr.get("cpus") or []
    for tag in tags:
        ev = None
        p = os.path.join(d, f"{tag}.tsv")
        if os.path.exists(p):
            ev = load_tsv(p)
            for e in ev["E"]:
                print(f"WARN [{tag}] {e}")
        w = analyze_window(v, tag, ev, tr) if ev is not None else None
        if ev is not None and tag in ("D1", "A", "A1"):
            kernel_match(v, tag, ev, tr)
        cp = os.path.join(d, f"{tag}.coll.tsv")
        if ev is not None and tag[0] == "U" and os.path.exists(cp):
            uprobe_align(v, tag, ev, load_tsv(cp))
        b, e = marks[f"{tag}_begin"], marks[f"{tag}_end"]
        if tag[0] == "Z":
            w = (b, e)
        elif w is None and tag[0] == "K":  # RATES_ONLY: the library's window, less its attach
            w = (b + int(0.5 * S), e)
        elif w is None:  # no CUPTI log: the collector's own window after --delay
            w = (b + int(3.3 * S), e - int(0.3 * S))
        before = rate(starts, b - int(3.5 * S), b)
        during = rate(starts, w[0] + int(0.2 * S), w[1] - int(0.2 * S))
        after = rate(starts, e + int(0.5 * S), e + int(3.5 * S)) if e + int(3.5 * S) < starts[-1] else float("nan")
        if e - b > 8 * S and tag[0] != "Z":  # long windows: is the cost steady?
            secs = [rate(starts, t, t + 2 * S) for t in range(w[0], w[1] - 2 * S, 2 * S)]
            print(f"INFO [{tag}] steps/s in 2 s slices: " + " ".join(f"{x:.0f}" for x in secs))
        kps = len(ev["K"]) / ((w[1] - w[0]) / S) if ev and w[1] > w[0] else 0
        aps = len(ev["A"]) / ((w[1] - w[0]) / S) if ev and w[1] > w[0] else 0
        rows.append((tag, before, during, after, kps, aps))
        # the same window without its first second (attach transients: the
        # hook's injection, uprobes going in): the steady cost
        steady[tag] = rate(starts, w[0] + int(1.2 * S), w[1] - int(0.2 * S))
        if cpus:
            cpu[tag] = (cpu_per_step(starts, cpus, b - int(3.5 * S), b),
                        cpu_per_step(starts, cpus, w[0] + int(1.2 * S), w[1] - int(0.2 * S)))
        if f"{tag}_rc" in marks:
            v(marks[f"{tag}_rc"] == 0, f"[{tag}] the collector exited 0 (got {marks[f'{tag}_rc']}; "
              f"136 = SIGFPE)")
    befores = [r[1] for r in rows]
    if befores:
        m = sum(befores) / len(befores)
        print(f"INFO baseline steps/s over {len(befores)} windows: mean {m:.1f}, min {min(befores):.1f}, "
              f"max {max(befores):.1f} (spread {(max(befores) - min(befores)) / m * 100:.1f}%)")
    print("FIGURES tag | before | during (vs before) | after (vs before) | kernels/s | API records/s | mode")
    for tag, before, during, after, kps, aps in rows:
        print(f"FIGURES {tag:3s}| {before:6.1f} | {during:6.1f} ({(during / before - 1) * 100:+5.1f}%) | "
              f"{after:6.1f} ({(after / before - 1) * 100:+5.1f}%) | {kps:7.0f} | {aps:7.0f} | {MODES[tag[0]]}")
    y = tr.get("yardstick")
    if y:
        print(f"FIGURES yardstick torch.profiler (CUDA only), same loop, 4 s each: before {y['before']:.1f}, "
              f"during {y['during']:.1f} ({(y['during'] / y['before'] - 1) * 100:+.1f}%), after {y['after']:.1f} "
              f"({(y['after'] / y['before'] - 1) * 100:+.1f}%) steps/s")
    # The cost table: each window against the 3.5 s just before it (idle),
    # averaged over the mode's windows; Z (nothing attached) is the method's
    # own noise.
    print("COST mode | steps/s while recording vs just before: mean, sd, windows | after detach | what")
    for mode in "ZYKDAHUSEVFN":
        r = [x for x in rows if x[0][0] == mode]
        if r:
            rel = [x[2] / x[1] - 1 for x in r]
            mean = sum(rel) / len(rel)
            sd = (sum((x - mean) ** 2 for x in rel) / (len(rel) - 1)) ** 0.5 if len(rel) > 1 else float("nan")
            aft = [x[3] / x[1] - 1 for x in r if x[3] == x[3]]
            print(f"COST {mode} | {mean * 100:+6.1f}% sd {sd * 100:4.1f} n={len(rel)} | "
                  f"{(sum(aft) / len(aft) * 100 if aft else float('nan')):+6.1f}% | {MODES[mode]}")
    if y:
        print(f"COST torch.profiler (CUDA activities, same process) | "
              f"{(y['during'] / y['before'] - 1) * 100:+6.1f}% n={y.get('rounds', 1)} | "
              f"{(y['after'] / y['before'] - 1) * 100:+6.1f}% |")
    # The yardsticks: everything on, and kernels with their links,
    # against kernels only (points of steps/s, means over the windows).
    def mean_of(mode):
        r = [x[2] / x[1] - 1 for x in rows if x[0][0] == mode]
        return sum(r) / len(r) if r else None
    k = mean_of("K")

    def steady_of(mode):
        r = [steady[x[0]] / x[1] - 1 for x in rows if x[0][0] == mode and steady.get(x[0])]
        return sum(r) / len(r) if r else None
    for mode in "KAHUSE":
        m = steady_of(mode)
        if m is not None:
            print(f"COST {mode} after the window's first second | {m * 100:+6.1f}% | {MODES[mode]}")
    # The launching thread's own CPU time per step, after the first second:
    # what each mode adds to the thread that launches (the GPU's drift moves
    # it less than steps/s)
    for mode in "ZKAHUSE":
        r = [(cpu[t][1] - cpu[t][0], cpu[t][1] / cpu[t][0] - 1) for t in cpu
             if t[0] == mode and cpu[t][0] == cpu[t][0] and cpu[t][1] == cpu[t][1] and cpu[t][0] > 0]
        if r:
            print(f"COST {mode} launching thread's CPU per step | {sum(x[0] for x in r) / len(r):+8.1f} us "
                  f"({sum(x[1] for x in r) / len(r) * 100:+5.1f}%) n={len(r)} | {MODES[mode]}")
    ks, es = steady_of("K"), steady_of("E")
    if ks is not None and es is not None:
        print(f"INFO everything on, after the first second: {(ks - es) * 100:.1f} points over kernels only")
    for mode, limit, what in (("E", 5, "everything on (-t all)"), ("A", 10, "kernels with launch links")):
        m = mean_of(mode)
        if k is not None and m is not None:
            v((k - m) * 100 <= limit, f"{what} costs {(k - m) * 100:.1f} points more than kernels only "
              f"(at most {limit})")
    # U adds uprobes: shown, not judged; beside kernels-only windows (the
    # cost set) A is judged against them (above), not in absolute terms
    dflt = [x for x in rows if x[0][0] in "A"] if k is None else []
    for tag, before, during, after, _, _ in dflt:
        v(during >= 0.95 * before, f"[{tag}] at most 5% fewer steps/s while profiling ({during:.1f} vs {before:.1f})")
        v(after >= 0.99 * before, f"[{tag}] after detach within 1% of before ({after:.1f} vs {before:.1f})")
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
