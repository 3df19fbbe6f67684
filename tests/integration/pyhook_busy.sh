#!/bin/bash
# -t python on CPU-bound interpreters (tests/workloads/pyb_busy.py: no sleep,
# no I/O, so no thread ever sleeps in a system call): the injector stops a
# busy thread at a patched CPython function entry (collector/injection/inject_latch.h).
# Counts are exact: the workload's measured part runs between two marker
# calls, after SIGUSR1, which the test sends once the collector says it
# traces; every function of the script called in between must be recorded
# as often as sys.setprofile counts it in a reference run of the same part
# (pyb_check.py). Interpreters: pyenv's (no USDT probes), Debian's
# python3.11 (USDT probes: the hook first, the probes with
# --python-method usdt or when the hook cannot go in). Also: a loop that
# calls and allocates nothing is refused in one line (Debian's python falls
# back to USDT); the launch form (hook installed at Py_RunMain: exact from
# the script's first line; USDT where the interpreter has probes, by
# default); attach/detach cycles on busy interpreters
# (PYB_CYCLES, default 10) leave them unchanged, with no library mapping and
# no patched byte behind; a SIGKILLed collector's patch is undone by its
# guardian.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
LIB=$(realpath -m "$BUILD/lib/libllmtracker-inject.so")
S=$PWD/tests/workloads/pyb_busy.py
CHECK=$PWD/tests/integration/pyb_check.py
PATCH=$PWD/tests/integration/pyb_patch.py
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
CYCLES=${PYB_CYCLES:-10}
need_built "$LT" "$DUMP" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace)"
PY=$(ls "$PYENV"/3.12*/bin/python3.12 2>/dev/null | head -1)
[ -x "$PY" ] || skip "no pyenv python3.12 under $PYENV"
USDTPY=/usr/bin/python3.11
readelf -n $USDTPY 2>/dev/null | grep -q function__entry || USDTPY=

tap_tmpdir T pyb-test
said() { grep -oE "python: pid [0-9]+: (tracing|cannot).*" "$1" | cut -c1-260 | sed 's/^/# /'; }
counts() { # dir ref: exact counts of the measured part, from every log in dir
	"$DUMP" "$1"/*.evlog "$1"/c.log 2> /dev/null | python3 "$CHECK" "$S" "$2" > "$1/check"
	local rc=$?
	sed 's/^/# /' "$1/check"
	return $rc
}

# attach TAG PY GO N THREADS [profile options]: run the workload, attach,
# send SIGUSR1 once the collector says it traces (or gave up), let it end.
attach() {
	local d=$T/$1 py=$2 go=$3 n=$4 th=$5 tp cp
	shift 5
	mkdir -p "$d"
	"$py" "$S" ref "$n" "$th" > "$d/ref"
	"$py" "$S" measure "$go" "$n" "$th" > "$d/out" 2> "$d/stderr" & tp=$!; tap_bg $tp
	usr1_caught $tp # spinning, its handler in
	"$LT" profile -p $tp -t python -o "$d/c.log" -v 1 "$@" > /dev/null 2> "$d/err" & cp=$!; tap_bg $cp
	wait_for "$d/err" "python: pid [0-9]+: (tracing|cannot)" 20
	kill -USR1 $tp; wait $tp; echo $? > "$d/rc"
	wait $cp; echo $? > "$d/coll_rc"
}
unchanged() { # dir n threads: the workload's own output and status
	[ "$(cat "$1/rc")" = 3 ] && [ ! -s "$1/stderr" ] &&
		[ "$(cat "$1/out")" = "$("$PY" "$S" measure now "$2" "$3" 2>&1)" ]
}

# 1. pyenv interpreters (no USDT probes): the hook, from a stopped busy thread
for v in 3.12 3.9 3.10 3.11 3.13; do
	p=$(ls "$PYENV"/$v.*/bin/python$v 2>/dev/null | head -1)
	if [ ! -x "$p" ]; then ok "# SKIP no python$v"; continue; fi
	attach "a$v" "$p" signal 100 2
	said "$T/a$v/err"
	counts "$T/a$v" "$(cat "$T/a$v/ref")" && grep -q "loaded from a busy thread stopped at" "$T/a$v/err" &&
		[ "$(cat "$T/a$v/coll_rc")" = 0 ] && unchanged "$T/a$v" 100 2
	check_rc $? "python$v -p, CPU-bound (3 threads): hook loaded from a busy thread; exact counts of every function; output and exit status unchanged"
