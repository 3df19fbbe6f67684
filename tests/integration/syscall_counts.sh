#!/bin/bash
# -t syscall records every system call of every thread exactly: a program
# making known numbers of calls from 3 threads, launched with `-- CMD`, and
# two programs given with -p at once, one of which exits mid-run.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_counts" "$PROGS/sys_names"
getppid=$(sys_nr getppid) write=$(sys_nr write) nanosleep=$(sys_nr nanosleep)

# --- launch form, 3 threads
"$LT" profile -t syscall -o "$T/launch.evlog" -- "$PROGS/sys_counts" -n 3 2>"$T/launch.err"
check "launch: collector exits 0" test $? -eq 0
pid=$(events "$T/launch.evlog" process | head -1 | sed 's/.* pid=\([0-9]*\) .*/\1/')
c=$(count_sys "$T/launch.evlog" "$pid" "$getppid")
check "launch: getppid x3000 (got $c)" test "$c" -eq 3000
c=$(count_sys "$T/launch.evlog" "$pid" "$write")
check "launch: write x2331 (got $c)" test "$c" -eq 2331
c=$(count_sys "$T/launch.evlog" "$pid" "$nanosleep")
check "launch: nanosleep x150 (got $c)" test "$c" -eq 150
tids=$(events "$T/launch.evlog" syscall | awk -v nr="nr=$getppid" '$0 ~ " "nr" " { print $4 }' | sort -u | wc -l)
check "launch: getppid from 3 threads (got $tids)" test "$tids" -eq 3
check "launch: summary names the output" grep -q "wrote $T/launch.evlog" "$T/launch.err"
check "launch: 3 new threads recorded" test "$(events "$T/launch.evlog" thread | grep -c 'is_new=1')" -ge 3
check "launch: process exit recorded" test "$(events "$T/launch.evlog" process_exit | grep -c "pid=$pid ")" -eq 1

# --- end to end: `llmtracker export` names the calls in the trace JSON
if [ -x "$BUILD/bin/llmtracker-convert" ] && command -v python3 >/dev/null; then
	"$LT" export -i "$T/launch.evlog" -o "$T/launch.json" >/dev/null 2>&1
	check "export to trace JSON exits 0" test $? -eq 0
	got=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
n = lambda name: sum(1 for e in ev if e.get("cat") == "syscall" and e.get("name") == name and e.get("ph") == "X")
print(n("getppid"), n("write"), n("nanosleep"))' "$T/launch.json")
	check "trace JSON: getppid/write/nanosleep events by name ($got)" test "$got" = "3000 2331 150"
fi

# --- several -p at once; A exits mid-run, B keeps the session going
"$PROGS/sys_counts" -w -n 2 & a=$!
"$PROGS/sys_counts" -w -n 1 & b=$!
tap_bg "$a" "$b"
usr1_ready "$a" && usr1_ready "$b"
"$LT" profile -p "$a" -p "$b" -t syscall -o "$T/multi.evlog" -v 1 2>"$T/multi.err" & lt=$!
tap_bg "$lt"
check "multi: attached" wait_for "$T/multi.err" "profiling 2 process" 20
usr1 "$a"; usr1 "$a"; wait "$a"
wait_for "$T/multi.err" "target $a exited" 10
check "multi: collector still running after one target exited" kill -0 "$lt"
usr1 "$b"; usr1 "$b"; wait "$b"
wait_until 10 '! kill -0 "$lt" 2>/dev/null'
wait "$lt"; rc=$?
check "multi: collector stops by itself when every target exited (rc $rc)" test "$rc" -eq 0
check "multi: stop reason" grep -q "every target exited" "$T/multi.err"
c=$(count_sys "$T/multi.evlog" "$a" "$getppid")
check "multi: A getppid x2000 (got $c)" test "$c" -eq 2000
c=$(count_sys "$T/multi.evlog" "$b" "$getppid")
check "multi: B getppid x1000 (got $c)" test "$c" -eq 1000
c=$(count_sys "$T/multi.evlog" "$b" "$write")
check "multi: B write x777 (got $c)" test "$c" -eq 777
check "multi: both exits recorded" test "$(events "$T/multi.evlog" process_exit | grep -cE "pid=($a|$b) ")" -eq 2
tap_done
