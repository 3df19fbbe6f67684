#!/bin/bash
# One profile, one session: the collector's log and every injected library's
# log of one `profile` run carry one session id, and the converter takes a
# profile's logs by it, never by file time (schemas/eventlog.md 5.1).
#   1. a pyenv Python (no USDT probes: the profile hook is injected): the
#      hook's log carries the main log's session; `export -i LOG`, `summary
#      LOG` and `export --logdir` of the main log alone show the hook's
#      calls, with exact counts;
#   2. a second, unrelated profile written into the same directory: each
#      conversion takes exactly its own logs (exact counts) and names the
#      other profile's logs as left out in one line, with or without
#      --cupti-dir; the directory given whole says it holds two profiles;
#   3. CUDA kernels from the stand-in CUPTI (tests/progs/fake_cupti.c)
#      through `profile --enable-cuda-kernel` (a private mount namespace
#      shows it a driver file): the CUPTI log carries the session, `summary
#      LOG` counts every kernel the library wrote;
#   4. logs without a session convert, --cupti-dir's logs without one
#      joined by host and file time, said in one line; library logs of two
#      sessions and no main log are refused, naming both.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
P=$(realpath -m "$BUILD/tests/progs")
SCRIPT=$PWD/tests/workloads/pyh_calltree.py
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
need_built "$LT" "$CONV" "$DUMP" "$P/conv_genlog" "$P/fake_cuda_app" "$P/fake_cupti" \
	"$BUILD/lib/libllmtracker-inject.so"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace)"

tap_tmpdir T session-join
tap_at_exit 'exec 9>&- 2>/dev/null'
session_of() { "$DUMP" "$1" 2>/dev/null | sed -n 's/^# session=//p' | head -1; }
# py_counts JSON: "f=N g=N loop=N" of the Python calls (complete events) in a trace
py_counts() {
	python3 - "$1" <<'PY'
import collections, gzip, json, sys
p = sys.argv[1]
ev = json.load(gzip.open(p) if p.endswith(".gz") else open(p))["traceEvents"]
c = collections.Counter(e["name"] for e in ev if e.get("cat") == "python_function" and e.get("ph") == "X")
print("f=%d g=%d loop=%d" % (c["f"], c["g"], c["loop"]))
PY
}

# profile_py DIR NAME N [OPTION...]: profile pyh_calltree.py (N iterations: f N times, g
# 3N) under a pyenv Python into DIR/NAME.evlog; the loop starts once the
# hook is in, the target sleeps (in a system call) before and after it.
profile_py() {
	local d=$1 name=$2 tp cp
	"$PY" "$SCRIPT" "$3" "$T/$name.go" "$T/$name.hold" > "$T/$name.out" 2>&1 & tp=$!; tap_bg $tp
	"$LT" profile -p $tp -t python -o "$d/$name.evlog" -v 1 "${@:4}" > /dev/null 2> "$T/$name.err" & cp=$!; tap_bg $cp
	wait_for "$T/$name.err" "tracing functions|cannot trace" 30 && touch "$T/$name.go"
	wait_for "$T/$name.out" "pyh_calltree done" 30
	kill -INT $cp; wait $cp
	touch "$T/$name.hold"; wait $tp
	echo $tp > "$T/$name.pid"
}

PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
if [ -x "$PY" ] && [ "$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("WITH_DTRACE"))')" = 0 ]; then
	D=$T/shared
	mkdir -p "$D"
	# 1. the hook's calls from the main log alone
	profile_py "$D" p1 100
	s1=$(session_of "$D/p1.evlog") pl1=$(ls "$D"/llmtracker-python.*.$(cat "$T/p1.pid").*.evlog 2>/dev/null)
	echo "# p1 session $s1, hook log ${pl1##*/}"
	[ ${#s1} = 32 ] && [ -n "$pl1" ] && [ "$(session_of "$pl1")" = "$s1" ] &&
		grep -q "(session $s1)" "$T/p1.err"
	check_rc $? "the collector's log and the hook's log carry one session id ($s1)"
	"$LT" export -i "$D/p1.evlog" -o "$T/p1.json" 2> "$T/p1.conv"
	c=$(py_counts "$T/p1.json"); echo "# export -i p1.evlog: $c"
	[ "$c" = "f=100 g=300 loop=1" ] && ! grep -q "left out" "$T/p1.conv"
	check_rc $? "export -i LOG shows the hook's Python calls, no extra flag (f=100 g=300 loop=1)"
	"$CONV" -q -i "$D/p1.evlog" -i "$pl1" -o "$T/p1named.json"
	cmp -s "$T/p1.json" "$T/p1named.json"
	check_rc $? "... byte for byte the trace of both logs named by hand"
	(cd "$D" && "$CONV" summary -n 100000 p1.evlog) > "$T/p1.sum" 2> "$T/p1.sumerr" # a bare name too
	grep -E " (f|g) \(" "$T/p1.sum" | sed 's/^/# /'
	grep -qE "^ .* 100 +[0-9.]+  f \(.*pyh_calltree.py:19\)$" "$T/p1.sum" &&
		grep -qE "^ .* 300 +[0-9.]+  g \(.*pyh_calltree.py:15\)$" "$T/p1.sum"
	check_rc $? "summary LOG (a bare name, in its directory) lists the hook's calls (f 100 calls, g 300)"
	"$CONV" -q -i "$D/p1.evlog" --logdir "$T/tb" --run r1
	c=$(py_counts "$(ls "$T"/tb/plugins/profile/r1/*.trace.json.gz)"); echo "# --logdir: $c"
	[ "$c" = "f=100 g=300 loop=1" ] && [ -s "$(ls "$T"/tb/plugins/profile/r1/*.xplane.pb)" ]
	check_rc $? "--logdir of the main log alone: the run's trace holds the hook's calls ($c)"

	# 2. an unrelated profile into the same directory
	profile_py "$D" p2 50
	pl2=$(ls "$D"/llmtracker-python.*.$(cat "$T/p2.pid").*.evlog 2>/dev/null)
	s2=$(session_of "$D/p2.evlog")
	[ -n "$pl2" ] && [ "$(session_of "$pl2")" = "$s2" ] && [ "$s2" != "$s1" ]
	check_rc $? "the second profile has a session of its own ($s2)"
	for args in "" "--cupti-dir $D"; do
		"$CONV" -i "$D/p1.evlog" $args -o "$T/a.json" --force 2> "$T/a.err"
		"$CONV" -i "$D/p2.evlog" $args -o "$T/b.json" --force 2> "$T/b.err"
		ca=$(py_counts "$T/a.json") cb=$(py_counts "$T/b.json")
		grep "left out" "$T/a.err" | cut -c1-300 | sed 's/^/# /'
		[ "$ca" = "f=100 g=300 loop=1" ] && [ "$cb" = "f=50 g=150 loop=1" ] &&
			[ "$(grep -c "left out" "$T/a.err")" = 1 ] && [ "$(grep -c "left out" "$T/b.err")" = 1 ] &&
			grep "left out 2 event logs" "$T/a.err" | grep -F "$D/p2.evlog" | grep -qF "$pl2" &&
			grep "left out 2 event logs" "$T/b.err" | grep -F "$D/p1.evlog" | grep -qF "$pl1"
		check_rc $? "two profiles in one directory${args:+ ($args)}: each takes its own ($ca; $cb) and names the other's 2 logs in one line"
	done
	# profile --cupti-dir elsewhere: said at the start; the converter then needs it too
	mkdir -p "$T/main" "$T/libs"
	profile_py "$T/main" p3 20 --cupti-dir "$T/libs"
	"$CONV" -q -i "$T/main/p3.evlog" --cupti-dir "$T/libs" -o "$T/c.json"
	c=$(py_counts "$T/c.json")
	grep -q "logs go to $T/libs, not beside $T/main/p3.evlog: convert with --cupti-dir $T/libs" "$T/p3.err" &&
		[ "$c" = "f=20 g=60 loop=1" ] && ls "$T"/libs/llmtracker-python.*.evlog > /dev/null
	check_rc $? "profile --cupti-dir elsewhere says so; export -i LOG --cupti-dir DIR takes its logs ($c)"
	"$CONV" summary "$D" > /dev/null 2> "$T/dir.err"
	grep "two profiles" "$T/dir.err" | sed 's/^/# /'
	grep -q "p1.evlog and .*p2.evlog: two profiles of host" "$T/dir.err"
	check_rc $? "the directory given whole: both profiles, said in one line"
else
	echo "# no pyenv python3.11 without USDT probes under $PYENV: hook checks skipped"
fi

# 3. CUDA kernels from the stand-in CUPTI, through profile --enable-cuda-kernel
if [ "$(uname -m)" = x86_64 ] && [ ! -e /proc/driver/nvidia/version ] && [ ! -e /dev/nvidiactl ]; then
	C=$T/cuda
	mkdir -p "$C"
	mkfifo "$C/in"
	FAKE_CUPTI_RATE=20000 "$P/fake_cuda_app" "$P/fake_cupti" < "$C/in" > "$C/app.out" 2>&1 & tp=$!; tap_bg $tp
	exec 9> "$C/in"
	wait_for "$C/app.out" "^ready" 30
	# Only this collector sees a driver file (the node has none): the library goes in.
	unshare -m --propagation private sh -c 'mount -t tmpfs stand-in /proc/driver &&
		mkdir /proc/driver/nvidia && echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
		"$LT" profile -p $tp -t syscall --enable-cuda-kernel true -o "$C/main.evlog" -d 2 -v 1 \
		> /dev/null 2> "$C/err"
	exec 9>&-
	wait $tp
	cl=$(ls "$C"/llmtracker-cupti.*.$tp.*.evlog 2>/dev/null)
	sc=$(session_of "$C/main.evlog")
	[ -n "$cl" ] && [ ${#sc} = 32 ] && [ "$(session_of "$cl")" = "$sc" ]
	check_rc $? "the CUPTI library's log carries the profile's session ($sc)"
	k=$("$DUMP" "$cl" 2>/dev/null | grep -c "^gpu_kernel ")
	"$CONV" summary "$C/main.evlog" > "$C/sum" 2> /dev/null
	grep -E "fake_kernel" "$C/sum" | sed 's/^/# /'
	[ "$k" -gt 0 ] && grep -qE "^ .* $k +[0-9.]+ +[0-9.]+  fake_kernel$" "$C/sum"
	check_rc $? "summary LOG of the main log alone counts every kernel of the CUPTI log ($k)"
else
	echo "# not x86-64, or a GPU driver here (tests/gpu/ covers it): stand-in CUPTI checks skipped"
fi

# 4. logs without a session
O=$T/old
mkdir -p "$O/cupti"
"$P/conv_genlog" "$O/host.log" -n 20000 --part host > /dev/null
"$P/conv_genlog" "$O/cupti/inject-4000.log" -n 6000 --part gpu > /dev/null
# a library log of a profile with a session, in the same --cupti-dir
"$P/conv_genlog" "$O/cupti/inject-new.log" -n 600 --part gpu --pid 4100 \
	--session 00112233445566778899aabbccddeeff > /dev/null
"$CONV" -i "$O/host.log" --cupti-dir "$O/cupti" -o "$O/j.json" 2> "$O/j.err"; rc=$?
"$CONV" -q -i "$O/host.log" -i "$O/cupti/inject-4000.log" -o "$O/named.json"
sed 's/^/# /' "$O/j.err" | cut -c1-200
[ $rc = 0 ] && ! "$DUMP" "$O/host.log" | grep -q "^# session=" && cmp -s "$O/j.json" "$O/named.json" &&
	[ "$(grep -c "has no session id" "$O/j.err")" = 1 ] && grep -q "left out 1 event log .*inject-new.log" "$O/j.err"
check_rc $? "logs without a session convert, --cupti-dir joined by host and file time (said once; a log of a session left out)"
mkdir -p "$O/libs"
"$P/conv_genlog" "$O/libs/l1.log" -n 300 --part gpu --session 11111111111111111111111111111111 > /dev/null
"$P/conv_genlog" "$O/libs/l2.log" -n 300 --part gpu --session 22222222222222222222222222222222 > /dev/null
"$CONV" summary "$O/libs" > /dev/null 2> "$O/two.err"; rc=$?
sed 's/^/# /' "$O/two.err"
[ $rc = 1 ] && grep -q "library logs of 2 profiles (sessions 1111.*, 2222.*) and no collector log" "$O/two.err"
check_rc $? "library logs of two sessions and no main log: refused, both named"
tap_done
