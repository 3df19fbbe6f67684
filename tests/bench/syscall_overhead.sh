#!/bin/bash
# Slowdown of a syscall-heavy program (N one-byte reads of /dev/zero) under
# `llmtracker profile -t syscall`, side by side with `strace -f -c` and no
# tracer; what every other process pays while some process is profiled; and
# the collector's own CPU per million events. Prints figures; asserts
# nothing. Best of 3 runs, the program's own CPU time (steadier on a shared
# machine) and wall time (what strace costs shows there); strace runs N/10
# calls once (it is slow); all figures are per call.
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
# best "cpu wall" pair so far vs a new one (each field its own minimum)
best() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
	if (a == "") { print b; exit } printf "%s %s", (y[1] < x[1] ? y[1] : x[1]), (y[2] < x[2] ? y[2] : x[2]) }'; }
line() { # what "cpu wall" n base_cpu_ns base_wall_ns
	local c w
	c=$(per_call_ns "${2% *}" "$3") w=$(per_call_ns "${2#* }" "$3")
	printf "%-40s %8s %6s  %8s %6s\n" "$1" "$c" "$(awk -v a="$c" -v b="$4" 'BEGIN { printf "%.2fx", a / b }')" \
		"$w" "$(awk -v a="$w" -v b="$5" 'BEGIN { printf "%.2fx", a / b }')"
}

base="" traced="" other=""
for i in 1 2 3; do
	base=$(best "$base" "$("$PROG" "$N")")
	rm -f "$T/b.evlog"
	t=$("$LT" profile -t syscall -o "$T/b.evlog" -- "$PROG" "$N" 2>"$T/lt.err.new") &&
		mv "$T/lt.err.new" "$T/lt.err"
	traced=$(best "$traced" "$t")
done
# Tracepoints on, this process not a target: the cost to the rest of the node.
sleep 30 & idle=$!
"$LT" profile -p "$idle" -t syscall -o "$T/idle.evlog" -v 1 2>"$T/idle.err" & lt=$!
for i in $(seq 100); do grep -q "profiling 1 process" "$T/idle.err" && break; sleep 0.05; done
for i in 1 2 3; do other=$(best "$other" "$("$PROG" "$N")"); done
kill -INT "$lt"; wait "$lt"; kill "$idle"; wait "$idle" 2>/dev/null

bc_=$(per_call_ns "${base% *}" "$N") bw=$(per_call_ns "${base#* }" "$N")
printf "%-40s %15s  %15s\n" "ns per call, best of 3" "CPU time" "wall time"
line "no tracer ($N reads)" "$base" "$N" "$bc_" "$bw"
line "llmtracker -t syscall" "$traced" "$N" "$bc_" "$bw"
line "not a target, while profiling another" "$other" "$N" "$bc_" "$bw"
if command -v strace >/dev/null; then
	st=$(strace -f -c -o /dev/null "$PROG" "$NS")
	line "strace -f -c ($NS reads, one run)" "$st" "$NS" "$bc_" "$bw"
fi
echo "added CPU per traced call: $(awk -v l="$(per_call_ns "${traced% *}" "$N")" -v b="$bc_" 'BEGIN { printf "%.0f", l - b }') ns;" \
	"per call of any other process while profiling: $(awk -v o="$(per_call_ns "${other% *}" "$N")" -v b="$bc_" 'BEGIN { printf "%.0f", o - b }') ns"
events=$(awk '$1 == "syscall" { print $2 }' "$T/lt.err")
lost=$(awk '$1 == "syscall" { print $3 }' "$T/lt.err")
cpu=$(sed -n 's/.*collector CPU \([0-9.]*\) s.*/\1/p' "$T/lt.err")
bytes=$(sed -n 's/.*: \([0-9]*\) bytes,.*/\1/p' "$T/lt.err")
echo "collector: ${events:-?} events, ${lost:-?} lost, ${cpu:-?} s CPU" \
	"($(awk -v c="${cpu:-0}" -v e="${events:-1}" 'BEGIN { printf "%.3f", c * 1e6 / (e ? e : 1) }') s per million events)," \
	"log ${bytes:-?} bytes ($(awk -v b="${bytes:-0}" -v e="${events:-1}" 'BEGIN { printf "%.1f", b / (e ? e : 1) }') bytes/event)"
