#!/bin/bash
# Targets include their descendants (a shell wrapper starting workers, as
# torchrun does), for `--` and for -p, unless --no-children.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_counts" "$PROGS/sys_names"
getppid=$(sys_nr getppid) wait4=$(sys_nr wait4)
W="$PROGS/sys_counts -n 1"

# sum of getppid over every process but the wrapper (bash calls getppid too)
workers_getppid() {
	local wrapper
	wrapper=$(events "$1" process | head -1 | awk '{ print $3 }' | cut -d= -f2)
	echo $(($(count_sys "$1" 0 "$getppid") - $(count_sys "$1" "$wrapper" "$getppid")))
}

"$LT" profile -t syscall -o "$T/kids.evlog" -- bash -c "$W & $W & wait" 2>"$T/kids.err"
check "wrapper with 2 workers: collector exits 0" test $? -eq 0
c=$(workers_getppid "$T/kids.evlog")
check "default follows children: getppid x2000 from the workers (got $c)" test "$c" -eq 2000
n=$(events "$T/kids.evlog" process | grep -c 'is_exec=1 *$\|is_exec=1')
check "workers' exec recorded (got $n execs)" test "$n" -ge 3
n=$(events "$T/kids.evlog" process_exit | wc -l)
check "3 process exits recorded (got $n)" test "$n" -eq 3

"$LT" profile -t syscall --no-children -o "$T/nokids.evlog" -- bash -c "$W & $W & wait" 2>"$T/nokids.err"
check "--no-children: collector exits 0" test $? -eq 0
c=$(workers_getppid "$T/nokids.evlog")
check "--no-children: no worker syscalls (got $c getppid)" test "$c" -eq 0
pids=$(events "$T/nokids.evlog" syscall | awk '{ print $3 }' | sort -u | wc -l)
check "--no-children: only the wrapper's syscalls (got $pids pids)" test "$pids" -eq 1
c=$(count_sys "$T/nokids.evlog" 0 "$wait4")
check "--no-children: the wrapper itself recorded (wait4 x$c)" test "$c" -ge 1

# -p: a worker that exists before attach, and one forked after.
bash -c "$PROGS/sys_counts -w -n 1 & until [ -e '$T/fork' ]; do sleep 0.05; done; $W; wait" & wrapper=$!
tap_bg "$wrapper"
wait_until 10 'early=$(pgrep -P "$wrapper" sys_counts) && usr1_ready "$early" 1'
"$LT" profile -p "$wrapper" -t syscall -o "$T/p.evlog" -v 1 2>"$T/p.err" & lt=$!
tap_bg "$lt"
check "-p wrapper: attached" wait_for "$T/p.err" "profiling 1 process" 20
touch "$T/fork" # the second worker starts after the attach
usr1 "$early"; usr1 "$early"
wait "$lt"; rc=$?
check "-p wrapper: collector stops when the tree exited (rc $rc)" test "$rc" -eq 0
c=$(count_sys "$T/p.evlog" "$early" "$getppid")
check "-p wrapper: existing child followed (getppid x$c)" test "$c" -eq 1000
c=$(workers_getppid "$T/p.evlog")
check "-p wrapper: child forked after attach followed (total getppid x$c)" test "$c" -eq 2000
tap_done
