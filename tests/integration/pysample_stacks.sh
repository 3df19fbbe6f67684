#!/bin/bash
# -t pysample: sampled Python stacks from CPython's own structures, on
# /usr/bin/python3.11 (a static interpreter) and on a python3 with a shared
# libpython (pyenv's, when installed), launched with `--` and attached with
# -p. tests/workloads/pys_hot.py spends its time in <module> -> hot_outer ->
# hot_inner, and a thread in other_worker.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker CONV=$BUILD/bin/llmtracker-convert DUMP=$BUILD/tests/progs/evlog_dump
SCRIPT=$(cd "$(dirname "$0")/../.." && pwd)/tests/workloads/pys_hot.py
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events)"
[ -x /usr/bin/python3.11 ] || skip "/usr/bin/python3.11 not installed"
need_built "$LLMT" "$CONV" "$DUMP"
tap_tmpdir tmp llmt-test
bg=
tap_at_exit 'kill $bg 2>/dev/null'

# "count root;..;leaf" per stack of the folded file, frames without (file:line).
folded() {
	find "$1" -name '*.python.folded' -exec cat {} + |
		sed -E 's/ \([^;]*:[0-9]+\)//g' | awk '{c = $NF; $NF = ""; sub(/ $/, ""); print c, $0}' |
		sort -rn
}

# Samples per "tid frames" of a log (frames leaf first, without file:line).
by_tid() {
	"$DUMP" "$1" | awk '$1 == "py_sample" { t = ""; f = ""
		for (i = 2; i <= NF; i++) {
			if ($i ~ /^tid=/) t = substr($i, 5)
			if ($i ~ /^frames=/) f = substr($i, 8)
		}
		gsub(/\\x20\([^,]*:[0-9]+\)/, "", f); print t, f }'
}

# check_run NAME LOG PID: the expectations on one profile.
check_run() {
	local name=$1 log=$2 pid=$3 top other
	rm -rf "$tmp/tb"
	"$CONV" -q -i "$log" --logdir "$tmp/tb" >"$tmp/conv.out" 2>&1
	check "$name: converts" '[ $? = 0 ]'
	folded "$tmp/tb" >"$tmp/folded"
	head -3 "$tmp/folded" | cut -c1-160 | sed 's/^/# /'
	top=$(head -1 "$tmp/folded" | cut -d' ' -f2-)
	check "$name: hottest Python stack is <module>;hot_outer;hot_inner ($top)" \
		'[ "$top" = "<module>;hot_outer;hot_inner" ]'
	by_tid "$log" >"$tmp/tids"
	other=$(awk -v p="$pid" '$1 != p && $2 ~ /^other_worker,/' "$tmp/tids" | wc -l)
	check "$name: other_worker sampled on its own thread ($other samples)" '[ "$other" -ge 1 ]'
	check "$name: other_worker never on the main thread" \
		'! awk -v p="$pid" '"'"'$1 == p && /other_worker/'"'"' "$tmp/tids" | grep -q .'
}

# 1. Launched, static interpreter.
"$LLMT" profile -t pysample -o "$tmp/a.evlog" -- /usr/bin/python3.11 "$SCRIPT" 1.5 \
	>"$tmp/a.out" 2>&1
check "profile -t pysample -- python3.11 exits 0" '[ $? = 0 ]'
pid=$("$DUMP" "$tmp/a.evlog" | awk '$1 == "process" && /is_exec=1/ { sub(/pid=/, "", $3); print $3; exit }')
check_run "python3.11 launched" "$tmp/a.evlog" "$pid"

# 2. Attached with -p to a running interpreter with a shared libpython.
PY=$(command -v python3)
PY=$("$PY" -c 'import sys; print(sys.executable)' 2>/dev/null)
if [ -n "$PY" ] && "$PY" -c 'import sys; sys.exit(sys.version_info[:2] not in ((3, 11), (3, 12)))'; then
	"$PY" "$SCRIPT" 3 &
	bg=$!
	wait_exec "$bg" "$PY"
	"$LLMT" profile -t pysample -p "$bg" -d 1.5 -o "$tmp/b.evlog" >"$tmp/b.out" 2>&1
	check "profile -t pysample -p PID ($PY) exits 0" '[ $? = 0 ]'
	check_run "$PY attached" "$tmp/b.evlog" "$bg"
	wait "$bg"
	check "the target ran to its end undisturbed" '[ $? = 0 ]'
	bg=
else
	echo "# no python3 3.11/3.12 on PATH besides /usr/bin/python3.11: -p case not run"
fi

# 3. A target that is no Python: one line saying so, the other sources record.
"$LLMT" profile -t pysample,cpu -v 1 -o "$tmp/c.evlog" -- /bin/sh -c \
	'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done' >"$tmp/c.out" 2>&1
check "a non-Python target profiles fine with -t pysample,cpu" '[ $? = 0 ]'
check "it is named as running no CPython" 'grep -q "pysample: pid [0-9]*: no CPython" "$tmp/c.out"'
check "cpu samples still recorded" '"$DUMP" "$tmp/c.evlog" | grep -q "^cpu_sample "'

# 4. An interpreter of another version: a copy of python3.11 whose Py_Version
# says 3.10 (it runs the same). One warning naming pid, file and version.
cp /usr/bin/python3.11 "$tmp/python3.10"
va=$((16#$(readelf -Ws "$tmp/python3.10" | awk '$8 == "Py_Version" { print $2; exit }')))
off=
while read -r t o v _ f _; do
	[ "$t" = LOAD ] || continue
	if [ "$va" -ge $((v)) ] && [ "$va" -lt $((v + f)) ]; then off=$((va - v + o)); break; fi
done < <(readelf -lW "$tmp/python3.10")
printf '\x0a' | dd of="$tmp/python3.10" bs=1 seek=$((off + 2)) conv=notrunc status=none
"$LLMT" profile -t pysample -o "$tmp/d.evlog" -- "$tmp/python3.10" -c \
	'import time; e = time.monotonic() + 0.5
while time.monotonic() < e: pass' >"$tmp/d.out" 2>&1
check "an unsupported version still profiles (exit 0)" '[ $? = 0 ]'
grep 'pysample: pid' "$tmp/d.out" | sed 's/^/# /'
check "one line names the pid, the file and the version" \
	'[ "$(grep -c "pysample: pid [0-9]*: cannot sample Python stacks: .*python3.10 is CPython 3.10" "$tmp/d.out")" = 1 ]'
tap_done
