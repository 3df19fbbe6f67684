"""Checks an event log dump (evlog_dump output on stdin) for Python
function events: counts per function, and that enters and exits nest per
thread. Usage: python_check.py FUNC=ENTERS [FUNC=ENTERS ...]
Prints one TAP-free line per finding; exit 0 when all hold."""
import re
import sys

want = dict(a.split("=") for a in sys.argv[1:])
enter = {f: 0 for f in want}
exit_ = {f: 0 for f in want}
stacks = {}
bad_nest = 0
unmatched_exits = 0
events = 0
field = re.compile(r"(\w+)=(\S*)")
for line in sys.stdin:
    kind = line.split(" ", 1)[0]
    if kind not in ("py_enter", "py_exit"):
        continue
    events += 1
    kv = dict(field.findall(line))
    func, tid = kv.get("func", ""), kv["tid"]
    st = stacks.setdefault(tid, [])
    if kind == "py_enter":
        st.append(func)
        if func in enter:
            enter[func] += 1
    else:
        if func in exit_:
            exit_[func] += 1
        if not st:
            unmatched_exits += 1   # frames entered before we attached
        elif st[-1] != func:
            bad_nest += 1
            st.pop()
        else:
            st.pop()
ok = True
for f, n in want.items():
    good = enter[f] == int(n) and exit_[f] == int(n)
    ok &= good
    print(("ok " if good else "FAIL ") + "%s: %d enters, %d exits (want %s)" % (f, enter[f], exit_[f], n))
print(("ok " if bad_nest == 0 else "FAIL ") + "%d exits out of nesting order (%d events)" % (bad_nest, events))
ok &= bad_nest == 0
print("info %d exits of frames entered before attaching" % unmatched_exits)
sys.exit(0 if ok else 1)