done

# 2. Debian's python3.11 has USDT probes: the hook still comes first
if [ -n "$USDTPY" ]; then
	attach u "$USDTPY" signal 100 2
	said "$T/u/err"
	counts "$T/u" "$(cat "$T/u/ref")" && grep -q "through the injected profile hook" "$T/u/err" &&
		grep -q "loaded from a busy thread" "$T/u/err" && unchanged "$T/u" 100 2
	check_rc $? "$USDTPY -p (has USDT): the injected hook by default; exact counts; unchanged"
	attach uu "$USDTPY" signal 100 2 --python-method usdt
	said "$T/uu/err"
	counts "$T/uu" "$(cat "$T/uu/ref")" && grep -q "through the USDT probes" "$T/uu/err" &&
		! ls "$T/uu"/llmtracker-python.*.evlog > /dev/null 2>&1 && unchanged "$T/uu" 100 2
	check_rc $? "$USDTPY -p --python-method usdt: the USDT probes; exact counts; unchanged"
else
	ok "# SKIP no /usr/bin/python3.11 with USDT probes"
	ok "# SKIP no /usr/bin/python3.11 with USDT probes"
fi

# 3. a loop that calls and allocates nothing offers no stop: refused in one
# line, in bounded time, target untouched; with USDT probes, they take over
attach bare "$PY" bare 50 0
said "$T/bare/err"
[ "$(grep -c "cannot trace Python functions: the profile hook could not go in: .*no thread called" "$T/bare/err")" = 1 ] &&
	unchanged "$T/bare" 50 0 && [ "$(cat "$T/bare/coll_rc")" = 0 ]
check_rc $? "python3.12, a loop without calls or allocations: one line says why, target unchanged"
if [ -n "$USDTPY" ]; then
	attach ubare "$USDTPY" bare 50 0
	said "$T/ubare/err"
	counts "$T/ubare" "$(cat "$T/ubare/ref")" &&
		grep -q "tracing functions through the USDT probes.*the profile hook could not go in" "$T/ubare/err" &&
		unchanged "$T/ubare" 50 0
	check_rc $? "$USDTPY, the same loop: falls back to the USDT probes, saying why; exact counts"
else
	ok "# SKIP no /usr/bin/python3.11 with USDT probes"
fi

# 4. launch form: the hook is installed at Py_RunMain, on the main thread,
# before the script's first instruction: the measured part runs at once
# (no signal) and still every call is recorded
launch() { # TAG PY [profile options]
	local d=$T/$1 py=$2
	shift 2
	mkdir -p "$d"
	"$py" "$S" ref 100 2 > "$d/ref"
	"$LT" profile -t python -o "$d/c.log" -v 1 "$@" -- "$py" "$S" measure now 100 2 > "$d/out" 2> "$d/err"
	echo $? > "$d/coll_rc"
	said "$d/err"
	counts "$d" "$(cat "$d/ref")" && [ "$(cat "$d/coll_rc")" = 0 ] && grep -q "command exited with status 3" "$d/err" &&
		grep -q "installed at Py_RunMain before the program's first Python instruction" "$d/err" &&
		grep -q "^pyb_busy measure n=100 threads=2 " "$d/out"
}
launch l "$PY"
check_rc $? "launched python3.12, CPU-bound from its first line: hook installed at Py_RunMain, exact counts, status 3 reported"
if [ -n "$USDTPY" ]; then
	launch lh "$USDTPY"
	check_rc $? "launched $USDTPY (USDT probes too; auto picks the hook): the same through the hook"
else
	ok "# SKIP no /usr/bin/python3.11 with USDT probes"
