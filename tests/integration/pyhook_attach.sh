#!/bin/bash
# -t python on interpreters without USDT function probes (pyenv's python3
# 3.11, and 3.12 / 3.13 / 3.10 / 3.9 when present): the injected profile hook.
# A known call tree (f() calls g() 3 times, 100 iterations) runs only after
# the collector says it is tracing, so the counts are exact; the target's
# output and exit status are unchanged and the library is gone from its
# maps after the detach. Also: the converter merges the hook's log, an
# unsupported CPython gets one clear line, the launch form, and a SIGKILLed
# collector leaves the target running.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
LIB=$(realpath -m "$BUILD/lib/libllmtracker-inject.so")
SCRIPT=$PWD/tests/workloads/pyh_calltree.py
CHECK=$PWD/tests/integration/python_check.py
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
need_built "$LT" "$DUMP" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace)"
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
[ -x "$PY" ] || skip "no pyenv python3.11 (the interpreter without USDT probes) under $PYENV"
[ "$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("WITH_DTRACE"))')" = 0 ] ||
	skip "$PY has USDT probes; this test needs one without"

tap_tmpdir T pyhook-test
check_calls() { # dir what func=n...
	local d=$1 what=$2; shift 2
	cat "$d"/llmtracker-python.*.evlog > /dev/null 2>&1 &&
		"$DUMP" "$d"/llmtracker-python.*.evlog > "$d/dump" 2> "$d/dump.err" &&
		python3 "$CHECK" "$@" < "$d/dump" > "$d/check"
	local rc=$?
	sed 's/^/# /' "$d/check" 2>/dev/null
	check_rc $rc "$what"
}
inject_mapped() { grep -c "memfd:llmtracker-inject" "/proc/$1/maps" 2>/dev/null; }

# attach PY TAG N THREADS: run the tree under `profile -p`, detach while the
# target idles, then let it exit. Leaves $T/TAG/{out,rc,err,maps_after}.
attach() {
	local py=$1 d=$T/$2 tp cp
	mkdir -p "$d"
	"$py" "$SCRIPT" "$3" "$d/go" "$d/hold" "$4" > "$d/out" 2> "$d/stderr" & tp=$!; tap_bg $tp
	wait_until 30 "[ -e '$d/go.ready' ]"
	"$LT" profile -p $tp -t python -o "$d/c.log" -v 1 > /dev/null 2> "$d/err" & cp=$!; tap_bg $cp
	wait_for "$d/err" "tracing functions|cannot trace" && touch "$d/go"
	wait_for "$d/out" "pyh_calltree done"
	inject_mapped $tp > "$d/maps_during"
	kill -INT $cp; wait $cp; echo $? > "$d/coll_rc"
	inject_mapped $tp > "$d/maps_after"
	touch "$d/hold"; wait $tp; echo $? > "$d/rc"
}

# launched PY TAG N THREADS: the tree run by `profile -- PY ...` (held at
# Py_RunMain until the hook is in), to its end. Leaves $T/TAG/{out,err,coll_rc}.
launched() {
	local d=$T/$2 cp
	mkdir -p "$d"
	( "$LT" profile -t python -o "$d/c.log" -v 1 -- "$1" "$SCRIPT" "$3" "$d/go" "$d/hold" "$4" \
		> "$d/out" 2> "$d/err"; echo $? > "$d/coll_rc" ) & cp=$!; tap_bg $cp
	wait_for "$d/err" "tracing functions|cannot trace" && touch "$d/go"
	wait_for "$d/out" "pyh_calltree done"
	touch "$d/hold"; wait $cp
}

# 1. pyenv python3.11 by -p
attach "$PY" a 100 0
check_rc "$(cat $T/a/coll_rc)" "profile -p PID -t python (no USDT: $PY) exits 0"
grep -q "tracing functions through the injected profile hook" "$T/a/err"
check_rc $? "the collector says it traces through the injected hook"
check_calls "$T/a" "exact f/g enter+exit counts, nested per thread" f=100 g=300 loop=1
[ "$(cat $T/a/rc)" = 3 ] && [ "$(cat $T/a/out)" = "pyh_calltree done 100 0 30300" ] && [ ! -s "$T/a/stderr" ]
check_rc $? "the target's output and exit status (3) are unchanged"
grep -q "removed=1" "$T/a/err" && [ "$(cat $T/a/maps_during)" -ge 1 ] && [ "$(cat $T/a/maps_after)" = 0 ]
check_rc $? "profile function removed, library mapped while profiling ($(cat $T/a/maps_during)) and gone after ($(cat $T/a/maps_after))"
"$DUMP" "$T/a"/llmtracker-python.*.evlog | awk '/^py_enter/ && / func=g / { for (i = 2; i <= NF; i++) if ($i ~ /^(pid|tid|line|file)=/) print $i }' |
	sort -u > "$T/a/fields"
