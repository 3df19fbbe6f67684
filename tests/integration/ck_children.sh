#!/bin/bash
# --enable-cuda-kernel in attach mode reaches the processes the collector
# follows after it attached: a parent (a shell script) is profiled with
# `-p PARENT -t cpu --enable-cuda-kernel true -d N`; once the collector says
# it is profiling, the parent starts three children: A, a shell that waits
# for the test's word and then execs a CUDA program (tests/progs/fake_cuda_app
# with the stand-in CUPTI of tests/progs/fake_cupti.c, copied as
# libcupti.so.13 as a real one is named: the gpu source waits until the driver
# or CUPTI is mapped); B, the CUDA program at once, which once its stdin
# closes execs `sleep` (what was loaded into it goes with the old image);
# C, a process that never loads CUDA (sleep); and D, the CUDA program with
# the stand-in copied as libcuda.so.1 (the driver's name), which forks E once
# CUDA is up (as a DataLoader worker is forked).
#   - A is left alone while it runs no CUDA, gets the library once it does;
#     its kernels are in a published CUPTI log of the profile's session in
#     --cupti-dir, as many as the collector was told of, and the summary's
#     gpu row counts them; A exits normally afterwards with its own output
#     and status;
#   - B gets the library; after its exec the collector's end calls nothing
#     into the new image: the sleep it became runs on, not stopped;
#   - C is left untouched (no library mapped in it while it runs), and no
#     child is named in the gpu row as not seen; the parent (no CUDA) is,
#     with why;
#   - D gets the library; E, whose driver mapping is D's (CUDA does not
#     survive a fork), is never injected (no copy of its own, no line).
# No GPU driver here: the collector's check for one is met in a private
# mount namespace (a /proc/driver/nvidia/version of ours).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$(realpath -m "$BUILD/tests/progs")
COLL=$(realpath -m "$BUILD/bin/llmtracker")
need_built "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_logdump" "$T/evlog_dump" "$COLL"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace, mount namespace)"
need_standin_driver tests/gpu/
tap_tmpdir W llmt-ck-children
PARENT= CP=
ck_cleanup() {
	exec 9>&- 8>&- 2>/dev/null
	[ -n "$CP" ] && kill -INT "$CP" 2>/dev/null && wait "$CP" 2>/dev/null
	for f in "$W"/*.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	[ -n "$PARENT" ] && kill "$PARENT" 2>/dev/null
	return 0
}
tap_at_exit ck_cleanup
injected() { grep -qE "libllmtracker-inject|memfd:llmtracker" "/proc/$1/maps" 2>/dev/null; }
state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null; }

cp "$T/fake_cupti" "$W/libcupti.so.13"
cp "$T/fake_cupti" "$W/libcuda.so.1"
mkfifo "$W/go" "$W/load" "$W/a.in" "$W/b.in" "$W/d.in"
# The parent: waits for the go, then starts the children and waits for them.
printf '%s\n' '#!/bin/bash' 'W=$1 APP=$2' 'read -r _ < "$W/go"' 'export FAKE_CUPTI_RATE=50000' \
	'bash -c '\''read -r _ < "$1/load"; exec "$2" "$1/libcupti.so.13"'\'' _ "$W" "$APP" < "$W/a.in" > "$W/a.out" 2>&1 &' \
	'echo $! > "$W/a.pid"' \
	'"$APP" "$W/libcupti.so.13" /bin/sleep 120 < "$W/b.in" > "$W/b.out" 2>&1 & echo $! > "$W/b.pid"' \
	'sleep 120 & echo $! > "$W/c.pid"' \
	'FAKE_APP_FORK=1 "$APP" "$W/libcuda.so.1" < "$W/d.in" > "$W/d.out" 2>&1 & echo $! > "$W/d.pid"' \
	'wait "$(cat "$W/a.pid")"' 'echo "status $?" > "$W/a.status"' 'wait' > "$W/parent.sh"
bash "$W/parent.sh" "$W" "$T/fake_cuda_app" & PARENT=$!

unshare -m --propagation private sh -c 'mount -t tmpfs stand-in /proc/driver &&
	mkdir /proc/driver/nvidia && echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
	"$COLL" profile -p "$PARENT" -t cpu --enable-cuda-kernel true -d 10 -v 1 -o "$W/main.evlog" \
	--cupti-dir "$W" > "$W/out" 2> "$W/err" & CP=$!
wait_for "$W/err" "profiling 1 process" 30
check "the collector profiles the parent" 'grep -q "profiling 1 process" "$W/err"'
echo go > "$W/go"
exec 9> "$W/a.in" 8> "$W/b.in" 7> "$W/d.in" # the apps' stdin: each runs until its closes
wait_for "$W/b.out" "^ready" 30
wait_for "$W/d.out" "^forked" 30
A=$(cat "$W/a.pid" 2>/dev/null) B=$(cat "$W/b.pid" 2>/dev/null) C=$(cat "$W/c.pid" 2>/dev/null)
D=$(cat "$W/d.pid" 2>/dev/null) E=$(sed -n 's/^forked //p' "$W/d.out")
echo "# parent $PARENT, children A ${A:-?} (CUDA later), B ${B:-?} (CUDA, then exec), C ${C:-?} (no CUDA)," \
	"D ${D:-?} (CUDA, forks), E ${E:-?} (D's fork)"
wait_for "$W/err" "CUDA kernel profiling (of|cannot start in) pid $B" 30
check "B, a CUDA child started after attach, gets the library" \
	'[ -n "$B" ] && grep -q "CUDA kernel profiling of pid $B started" "$W/err" && injected "$B"'
check "A, running no CUDA yet, is left alone" '[ -n "$A" ] && kill -0 "$A" && ! injected "$A"'
echo load > "$W/load"
wait_for "$W/a.out" "^ready" 30
wait_for "$W/err" "CUDA kernel profiling (of|cannot start in) pid $A" 30
check "A gets the library once it runs CUDA" 'grep -q "CUDA kernel profiling of pid $A started" "$W/err" && injected "$A"'
check "... and is left running (not stopped)" '[ "$(state "$A")" != T ] && kill -0 "$A"'
check "C, which loads no CUDA, has no library mapped while it runs" '[ -n "$C" ] && kill -0 "$C" && ! injected "$C"'
wait_for "$W/err" "CUDA kernel profiling (of|cannot start in) pid $D" 30
check "D, mapping the driver, gets the library" 'grep -q "CUDA kernel profiling of pid $D started" "$W/err"'
exec 8>&- # B prints what it saw and execs sleep
wait_until 30 '[ "$(readlink "/proc/$B/exe")" = "$(readlink -f /bin/sleep)" ]'
check "B exec'd sleep" '[ "$(readlink "/proc/$B/exe")" = "$(readlink -f /bin/sleep)" ] && grep -q "^generated=" "$W/b.out"'
wait "$CP"; crc=$? CP=
grep -E "inject_mgr.c" "$W/err" | cut -c1-200 | sed 's/^/# /'
check "the collector ended after -d, status 0" '[ "$crc" = 0 ] && grep -q "stopped: duration reached" "$W/err"'
check "C was never injected, to the end" 'kill -0 "$C" && ! injected "$C"'
check "the library was unloaded from A" '! injected "$A"'
check "B, exec'd since the load, was not called into at the end: its sleep runs on" \
	'kill -0 "$B" && [ "$(state "$B")" = S ] && ! injected "$B" && ! grep -q "pid $B: unloading" "$W/err"'
# copies of the library mapped: distinct memfd inodes (E may share D's, from the fork)
own_copy() { awk '/memfd:llmtracker/ { print $5 }' "/proc/$1/maps" 2>/dev/null | sort -u |
	grep -vxF -f <(awk '/memfd:llmtracker/ { print $5 }' "/proc/$2/maps" 2>/dev/null | sort -u; echo x) | grep -q .; }
check "E, a fork of the CUDA process D, was never injected" \
	'[ -n "$E" ] && kill -0 "$E" && ! own_copy "$E" "$D" && ! grep "inject_mgr.c" "$W/err" | grep -q "pid $E[^0-9]"'
exec 9>&- 7>&-
kill "$C" "$B" 2>/dev/null
wait_for "$W/a.status" "status" 30
check "A exited normally, with its own output" \
	'grep -q "status 0" "$W/a.status" && grep -q "^generated=[1-9]" "$W/a.out"'
wait "$PARENT"; PARENT=

cl=$(ls "$W"/llmtracker-cupti.*."$A".*.evlog 2>/dev/null | head -1)
told=$(grep -oE "pid $A: [0-9]+ kernels" "$W/err" | grep -oE "[0-9]+ kernels" | grep -oE "^[0-9]+")
logged=$("$T/inject_logdump" "$cl" 2>/dev/null | grep -c "^K")
sess() { "$T/evlog_dump" "$1" 2>/dev/null | sed -n 's/^# session=//p' | head -1; }
echo "# A's CUDA log ${cl##*/}: ${logged} kernels; the collector was told ${told:-none}"
check "A's CUPTI log is published with every kernel the collector was told of" \
	'[ -n "$cl" ] && [ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "... and carries the profile's session" \
	'[ -n "$cl" ] && [ -n "$(sess "$cl")" ] && [ "$(sess "$cl")" = "$(sess "$W/main.evlog")" ]'
sed -n '/^  gpu /,/^  wrote/p' "$W/err" | sed 's/^/# /'
row=$(awk '$1 == "gpu" { print $2 }' "$W/err")
told_d=$(grep -oE "pid $D: [0-9]+ kernels" "$W/err" | grep -oE "[0-9]+ kernels" | grep -oE "^[0-9]+")
check "the summary's gpu row counts A's and D's kernels ($row = $told + ${told_d:-none})" \
	'[ -n "$told" ] && [ -n "$told_d" ] && [ "$row" = $((told + told_d)) ]'
check "the gpu row names the parent (no CUDA) as not seen, with why, and no child" \
	'sed -n "/^  gpu /,/^  wrote/p" "$W/err" | grep -A1 "not seen in" | grep -q "$PARENT" &&
	 sed -n "/^  gpu /,/^  wrote/p" "$W/err" | grep -q "has not loaded the CUDA driver" &&
	 ! sed -n "/^  gpu /,/^  wrote/p" "$W/err" | grep -v "^  wrote" | grep -qwE "$A|$B|$C|$D|$E"'
tap_done
