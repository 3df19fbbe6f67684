#!/bin/bash
# Records that do not fit in the ring buffer are counted in BPF, written as
# EV_LOST and reported per source in the summary: with a 1 MiB/CPU buffer
# and the collector stopped (SIGSTOP) while the target makes 200000 calls,
# recorded + lost must still account for every call.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_reads" "$PROGS/sys_names"
read_nr=$(sys_nr read)
mkfifo "$T/go"

"$LT" profile -t syscall --cpu-buffer-size 1 -o "$T/lost.evlog" -v 1 -- \
	bash -c "read x <'$T/go'; exec '$PROGS/sys_reads' 200000" >/dev/null 2>"$T/lost.err" & lt=$!
tap_bg "$lt"
check "attached" wait_for "$T/lost.err" "profiling 1 process" 20
# The command is released just after that line: stop the collector only once
# the command runs (bash, waiting on the fifo), or nobody would read "go".
wait_until 20 pgrep -f "^bash -c read x <'$T/go'" >/dev/null
kill -STOP "$lt"
echo go >"$T/go"
wait_until 10 '! pgrep -f "sys_reads 200000" >/dev/null'
kill -CONT "$lt"
wait "$lt"; rc=$?
check "collector finishes (rc $rc)" test "$rc" -eq 0
lost=$(awk '$1 == "syscall" { print $3 }' "$T/lost.err")
check "summary reports lost syscall events ($lost)" test "${lost:-0}" -gt 0
ev=$(events "$T/lost.evlog" lost | head -1)
check "EV_LOST in the log: $ev" test "$(field "$ev" count)" = "$lost"
reads=$(count_sys "$T/lost.evlog" 0 "$read_nr")
check "recorded ($reads reads) + lost ($lost) >= 200000" test $((reads + lost)) -ge 200000
tap_done