grep -qx "pid=$(sed -n 's/.*pid \([0-9]*\): tracing.*/\1/p' "$T/a/err")" "$T/a/fields" && grep -q "^file=$SCRIPT$" "$T/a/fields" &&
	grep -qx "line=15" "$T/a/fields"
check_rc $? "g's events carry the target's pid, the script's file and g's first line"

# 1b. threads started after the hook went in are traced from their first call
attach "$PY" th 100 3
check_calls "$T/th" "3 new threads + main: exact counts, nesting per thread" f=400 g=1200 loop=4
[ "$(grep "^py_enter.* func=loop " "$T/th/dump" | grep -o 'tid=[0-9]*' | sort -u | wc -l)" = 4 ] &&
	[ "$(cat $T/th/rc)" = 3 ] && [ "$(cat $T/th/maps_after)" = 0 ] && grep -q "removed=1" "$T/th/err"
check_rc $? "the 4 loops are on 4 distinct threads; hook removed, library gone, exit status unchanged"

# 2. the converter merges the hook's log with the collector's
if [ -x "$CONV" ] && "$CONV" -i "$T/a/c.log" --cupti-dir "$T/a" -o "$T/a/t.json" > "$T/a/conv" 2>&1; then
	python3 - "$T/a/t.json" <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
py = [e for e in ev if e.get("cat") == "python_function" and e.get("ph") == "X"]
n = collections.Counter(e["name"] for e in py)
print("# python_function X: f=%d g=%d loop=%d" % (n["f"], n["g"], n["loop"]))
assert (n["f"], n["g"], n["loop"]) == (100, 300, 1)
PY
	check_rc $? "converted with --cupti-dir: python_function X events f=100 g=300"
else
	sed 's/^/# /' "$T/a/conv" 2>/dev/null | head -5
	nok "llmtracker-convert -i LOG --cupti-dir DIR"
fi

# 3. other CPython versions without probes, when installed
for v in 3.12 3.13 3.10 3.9; do
	p=$(ls "$PYENV"/$v.*/bin/python$v 2>/dev/null | head -1)
	if [ ! -x "$p" ]; then ok "# SKIP no python$v"; continue; fi
	attach "$p" "v$v" 50 0
	check_calls "$T/v$v" "python$v: exact counts, nesting" f=50 g=150 loop=1
	[ "$(cat $T/v$v/rc)" = 3 ] && [ "$(cat $T/v$v/maps_after)" = 0 ]
	check_rc $? "python$v: exit status unchanged, library gone after detach"
	case $v in 3.12|3.13) # the events of a monitoring tool of ours, not the profile function
		grep -q "tracing functions.*events=sys.monitoring" "$T/v$v/err"
		check_rc $? "python$v: traced as a sys.monitoring tool";;
	esac
done

