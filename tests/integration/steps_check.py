"""Compare the Steps track of a trace JSON with a workload's true steps.

    steps_check.py TRACE.json TRUTH [none] [--rank R] [--at-least FRAC]
Prints TAP-style "ok"/"not ok" lines (numbering by the caller's awk) and
exits 1 on a failure. Checks: detected count within +-1 of the true train
steps; every detected boundary within 2% of the mean true step time of the
nearest true boundary (its window, below). With "none": no step slices at all.
--rank R: only the steps of the process named "rank R (pid P)" (a job's
trace); --at-least FRAC: that fraction of the boundaries, and of the steps'
starts, suffices (default 1: every one).

TRUTH lines are "train START END [...]" or "train START END in START_LO END_LO": a
workload that cannot stamp a boundary at one instant gives the window it
lies in (the step ends in [END_LO, END], its successor starts in
[START_LO, START]); a boundary inside its window is off by 0.
"""
import json
import re
import sys


def read_step(line):
    """A true step as its start and end windows, (lo, hi) each."""
    f = line.split()
    start, end = int(f[1]), int(f[2])
    if len(f) >= 6 and f[3] == "in":
        return (int(f[4]), start), (int(f[5]), end)
    return (start, start), (end, end)


def off_by(b, window):
    """How far b lies outside the window (0 inside)."""
    lo, hi = window
    return lo - b if b < lo else b - hi if b > hi else 0


def rank_pid(events, rank):
    """The trace's pid of the process named "rank RANK (pid P)"."""
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name" and \
                re.match(rf"rank {rank} \(pid \d+\)", e["args"]["name"]):
            return e["pid"]
    return None


def options(a):
    """The positional arguments, the rank (None: all steps), the fraction."""
    pos, rank, frac = [], None, 1.0
    while a:
        if a[0] in ("--rank", "--at-least") and len(a) > 1:
            rank, frac = (int(a[1]), frac) if a[0] == "--rank" else (rank, float(a[1]))
            a = a[2:]
        else:
            pos, a = pos + [a[0]], a[1:]
    return pos, rank, frac


def main():
    (trace, truth, *rest), rank, frac = options(sys.argv[1:])
    want_none = rest == ["none"]
    d = json.load(open(trace))
    base = d["baseTimeNanoseconds"]
    pid = rank_pid(d["traceEvents"], rank) if rank is not None else None
    steps = sorted((base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000))
                   for e in d["traceEvents"]
                   if e.get("cat") == "step" and (rank is None or e.get("pid") == pid))
    fails = 0

    def check(what, cond):
        nonlocal fails
        print(("ok - " if cond else "not ok - ") + what)
        fails += not cond

    if want_none:
        check(f"no steps written ({len(steps)})", not steps)
        return fails
    true = [read_step(l) for l in open(truth) if l.startswith("train ")]
    mean = sum(e[1] - s[1] for s, e in true) / len(true)
    check(f"step count {len(steps)} within 1 of {len(true)}", abs(len(steps) - len(true)) <= 1)
    tol = 0.02 * mean
    windows = [w for st in true for w in st]
    offs = [min(off_by(b, w) for w in windows) for s, e in steps for b in (s, e)]
    worst, good = max(offs, default=0.0), sum(x <= tol for x in offs)
    if frac >= 1:
        check(f"every boundary within 2% of the mean step ({tol / 1e6:.3f} ms): worst "
              f"{worst / 1e6:.3f} ms", worst <= tol)
    else:
        check(f"{good} of {len(offs)} boundaries within 2% of the mean step ({tol / 1e6:.3f} ms; "
              f"worst {worst / 1e6:.3f} ms), at least {frac:g} wanted",
              offs and good >= frac * len(offs))
    # Each detected step must start at a true start (not drift by a step).
    starts = [s for s, _ in true]
    off = sum(min(off_by(s, w) for w in starts) > tol for s, _ in steps)
    check(f"each step starts at a true step start ({off} do not)", off <= (1 - frac) * len(steps))
    return fails


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
