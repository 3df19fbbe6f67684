#!/bin/bash
# Why the collector's store I/O is in a process of its own (collector/session/store.h):
# on an object-store FUSE mount (s3fs over a local S3 server, stopped with
# SIGSTOP for STALL seconds), a process whose thread is in close() of a file
# it wrote cannot exit until the store answers: the close sends FLUSH (s3fs
# uploads there), which the kernel waits out uninterruptibly once the daemon
# has it, SIGKILL included. Prints the thread's state and how long the exit
# took; then the same stall at the end of a profile, whose collector exits
# within its bound while its writer process waits. Skips (status 0) where
# s3fs cannot run.
set -u
export BUILD=${BUILD:-build}
LLMT_ROOT=${LLMT_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
STALL=${STALL:-15}
. "$LLMT_ROOT/tests/lib/tap.sh"
skip() { echo "store_exit_hold: skipped: $*"; exit 0; }
LT=$BUILD/bin/llmtracker
P=$BUILD/tests/progs
[ -x "$LT" ] && [ -x "$P/close_then_exit" ] && [ -x "$P/busy_rate" ] ||
	{ echo "store_exit_hold: make tests-bin first"; exit 1; }
tap_tmpdir T lt-bench
. "$LLMT_ROOT/tests/integration/store.inc"
need_store
st_server_start
st_mount A
now() { echo "${EPOCHREALTIME/./}"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }

mkfifo "$T/go"
"$P/close_then_exit" "$A/f" "$T/ready" <"$T/go" & p=$!
exec 3>"$T/go"
wait_until 20 "[ -e '$T/ready' ]" || { echo "store_exit_hold: the file was not written"; exit 1; }
st_server_pause
t0=$(now)
echo >&3
sleep 2
echo "a thread in close() on the stalled store, its process exiting:"
for t in /proc/$p/task/*; do
	echo "  task $(basename "$t"): state $(awk '{ print $3 }' "$t/stat" 2>/dev/null), waiting in $(cat "$t/wchan" 2>/dev/null)"
done
kill -9 "$p"
sleep 1
echo "  after SIGKILL: state $(awk '{ print $3 }' /proc/$p/stat 2>/dev/null || echo gone)"
sleep $((STALL - 3))
st_server_resume
wait "$p"
echo "  the process was reaped $(secs "$t0" "$(now)") s after its exit began (the store stopped for $STALL s)"

mkdir "$A/run"
"$P/busy_rate" "$T/rate" 60 & tp=$!
tap_bg "$tp"
t1=$(now)
"$LT" profile -p "$tp" -t syscall -q -d 5 --segment-seconds 1 -o "$A/run/node.evlog" 2>"$T/p.err" & lt=$!
sleep 3
st_server_pause
wait "$lt"
t2=$(now)
echo "a profile (-d 5) whose store stops at 3 s: the collector exited $(secs "$t1" "$t2") s after it started;"
echo "  its writer process ($(pgrep -x llmt-store | tr '\n' ' ')) waits for the store"
sleep 2
st_server_resume
wait_until 60 "st_objects | grep -qx run/node.evlog" &&
	echo "  the store answered: the writer published the log $(secs "$t1" "$(now)") s after the start"