# 3b. 3.12+: threads started after the hook, a program that starts
# cProfile (sys.monitoring's profiler tool id) while traced: both complete,
# and hostile programs (below)
p=$(ls "$PYENV"/3.12.*/bin/python3.12 2>/dev/null | head -1)
if [ -x "$p" ]; then
	attach "$p" th12 100 3
	check_calls "$T/th12" "python3.12: 3 new threads + main: exact counts" f=400 g=1200 loop=4
	[ "$(cat $T/th12/rc)" = 3 ] && [ "$(cat $T/th12/maps_after)" = 0 ] && grep -q "removed=1" "$T/th12/err"
	check_rc $? "python3.12, threads: tool removed, library gone, exit status unchanged"
	# A program's head: f calls g 3 times; it waits for GO (argv[1]) once
	# started (GO.ready), and the caller's lines follow.
	py_head() { cat <<'PY'
import os, sys, time
def g(x): return x
def f():
    for _ in range(3): g(1)
PY
	}
	py_wait() { printf '%s\n' 'open(sys.argv[1] + ".ready", "w").close()' \
		'while not os.path.exists(sys.argv[1]): time.sleep(0.01)'; }
	# traced DIR PATTERN [ARGS]: run DIR/t.py GO HOLD ARGS, attach `profile -t
	# python` once it waits, let it go until its output says PATTERN, stop the
	# collector, note whether the library is still mapped (DIR/maps_after),
	# release it (DIR/rc: its exit status).
	traced() {
		local d=$1 pat=$2 tp cp
		shift 2
		"$p" "$d/t.py" "$d/go" "$d/hold" "$@" > "$d/out" 2>&1 & tp=$!; tap_bg $tp
		wait_until 30 "[ -e '$d/go.ready' ]"
		"$LT" profile -p $tp -t python -o "$d/c.log" -v 1 > /dev/null 2> "$d/err" & cp=$!; tap_bg $cp
		wait_for "$d/err" "tracing functions|cannot trace" && touch "$d/go"
		wait_for "$d/out" "$pat"
		kill -INT $cp; wait $cp
		inject_mapped $tp > "$d/maps_after"
		touch "$d/hold"; wait $tp; echo $? > "$d/rc"
	}
	mkdir -p "$T/cp12"
	{ py_head; echo "import cProfile, pstats"; py_wait; cat <<'PY'
pr = cProfile.Profile()
pr.enable()
for _ in range(10): f()
pr.disable()
st = pstats.Stats(pr).stats
n = {fn[2]: v[1] for fn, v in st.items() if fn[2] in ("f", "g")}
print("cProfile saw f", n.get("f"), "g", n.get("g"), flush=True)
while not os.path.exists(sys.argv[2]): time.sleep(0.01)
PY
	} > "$T/cp12/t.py"
	traced "$T/cp12" "cProfile saw"
	check_calls "$T/cp12" "python3.12 with cProfile running: our counts exact too" f=10 g=30
	[ "$(cat "$T/cp12/out")" = "cProfile saw f 10 g 30" ]
	check_rc $? "python3.12: the program's own cProfile starts and counts (f 10, g 30) while traced"
	# A hostile program: sys.monitoring deleted while traced (detach still
	# unregisters: the library leaves), or its functions replaced before
	# (none of its code runs in theirs: the profile function is used)
	mkdir -p "$T/del12" "$T/rep12"
	{ py_head; py_wait; cat <<'PY'
del sys.monitoring
for _ in range(10): f()
print("deleted and ran", flush=True)
while not os.path.exists(sys.argv[2]): time.sleep(0.01)
sys.exit(3)
PY
	} > "$T/del12/t.py"
	{ py_head; cat <<'PY'
def trap(*a):
    open(sys.argv[3], "w").close()
for name in ("use_tool_id", "get_tool", "register_callback", "set_events", "free_tool_id"):
    setattr(sys.monitoring, name, trap)
PY
	py_wait; cat <<'PY'
for _ in range(10): f()
print("replaced and ran", flush=True)
while not os.path.exists(sys.argv[2]): time.sleep(0.01)
sys.exit(3)
PY
	} > "$T/rep12/t.py"
	traced "$T/del12" "deleted and ran"
	traced "$T/rep12" "replaced and ran" "$T/rep12/trapped"
	check_calls "$T/del12" "python3.12, sys.monitoring deleted while traced: exact counts" f=10 g=30
	[ "$(cat $T/del12/rc)" = 3 ] && [ "$(cat $T/del12/maps_after)" = 0 ] && grep -q "removed=1" "$T/del12/err"
	check_rc $? "... the tool unregistered all the same: library gone, exit status unchanged"
	check_calls "$T/rep12" "python3.12, sys.monitoring's functions replaced: exact counts" f=10 g=30
	grep -q "tracing functions.*events=profile" "$T/rep12/err" && [ ! -e "$T/rep12/trapped" ] &&
		[ "$(cat $T/rep12/rc)" = 3 ] && [ "$(cat $T/rep12/maps_after)" = 0 ]
	check_rc $? "... none of the program's replacements called: the profile function used, library gone after"
	# the launch form: the tool registered on the program's own thread, held at Py_RunMain
	launched "$p" l12 100 2
	check_calls "$T/l12" "python3.12 launched: exact counts, 2 threads + main" f=300 g=900 loop=3
	[ "$(cat $T/l12/coll_rc)" = 0 ] && grep -q "hook py_enter=.* events=sys.monitoring" "$T/l12/err"
	check_rc $? "python3.12 launched: traced as a sys.monitoring tool, collector exits 0"
else
	for _ in 1 2 3 4 5 6 7 8 9 10; do ok "# SKIP no python3.12"; done
fi

# 4. an unsupported CPython: one clear line, the target untouched
p=$(ls "$PYENV"/3.8.*/bin/python3.8 2>/dev/null | head -1)
if [ -x "$p" ]; then
	attach "$p" old 10 0
	grep "cannot trace" "$T/old/err" | sed 's/^/# /'
	said=$(grep -c "cannot trace Python functions.*CPython 3.8 is not supported" "$T/old/err")
	[ "$said" = 1 ] && [ "$(cat $T/old/rc)" = 3 ] && [ "$(cat $T/old/maps_after)" = 0 ] &&
		[ "$(cat $T/old/out)" = "pyh_calltree done 10 0 330" ]
	check_rc $? "CPython 3.8: one clear line (said $said), target untouched (library mapped after: $(cat $T/old/maps_after)) and unchanged (exit $(cat $T/old/rc))"