fi
if [ -n "$USDTPY" ]; then
	mkdir -p "$T/lu"
	"$USDTPY" "$S" ref 100 2 > "$T/lu/ref"
	"$LT" profile -t python --python-method usdt -o "$T/lu/c.log" -v 1 -- "$USDTPY" "$S" measure now 100 2 \
		> "$T/lu/out" 2> "$T/lu/err"
	echo $? > "$T/lu/coll_rc"
	said "$T/lu/err"
	counts "$T/lu" "$(cat "$T/lu/ref")" && [ "$(cat "$T/lu/coll_rc")" = 0 ] && grep -q "through the USDT probes" "$T/lu/err"
	check_rc $? "launched $USDTPY --python-method usdt (measured part at once): USDT probes armed before its first instruction, exact counts"
else
	ok "# SKIP no /usr/bin/python3.11 with USDT probes"
fi

# 5. attach/detach cycles on busy interpreters: each cycle traces, detaches,
# and leaves neither the library nor a patched byte; the target's result
# and status are unchanged at the end
cycles() { # TAG THREADS
	local d=$T/$1 th=$2 tp i bad=0 latched=0 c
	mkdir -p "$d"
	"$PY" "$S" cycles "$th" 1 > "$d/out" 2> "$d/stderr" & tp=$!; tap_bg $tp
	usr1_caught $tp
	for i in $(seq "$CYCLES"); do
		"$LT" profile -p $tp -t python -d 0.3 -q -o "$d/c$i.log" -v 1 > /dev/null 2> "$d/err$i"; c=$?
		latched=$((latched + $(grep -c "loaded from a busy thread" "$d/err$i")))
		if [ $c != 0 ] || ! grep -q "removed=1" "$d/err$i" || grep -q "memfd:llmtracker" /proc/$tp/maps ||
			python3 "$PATCH" $tp | grep -q ebfe || ! grep -q "TracerPid:.0" /proc/$tp/status; then
			bad=$((bad + 1)); sed 's/^/# /' "$d/err$i" | grep -E "^# [EW]" | head -3
		fi
	done
	kill -USR1 $tp; wait $tp; echo $? > "$d/rc"
	echo "# $1: $CYCLES cycles, $bad bad, $latched loaded from a stopped busy thread; target said: $(cat "$d/out")"
	"$PY" "$S" cycles "$th" 1 > "$d/ref_out" & tp=$!; tap_bg $tp
	usr1_caught $tp; kill -USR1 $tp; wait $tp
	[ $bad = 0 ] && [ "$(cat "$d/rc")" = 3 ] && [ ! -s "$d/stderr" ] && grep -q "wrong=0" "$d/out" &&
		[ "$(cat "$d/out")" = "$(cat "$d/ref_out")" ]
}
cycles c1 0
check_rc $? "$CYCLES attach/detach cycles, one busy thread: each traced, library and patch gone after, result unchanged"
cycles c4 3
check_rc $? "$CYCLES attach/detach cycles, 4 busy threads: the same"

# 6. the collector is SIGKILLed while threads spin on the patch: its
# guardian puts the text back; the target goes on unchanged, untraced
mkdir -p "$T/k"
"$PY" "$S" cycles 0 1 > "$T/k/out" 2> "$T/k/stderr" & tp=$!; tap_bg $tp
usr1_caught $tp
LLMT_TEST_LATCH_STALL_MS=5000 "$LT" profile -p $tp -t python -o "$T/k/c.log" > /dev/null 2> "$T/k/err" & cp=$!; tap_bg $cp
wait_until 10 'python3 "$PATCH" $tp | grep -q ebfe'
patched=$(python3 "$PATCH" $tp | grep -c ebfe)
kill -KILL $cp; wait $cp 2> /dev/null
t0=$EPOCHREALTIME
wait_until 5 '! python3 "$PATCH" $tp | grep -q ebfe'
restored_ms=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }')
left=$(python3 "$PATCH" $tp | grep -c ebfe)
tracer=$(sed -n 's/^TracerPid:\t//p' /proc/$tp/status)
kill -USR1 $tp; wait $tp; rc=$?
echo "# patched entries while stalled: $patched; left after SIGKILL: $left (restored within ~$restored_ms ms); tracer after: $tracer"
[ "$patched" -ge 1 ] && [ "$left" = 0 ] && [ "$tracer" = 0 ] && [ $rc = 3 ] && grep -q "wrong=0" "$T/k/out"
check_rc $? "collector SIGKILLed with threads spinning on its patch: the guardian restores the text, the target finishes unchanged"
tap_done
