#!/bin/bash
# -t python against real interpreters: /usr/bin/python3.11 (built with
# USDT probes) running a known call tree (f() calls g() 3 times, 100
# iterations), launched and attached by -p; an interpreter without probes
# gets a clear message; probes are gone from the target after detaching.
# Every run says --python-method usdt, the method tested here
# (tests/integration/pyhook_busy.sh checks which one -t python picks).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
PY=/usr/bin/python3.11
SCRIPT=$PWD/tests/workloads/py_calltree.py
CHECK=$PWD/tests/integration/python_check.py
need_built "$LT" "$DUMP"
[ "$(id -u)" = 0 ] || skip "needs root for eBPF"
[ -x $PY ] && readelf -n $PY 2>/dev/null | grep -q function__entry ||
	skip "$PY with USDT function probes is not installed"
command -v python3 >/dev/null || skip "python3 (for the checks) missing"

tap_tmpdir T pyusdt-test
check_calls() { # log what args...
	local log=$1 what=$2; shift 2
	"$DUMP" "$log" > "$T/dump" 2> "$T/dump.err" && python3 "$CHECK" "$@" < "$T/dump" > "$T/check"
	local rc=$?
	sed 's/^/# /' "$T/check"
	check_rc $rc "$what"
}

# 1. launched: traced from its first instruction
"$LT" profile --python-method usdt -t python -o "$T/launch.log" -- $PY "$SCRIPT" 100 > "$T/out" 2> "$T/err"
check_rc $? "profile -t python -- python3.11 script exits 0"
check_calls "$T/launch.log" "launched: exact f/g enter+exit counts, nested per thread" f=100 g=300

CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
if [ -x "$CONV" ] && "$CONV" -i "$T/launch.log" -o "$T/launch.json" > /dev/null 2>&1; then
	python3 - "$T/launch.json" "$SCRIPT" <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
py = [e for e in ev if e.get("cat") == "python_function" and e.get("ph") == "X"]
n = collections.Counter(e["name"] for e in py if e["args"]["file"] == sys.argv[2])
print("# python_function X events from the script:", dict(n))
assert n["f"] == 100 and n["g"] == 300
assert all(e["args"]["line"] > 0 for e in py if e["name"] in ("f", "g"))
PY
	check_rc $? "converted: python_function X events f=100 g=300 with file and line"
else
	ok "# SKIP llmtracker-convert not built or failed"
fi

# 1b. four threads at once: every thread's calls, each nested on its own thread
"$LT" profile --python-method usdt -t python -o "$T/threads.log" -- $PY "$PWD/tests/workloads/py_threads.py" 4 200 > /dev/null 2> "$T/err"
check_calls "$T/threads.log" "4 threads: exact counts, nesting per thread" f=800 g=2400 work=4
"$DUMP" "$T/threads.log" | grep '^py_enter.* func=work ' | grep -o 'tid=[0-9]*' | sort -u | wc -l | grep -qx 4
check_rc $? "the 4 workers are recorded on 4 distinct threads"

# 2. attached by -p to a running interpreter, which then runs the tree
$PY "$SCRIPT" 100 "$T/go" > "$T/p.out" & tp=$!; tap_bg $tp
wait_until 10 '[ -e "$T/go.ready" ]'
"$LT" profile --python-method usdt -p $tp -t python -o "$T/attach.log" -v 1 > "$T/out" 2> "$T/err" & cp=$!; tap_bg $cp
if wait_for "$T/err" "tracing functions" 5; then touch "$T/go"; fi
wait $cp; rc=$?
check_rc $rc "profile -p PID -t python exits 0 when the target ends"
check_calls "$T/attach.log" "attached: exact f/g enter+exit counts, nested per thread" f=100 g=300

# 2b. a target in another mount namespace (as in a container), where
# /usr/bin/python3.11 is a different file than ours: probed through /proc/PID/root
if command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
	cp $PY "$T/py-copy"
	unshare -m sh -c "mount --bind '$T/py-copy' $PY && exec $PY '$SCRIPT' 100 '$T/gomnt'" > /dev/null & tp=$!; tap_bg $tp
	wait_until 10 '[ -e "$T/gomnt.ready" ]'
	"$LT" profile --python-method usdt -p $tp -t python -o "$T/mnt.log" -v 1 > /dev/null 2> "$T/err" & cp=$!; tap_bg $cp
	wait_for "$T/err" "tracing functions" 5 && touch "$T/gomnt"
	wait $cp
	[ "$(stat -L -c %i /proc/$tp/exe 2>/dev/null || stat -c %i "$T/py-copy")" != "$(stat -c %i $PY)" ]
	check_rc $? "the namespaced target runs a different python3.11 file than the host's"
	check_calls "$T/mnt.log" "other mount namespace: exact counts through /proc/PID/root" f=100 g=300
else
	ok "# SKIP unshare -m not available"
fi

