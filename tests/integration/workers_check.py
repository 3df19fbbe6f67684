"""Checks the Python logs of a profile of tests/workloads/py_workers.py
(evlog_dump output of every log on stdin, "# file=" starting each) against
the reference run's counts (py_workers.py ref):
  - every function of SCRIPT is entered as often, over all logs, as
    sys.setprofile counted it (names "-" in the reference are left out);
  - each log holds the events of one process, its writer's (producer_pid);
  - WORKER_FN (a function only workers call) was recorded in at least
    MIN_WORKERS logs, none of them the parent's (the log holding main).
Usage: workers_check.py SCRIPT 'name=count ...' WORKER_FN MIN_WORKERS"""
import collections
import os
import re
import sys

script, ref, worker_fn, min_workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
want, skip = {}, set()
for k, v in (t.rsplit("=", 1) for t in ref.split()):
    if v == "-":
        skip.add(k)
    else:
        want[k] = int(v)
field = re.compile(r"(\w+)=(\S*)")
logs = collections.OrderedDict()  # file -> {"pid": producer_pid, "pids": set, "calls": Counter}
cur = None
for line in sys.stdin:
    if line.startswith("# file="):
        cur = logs.setdefault(line[7:].strip(), {"pid": None, "pids": set(), "calls": collections.Counter()})
    elif line.startswith("# producer_pid=") and cur is not None:
        cur["pid"] = int(line.split("=", 1)[1])
    elif cur is not None and (line.startswith("py_enter ") or line.startswith("py_exit ")):
        kv = dict(field.findall(line))
        cur["pids"].add(int(kv["pid"]))
        if line.startswith("py_enter ") and os.path.basename(kv.get("file", "")) == os.path.basename(script):
            cur["calls"][kv["func"].rsplit(".", 1)[-1]] += 1
ok = True
total = collections.Counter()
for f, l in logs.items():
    total.update(l["calls"])
    mixed = l["pids"] - {l["pid"]}
    if mixed:
        ok = False
        print("FAIL %s (pid %s) holds events of pids %s" % (os.path.basename(f), l["pid"], sorted(mixed)))
for name in sorted((set(want) | set(total)) - skip):
    good = total[name] == want.get(name, 0)
    ok &= good
    print("%s %s: %d recorded, %d in the reference" % ("ok" if good else "FAIL", name, total[name],
                                                      want.get(name, 0)))
parents = [l for l in logs.values() if l["calls"]["main"]]
workers = [l for l in logs.values() if l["calls"][worker_fn] and not l["calls"]["main"]]
if len(parents) != 1 or parents[0]["calls"][worker_fn]:
    ok = False
    print("FAIL %d logs hold main; the parent's holds %d calls of %s" %
          (len(parents), parents[0]["calls"][worker_fn] if parents else 0, worker_fn))
if len(workers) < min_workers:
    ok = False
print("%s %s in %d worker logs (pids %s), want at least %d; %d logs in all" %
      ("ok" if len(workers) >= min_workers else "FAIL", worker_fn, len(workers),
       sorted(l["pid"] for l in workers), min_workers, len(logs)))
sys.exit(0 if ok else 1)
