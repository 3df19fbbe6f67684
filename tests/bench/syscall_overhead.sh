#!/bin/bash
# Slowdown of a syscall-heavy program (N one-byte reads of /dev/zero) under
# `llmtracker profile -t syscall`, side by side with `strace -f -c` and no
# tracer; what every other process pays while some process is profiled; and
# the collector's own CPU per million events. Prints figures; asserts
# nothing. Best of 3 runs (the machine is shared); strace runs N/10 calls
# once (it is slow); all figures are per call.
set -u
BUILD=${BUILD:-build}
LT=$BUILD/bin/llmtracker
PROG=$BUILD/tests/progs/sys_reads
N=${N:-2000000}
NS=$((N / 10))
[ "$(id -u)" -eq 0 ] || { echo "syscall_overhead: needs root (skipped)"; exit 0; }
[ -x "$LT" ] && [ -x "$PROG" ] || { echo "syscall_overhead: build $LT and $PROG first"; exit 1; }
T=$(mktemp -d /tmp/lt-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

per_call_ns() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.1f", s * 1e9 / n }'; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }
line() { printf "%-40s %9s ns/call  %s\n" "$1" "$2" "$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2fx", a / b }')"; }

base="" traced="" other=""
for i in 1 2 3; do
	base=$(min "$base" "$("$PROG" "$N")")
	rm -f "$T/b.evlog"
	t=$("$LT" profile -t syscall -o "$T/b.evlog" -- "$PROG" "$N" 2>"$T/lt.err.new") &&
		mv "$T/lt.err.new" "$T/lt.err"
	traced=$(min "$traced" "$t")
done
# Tracepoints on, this process not a target: the cost to the rest of the node.
sleep 30 & idle=$!
"$LT" profile -p "$idle" -t syscall -o "$T/idle.evlog" -v 1 2>"$T/idle.err" & lt=$!
for i in $(seq 100); do grep -q "profiling 1 process" "$T/idle.err" && break; sleep 0.05; done
for i in 1 2 3; do other=$(min "$other" "$("$PROG" "$N")"); done
kill -INT "$lt"; wait "$lt"; kill "$idle"; wait "$idle" 2>/dev/null

b=$(per_call_ns "$base" "$N")
line "no tracer ($N reads)" "$b" "$b"
line "llmtracker -t syscall" "$(per_call_ns "$traced" "$N")" "$b"
line "not a target, while profiling another" "$(per_call_ns "$other" "$N")" "$b"
if command -v strace >/dev/null; then
	st=$(strace -f -c -o /dev/null "$PROG" "$NS")
	line "strace -f -c ($NS reads)" "$(per_call_ns "$st" "$NS")" "$b"
fi
events=$(awk '$1 == "syscall" { print $2 }' "$T/lt.err")
lost=$(awk '$1 == "syscall" { print $3 }' "$T/lt.err")
cpu=$(sed -n 's/.*collector CPU \([0-9.]*\) s.*/\1/p' "$T/lt.err")
bytes=$(sed -n 's/.*: \([0-9]*\) bytes,.*/\1/p' "$T/lt.err")
echo "collector: ${events:-?} events, ${lost:-?} lost, ${cpu:-?} s CPU" \
	"($(awk -v c="${cpu:-0}" -v e="${events:-1}" 'BEGIN { printf "%.3f", c * 1e6 / (e ? e : 1) }') s per million events)," \
	"log ${bytes:-?} bytes ($(awk -v b="${bytes:-0}" -v e="${events:-1}" 'BEGIN { printf "%.1f", b / (e ? e : 1) }') bytes/event)"
