#!/bin/bash
# The injected library's logs with -o on an object store (s3fs over a local
# S3 server): a Python target (pyenv python3.11, a known call tree) traced
# through the profile hook, `-t python --python-method hook -p PID`.
#   a. the store answers: the library log is published on the store beside
#      the main log and converts with it; no staging file is left, neither
#      on the store nor in the collector's TMPDIR;
#   b. the S3 server paused (SIGSTOP) before the target exits: the target
#      exits as promptly as in (a) (its log is staged on a local disk, so
#      its close waits for no upload), the collector ends within its store
#      bound (10 s, LT_STORE_WAIT_S) of the stop and names the library log
#      as not published, kept on the node where it says; once the store
#      answers again, nothing is under the log's final name (nor its copy),
#      and the main log, published late, records no library log;
#   c. a collector killed (SIGKILL) leaves the staging file in the staging
#      directory it named at its start, every flushed chunk readable.
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/store.inc"
CONV=$BUILD/bin/llmtracker-convert
SCRIPT=$PWD/tests/workloads/pyh_calltree.py
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
need_bpf "$CONV" "$BUILD/lib/libllmtracker-inject.so"
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
[ -x "$PY" ] || skip "no pyenv python3.11 under $PYENV"
need_store
st_server_start
st_mount A
BOUND=10         # LT_STORE_WAIT_S (collector/session/store.h)
N=300000         # iterations of the call tree: 1.2 M calls, some MiB of log
SLACK=$((3 * TAP_TIME_SCALE))

# start TAG: the target and its collector into $A/TAG; the target has run
# its N iterations, traced (its log staged), and waits for its HOLD file.
start() {
	local d=$T/$1
	mkdir -p "$d/tmp" "$A/$1" || bail "mkdir on the store"
	"$PY" "$SCRIPT" "$N" "$d/go" "$d/hold" 0 > "$d/out" 2> "$d/stderr" & tp=$!
	tap_bg "$tp"
	wait_until 30 "[ -e '$d/go.ready' ]" || bail "the target did not start"
	TMPDIR=$d/tmp "$LT" profile -p "$tp" -t python --python-method hook -d 120 -v 1 \
		-o "$A/$1/node.evlog" > /dev/null 2> "$d/err" & lt=$!
	tap_bg "$lt"
	wait_for "$d/err" "tracing functions|cannot trace" 60 || bail "the collector did not attach"
	touch "$d/go"
	wait_for "$d/out" "pyh_calltree done" 120 || bail "the target did not finish its calls"
	stage=$(sed -n 's/.*library logs are staged in \(\/[^ ]*\) .*/\1/p' "$d/err" | head -1)
}

# a. the store answers
start a
pub=$(sed -n 's/.* published by process \([0-9]*\).*/\1/p' "$T/a/err" | head -1)
check "the collector stages library logs off the store, in its TMPDIR: ${stage:-none named}" \
	'[ -n "$stage" ] && [ "${stage#$T/a/tmp/}" != "$stage" ] && ls -A "$stage" | grep -q "^\.llmtracker-python\..*\.evlog\.partial$"'
ms_a=$(st_exit_ms "$tp" "$T/a/hold" 60)
wait_until 60 "! kill -0 $lt 2>/dev/null"
wait "$lt"; rc=$?
echo "# target exit: $ms_a ms (store answering)"
check "the target exits (${ms_a} ms) and the collector ends (rc $rc)" '[ "$ms_a" -ge 0 ] && [ $rc = 0 ]'
L=$(st_objects | grep '^a/llmtracker-python\..*\.evlog$')
check "the library log is published on the store: ${L:-none}" '[ "$(echo "$L" | grep -c .)" = 1 ]'
check "no staging file or copy is left on the store" '! st_objects | grep -q "^a/\."'
check "the staging directory is removed from TMPDIR" '[ -z "$(ls -A "$T/a/tmp")" ]'
"$CONV" summary "$A/a/node.evlog" > "$T/a/sum" 2> "$T/a/sum.err"
crc=$?
check "it converts with the main log: the summary counts f 300000 times (rc $crc)" \
	'[ $crc = 0 ] && grep -qE "^ .* 300000 .* f( |$)" "$T/a/sum" && ! grep -q "left out" "$T/a/sum.err"' ||
	sed 's/^/# /' "$T/a/sum.err" | head -5

