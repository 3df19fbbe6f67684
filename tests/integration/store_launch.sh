#!/bin/bash
# A launched command's CUDA log with -o on an object store (s3fs over a
# local S3 server): `profile --enable-cuda-kernel true -- fake_cuda_launch`
# (the stand-in CUPTI, tests/progs/fake_cupti.c; the collector's check for a
# GPU driver met in a private mount namespace). The program records kernels,
# says "recorded PID", and exits once told (its HOLD file).
#   a. the store answers: the library wrote its log in a staging directory
#      of the collector's on a local disk (in its TMPDIR, named in an I
#      line), not on the store; the log is published on the store, recorded
#      in the main log (lib_log), and converts with it, every kernel the
#      library told of; nothing is left in TMPDIR or under a hidden name on
#      the store;
#   b. the S3 server paused (SIGSTOP) before the program exits: it exits as
#      promptly as in (a) (its log's close waits for no upload), the
#      collector ends within its store bound (10 s) of the exit and names the
#      log as not published, kept on the node with every kernel, counted lost
#      in the gpu row; once the store answers, nothing is under the log's
#      name, and the main log records no library log;
#   c. --user nobody: the staging directory is nobody's alone (0700), the
#      program runs as nobody and its log is published, owned by the
#      collector's uid, mode 0644, with every kernel;
#   d. --user nobody, the program swapping its log's name for a symbolic
#      link to a file only root may read, then for a FIFO: the collector
#      neither follows the link nor waits on the FIFO; each log is named as
#      not published, and nothing of the file is on the store.
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/store.inc"
CONV=$BUILD/bin/llmtracker-convert
P=$(realpath -m "$PROGS")
need_bpf "$CONV" "$P/fake_cuda_launch" "$P/fake_cupti" "$P/inject_logdump" "$BUILD/lib/libllmtracker-inject.so"
need_standin_driver tests/gpu/launch_kernels.sh
nobody=$(id -u nobody 2>/dev/null) || skip "no user nobody"
need_store
st_server_start
st_mount A
BOUND=10         # LT_STORE_WAIT_S (collector/session/store.h)
SLACK=$((3 * TAP_TIME_SCALE))
# what the program and the user it runs as reach: hold files, a TMPDIR
tap_tmpdir U lt-launch-user
chmod 755 "$U"

# start TAG [PROFILE OPTIONS]: the program under a collector into $A/TAG,
# TMPDIR $U/TAG.tmp; returns once it has recorded (pid in $tp) and waits
# for $U/TAG.hold. $lt: the collector; $stage: the staging directory named.
start() {
	local tag=$1 d=$T/$1
	shift
	mkdir -p "$d" "$A/$tag" && mkdir -m 755 "$U/$tag.tmp" || bail "mkdir"
	TMPDIR=$U/$tag.tmp FAKE_CUPTI_RATE=20000 unshare -m --propagation private sh -c \
		'mount -t tmpfs stand-in /proc/driver && mkdir /proc/driver/nvidia &&
		 echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
		"$LT" profile -t cpu --enable-cuda-kernel true -d 120 -v 1 -o "$A/$tag/node.evlog" "$@" \
		-- "$P/fake_cuda_launch" "$P/fake_cupti" 500 "$U/$tag.hold" > "$d/out" 2> "$d/err" & lt=$!
	tap_bg "$lt"
	wait_for "$d/out" "^recorded [0-9]+" 60 || bail "the program did not record: $(tail -3 "$d/err")"
	tp=$(sed -n 's/^recorded //p' "$d/out")
	tap_bg "$tp"
	stage=$(sed -n 's/.*CUDA logs are staged in \(\/[^ ]*\) .*/\1/p' "$d/err" | head -1)
}
told() { grep -oE "pid $2: [0-9]+ kernels" "$T/$1/err" | grep -oE "[0-9]+ kernels" | grep -oE "^[0-9]+"; }
gpu_row() { awk -v c="$2" '$1 == "gpu" { print $c }' "$T/$1/err" | tail -1; }
# ends TAG: the collector has ended, its status in $rc
ends() {
	wait_until 60 "! kill -0 $lt 2>/dev/null"
	wait "$lt"; rc=$?
}
# published TAG: the program's log on the store, converted with the main
# log: every kernel the library told of, recorded in the main log
published() {
	local tag=$1 n l k
	L=$(st_objects | grep "^$tag/llmtracker-cupti\..*\.$tp\..*\.evlog$")
	n=$(told "$tag" "$tp")
	check "$tag: the program's CUDA log is published on the store: ${L:-none}" \
		'[ "$(echo "$L" | grep -c .)" = 1 ] && ! st_objects | grep -q "^$tag/\."'
	l=$("$DUMP" "$A/$tag/node.evlog" 2>/dev/null | grep -c "^lib_log .*${L#$tag/}")
	check "$tag: ... recorded in the main log ($l lib_log)" '[ "$l" = 1 ]'
	"$CONV" summary "$A/$tag/node.evlog" > "$T/$tag/sum" 2> "$T/$tag/sum.err"
	k=$(awk '$NF == "fake_kernel" { print $(NF - 3) }' "$T/$tag/sum")
	check "$tag: ... and converts with it: $k kernels, the library told of ${n:-none}" \
		'[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$k" = "$n" ] && ! grep -q "left out" "$T/$tag/sum.err"' ||
		sed 's/^/# /' "$T/$tag/sum.err" | head -5
}

