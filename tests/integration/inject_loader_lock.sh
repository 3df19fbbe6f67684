#!/bin/bash
# A call into the target that outlives the injector's patience: another
# thread holds the dynamic loader's lock (tests/progs/loader_hold, as a long
# library constructor would) for longer than a remote call's timeout, so the
# injected dlopen() waits. The collector gives the call up; the borrowed
# thread is let go (no tracer on any thread), finishes the dlopen once the
# lock is free and goes on as it was: the job ends with its own status,
# never SIGSEGV. Also: the injector killed while its call waits, and at
# random moments of load/unload cycles (INJECT_KILLS rounds, 10 by default).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
P=$BUILD/tests/progs
LIB=$(realpath -m "$BUILD/lib/libllmtracker-inject.so")
need_built "$P/loader_hold" "$P/inject_tool" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root (ptrace)"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"
export LLMT_SKIP_DRIVER_CHECK=1
HOLD_MS=${LOADER_HOLD_MS:-15000}
tap_tmpdir T inject-loader-lock

tracers() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^TracerPid:/ && $2 != 0' | wc -l; }
start_job() { # tag: loader_hold under a fifo we hold open on fd 9
	rm -f "$T/$1.in"
	mkfifo -m 600 "$T/$1.in"
	"$P/loader_hold" "$HOLD_MS" <"$T/$1.in" >"$T/$1.out" 2>&1 &
	JOB=$!
	exec 9>"$T/$1.in"
	wait_for "$T/$1.out" '^ready$'
}
end_job() { # tag: close its input, its status
	exec 9>&-
	wait_until $((HOLD_MS / 1000 + 20)) '! kill -0 '$JOB' 2>/dev/null'
	wait $JOB
}

# ---- the call given up at its timeout
start_job a
t0=${EPOCHREALTIME/./}
"$P/inject_tool" cycle $JOB 1 "$LIB" >"$T/a.tool" 2>&1
trc=$? ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
sed 's/^/# /' "$T/a.tool"
check "the injected dlopen waits past its timeout and is given up, said in one line (${ms} ms)" \
	"[ $trc != 0 ] && grep -q 'did not return within .* let go' $T/a.tool"
check "no thread of the job is traced after the injector gave up" "[ \$(tracers $JOB) = 0 ]"
wait_for "$T/a.out" '^released$' $((HOLD_MS / 1000 + 20))
rc_a=0; end_job a || rc_a=$?
check "the loader's lock freed: the job goes on and ends with its own status (7: got $rc_a)" "[ $rc_a = 7 ]"

# ---- the injector SIGKILLed while its call waits
start_job b
"$P/inject_tool" cycle $JOB 1 "$LIB" >"$T/b.tool" 2>&1 & tool=$!
# the borrowed thread is in the injected call once it stops in a futex of dlopen
wait_until 10 '[ "$(awk "{print \$1}" /proc/'$JOB'/task/'$JOB'/syscall 2>/dev/null)" = 202 ]'
kill -KILL $tool; wait $tool 2>/dev/null
wait_until 5 '[ $(tracers '$JOB') = 0 ]'
check "the injector killed mid-call: no thread of the job stays traced" "[ \$(tracers $JOB) = 0 ]"
wait_for "$T/b.out" '^released$' $((HOLD_MS / 1000 + 20))
rc_b=0; end_job b || rc_b=$?
check "... and the job ends with its own status (7: got $rc_b)" "[ $rc_b = 7 ]"
# ---- a borrowed thread asleep in nanosleep sleeps its whole time: its
# restart (restart_syscall) survives the calls made on it
t0=${EPOCHREALTIME/./}
sleep 3 & sp=$!
wait_until 5 '[ "$(awk "{print \$1}" /proc/'$sp'/syscall 2>/dev/null)" = 230 ]'
"$P/inject_tool" cycle $sp 2 "$LIB" >"$T/s.tool" 2>&1
trc=$?
wait $sp
slept=$(((${EPOCHREALTIME/./} - t0) / 1000))
check "a thread borrowed in nanosleep: 2 load/unload cycles ($trc), and it still sleeps its 3 s (${slept} ms)" \
	"[ $trc = 0 ] && [ $slept -ge 2950 ]"

# ---- the injector SIGKILLed at random moments of load/unload cycles
ROUNDS=${INJECT_KILLS:-10}
HOLD_MS=0
bad=0
for i in $(seq "$ROUNDS"); do
	start_job c$i
	wait_for "$T/c$i.out" '^released$'
	"$P/inject_tool" cycle $JOB 50 "$LIB" >"$T/c$i.tool" 2>&1 & tool=$!
	delay=$((RANDOM % 1500))
	sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
	kill -KILL $tool 2>/dev/null; wait $tool 2>/dev/null
	wait_until 5 '[ $(tracers '$JOB') = 0 ]'
	tr=$(tracers $JOB) state=$(awk '{print $3}' /proc/$JOB/stat 2>/dev/null)
	rc=0; end_job c$i || rc=$?
	echo "# round $i: killed after $delay ms ($(grep -c '^cycle\|ok' $T/c$i.tool) lines said); tracers $tr, state $state, job exit $rc"
	[ "$tr" = 0 ] && [ "$state" != T ] && [ "$state" != t ] && [ $rc = 7 ] || bad=$((bad + 1))
done
check "the injector SIGKILLed at random moments of loading and unloading, $ROUNDS times: \
no thread left traced or stopped, the job ends with its own status ($bad bad)" "[ $bad = 0 ]"
tap_done
