#!/usr/bin/env python3
"""Where a trace's unlinked GPU work sits (diagnosis of a launch-link FAIL).

Usage: edge_links.py TRACE.json.gz

Reads the converter's trace JSON (one event a line) and prints, for the GPU
items that carry a CUPTI correlation id but no flow (the "unbound flows"),
each correlation id's group: when (ms after the trace's first GPU item),
how many items, graph id, names; the first linked graph groups' correlation
ids beside it (CUPTI numbers calls as they are made), and the graph launch
calls around it with their times and the ids the converter gave them.
"""
import gzip
import json
import sys


def load(path):
    """GPU items (ts, dur, corr, graph, name, linked) and graph launch calls."""
    items, calls, marks = [], [], []
    last = None
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for line in f:
            line = line.strip().lstrip(",")
            if not line.startswith("{"):
                continue
            if '"ph":"f"' in line:
                if last is not None:
                    last[5] = True
                continue
            if last is not None:
                last = None
            if "cupti_on" in line:
                marks.append(line[:300])
                continue
            if '"correlation"' not in line and "GraphLaunch" not in line:
                continue
            e = json.loads(line.rstrip(","))
            a = e.get("args", {})
            if "GraphLaunch" in e.get("name", ""):
                calls.append((e["ts"], e.get("dur", 0), a.get("correlation", 0), e.get("tid")))
            elif "stream" in a and "library" not in a:
                last = [e["ts"], e.get("dur", 0), a["correlation"], a.get("graph id", 0),
                        e.get("name", "")[:60], False]
                items.append(last)
    return items, calls, marks


def main():
    items, calls, marks = load(sys.argv[1])
    if not items:
        print("INFO edge: no GPU items with correlation ids")
        return
    items.sort()
    calls.sort()
    t0 = items[0][0]
    rel = lambda ts: (ts - t0) / 1000.0
    print("INFO edge: %d GPU items, first at 0, last at %.3f ms; %d graph launch calls, "
          "first at %.3f ms, last ends %.3f ms" % (len(items), rel(items[-1][0]), len(calls),
          rel(calls[0][0]) if calls else 0, rel(calls[-1][0] + calls[-1][1]) if calls else 0))
    for m in marks[:4]:
        print("INFO edge: marker", m)
    groups = {}
    for it in items:
        g = groups.setdefault((it[2], it[5]), [it[0], it[0], 0, it[3], set()])
        g[1] = it[0]
        g[2] += 1
        g[4].add(it[4])
    linked = sorted((v[0], c) for (c, ok), v in groups.items() if ok and v[3])
    bad = sorted((v[0], c) for (c, ok), v in groups.items() if not ok)
    print("INFO edge: %d unlinked groups; linked graph groups' first ids: %s" %
          (len(bad), [c for _, c in linked[:6]]))
    print("INFO edge: linked graph groups' ids, steps: %s" %
          [linked[i + 1][1] - linked[i][1] for i in range(min(8, len(linked) - 1))])
    for ts, c in bad[:6]:
        v = groups[(c, False)]
        print("INFO edge: unlinked corr %d: %d items, graph %d, %.3f..%.3f ms, %s" %
              (c, v[2], v[3], rel(v[0]), rel(v[1]), sorted(v[4])[:3]))
        near = [k for k in calls if abs(k[0] - ts) < 400000]
        before = [k for k in near if k[0] <= ts][-5:]
        after = [k for k in near if k[0] > ts][:3]
        for k in before + after:
            print("INFO edge:   graph launch at %.3f ms, ends %.3f ms, corr %s, tid %s" %
                  (rel(k[0]), rel(k[0] + k[1]), k[2], k[3]))
        nxt = [l for l in linked if l[0] > ts][:2]
        for l in nxt:
            print("INFO edge:   next linked graph group corr %d at %.3f ms" % (l[1], rel(l[0])))


if __name__ == "__main__":
    main()
