#!/bin/bash
# Stopping: -d, SIGINT, SIGTERM; --delay; a collector killed with SIGKILL
# leaves a partial log the reader recovers, nothing attached, and the
# target running as before.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_counts" "$PROGS/sys_names"
getppid=$(sys_nr getppid)
command -v bpftool >/dev/null || skip "bpftool not installed"

# ids of the BPF programs a process holds (its prog and link fds)
prog_ids_of() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null | sed -n 's/^prog_id:[[:space:]]*//p' | sort -u
}

sleep 30 & idle=$!
tap_bg "$idle"

# -d (the wrapper's wait4 and sleep's nanosleep are in flight at the end)
start=$(date +%s.%N)
"$LT" profile -t syscall -d 1 -o "$T/d.evlog" -- bash -c 'sleep 2; true' 2>"$T/d.err"
rc=$? el=$(echo "$(date +%s.%N) - $start" | bc)
check "-d 1 stops by itself (rc $rc, ${el}s)" test "$rc" -eq 0 -a "$(echo "$el < 5" | bc)" -eq 1
check "-d: reason in the summary" grep -q "duration reached" "$T/d.err"
check "-d: log published" test -s "$T/d.evlog"
check "-d: exec names the child" grep -q "name=sleep .*is_exec=1" <(events "$T/d.evlog" process)
check "-d: the sleeping call in flight is recorded (ret -EINPROGRESS)" grep -q "ret=-115" <(events "$T/d.evlog" syscall)

# SIGINT, SIGTERM
for sig in INT TERM; do
	"$LT" profile -p "$idle" -t syscall -o "$T/$sig.evlog" -v 1 2>"$T/$sig.err" & lt=$!
	tap_bg "$lt"
	wait_for "$T/$sig.err" "profiling 1 process" 20
	kill -"$sig" "$lt"; wait "$lt"; rc=$?
	check "SIG$sig stops cleanly (rc $rc) and publishes the log" test "$rc" -eq 0 -a -s "$T/$sig.evlog"
done

# Every source's probes are off before any writes its tables: the cpu
# source's symbolization (seconds on a big job) runs with nothing attached.
"$LT" profile -p "$idle" -t syscall,cpu -d 1 -o "$T/q.evlog" -v 1 2>"$T/q.err"
q=$(grep -n "sources quiesced" "$T/q.err" | cut -d: -f1) y=$(grep -n "cpu: .*symbolized in" "$T/q.err" | cut -d: -f1)
check "at the end, every source's probes go off before the tables are written (lines ${q:-none} < ${y:-none})" \
	test -n "$q" -a -n "$y" -a "${q:-0}" -lt "${y:-0}"

# --delay: nothing is recorded before it ends
"$PROGS/sys_counts" -w -n 1 & w=$!
tap_bg "$w"
usr1_ready "$w"
"$LT" profile -p "$w" -t syscall --delay 3 -o "$T/delay.evlog" -v 1 2>"$T/delay.err" & lt=$!
tap_bg "$lt"
usr1 "$w" # its calls, made during the delay: done once its thread is gone again
wait_until 10 '[ "$(ls /proc/$w/task | wc -l)" = 1 ] && [ "$(awk "/^syscw/ { print \$2 }" /proc/$w/io)" -ge 777 ]'
check "--delay: not attached while waiting" test -z "$(prog_ids_of "$lt")"
wait_for "$T/delay.err" "profiling 1 process" 20
usr1 "$w"; wait "$lt"
check "--delay: calls made during the delay are not recorded" test "$(count_sys "$T/delay.evlog" "$w" "$getppid")" -eq 0

# SIGKILL mid-run
"$PROGS/sys_counts" -w -n 1 & w=$!
tap_bg "$w"
usr1_ready "$w"
"$LT" profile -p "$w" -t syscall -o "$T/killed.evlog" -v 1 2>"$T/killed.err" & lt=$!
tap_bg "$lt"
wait_for "$T/killed.err" "profiling 1 process" 20
ids=$(prog_ids_of "$lt")
check "programs attached while running ($(echo $ids))" test -n "$ids"
usr1 "$w"
# until the writer has flushed them (every 1 s) into its partial file
wait_until 15 '[ "$(count_sys "$T/.killed.evlog.partial" "$w" "$getppid" 2>/dev/null)" = 1000 ]'
kill -9 "$lt"; wait "$lt" 2>/dev/null
# The kernel frees a dead process's programs after an RCU grace period: give it up to 5 s.
progs_left() {
	left=""
	for id in $ids; do bpftool prog show id "$id" >/dev/null 2>&1 && left="$left $id"; done
	[ -z "$left" ]
}
wait_until 5 progs_left
check "nothing left attached after SIGKILL (left:$left)" test -z "$left"
partial="$T/.killed.evlog.partial"
check "final name not published" test ! -e "$T/killed.evlog"
check "partial file left" test -s "$partial"
c=$(count_sys "$partial" "$w" "$getppid")
check "reader recovers the partial log (getppid x$c)" test "$c" -eq 1000
usr1 "$w"; wait "$w"; rc=$?
check "target unharmed: it finishes normally (rc $rc)" test "$rc" -eq 0
tap_done
