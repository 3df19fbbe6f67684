#!/bin/bash
# The launch form through a launcher (tests/workloads/launcher_chain.sh, as
# pyenv's shims: ~36 short-lived helper processes, then an exec of the real
# interpreter in the launched pid), with -t python,cuda: the cuda source
# arms libraries at every exec and the hook goes in at Py_RunMain of the
# last one. Each run must trace the script exactly (its f called 2000
# times) and report the command's own exit status. It failed two ways:
# the collector's wait for its command took the ptrace stops its injector
# waited for (the command left stopped at the injection's trap, read as
# "ended (wait status 0xb7f)", nothing traced), and closing the uprobe links
# of exited helpers (a kernel grace period each) held the main loop so long
# that the interpreter's exec was seen after it had ended. The summary says,
# under each source's row, what it could not see: the helpers ran no
# Python, and the probe file's libraries were never loaded.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
CHAIN=$PWD/tests/workloads/launcher_chain.sh
PY=$(ls ${PYENV_ROOT:-/root/.pyenv}/versions/3.1[12]*/bin/python3.1[12] 2>/dev/null | head -1)
RUNS=${LAUNCH_CHAIN_RUNS:-5}
need_built "$LT" "$CONV"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace)"
[ -x "$PY" ] || skip "no pyenv python3.11/3.12"
tap_tmpdir T launch-chain
cat > "$T/t.py" <<'PY'
import sys
def f():
    return sum(range(1000))
for i in range(2000):
    f()
sys.exit(3)
PY
for r in $(seq "$RUNS"); do
	"$LT" profile -t python,cuda -o "$T/p$r.log" -- "$CHAIN" "$PY" "$T/t.py" >/dev/null 2>"$T/err$r"
	grep -oE "command .*" "$T/err$r" | sed "s/^/# [$r] /"
	grep -q "command exited with status 3" "$T/err$r"
	check_rc $? "[$r] the command's own exit status (3) is reported"
	COLUMNS=1000 "$CONV" summary -n 100000 "$T/p$r.log" 2>/dev/null |
		awk '$NF ~ /^\(.*t\.py:2\)$/ && $(NF-1) == "f" { print $(NF-3) }' >"$T/calls$r"
	echo "# [$r] f calls recorded: $(cat "$T/calls$r")"
	[ "$(cat "$T/calls$r")" = 2000 ]
	rc=$?
	[ $rc = 0 ] || grep -E "python[.:]|not seen|held|let go" "$T/err$r" | cut -c1-240 | sed "s/^/# [$r] /"
	check_rc $rc "[$r] every call of the script's f recorded (2000)"
done
sed -n '/^  source /,$p' "$T/err1" | sed 's/^/# /'
! grep -A1 -E '^  python ' "$T/err1" | grep -qE 'not seen|ran no Python'
check_rc $? "the chain's processes without Python are not listed as missed"
grep -qE '^  cuda +0 +0 +not recorded: no library the probe file names was loaded' "$T/err1"
check_rc $? "the summary says why cuda recorded nothing"
tap_done
