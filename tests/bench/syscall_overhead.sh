#!/bin/bash
# Slowdown of a syscall-heavy program (N one-byte reads of /dev/zero) under
# `llmtracker profile -t syscall`, side by side with `strace -f -c` and no
# tracer, plus the collector's own CPU per million events. Prints figures;
# asserts nothing. strace runs N/10 calls (it is slow); figures are per call.
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

base=$("$PROG" "$N")
lt=$("$LT" profile -t syscall -o "$T/b.evlog" -- "$PROG" "$N" 2>"$T/lt.err")
st=none
command -v strace >/dev/null && st=$(strace -f -c -o /dev/null "$PROG" "$NS")

b=$(per_call_ns "$base" "$N") l=$(per_call_ns "$lt" "$N")
printf "%-28s %10s ns/call  %6s\n" "no tracer ($N reads)" "$b" "1.00x"
printf "%-28s %10s ns/call  %6s\n" "llmtracker -t syscall" "$l" "$(awk -v a="$l" -v b="$b" 'BEGIN { printf "%.2fx", a / b }')"
if [ "$st" != none ]; then
	s=$(per_call_ns "$st" "$NS")
	printf "%-28s %10s ns/call  %6s\n" "strace -f -c ($NS reads)" "$s" "$(awk -v a="$s" -v b="$b" 'BEGIN { printf "%.2fx", a / b }')"
fi
events=$(awk '$1 == "syscall" { print $2 }' "$T/lt.err")
lost=$(awk '$1 == "syscall" { print $3 }' "$T/lt.err")
cpu=$(sed -n 's/.*collector CPU \([0-9.]*\) s.*/\1/p' "$T/lt.err")
bytes=$(sed -n 's/.*: \([0-9]*\) bytes,.*/\1/p' "$T/lt.err")
echo "collector: ${events:-?} events, ${lost:-?} lost, ${cpu:-?} s CPU" \
	"($(awk -v c="${cpu:-0}" -v e="${events:-1}" 'BEGIN { printf "%.3f", c * 1e6 / (e ? e : 1) }') s per million events)," \
	"log ${bytes:-?} bytes ($(awk -v b="${bytes:-0}" -v e="${events:-1}" 'BEGIN { printf "%.1f", b / (e ? e : 1) }') bytes/event)"
