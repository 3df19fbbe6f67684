#!/bin/bash
# What each way of tracing Python calls costs, in one run, on a call-heavy
# loop (tests/workloads/pyh_callheavy.py, a one-line function called N times,
# timed inside the process): per interpreter, calls/s alone, under cProfile,
# under `profile -p PID -t python --python-method hook` and, where the
# interpreter has USDT probes, `--python-method usdt`. Interpreters: pyenv's
# python3.11 (no USDT probes) and Debian's /usr/bin/python3.11 (USDT).
# Prints the cost per traced call (us, against the run alone) and slowdowns
# as ratios; asserts nothing. PY_BENCH_CALLS sets N (traced runs).
set -u
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
CALLS=${PY_BENCH_CALLS:-300000}
[ -x "$LT" ] || { echo "python_methods: $LT not built"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "python_methods: needs root (eBPF, ptrace); skipped"; exit 0; }
T=$(mktemp -d /tmp/pymbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
S=$PWD/tests/workloads/pyh_callheavy.py
rate() { sed -n 's/^calls_per_s \([0-9]*\).*/\1/p' "$1"; }

alone() { # PY: calls/s, best of 3
	local b=0 r
	for _ in 1 2 3; do
		"$1" "$S" "$CALLS" > "$T/o"; r=$(rate "$T/o"); [ "${r:-0}" -gt "$b" ] && b=$r
	done
	echo $b
}
cprofile() { # PY
	local b=0 r
	for _ in 1 2 3; do
		"$1" -m cProfile -o "$T/prof" "$S" "$CALLS" > "$T/o"; r=$(rate "$T/o"); [ "${r:-0}" -gt "$b" ] && b=$r
	done
	echo $b
}
traced() { # PY METHOD: calls/s while attached with that method, best of 3
	local b=0 r tp cp
	for _ in 1 2 3; do
		rm -rf "$T/h"; mkdir -p "$T/h"
		"$1" "$S" "$CALLS" "$T/h/go" > "$T/h/o" & tp=$!
		sleep 0.2
		"$LT" profile -p $tp -t python --python-method "$2" -o "$T/h/c.log" -v 1 > /dev/null 2> "$T/h/err" & cp=$!
		for _ in $(seq 200); do grep -q "python: pid [0-9]*: \(tracing\|cannot\)" "$T/h/err" && break; sleep 0.05; done
		touch "$T/h/go"; wait $tp; wait $cp
		grep -q "python: pid [0-9]*: tracing.*$([ "$2" = usdt ] && echo USDT || echo hook)" "$T/h/err" ||
			{ echo 0; return; }
		r=$(rate "$T/h/o"); [ "${r:-0}" -gt "$b" ] && b=$r
	done
	echo $b
}
row() { # label alone traced
	awk -v l="$1" -v a="$2" -v t="$3" 'BEGIN {
		if (a > 0 && t > 0) printf "  %-40s %10d calls/s  %5.1fx slower  %6.2f us per call\n", l, t, a / t, 1e6 / t - 1e6 / a
		else printf "  %-40s %10s\n", l, "n/a" }'
}

# ms from "source python attached" to the hook's "tracing" line, attaching to
# a CPU-bound interpreter (no thread asleep: a thread is stopped at a patched
# entry): median of 5, and how many of the 5 went through such a stop
busy_inject() { # PY
	local tp i ms=() stopped=0
	for i in 1 2 3 4 5; do
		"$1" "$PWD/tests/workloads/pyb_busy.py" cycles 0 1 > /dev/null & tp=$!
		sleep 0.2
		"$LT" profile -p $tp -t python --python-method hook -d 0.2 -q -o "$T/b.log" -v 1 > /dev/null 2> "$T/b.err"; rm -f "$T"/b.log "$T"/llmtracker-python.*
		kill -USR1 $tp; wait $tp
		stopped=$((stopped + $(grep -c "loaded from a busy thread" "$T/b.err")))
		ms+=("$(awk '/source python attached/ { split($2, a, ":"); s = a[3] } /python: pid [0-9]+: tracing/ { split($2, a, ":"); d = a[3] - s; if (d < 0) d += 60; printf "%d\n", d * 1000 }' "$T/b.err")")
	done
	echo "$(printf '%s\n' "${ms[@]}" | sort -n | sed -n 3p) ms (median of 5; $stopped of 5 through a stopped busy thread)"
}

HOOKPY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
HOOKPY12=$(ls "$PYENV"/3.12*/bin/python3.12 2>/dev/null | head -1)
USDTPY=/usr/bin/python3.11
echo "python calls/s of a 1-line function, $CALLS calls, best of 3; cost per call against the run alone"
echo "(mix: the function also calls three C builtins, as a step's Python calls C ops;"
echo " work: it loops 90 times first, ~1.5 us a call, a million events/s traced):"
declare -A cost
for run in "$HOOKPY 0" "$HOOKPY 1" "$HOOKPY12 0" "$HOOKPY12 1" "$HOOKPY12 2" "$USDTPY 0"; do
	py=${run% *}
	export PYH_MIX=${run#* }
	[ -x "$py" ] || continue
	a=$(alone "$py"); c=$(cprofile "$py"); h=$(traced "$py" hook); u=0
	readelf -n "$py" 2>/dev/null | grep -q function__entry && u=$(traced "$py" usdt)
	echo "$py$([ "$PYH_MIX" = 1 ] && echo " (mix)")$([ "$PYH_MIX" = 2 ] && echo " (work)"): alone $a calls/s"
	row "cProfile" "$a" "$c"
	row "-t python, injected hook" "$a" "$h"
	[ "$u" != 0 ] && row "-t python, USDT probes" "$a" "$u"
	awk -v a="$a" -v c="$c" -v h="$h" -v u="$u" 'BEGIN {
		if (a > 0 && c > 0 && h > 0) printf "  ratios: hook slowdown / cProfile slowdown %.2f", (a / h) / (a / c)
		if (a > 0 && h > 0 && u > 0) printf "; USDT cost per call / hook cost per call %.1f", (1e6 / u - 1e6 / a) / (1e6 / h - 1e6 / a)
		printf "\n" }'
	[ "$PYH_MIX" = 0 ] && echo "  hook into a CPU-bound interpreter: $(busy_inject "$py")"
done