# 3. the interpreter's probes are off again once we detach
$PY "$SCRIPT" 10 "$T/go2" > /dev/null & tp=$!; tap_bg $tp
wait_until 10 '[ -e "$T/go2.ready" ]'
sema() { # entry, return, line semaphores of a non-PIE python3.11
	python3 - "$1" <<'PY'
import re, subprocess, struct, sys
notes = subprocess.run(["readelf", "-n", "/usr/bin/python3.11"], capture_output=True, text=True).stdout
sem = {}
for name, addr in re.findall(r"Name: (\w+)\n.*?Semaphore: (0x[0-9a-f]+)", notes, re.S):
    sem[name] = int(addr, 16)
with open("/proc/%s/mem" % sys.argv[1], "rb") as m:
    out = []
    for k in ("function__entry", "function__return", "line"):
        m.seek(sem[k]); out.append(struct.unpack("<H", m.read(2))[0])
print(*out)
PY
}
if readelf -h $PY | grep -q 'EXEC (Executable'; then
	# sema_until PID WANT: the semaphores once they read WANT (the collector
	# attaches later on a busy machine), or as they are after 30 s
	sema_until() {
		local v pid=$1 want=$2
		wait_until 30 'v=$(sema $pid); [ "$v" = "$want" ]'
		echo "$v"
	}
	before=$(sema $tp)
	"$LT" profile --python-method usdt -p $tp -t python -d 60 -o "$T/d.log" > /dev/null 2> "$T/err" & cp=$!; tap_bg $cp
	during=$(sema_until $tp "1 1 1")
	kill -INT $cp; wait $cp
	after=$(sema $tp)
	echo "# semaphores entry/return/line: before '$before' during '$during' after '$after'"
	[ "$before" = "0 0 0" ] && [ "$during" = "1 1 1" ] && [ "$after" = "0 0 0" ]
	check_rc $? "probes raised while profiling, the target left as found after"
	"$LT" profile --python-method usdt -p $tp -t python -d 10 -o "$T/k.log" > /dev/null 2>&1 & cp=$!; tap_bg $cp
	during=$(sema_until $tp "1 1 1"); kill -KILL $cp; wait $cp 2>/dev/null
	after=$(sema_until $tp "0 0 0")
	echo "# collector killed with SIGKILL: during '$during' after '$after'"
	[ "$during" = "1 1 1" ] && [ "$after" = "0 0 0" ] && kill -0 $tp
	check_rc $? "even a SIGKILLed collector leaves the target's probes off and the target running"
else
	ok "# SKIP python3.11 is position independent; semaphore check needs fixed addresses"
fi
touch "$T/go2"; wait $tp 2>/dev/null

# 4. a child exec'd by a shell is followed into Python
PY_CALLTREE_DELAY=0.3 "$LT" profile --python-method usdt -t python -o "$T/exec.log" -- /bin/sh -c "sleep 0.1; exec $PY $SCRIPT 100" \
	> /dev/null 2> "$T/err"
check_calls "$T/exec.log" "sh -c 'exec python3.11 ...': followed through exec, exact counts" f=100 g=300

# 5. EBPF_USDT_PYTHON_PATH names the interpreter
EBPF_USDT_PYTHON_PATH=$PY "$LT" profile --python-method usdt -t python -o "$T/env.log" -- $PY "$SCRIPT" 20 > /dev/null 2> "$T/err"
check_calls "$T/env.log" "EBPF_USDT_PYTHON_PATH=$PY is used" f=20 g=60
EBPF_USDT_PYTHON_PATH=/nonexistent/python "$LT" profile --python-method usdt -t python -o "$T/env2.log" -- $PY "$SCRIPT" 5 \
	> /dev/null 2> "$T/err"; rc=$?
grep -q "EBPF_USDT_PYTHON_PATH=/nonexistent/python cannot be read" "$T/err" && [ $rc -eq 0 ]
check_rc $? "a wrong EBPF_USDT_PYTHON_PATH is named in a clear message"

# 6. an interpreter without USDT probes: one clear line, the rest keeps going
NOUSDT=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
NOUSDT=$(realpath "$NOUSDT" 2>/dev/null)
if [ -n "$NOUSDT" ] && ! readelf -n "$NOUSDT" 2>/dev/null | grep -q function__entry; then
	$PY "$SCRIPT" 100 "$T/go3" > /dev/null & a=$!; tap_bg $a
	"$NOUSDT" -c 'import time; time.sleep(30)' & b=$!; tap_bg $b
	wait_until 10 '[ -e "$T/go3.ready" ]' && wait_exec $b "$NOUSDT"
	# LLMT_PYTHON_HOOK=0: no profile-hook fallback (tests/integration/pyhook_attach.sh covers it)
	LLMT_PYTHON_HOOK=0 "$LT" profile --python-method usdt -p $a -p $b -t python -o "$T/mixed.log" -d 3 -v 1 > /dev/null 2> "$T/err" & cp=$!; tap_bg $cp
	wait_for "$T/err" "tracing functions" 5 && touch "$T/go3"
	wait $a; wait $cp; rc=$?
	grep "cannot trace" "$T/err" | sed 's/^/# /'
	[ $rc -eq 0 ] && [ "$(grep -c "pid $b: cannot trace Python functions: .*has no USDT probes" "$T/err")" = 1 ]
	check_rc $? "python without probes ($NOUSDT): exactly one clear line"
	check_calls "$T/mixed.log" "the USDT-capable target is still traced alongside" f=100 g=300
	kill $b 2>/dev/null
else
	ok "# SKIP no interpreter without USDT probes found"
fi

# 7. not Python at all
"$LT" profile --python-method usdt -t python -o "$T/sleep.log" -- /bin/sleep 0.2 > /dev/null 2> "$T/err"; rc=$?
grep -qE "^  python .*not recorded: no process ran a Python interpreter" "$T/err" && [ $rc -eq 0 ]
check_rc $? "a non-Python command is reported, not an error"
tap_done
