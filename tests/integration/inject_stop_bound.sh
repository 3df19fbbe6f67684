#!/bin/bash
# -d bounds the profile whatever the targets do: at the end every target's
# injected library is asked to stop at once and waited for at once, each on
# its own bound, and only those that answered are unloaded.
#   1. three CPython 3.11 targets (pyenv's) that hold the GIL in one long C
#      call when the profile stops (tests/workloads/pyd_gil.py: the hook goes
#      in while they run Python, then they enter the call): with -d 4 the
#      collector exits within 6 s of its start (more on a loaded machine), names the three in its
#      summary as keeping the library ("did not answer within N ms (holding
#      the GIL?)"), and leaves them running: not stopped, no tracer on any
#      thread, their CPU time still growing.
#   2. three targets that answer (they sleep between Python calls): each is
#      stopped and unloaded as before (the library gone from its maps, its
#      log published).
#   3. the two together, -d 1: the answering ones are unloaded, the stuck one
#      kept and named, the collector gone within 4 s of its start (the stuck
#      one's wait runs beside the others', not after them).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
LIB=$(realpath -m "$BUILD/lib/libllmtracker-inject.so")
W=$PWD/tests/workloads/pyd_gil.py
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
need_built "$LT" "$LIB"
need_root "eBPF, ptrace"
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
[ -x "$PY" ] || skip "no pyenv python3.11 under $PYENV"

tap_tmpdir T stopbound-test

utime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 }'; }
# running, not stopped (T/t) nor a zombie, no tracer on any thread, CPU
# time growing
untouched() { # PID
	local p=$1 st u0
	st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -c1)
	case "$st" in R|S|D) ;; *) echo "# pid $p: state '$st'"; return 1 ;; esac
	if grep -h "^TracerPid:" /proc/$p/task/*/status | grep -qv "TracerPid:[[:space:]]0$"; then
		echo "# pid $p: a thread is traced"; return 1
	fi
	u0=$(utime $p)
	wait_until 10 "[ \"\$(utime $p)\" -gt $u0 ]" || { echo "# pid $p: utime stays $u0"; return 1; }
}
lib_in() { grep -q "memfd:llmtracker-inject" "/proc/$1/maps"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# run TAG D STUCK... -- FREE...: targets that will hold the GIL in C (STUCK
# count) and ones that keep answering (FREE count); profile them with -d D
# once the hook is in every one, the stuck ones entering their C call;
# sets $wall (collector start to exit, s), $pids_stuck, $pids_free, $crc.
run() {
	local d=$T/$1 dur=$2 nstuck=$3 nfree=$4 p a b args=() i
	mkdir -p "$d"
	pids_stuck= pids_free=
	for i in $(seq "$nstuck"); do
		"$PY" "$W" "$d/go" & p=$!; tap_bg $p; pids_stuck="$pids_stuck $p"
	done
	for i in $(seq "$nfree"); do
		"$PY" "$W" "$d/never" & p=$!; tap_bg $p; pids_free="$pids_free $p"
	done
	for p in $pids_stuck $pids_free; do args+=(-p "$p"); done
	a=$(date +%s.%N)
	"$LT" profile -d "$dur" -t python "${args[@]}" -o "$d/c.log" -v 1 > /dev/null 2> "$d/err" & p=$!; tap_bg $p
	wait_until 20 "[ \$(grep -c 'python: pid [0-9]*: tracing functions through the injected' $d/err) -ge $((nstuck + nfree)) ]" ||
		echo "# not every hook went in: $(grep -c 'tracing functions' "$d/err")"
	touch "$d/go"
	for i in $pids_stuck; do
		wait_until 10 "[ -e $d/go.$i ]" || echo "# pid $i did not enter its C call"
	done
	wait $p; crc=$?
	b=$(date +%s.%N)
	wall=$(secs "$a" "$b")
	echo "# $1: -d $dur, $nstuck stuck + $nfree answering: collector exited after $wall s (status $crc);" \
		"started $(date -d @"$a" +%T.%N | cut -c1-12), its log:"
	grep -E "^[IWE]" "$d/err" | grep -E "ring buffer|profiling [0-9]+ process|stopping:|stays|sources quiesced" |
		awk '{ print "#   " $2, substr($0, index($0, $4), 90) }'
	grep -E "^ +(pid [0-9]+ \(|the injected library stays)" "$d/err" | sed 's/^/#/'
}
kept_named() { # DIR PID...: the summary names each as keeping the library, and why
	local d=$1 p
	shift
	for p; do
		grep -qE "^    pid $p \(python3\.11\): did not answer within [0-9]+ ms \(holding the GIL\?\)$" "$d/err" ||
			{ echo "# pid $p not named as keeping the library"; return 1; }
	done
}
unloaded() { # DIR PID...: stopped, hook removed, library out, log published
	local d=$1 p
	shift
	for p; do
		grep -qE "python: pid $p: hook .*removed=1" "$d/err" && ! lib_in $p &&
			ls "$d"/llmtracker-python.*."$p".*.evlog > /dev/null 2>&1 &&
			! grep -qE "^    pid $p \(" "$d/err" || { echo "# pid $p not unloaded as before"; return 1; }
	done
}

# 1. three targets holding the GIL in C at stop time
# -d + 2 s on a quiet machine; a loaded one stretches the start and the
# teardown, never the stop's own deadlines (TAP_TIME_SCALE: tests/lib/tap.sh)
run stuck 4 3 0
bound=$((4 + 2 * TAP_TIME_SCALE))
[ "$crc" = 0 ] && awk -v w="$wall" -v b="$bound" 'BEGIN { exit !(w <= b) }'
check_rc $? "-d 4, three targets holding the GIL in C at stop: the collector exits within $bound s of its start ($wall s)"
kept_named "$T/stuck" $pids_stuck &&
	grep -q "the injected library stays loaded in 3 processes" "$T/stuck/err"
check_rc $? "the summary names the three (pid, name) as keeping the library: did not answer (holding the GIL?)"
ok=0
for p in $pids_stuck; do untouched $p && lib_in $p || ok=1; done
check_rc $ok "each runs on with its library loaded: not stopped, no tracer on any thread, its CPU time growing"

# 2. targets that answer: stopped and unloaded as before
run free 1 0 3
[ "$crc" = 0 ] && unloaded "$T/free" $pids_free && ! grep -q "stays loaded" "$T/free/err"
check_rc $? "three answering targets: each stopped, its hook removed, the library gone from its maps, its log published"
ok=0
for p in $pids_free; do untouched $p || ok=1; done
check_rc $ok "they run on untraced"

# 3. both at once: one stuck target does not keep the others' libraries in
run mixed 1 1 2
[ "$crc" = 0 ] && unloaded "$T/mixed" $pids_free && kept_named "$T/mixed" $pids_stuck &&
	untouched $pids_stuck && lib_in $pids_stuck && awk -v w="$wall" 'BEGIN { exit !(w <= 4.0) }'
check_rc $? "one stuck and two answering: the two unloaded, the stuck one kept and named; exit within -d + 3 s ($wall s)"
tap_done
