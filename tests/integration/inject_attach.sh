#!/bin/bash
# The ptrace injector against a real multi-threaded program: the real
# libllmtracker-inject.so (no GPU here: it answers "cannot start") is loaded
# and unloaded 100 times; the program's output and exit status must be
# exactly those of a run without injection, the library must come from a
# memfd and leave no file behind, a target that dies mid-injection must
# give a clean error, and a failed injected call must leave the borrowed
# thread's errno as it was.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
need_built "$T/inject_target" "$T/inject_tool" "$T/errno_target" "$LIB"
if [ "$(id -u)" != 0 ]; then skip "needs root for ptrace"; fi
if [ "$(uname -m)" != x86_64 ]; then skip "the injector supports x86-64 only"; fi

tap_tmpdir W llmt-inject
tap_at_exit 'exec 9>&- 2>/dev/null; kill $TP 2>/dev/null'
TP=

ITERS=20000
# Reference run, no injection.
"$T/inject_target" 4 $ITERS </dev/null >"$W/ref.raw"; ref_rc=$?
grep -v '^ready' "$W/ref.raw" >"$W/ref.out"

# Injected run: stdin from a fifo keeps it alive while we work on it.
mkdir "$W/cwd"
mkfifo "$W/in"
TGT=$(realpath "$T/inject_target")
(cd "$W/cwd" && exec "$TGT" 4 $ITERS <"$W/in" >"$W/run.out") &
TP=$!
exec 9>"$W/in"
wait_for "$W/run.out" '^ready' 5
PID=$(awk '/^ready/ {print $2}' "$W/run.out")
check "target started (pid ${PID:-?})" '[ -n "$PID" ] && kill -0 "$PID"'
touch "$W/stamp"

# Hold the library loaded and look at the target meanwhile.
coproc HOLD { "$T/inject_tool" hold "$PID" "$LIB"; }
# copies of the coprocess's pipes: bash unsets HOLD (and closes its fds) as
# soon as the tool exits, which may come before the last read
exec {hold_r}<&"${HOLD[0]}" {hold_w}>&"${HOLD[1]}"
hold_pid=$HOLD_PID
read -r -t 10 line <&$hold_r
check "library loaded into the running target" '[ "$line" = loaded ]'
check "it is mapped from a memfd" 'grep -q "/memfd:llmtracker-inject (deleted)" /proc/$PID/maps'
check "not from a file path" '! grep -q "libllmtracker-inject.so" /proc/$PID/maps'
check "target keeps its 5 threads (plus the library's one)" '[ "$(ls /proc/$PID/task | wc -l)" = 6 ]'
echo go >&$hold_w
read -r -t 10 line <&$hold_r
wait "$hold_pid" 2>/dev/null
exec {hold_r}<&- {hold_w}>&-
check "library unloaded ($line)" '[ "$line" = "unloaded 1" ]'
check "no mapping left after unloading" '! grep -q memfd:llmtracker /proc/$PID/maps'

out=$(timeout 120 "$T/inject_tool" cycle "$PID" 100 "$LIB")
echo "$out" | sed 's/^/# /'
check "100 loads and unloads in a row" 'echo "$out" | grep -q "cycles=100 ok=100 memfd_seen=100 memfd_left=0"'
check "the library says in one line why CUDA profiling cannot start here" \
	'echo "$out" | grep -q "start reply: err .*CUDA kernel profiling cannot start"'
fds_open=$(ls /proc/$PID/fd | wc -l)
check "no descriptor left open in the target ($fds_open open)" '[ "$fds_open" -le 6 ]'

exec 9>&-
wait "$TP"; run_rc=$?
TP=
grep -v '^ready' "$W/run.out" >"$W/run.cmp"
check "target output identical to the run without injection" 'cmp -s "$W/ref.out" "$W/run.cmp"'
check "target exit status unchanged ($run_rc)" '[ "$run_rc" = "$ref_rc" ]'
check "nothing written into the target's cwd" '[ -z "$(ls -A "$W/cwd")" ]'
# files only, at the top: other tests running meanwhile make directories there
left=$(find /tmp /dev/shm -maxdepth 1 -type f -newer "$W/stamp" \( -name '*llmtracker*' -o -name '*inject*' \) \
	! -path "$W*" 2>/dev/null)
check "no file left in /tmp or /dev/shm" '[ -z "$left" ]'

# A target that exits mid-injection: a clean error, no hang, no crash.
bad=0
for delay in 0.01 0.03 0.05 0.08 0.13; do
	"$T/inject_target" 4 200000 < <(sleep 20) >/dev/null 2>&1 &
	vp=$!
	sleep 0.05
	(sleep "$delay"; kill -9 $vp) &
	res=$(timeout 30 "$T/inject_tool" cycle "$vp" 2000 "$LIB" 2>&1); rc=$?
	wait $vp 2>/dev/null
	echo "# killed after ${delay}s: rc=$rc: $(echo "$res" | grep -v '^start reply' | head -1)"
	if [ $rc -ne 1 ] || ! echo "$res" | grep -qE "exited|is exiting|not found|zombie"; then
		bad=$((bad + 1))
	fi
done
check "a target killed mid-injection gives a clean error every time" '[ $bad -eq 0 ]'
res=$("$T/inject_tool" hold 999999999 "$LIB" </dev/null 2>&1); rc=$?
check "a PID that does not exist is refused ($res)" '[ $rc -eq 1 ] && echo "$res" | grep -q "not found"'

# An injected system call that fails (memfd_create: the target is at its
# fd limit) sets errno in libc's syscall(); the borrowed thread gets its
# own errno back (tests/progs/errno_target: 4242, sleeping in read).
mkfifo "$W/ein"
"$T/errno_target" <"$W/ein" >"$W/errno.out" 2>&1 &
ep=$!
tap_bg $ep
exec 8>"$W/ein"
wait_for "$W/errno.out" '^ready' 5
res=$("$T/inject_tool" hold "$ep" "$LIB" </dev/null 2>&1)
echo "# $res"
echo x >&8
exec 8>&-
wait $ep
check "a failed injected system call leaves the borrowed thread's errno as it was ($(grep '^errno' "$W/errno.out"))" \
	'echo "$res" | grep -q "memfd_create failed: Too many open files" && grep -q "^errno 4242 " "$W/errno.out"'
tap_done