# a. the store answers
start a
check "a: the launched command's CUDA logs are staged in the collector's TMPDIR: ${stage:-none named}" \
	'[ -n "$stage" ] && [ "${stage#$U/a.tmp/}" != "$stage" ] && [ -d "$stage" ]'
ms_a=$(st_exit_ms "$tp" "$U/a.hold" 60)
ends
echo "# program exit: $ms_a ms (store answering)"
check "a: the program exits ($ms_a ms) with its status, and the collector ends (rc $rc)" \
	'[ "$ms_a" -ge 0 ] && [ $rc = 0 ] && grep -q "command exited with status 7" "$T/a/err"'
published a
check "a: the staging directory is removed from TMPDIR" '[ -z "$(ls -A "$U/a.tmp")" ]'

# b. the store stalls before the program exits
start b
st_server_pause
tap_at_exit st_server_resume
ms_b=$(st_exit_ms "$tp" "$U/b.hold" $((20 * TAP_TIME_SCALE)))
t_exit=${EPOCHREALTIME/./}
echo "# program exit: $ms_b ms (store stalled), $ms_a ms (store answering)"
check "b: the program exits as promptly as with the store answering: $ms_b ms against $ms_a ms" \
	'[ "$ms_b" -ge 0 ] && [ "$ms_b" -le $((ms_a + 1000 * TAP_TIME_SCALE)) ]'
[ "$ms_b" -ge 0 ] || st_server_resume # held by the store: let it end
wait_until $((BOUND + 20)) "! kill -0 $lt 2>/dev/null"
t_end=${EPOCHREALTIME/./}
took=$(((t_end - t_exit) / 1000000))
check "b: the collector ends ${took} s after the program's exit (bound $BOUND s + $SLACK s), the store stalled" \
	"[ $took -le $((BOUND + SLACK)) ] && ! kill -0 $lt 2>/dev/null"
kill -0 "$lt" 2>/dev/null && st_server_resume
wait "$lt"; rc=$?
grep -E "not published|staged|NOT|pid [0-9]* \(gpu\)" "$T/b/err" | cut -c1-260 | sed 's/^/# /'
kept=$(sed -n 's/^ *pid [0-9]* (gpu): \(\/.*\.evlog\): .*/\1/p' "$T/b/err" | head -1)
check "b: the summary names the log as not published, kept on this node (rc $rc): ${kept:-none}" \
	'[ $rc = 1 ] && grep -q "NOT published: 1 library log" "$T/b/err" && [ -n "$stage" ] && [ "${kept#$stage/}" != "$kept" ]'