# b. the store stalls before the target exits
start b
st_server_pause
tap_at_exit st_server_resume
ms_b=$(st_exit_ms "$tp" "$T/b/hold" $((20 * TAP_TIME_SCALE)))
t_exit=${EPOCHREALTIME/./}
echo "# target exit: $ms_b ms (store stalled), $ms_a ms (store answering)"
check "the target exits as promptly as with the store answering: $ms_b ms against $ms_a ms" \
	'[ "$ms_b" -ge 0 ] && [ "$ms_b" -le $((ms_a + 1000 * TAP_TIME_SCALE)) ]'
wait_until $((BOUND + 20)) "! kill -0 $lt 2>/dev/null"
t_end=${EPOCHREALTIME/./}
took=$(((t_end - t_exit) / 1000000))
check "the collector ends ${took} s after the target's exit (bound $BOUND s + $SLACK s), the store stalled" \
	"[ $took -le $((BOUND + SLACK)) ] && ! kill -0 $lt 2>/dev/null"
kill -0 "$lt" 2>/dev/null && st_server_resume # held by the store: let it end
wait "$lt"; rc=$?
grep -E "not published|staged|NOT|pid [0-9]* \(python\)" "$T/b/err" | cut -c1-240 | sed 's/^/# /'
kept=$(sed -n 's/^ *pid [0-9]* (python): \(\/.*\.evlog\.partial\): .*/\1/p' "$T/b/err" | head -1)
check "the summary names the library log as not published, kept on this node (rc $rc): ${kept:-none}" \
	'[ $rc = 1 ] && grep -q "NOT published: 1 library log" "$T/b/err" && [ -n "$stage" ] && [ "${kept#$stage/}" != "$kept" ]'
n=$("$DUMP" "$kept" 2>/dev/null | grep -c "^py_enter .* func=f ")
check "...and the file there holds the target's calls ($n of f)" '[ "$n" = 300000 ]'
lost=$(awk '$1 == "python" && NF >= 3 { print $3 }' "$T/b/err" | tail -1)
check "its events are counted as lost in the python row ($lost)" '[ "${lost:-0}" -ge 600000 ]'
st_server_resume
check "the store answers: the main log is published late" \
	wait_until 120 "st_objects | grep -qx b/node.evlog"
# the publisher process it left ends once its store call returns
pb=$(sed -n 's/.* published by process \([0-9]*\).*/\1/p' "$T/b/err" | head -1)
check "the process that published library logs ends (pid ${pb:-?})" \
	'[ -n "$pb" ] && wait_until 120 "! kill -0 $pb 2>/dev/null"'
st_objects | sed 's/^/# object: /'
check "nothing is under the library log's final name, nor its copy or staging name, on the store" \
	'! st_objects | grep -q "^b/llmtracker-python\." && ! st_objects | grep -q "^b/\."'
check "the main log records no library log" \
	'[ "$("$DUMP" "$A/b/node.evlog" 2>/dev/null | grep -c "^lib_log ")" = 0 ]'
check "the staging file is still where the summary said" '[ -s "$kept" ]'
check "...and the process that was publishing it said so once the store answered" \
	'grep -q "the output store answered after the profile had given up on the library log .*: not published; it stays as $kept" "$T/b/err"'

# c. a collector killed leaves the staging file where it said
start c
kill -KILL "$lt"
wait "$lt" 2>/dev/null
ms_c=$(st_exit_ms "$tp" "$T/c/hold" 60)
f=$(ls "$stage"/.llmtracker-python.*.evlog.partial 2>/dev/null | head -1)
n=$("$DUMP" "$f" 2>/dev/null | grep -c "^py_enter .* func=f ")
check "a collector killed leaves the staging file in $stage, its calls readable ($n of f)" \
	'[ -n "$f" ] && [ "$n" = 300000 ]'
tap_done
