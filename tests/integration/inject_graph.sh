#!/bin/bash
# CUDA kernel recording in a process that runs a CUDA graph (no GPU: the
# stand-in libcupti.so.13 of tests/progs/fake_cupti.c with FAKE_CUPTI_GRAPH=1
# marks its kernels as a graph's nodes and, as the GPU does, kills the
# process if CUPTI is finalized after them). Detaching must leave CUPTI
# attached and the library loaded, say so, and a second profile of the same
# process must reuse that copy (no second one mapped) and record again.
# `teardown=always` (finalize whatever ran) must kill it: the stand-in is
# faithful, so the first checks could fail.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
need_built "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_tool" "$T/inject_logdump" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root for ptrace"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"

tap_tmpdir W llmt-inject-graph
TP= TP2=
tap_at_exit 'exec 9>&- 8>&- 2>/dev/null; kill $TP $TP2 2>/dev/null'
# copies of the library mapped: distinct memfd inodes
copies() { awk '/memfd:llmtracker-inject/ { print $5 }' "/proc/$1/maps" 2>/dev/null | sort -u | wc -l; }
start_app() { # FIFO OUT FD: sets APP; the app's stdin stays open on FD
	mkfifo "$1"
	FAKE_CUPTI_GRAPH=1 FAKE_CUPTI_RATE=50000 "$T/fake_cuda_app" "$T/fake_cupti" <"$1" >"$2" 2>&1 &
	APP=$!
	eval "exec $3>\"\$1\""
	wait_for "$2" '^ready' 20
}

start_app "$W/in" "$W/app.out" 9; TP=$APP
check "target started" 'grep -q "^ready $TP" "$W/app.out"'
for round in 1 2; do
	mkdir "$W/r$round"
	LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $TP "$LIB" "$W/r$round" 1 >"$W/r$round.out" 2>&1
	sed "s/^/# [$round] /" "$W/r$round.out" | tail -3
	check "[$round] kernels recorded, CUPTI kept (not finalized), library not unloaded" \
		'grep -Eq "kernels=[1-9][0-9]* .*finalized=0 unloaded=0" "$W/r$round.out"'
	check "[$round] the reason is said" 'grep -q "a CUDA graph ran while recording" "$W/r$round.out"'
	# the stand-in, as CUPTI, describes its device once per process: the
	# second session's log, on the kept CUPTI, must describe it too
	check "[$round] the log describes the device" \
		'"$T/inject_logdump" "$W/r$round"/*.evlog 2>/dev/null | grep -q "^D	0	132	.*Fake GPU"'
	check "[$round] the process is alive" 'kill -0 $TP'
	check "[$round] one copy of the library mapped (found $(copies $TP))" '[ "$(copies $TP)" = 1 ]'
done
exec 9>&-
wait $TP
check "target exited 0 after two profiles (CUPTI never finalized)" '[ $? = 0 ] && grep -q "finalized=0" "$W/app.out"'
TP=

start_app "$W/in2" "$W/app2.out" 8; TP2=$APP
mkdir "$W/r3"
LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $TP2 "$LIB" "$W/r3" 1 teardown=always >"$W/r3.out" 2>&1
wait_until 5 '! kill -0 $TP2 2>/dev/null'
check "teardown=always after a graph kills the stand-in's process (the fault it models)" \
	'! kill -0 $TP2 2>/dev/null && grep -q "the GPU faults" "$W/app2.out"'
exec 8>&-
tap_done
