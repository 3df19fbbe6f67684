"""Compares the Python calls an event log recorded (evlog_dump output of one
or more logs on stdin) with a reference run's counts (pyb_busy.py ref).

Counted: entries of functions of SCRIPT whose time lies strictly between the
entry of begin_measure() and the entry of end_measure() (on any thread: the
measured part's worker threads start and end inside it). A name is the last
component of the recorded one (the hook records qualified names, USDT
plain ones). Exact equality for every function, both ways: a function
recorded but not in the reference fails too, as do missing markers.
Usage: pyb_check.py SCRIPT 'name=count name=count ...'"""
import collections
import re
import sys

script, ref = sys.argv[1], sys.argv[2]
want = {k: int(v) for k, v in (t.rsplit("=", 1) for t in ref.split())}
field = re.compile(r"(\w+)=(\S*)")
enters = []
for line in sys.stdin:
    if not line.startswith("py_enter "):
        continue
    kv = dict(field.findall(line))
    if kv.get("file") != script:
        continue
    name = kv["func"].rsplit(".", 1)[-1]
    enters.append((int(kv["ts"]), name))
begin = [ts for ts, n in enters if n == "begin_measure"]
end = [ts for ts, n in enters if n == "end_measure"]
if len(begin) != 1 or len(end) != 1:
    print("FAIL markers: %d begin_measure, %d end_measure entries (want 1 each; %d entries of %s)"
          % (len(begin), len(end), len(enters), script))
    sys.exit(1)
got = collections.Counter(n for ts, n in enters if begin[0] < ts < end[0])
ok = True
for name in sorted(set(want) | set(got)):
    good = got[name] == want.get(name, 0)
    ok &= good
    if not good or name in ("fib", "work_thread", "tail"):
        print("%s %s: %d recorded, %d in the reference" % ("ok" if good else "FAIL", name, got[name],
                                                          want.get(name, 0)))
print("%s %d functions, %d calls recorded, %d in the reference" %
      ("ok" if ok else "FAIL", len(set(want) | set(got)), sum(got.values()), sum(want.values())))
sys.exit(0 if ok else 1)
