"""Check a distributed job's steps and straggler report against the truth
its ranks wrote (tests/workloads/ddp_loop.py).

    ranks_check.py TRACE.json SUMMARY.txt SUMMARY.json TRUTH0 TRUTH1 ...
TRUTHr is rank r's file: "train START END" per step (CLOCK_REALTIME ns) and
"late STEP MS" for the steps it was made late at. Prints TAP-style
"ok"/"not ok" lines (numbered by the caller) and exits 1 on a failure.

Per rank (its process named "rank R (pid P)" in the trace): detected step
count within 1 of the truth; at least 90% of the detected boundaries within
2% of the mean true step of a true boundary. Across ranks: each true step
maps to the detected step overlapping it most (ProfilerStep#N, the same N
on every rank for one iteration); the report names the late rank at all
but at most one of its late steps, and at 90% or more of the other
iterations it compared it names no rank; summary --json carries the same
stragglers as the text, and each rank's steps.
"""
import json
import re
import sys


def read_truth(path):
    steps, late = [], []
    for line in open(path):
        f = line.split()
        if f and f[0] == "train":
            steps.append((int(f[1]), int(f[2])))
        elif f and f[0] == "late":
            late.append(int(f[1]))
    return steps, late


def main():
    trace, text, js, truths = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    d = json.load(open(trace))
    base = d["baseTimeNanoseconds"]
    fails = 0

    def check(what, cond):
        nonlocal fails
        print(("ok - " if cond else "not ok - ") + what)
        fails += not cond

    pid_of = {}
    for e in d["traceEvents"]:
        m = e.get("ph") == "M" and e["name"] == "process_name" and \
            re.match(r"rank (\d+) \(pid (\d+)\)", e["args"]["name"])
        if m:
            pid_of[int(m.group(1))] = int(m.group(2))
    check(f"processes named by rank: {sorted(pid_of)}", sorted(pid_of) == list(range(len(truths))))
    num_of = {}  # (rank, true step index) -> ProfilerStep number
    late_truth = {}
    for r, path in enumerate(truths):
        true, late = read_truth(path)
        if late:
            late_truth[r] = late
        pid = pid_of.get(r)
        got = sorted((base + round(e["ts"] * 1000), base + round((e["ts"] + e["dur"]) * 1000),
                      int(e["name"].split("#")[1]))
                     for e in d["traceEvents"] if e.get("cat") == "step" and e.get("pid") == pid)
        check(f"rank {r}: step count {len(got)} within 1 of {len(true)}",
              abs(len(got) - len(true)) <= 1)
        mean = sum(e - s for s, e in true) / len(true)
        tol = 0.02 * mean
        bounds = sorted({b for st in true for b in st})
        near = [min(abs(b - t) for t in bounds) for s, e, _ in got for b in (s, e)]
        good = sum(x <= tol for x in near)
        check(f"rank {r}: {good} of {len(near)} boundaries within 2% of the mean step "
              f"({tol / 1e6:.3f} ms; worst {max(near, default=0) / 1e6:.3f} ms)",
              near and good >= 0.9 * len(near))
        for i, (s, e) in enumerate(true):
            ov = [(min(e, b) - max(s, a), n) for a, b, n in got]
            best = max(ov, default=(0, None))
            if best[0] > 0:
                num_of[(r, i)] = best[1]
    same = all(num_of.get((0, i)) == num_of.get((r, i))
               for r in range(1, len(truths)) for i in range(len(read_truth(truths[0])[0]))
               if (0, i) in num_of and (r, i) in num_of)
    check("one iteration has the same ProfilerStep number on every rank", same)

    rep = []  # (step, rank) named in the text report
    intable = False
    for line in open(text):
        if line.startswith("Stragglers:"):
            intable = True
            continue
        m = intable and re.match(r"\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(.*)", line)
        if m:
            rep.append((int(m.group(1)), int(m.group(2))))
        elif intable and not line.startswith("    step"):
            intable = False
    compared = re.search(r"iterations (\d+)-(\d+) compared on all \((\d+)\)", open(text).read())
    check("the report says which iterations it compared", compared is not None)
    lo, hi, n_cmp = (int(x) for x in compared.groups()) if compared else (0, -1, 0)
    late_nums = set()
    for r, steps in late_truth.items():
        nums = [num_of.get((r, i)) for i in steps]
        late_nums |= set(nums)
        named = sum((n, r) in rep for n in nums)
        check(f"rank {r} named late at {named} of its {len(nums)} late steps {nums}",
              named >= len(nums) - 1)
    others = [n for n in range(lo, hi + 1) if n not in late_nums]
    blamed = sorted({n for n, _ in rep if n not in late_nums})
    check(f"no rank named at {len(others) - len(blamed)} of {len(others)} other iterations "
          f"(named at {blamed})", len(others) - len(blamed) >= 0.9 * len(others))
    if not late_truth:
        check("the verdict names no straggler or calls it scattered",
              re.search(r"^Verdict: (no straggler|scattered)", open(text).read(), re.M) is not None)

    j = json.load(open(js))
    jrep = sorted((x["step"], x["rank"]) for x in j["stragglers"])
    check("summary --json: the same stragglers as the text", jrep == sorted(rep))
    check("summary --json: stragglers carry pid, late_ms and where",
          all(x["pid"] == pid_of.get(x["rank"]) and x["late_ms"] > 0 and x["where"]
              for x in j["stragglers"]))
    ranks = {x["rank"]: x for x in j["ranks"] if x["rank"] is not None}
    check(f"summary --json: every rank with its steps ({sorted(ranks)})",
          sorted(ranks) == list(range(len(truths))) and
          all(abs(len(ranks[r]["steps"]) - len(read_truth(t)[0])) <= 1 for r, t in enumerate(truths)))
    parts = ("compute_ms", "comm_ms", "wait_ms", "input_ms", "other_ms")
    check("summary --json: each step's parts add up to it",
          all(abs(sum(s[p] for p in parts) - s["dur_ms"]) < 1e-3 for x in j["ranks"]
              for s in x["steps"]))
    return fails


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
