#!/bin/bash
# What a user sees by default while and after profiling: the status line
# counts every source as it records (the Python hook's events too, which
# its own log holds), no internals without -v, and -t all means every
# source, pysample included.
. "$(dirname "$0")/collector_common.inc"
need_bpf
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
[ -x "$PY" ] || skip "no pyenv python3.11 (the interpreter the hook goes into) under $PYENV"
cat > "$T/calls.py" <<'EOF'
import sys, time
def f():
    return 1
open(sys.argv[1], "w").close()
end = time.time() + 60
while time.time() < end:
    f()
EOF
"$PY" "$T/calls.py" "$T/ready" & tp=$!
tap_bg $tp
wait_until 30 "[ -e '$T/ready' ]" || bail "the target did not start"

LLMT_PROGRESS_SECONDS=0.5 "$LT" profile -p $tp -t all -d 3 -o "$T/a.evlog" 2> "$T/a.err"
rc=$?
sed 's/^/# /' "$T/a.err"
check "profile -t all exits 0 (rc $rc)" test $rc -eq 0
live=$(sed -n 's/.*python \([0-9]*\)[,)].*Ctrl-C.*/\1/p' "$T/a.err" | sort -n | tail -1)
final=$(awk '$1 == "python" { print $2 }' "$T/a.err")
check "the status line counts the hook's Python events while recording (${live:-none} of $final)" \
	'[ "${live:-0}" -gt 0 ] && [ "${live:-0}" -le "${final:-0}" ]'
check "-t all has a pysample row that recorded samples" \
	'awk '"'"'$1 == "pysample" && $2 > 0 { f = 1 } END { exit !f }'"'"' "$T/a.err"'
check "no internals by default (no I lines, no hook counters)" \
	'! grep -qE "^I[0-9]{4} |pending=|py_enter=|inline=" "$T/a.err"'
"$LT" profile -p $tp -t python -d 1 -v 1 -o "$T/v.evlog" 2> "$T/v.err"
check "-v 1 shows the hook's counters" grep -q "py_enter=" "$T/v.err"

# SIGINT to the collector alone in launch mode: the command runs on, and
# the summary names it.
"$LT" profile -t syscall -o "$T/l.evlog" -- sh -c "touch '$T/ran'; exec sleep 30" 2> "$T/l.err" & lt=$!
tap_bg $lt
wait_until 30 "[ -e '$T/ran' ]" || nok "the command did not start"
kill -INT $lt; wait $lt
cpid=$(sed -n 's/.*command still running (pid \([0-9]*\)), no longer profiled.*/\1/p' "$T/l.err")
check "SIGINT to the collector alone: the summary names the command's pid (${cpid:-none})" \
	'[ -n "$cpid" ] && kill -0 "$cpid" && grep -q sleep "/proc/$cpid/comm"'
[ -n "$cpid" ] && kill "$cpid"
tap_done
