#!/bin/bash
# Cost of Python function tracing on a call-heavy loop (tests/workloads/pyh_callheavy.py),
# side by side in one run: pyenv python3.11 alone and under the injected
# profile hook (`profile -p PID -t python`, no USDT probes there), and
# /usr/bin/python3.11 alone and under its USDT probes. Prints figures;
# asserts nothing.
set -u
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
HOOKPY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
USDTPY=/usr/bin/python3.11
CALLS=${PY_BENCH_CALLS:-300000}
[ -x "$LT" ] || { echo "pyhook_overhead: $LT not built"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "pyhook_overhead: needs root; skipped"; exit 0; }
[ -x "$HOOKPY" ] || { echo "pyhook_overhead: no pyenv python3.11; skipped"; exit 0; }
T=$(mktemp -d /tmp/pyhbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
S=$PWD/tests/workloads/pyh_callheavy.py
rate() { sed -n 's/^calls_per_s \([0-9]*\).*/\1/p' "$1"; }

alone() { # PY CALLS: calls/s, best of 3
	local b=0 r
	for _ in 1 2 3; do
		"$1" "$S" "$2" > "$T/o"; r=$(rate "$T/o"); [ "${r:-0}" -gt "$b" ] && b=$r
	done
	echo $b
}
hooked() { # calls/s under the hook, best of 3
	local b=0 r tp cp
	for _ in 1 2 3; do
		rm -rf "$T/h"; mkdir -p "$T/h"
		"$HOOKPY" "$S" "$CALLS" "$T/h/go" > "$T/h/o" & tp=$!
		sleep 0.2
		"$LT" profile -p $tp -t python -o "$T/h/c.log" -v 1 > /dev/null 2> "$T/h/err" & cp=$!
		for _ in $(seq 100); do grep -q "tracing functions\|cannot" "$T/h/err" && break; sleep 0.05; done
		touch "$T/h/go"; wait $tp; wait $cp
		r=$(rate "$T/h/o"); [ "${r:-0}" -gt "$b" ] && b=$r
		sed -n 's/.*hook \(py_enter=[0-9]*\).*\(dropped=[0-9]*\).*/\1 \2/p' "$T/h/err" > "$T/h.events"
	done
	echo $b
}
usdt() {
	local b=0 r
	for _ in 1 2 3; do
		"$LT" profile -t python -o "$T/u.log" -- $USDTPY "$S" "$CALLS" > "$T/o" 2>/dev/null
		r=$(rate "$T/o"); [ "${r:-0}" -gt "$b" ] && b=$r; rm -f "$T/u.log"
	done
	echo $b
}
h0=$(alone "$HOOKPY" $((CALLS * 10)))
h1=$(hooked)
h2=$(alone "$HOOKPY" $((CALLS * 10)))
if [ -x $USDTPY ] && readelf -n $USDTPY 2>/dev/null | grep -q function__entry; then
	u0=$(alone $USDTPY $((CALLS * 10)))
	u1=$(usdt)
else
	u0=0 u1=0
fi
echo "python calls/s of a 1-line function (best of 3; $CALLS calls traced, $((CALLS * 10)) untraced):"
printf '  %-44s %12s\n' "pyenv python3.11 alone" "$h0" "pyenv python3.11, injected profile hook" "$h1" \
	"pyenv python3.11 alone again" "$h2" "/usr/bin/python3.11 alone" "$u0" "/usr/bin/python3.11, USDT (-t python)" "$u1"
awk -v a="$h0" -v t="$h1" -v ua="$u0" -v ut="$u1" 'BEGIN {
	if (t > 0) printf "  slowdown, hook: %.1fx (%.2f us per traced call)\n", a / t, 1e6 / t - 1e6 / a
	if (ut > 0) printf "  slowdown, USDT: %.1fx (%.2f us per traced call)\n", ua / ut, 1e6 / ut - 1e6 / ua
	if (t > 0 && ut > 0) printf "  hook cost / USDT cost per call: %.2f\n", (1e6 / t - 1e6 / a) / (1e6 / ut - 1e6 / ua) }'
echo "  hook's events (last run): $(cat "$T/h.events" 2>/dev/null)"
