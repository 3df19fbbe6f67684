#!/bin/bash
# -t cpu,pysample: each CPU sample of a Python thread carries its Python
# frames from the same tick, and the interpreter's eval-loop frames
# (_PyEval_EvalFrameDefault) become the Python functions they were running
# (py-spy --native style): a stack reads _start -> main -> Python functions
# -> C leaf, also through C calling back into Python (sorted(key=...)).
# Debian's python3.11 (no frame pointers) and pyenv's 3.12 when installed,
# attached with -p at 2999 Hz; -t cpu alone (launched) is unchanged.
source "$(dirname "$0")/collector_common.inc"
CONV=$BUILD/bin/llmtracker-convert
need_bpf "$CONV"
[ -x /usr/bin/python3.11 ] || skip "/usr/bin/python3.11 is not installed"
cat >"$T/nest.py" <<'PY'
import sys
import time


def key(x):
    return (x * x) % 7919


def outer(n):
    t = 0
    for _ in range(n):
        t += len(sorted(range(20000), key=key))
        t += sum(k * k for k in range(20000))
    return t


print("looping", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    outer(2)
PY

# folded LOG NAME: convert, the CPU folded stacks ("frame;...;frame count") into $T/NAME.folded
folded() {
	"$CONV" -i "$1" -o "$T/$2.json.gz" -q >"$T/$2.conv" 2>&1 && cp "$T/$2.cpu.folded" "$T/$2.folded"
}
# share FOLDED AWK-CONDITION: percent of samples whose stack ($0 without the count) matches
share() {
	awk -v cond="$2" '{ n = $NF; s = $0; sub(/ [0-9]+$/, "", s); tot += n; if (s ~ cond) hit += n }
		END { printf "%.1f", tot ? 100 * hit / tot : 0 }' "$1"
}

merged_checks() { # NAME PY
	local name=$1 py=$2 f pid
	# Attached once it loops: the interpreter's layout is read at attach
	# (a launched one is found when it first runs, which a loaded machine
	# can delay by a good part of a short run).
	"$py" "$T/nest.py" 30 >"$T/$name.out" & pid=$!
	tap_bg "$pid"
	wait_for "$T/$name.out" looping 20
	"$LT" profile -t cpu,pysample --freq 2999 -q -d 1.5 -p "$pid" -o "$T/$name.evlog" \
		>/dev/null 2>"$T/$name.err"
	check "$name: profile -t cpu,pysample -p PID exits 0" [ $? = 0 ]
	kill "$pid"; wait "$pid" 2>/dev/null
	check "$name: converts" folded "$T/$name.evlog" "$name"
	f=$T/$name.folded
	awk '{ n = $NF; $NF = ""; print n, $0 }' "$f" | sort -rn | head -3 | cut -c1-400 | sed "s/^/# $name: /"
	local py_share root_share left cb own
	py_share=$(share "$f" 'nest\.py:')
	root_share=$(share "$f" '^(_start|__libc_start_main|__libc_start_call_main|main);.*nest\.py:')
	left=$(share "$f" 'nest\.py:.*_PyEval_EvalFrameDefault|_PyEval_EvalFrameDefault.*nest\.py:')
	cb=$(share "$f" ';outer \([^)]*nest\.py:[0-9]+\);[^()]+;key \([^)]*nest\.py:[0-9]+\)')
	own=$(share "$T/$name.python.folded" 'key \([^)]*nest\.py:[0-9]+\)') # -t pysample's own samples
	echo "# $name: samples with nest.py frames $py_share%, rooted in _start/main $root_share%," \
		"an eval-loop frame left beside them $left%, key() under sorted() under outer() $cb%" \
		"(-t pysample's own samples: key() in $own%)"
	check "$name: >= 95% of the samples hold the script's Python frames ($py_share%)" \
		awk -v v="$py_share" 'BEGIN { exit !(v >= 95) }'
	check "$name: those read from _start/main down through Python ($root_share%)" \
		awk -v v="$root_share" -v p="$py_share" 'BEGIN { exit !(v >= 0.95 * p) }'
	# An eval-loop call on its way in or out runs no Python frame: it stays
	# (a few percent of the samples, more on a busy machine: docs/MEASUREMENTS.md,
	# CPU stacks and Python samples).
	check "$name: the eval-loop frames are replaced by the Python frames ($left% left)" \
		awk -v v="$left" 'BEGIN { exit !(v <= 8) }'
	# ~1500 samples each at 2999 Hz: a share's sampling error is ~1 point.
	check "$name: Python -> C -> Python: outer;(sorted's C frames);key in $cb%, $own% in pysample's own" \
		awk -v v="$cb" -v o="$own" 'BEGIN { exit !(o >= 5 && v - o <= 6 && o - v <= 6) }'
	# A generator runs in an eval-loop call of its own, entered from C
	# (the stripped 3.11 names none of the frames between): still under outer.
	local gen gen_ok
	gen=$(share "$f" 'genexpr> \(')
	gen_ok=$(share "$f" '^(_start|__libc_start_main|main);.*;outer \([^)]*nest\.py:[0-9]+\);.*;outer\.<locals>\.<genexpr> \(')
	check "$name: the generator's frames under outer() ($gen_ok% of $gen%)" \
		awk -v g="$gen" -v o="$gen_ok" 'BEGIN { exit !(g >= 2 && o >= 0.95 * g) }'
	check "$name: C leaves below Python frames (key;...;PyNumber_Remainder)" \
		grep -q 'key ([^)]*nest\.py:[0-9]*);PyNumber_' "$f"
}

merged_checks py311 /usr/bin/python3.11
py312=$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3 2>/dev/null | head -1)
if [ -n "$py312" ]; then merged_checks py312 "$py312"; else echo "# no pyenv 3.12: skipped"; fi

"$LT" profile -t cpu --freq 999 -q -o "$T/alone.evlog" -- /usr/bin/python3.11 "$T/nest.py" 1 \
	>/dev/null 2>"$T/alone.err"
check "-t cpu alone: exits 0" [ $? = 0 ]
check "-t cpu alone: converts" folded "$T/alone.evlog" alone
check "-t cpu alone: no Python frames, the eval loop stays" \
	sh -c "! grep -q 'nest\.py:' '$T/alone.folded' && grep -q _PyEval_EvalFrameDefault '$T/alone.folded'"
tap_done
