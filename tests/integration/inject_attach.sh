#!/bin/bash
# The ptrace injector against a real multi-threaded program: the real
# libllmtracker-inject.so (no GPU here: it answers "cannot start") is loaded
# and unloaded 100 times; the program's output and exit status must be
# exactly those of a run without injection, the library must come from a
# memfd and leave no file behind, and a target that dies mid-injection must
# give a clean error.
set -u
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
for f in "$T/inject_target" "$T/inject_tool" "$LIB"; do
	[ -e "$f" ] || { echo "not ok 1 - missing $f (make tests-bin)"; exit 1; }
done
if [ "$(id -u)" != 0 ]; then echo "skip: needs root for ptrace"; exit 77; fi
if [ "$(uname -m)" != x86_64 ]; then echo "skip: the injector supports x86-64 only"; exit 77; fi

W=$(mktemp -d /tmp/llmt-inject.XXXXXX)
trap 'exec 9>&- 2>/dev/null; kill $TP 2>/dev/null; rm -rf "$W"' EXIT
TP=
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); echo "not ok $n - $*"; }
check() { if eval "$1"; then ok "$2"; else nok "$2"; fi; }

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
for _ in $(seq 100); do grep -q '^ready' "$W/run.out" 2>/dev/null && break; sleep 0.05; done
PID=$(awk '/^ready/ {print $2}' "$W/run.out")
check '[ -n "$PID" ] && kill -0 "$PID"' "target started (pid ${PID:-?})"
touch "$W/stamp"

# Hold the library loaded and look at the target meanwhile.
coproc HOLD { "$T/inject_tool" hold "$PID" "$LIB"; }
read -r -t 10 line <&"${HOLD[0]}"
check '[ "$line" = loaded ]' "library loaded into the running target"
check 'grep -q "/memfd:llmtracker-inject (deleted)" /proc/$PID/maps' "it is mapped from a memfd"
check '! grep -q "libllmtracker-inject.so" /proc/$PID/maps' "not from a file path"
check '[ "$(ls /proc/$PID/task | wc -l)" -ge 5 ]' "target keeps its threads (plus the library's one)"
echo go >&"${HOLD[1]}"
read -r -t 10 line <&"${HOLD[0]}"
[ -n "${HOLD_PID:-}" ] && wait "$HOLD_PID" 2>/dev/null
check '[ "$line" = "unloaded 1" ]' "library unloaded ($line)"
check '! grep -q memfd:llmtracker /proc/$PID/maps' "no mapping left after unloading"

out=$(timeout 120 "$T/inject_tool" cycle "$PID" 100 "$LIB")
echo "$out" | sed 's/^/# /'
check 'echo "$out" | grep -q "cycles=100 ok=100 memfd_seen=100 memfd_left=0"' "100 loads and unloads in a row"
check 'echo "$out" | grep -q "start reply: err .*CUDA kernel profiling cannot start"' \
	"the library says in one line why CUDA profiling cannot start here"
fds_open=$(ls /proc/$PID/fd | wc -l)
check '[ "$fds_open" -le 6 ]' "no descriptor left open in the target ($fds_open open)"

exec 9>&-
wait "$TP"; run_rc=$?
TP=
grep -v '^ready' "$W/run.out" >"$W/run.cmp"
check 'cmp -s "$W/ref.out" "$W/run.cmp"' "target output identical to the run without injection"
check '[ "$run_rc" = "$ref_rc" ]' "target exit status unchanged ($run_rc)"
check '[ -z "$(ls -A "$W/cwd")" ]' "nothing written into the target's cwd"
# files only, at the top: other tests running meanwhile make directories there
left=$(find /tmp /dev/shm -maxdepth 1 -type f -newer "$W/stamp" \( -name '*llmtracker*' -o -name '*inject*' \) \
	! -path "$W*" 2>/dev/null)
check '[ -z "$left" ]' "no file left in /tmp or /dev/shm"

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
	if [ $rc -ne 1 ] || ! echo "$res" | grep -qE "exited|not found|zombie"; then
		bad=$((bad + 1))
	fi
done
check '[ $bad -eq 0 ]' "a target killed mid-injection gives a clean error every time"
res=$("$T/inject_tool" hold 999999999 "$LIB" </dev/null 2>&1); rc=$?
check '[ $rc -eq 1 ] && echo "$res" | grep -q "not found"' "a PID that does not exist is refused ($res)"
exit 0