else
	ok "# SKIP no python3.8"
fi

# 4b. a thread running its own profiler (sys.setprofile) is left alone
mkdir -p "$T/own"
cat > "$T/own/own.py" <<'PY'
import os, sys, time
def g(x): return x
def f():
    for _ in range(3): g(1)
calls = []
def prof(frame, event, arg):
    if event == "call": calls.append(frame.f_code.co_name)
sys.setprofile(prof)
open(sys.argv[1] + ".ready", "w").close()
while not os.path.exists(sys.argv[1]): time.sleep(0.01)
for _ in range(10): f()
sys.setprofile(None)
print("own profiler saw f", calls.count("f"), "g", calls.count("g"), flush=True)
PY
"$PY" "$T/own/own.py" "$T/own/go" > "$T/own/out" & tp=$!; tap_bg $tp
wait_until 30 "[ -e '$T/own/go.ready' ]"
"$LT" profile -p $tp -t python -o "$T/own/c.log" -v 1 > /dev/null 2> "$T/own/err" & cp=$!; tap_bg $cp
wait_for "$T/own/err" "tracing functions|cannot trace" && touch "$T/own/go"
wait $tp; wait $cp
grep "profiler of their own" "$T/own/err" | cut -c1-160 | sed 's/^/# /'
[ "$(cat "$T/own/out")" = "own profiler saw f 10 g 30" ] && grep -q "1 thread(s) already run a profiler" "$T/own/err"
check_rc $? "a thread with its own sys.setprofile profiler keeps it (f 10, g 30 seen by it); said once"

# 5. launch form: the hook goes in once the new process can take it
launched "$PY" l 100 0
grep -E "python: pid" "$T/l/err" | cut -c1-200 | sed 's/^/# /'
check_calls "$T/l" "launched: exact counts once the hook is in" f=100 g=300 loop=1
[ "$(cat $T/l/coll_rc)" = 0 ] && grep -q "command exited with status 3" "$T/l/err"
check_rc $? "launched: collector exits 0, the command's status 3 is reported"

# 6. the collector is SIGKILLed: the library sees the socket close, removes
# its hook, flushes its log and closes the file; nobody is left to publish
# it, so it stays as the collector's .NAME.partial, readable; the target
# carries on and holds no fd of ours
mkdir -p "$T/k"
"$PY" "$SCRIPT" 100 "$T/k/go" "$T/k/hold" 0 > "$T/k/out" & tp=$!; tap_bg $tp
wait_until 30 "[ -e '$T/k/go.ready' ]" # its fds are those of a started interpreter
fdlist() { for f in /proc/$tp/fd/*; do echo "${f##*/} $(readlink "$f")"; done 2>/dev/null | sort; }
fdlist > "$T/k/fd.before"
"$LT" profile -p $tp -t python -o "$T/k/c.log" -v 1 > /dev/null 2> "$T/k/err" & cp=$!; tap_bg $cp
wait_for "$T/k/err" "tracing functions"
kill -KILL $cp; wait $cp 2>/dev/null
ours_open() { fdlist | comm -13 "$T/k/fd.before" - | grep -c .; }
wait_until 10 '[ "$(ours_open)" = 0 ]'
left_open=$(ours_open)
touch "$T/k/go"; wait_for "$T/k/out" "pyh_calltree done"; touch "$T/k/hold"; wait $tp; rc=$?
part=$(ls "$T/k"/.llmtracker-python.*.evlog.partial 2>/dev/null | head -1)
"$DUMP" "$part" 2>/dev/null > "$T/k/dump"; drc=$?
grep -c " func=g " "$T/k/dump" > "$T/k/g"
echo "# left open in the target: $left_open; partial: ${part##*/} (dump rc $drc)"
[ $rc = 3 ] && [ "$(cat $T/k/out)" = "pyh_calltree done 100 0 30300" ] && [ "$(cat $T/k/g)" = 0 ] &&
	[ -n "$part" ] && [ $drc = 0 ] && [ "$left_open" = 0 ] && ! ls "$T/k"/llmtracker-python.*.evlog >/dev/null 2>&1
check_rc $? "collector SIGKILLed: hook removed (no g calls recorded after), readable .partial left, no fd of ours left in the target, target unchanged"
tap_done
