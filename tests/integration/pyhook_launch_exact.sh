#!/bin/bash
# The launch form, exact every time: `profile -t python -- PY script` on a
# CPU-bound script (no sleep, no I/O: nothing a late hook could wait for),
# PYL_RUNS times (default 5) on pyenv's python3.11 and python3.12. The
# command is held before its execve, stepped to the loader's mapping of
# the interpreter and stopped at Py_RunMain (collector/injection/inject_exec.h), so
# every run records every call of the script's functions: as many as
# sys.setprofile counts from the script's first line, in every run. Before
# the hold, a loaded machine's launches recorded nothing 6 times in 30.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
LIB=$(realpath -m "$BUILD/lib/libllmtracker-inject.so")
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
RUNS=${PYL_RUNS:-5}
REPEATS=${PYL_REPEATS:-300} # mid(1000) calls: leaf is called REPEATS x 1000 times
need_built "$LT" "$DUMP" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace)"

tap_tmpdir T pyl-test
S=$T/busy.py
cat > "$S" <<'PY'
import sys
counts = {}
def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == __file__:
        counts[frame.f_code.co_name] = counts.get(frame.f_code.co_name, 0) + 1
def leaf(x):
    return x + 1
def mid(n):
    s = 0
    for _ in range(n):
        s = leaf(s)
    return s
def main():
    return sum(mid(1000) for _ in range(int(sys.argv[-1])))
if sys.argv[1] == "ref":
    sys.setprofile(prof)
print(main())
sys.setprofile(None)
if sys.argv[1] == "ref":
    print(" ".join("%s=%d" % kv for kv in sorted(counts.items())))
PY
# counts: "name=calls ..." of the script's functions in one log (its
# <module>, entered before the reference's profiler is set, left out)
counts() {
	"$DUMP" "$1"/llmtracker-python.*.evlog 2> /dev/null | awk -v f="$S" '
		/^py_enter / { fn = ""; file = ""
			for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "func") fn = kv[2]; if (kv[1] == "file") file = kv[2] }
			n = split(fn, q, "."); if (file == f && q[n] != "<module>") c[q[n]]++ }
		END { for (k in c) print k "=" c[k] }' | sort | tr '\n' ' ' | sed 's/ $//'
}

for v in 3.11 3.12; do
	py=$(ls "$PYENV"/$v.*/bin/python$v 2> /dev/null | head -1)
	if [ ! -x "$py" ]; then ok "# SKIP no pyenv python$v"; continue; fi
	ref=$("$py" "$S" ref "$REPEATS" | tail -1)
	good=0
	for i in $(seq "$RUNS"); do
		d=$T/$v.$i
		mkdir -p "$d"
		"$LT" profile -t python -o "$d/p.log" -v 1 -- "$py" "$S" run "$REPEATS" > "$d/out" 2> "$d/err"
		got=$(counts "$d")
		if [ "$got" = "$ref" ]; then
			good=$((good + 1))
			rm -rf "$d"
		else
			echo "# run $i: $got (want $ref)"
			grep -E "python: pid [0-9]+: (tracing|cannot)|not held|not seen" "$d/err" | cut -c1-200 | sed 's/^/#   /'
		fi
	done
	echo "# python$v: $good of $RUNS launches exact ($ref)"
	[ "$good" = "$RUNS" ]
	check_rc $? "python$v, $RUNS launches of a CPU-bound script: every call of every function recorded in each"
done
tap_done
