#!/bin/bash
# summary's Python table against a real profile (-t python, /usr/bin/python3.11
# with USDT probes): functions sharing a bare name (site.main, the script's
# main, Worker.main; decode, JSONDecoder.decode) are separate rows with exact
# call counts; a recursive function's inclusive time is counted once; self <=
# inclusive, no % over 100; inclusive times agree with the trace JSON; rows
# fit the terminal width.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
PY=/usr/bin/python3.11
SCRIPT=$PWD/tests/workloads/py_samename.py
need_built "$LT" "$CONV"
[ "$(id -u)" = 0 ] || skip "needs root for eBPF"
[ -x $PY ] && readelf -n $PY 2>/dev/null | grep -q function__entry ||
	skip "$PY with USDT function probes is not installed"
command -v python3 >/dev/null || skip "python3 (for the checks) missing"

tap_tmpdir T sumpy-test

R=50 # rounds: Worker.main R, decode and JSONDecoder.decode 3R, fact 60R calls
"$LT" profile -t python -o "$T/p.log" -- $PY "$SCRIPT" $R > /dev/null 2> "$T/err"
check_rc $? "profile -t python -- python3.11 py_samename.py exits 0"
COLUMNS=1000 "$CONV" summary -n 100000 "$T/p.log" > "$T/sum" 2> "$T/sum.err" &&
	"$CONV" -i "$T/p.log" -o "$T/p.json" > /dev/null 2>&1
check_rc $? "summary and JSON conversion succeed"

python3 - "$T/sum" "$T/p.json" "$SCRIPT" $R <<'PY'
import collections, json, re, sys
summ, trace, script, R = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows, intable = {}, False
for line in open(summ):
    if line.startswith("Python functions"):
        intable = True
        continue
    if intable and not line.strip():
        break
    m = re.match(r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+[\d.]+\s+(\S+) \((.*):(\d+)\)$", line)
    if intable and m:
        incl, pi, self_, ps, calls, name, file, first = m.groups()
        key = (name, file, int(first))
        assert key not in rows, "two rows for %s" % (key,)
        rows[key] = dict(incl=float(incl), pi=float(pi), self=float(self_), ps=float(ps), calls=int(calls))
assert rows, "no Python rows parsed"
src = open(script).read().splitlines()
def line_of(text):
    return next(i + 1 for i, l in enumerate(src) if l.startswith(text))
# bare (USDT: co_name) or qualified (the hook: co_qualname, 3.11+) names
same = lambda n, name: n == name or n.endswith("." + name)
def mine(name, text):
    k = [k for k in rows if same(k[0], name) and k[1:] == (script, line_of(text))]
    assert len(k) == 1, (name, text, k)
    return rows[k[0]]
want = {("main", "def main():"): 1, ("main", "    def main(self"): R,
        ("decode", "def decode("): 3 * R, ("fact", "def fact("): 60 * R}
for (name, text), calls in want.items():
    got = mine(name, text)["calls"]
    print("# %s at %s: %d calls (want %d)" % (name, text.strip(), got, calls))
    assert got == calls
site = [k for k in rows if same(k[0], "main") and k[1] in ("<frozen site>", "/usr/lib/python3.11/site.py")]
jdec = [k for k in rows if same(k[0], "decode") and k[1].endswith("json/decoder.py")]
print("# site.main rows:", site, "JSONDecoder.decode rows:", jdec)
# site.main runs while the interpreter starts: USDT sees it, the hook (in
# from Py_RunMain, the program's start) does not; never merged with main
assert len(site) <= 1 and all(rows[k]["calls"] == 1 for k in site)
assert len(jdec) == 1 and rows[jdec[0]]["calls"] == 3 * R
for k, r in rows.items():
    assert r["self"] <= r["incl"] + 0.0015, ("self > incl", k, r)
    assert r["pi"] <= 100.0 and r["ps"] <= 100.0, ("over 100%", k, r)
# recursion counted once: fact's inclusive is inside its caller's, and all its own
fact, worker = mine("fact", "def fact("), mine("main", "    def main(self")
print("# fact incl %.3f self %.3f; Worker.main incl %.3f" % (fact["incl"], fact["self"], worker["incl"]))
assert fact["incl"] <= worker["incl"] and abs(fact["self"] - fact["incl"]) <= 0.002
# inclusive times agree with the trace's X events (non-recursive functions)
ev = json.load(open(trace))["traceEvents"]
dur = collections.Counter()
for e in ev:
    if e.get("cat") == "python_function" and e.get("ph") == "X":
        dur[(e["name"], e["args"]["file"], e["args"]["line"])] += e["dur"] / 1000.0
keys = [k for k in rows for n, t in want if n != "fact" and same(k[0], n) and k[1:] == (script, line_of(t))]
for k in keys + jdec:
    print("# %s: summary %.3f ms, trace %.3f ms" % (k[0], rows[k]["incl"], dur[k]))
    assert abs(rows[k]["incl"] - dur[k]) <= 0.01 + 0.001 * dur[k]
PY
check_rc $? "separate rows per definition, exact calls, self <= incl, % <= 100, recursion once, agrees with the trace"

# every row: which rows make the top 20 depends on the machine's speed
COLUMNS=80 "$CONV" summary -n 100000 "$T/p.log" > "$T/narrow" 2>/dev/null
long=$(awk 'length > 80' "$T/narrow" | grep -v '^== host\|^Steps' | wc -l)
grep -q ' (\.\.\.[^ ]*\.py:[0-9]*)$' "$T/narrow"
rc=$?
awk 'length > 80' "$T/narrow" | grep -v '^== host\|^Steps' | sed 's/^/# too long: /' # for a failure's log
[ $rc -eq 0 ] && [ "$long" = 0 ]
check_rc $? "COLUMNS=80: table rows fit 80 columns, file paths cut at their start"
tap_done