n=$(told b "$tp")
k=$("$P/inject_logdump" "$kept" 2>/dev/null | grep -c "^K")
check "b: ... the file there holds every kernel told of ($k of ${n:-none})" '[ -n "$n" ] && [ "$n" -gt 0 ] && [ "$k" = "$n" ]'
lost=$(gpu_row b 3)
check "b: ... counted as lost in the gpu row ($lost)" '[ "${lost:-0}" -ge "${n:-1}" ]'
st_server_resume
check "b: the store answers: the main log is published late" \
	wait_until 120 "st_objects | grep -qx b/node.evlog"
pb=$(sed -n 's/.* published by process \([0-9]*\).*/\1/p' "$T/b/err" | head -1)
check "b: the process that publishes library logs ends (pid ${pb:-?})" \
	'[ -n "$pb" ] && wait_until 120 "! kill -0 $pb 2>/dev/null"'
check "b: nothing is under the log's name, nor a copy of it, on the store" \
	'! st_objects | grep -q "^b/llmtracker-cupti\." && ! st_objects | grep -q "^b/\."'
check "b: the main log records no library log" \
	'[ "$("$DUMP" "$A/b/node.evlog" 2>/dev/null | grep -c "^lib_log ")" = 0 ]'
check "b: the staged log is still where the summary said" '[ -s "$kept" ]'

# c. --user nobody
start c --user nobody
own=$(stat -c '%u %a' "$stage" 2>/dev/null)
check "c: the staging directory is nobody's alone: uid $nobody mode 700 ($own)" '[ "$own" = "$nobody 700" ]'
check "c: the program runs as nobody" 'grep -qP "^Uid:\t$nobody\t" /proc/$tp/status'
ms_c=$(st_exit_ms "$tp" "$U/c.hold" 60)
ends
check "c: the program exits ($ms_c ms) and the collector ends (rc $rc)" '[ "$ms_c" -ge 0 ] && [ $rc = 0 ]'
published c
own=$(stat -c '%u %a' "$A/$L" 2>/dev/null)
check "c: the published log is the collector's, mode 644 ($own)" '[ "$own" = "$(id -u) 644" ]'
check "c: the staging directory is removed from TMPDIR" '[ -z "$(ls -A "$U/c.tmp")" ]'

# d. --user nobody swaps its log's name for a symbolic link, then a FIFO
printf 'SECRET-%s\n' "$RANDOM$RANDOM" > "$T/secret"
chmod 600 "$T/secret"
for how in "symlink:$T/secret" fifo; do
	tag=d${how%%:*}
	FAKE_LAUNCH_SWAP=$how start "$tag" --user nobody
	ms=$(st_exit_ms "$tp" "$U/$tag.hold" 60)
	t_exit=${EPOCHREALTIME/./}
	ends
	took=$(((${EPOCHREALTIME/./} - t_exit) / 1000000))
	grep -E "swapped" "$T/$tag/out" | sed "s/^/# $tag: /"
	grep -E "not published|pid [0-9]* \(gpu\)" "$T/$tag/err" | cut -c1-260 | sed "s/^/# $tag: /"
	check "$tag: the program swapped its log (${how%%:*}) and exited ($ms ms)" \
		'[ "$ms" -ge 0 ] && grep -q "^swapped llmtracker-cupti\..* ${how%%:*}" "$T/$tag/out"'
	check "$tag: the collector ends at once ($took s) and names the log as not published, refused" \
		'[ $took -le $SLACK ] && grep -q "NOT published: 1 library log" "$T/$tag/err" &&
		 grep -qE "pid $tp \(gpu\): .*its staged file is (a symbolic link|not a regular file)" "$T/$tag/err"'
	check "$tag: nothing under the log's name on the store, no lib_log in the main log" \
		'! st_objects | grep -q "^$tag/llmtracker-cupti\." && [ "$("$DUMP" "$A/$tag/node.evlog" 2>/dev/null | grep -c "^lib_log ")" = 0 ]'
done
check "d: nothing of the root-only file reached the store" '! grep -rqF "$(cat "$T/secret")" "$T/s3data"'
tap_done
