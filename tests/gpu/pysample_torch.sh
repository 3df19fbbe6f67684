#!/bin/bash
# GPU machine check of -t pysample (sampled Python stacks) on the host's
# own python3 (3.12 there, without USDT probes), in one call:
#   1. launched: a PyTorch training loop (tests/workloads/pys_torch_loop.py) for 3 s;
#      the folded stacks hold <module>;main;train_loop;train_step;forward_pass,
#      backward_pass, and the feeder thread's prepare_batches on its own tid;
#      no shim or unreadable frames;
#   2. attached with -p to a running loop for 1.5 s: the same frames;
#   3. figures: steps/s alone, under -t pysample at 99 Hz and 999 Hz.
# Prints PASS/FAIL lines and figures; exit 0 only if all pass. Needs, built
# here and carried: $BUILD/bin/llmtracker-static (or llmtracker) and
# $BUILD/tests/progs/pys_folded.
set -u
. "$(dirname "$0")/common.inc"
BUILD=${BUILD:-build}
gpu_python python3
gpu_build_collector
FOLD=$BUILD/tests/progs/pys_folded
LOOP=tests/workloads/pys_torch_loop.py

gpu_need "$LT" "$FOLD"
gpu_need_torch
tap_tmpdir T pysample_torch
echo "collector: $LT; python: $(gpu_torch_python)"

# check_stacks NAME FOLDED PID: the expectations on one profile's stacks.
check_stacks() {
	local name=$1 f=$2 pid=$3 total odd
	total=$(awk '{ s += $1 } END { print s + 0 }' "$f")
	echo "top stacks ($name, $total samples; count pid tid root;...;leaf):"
	sort -rn "$f" | head -8 | cut -c1-220 | sed 's/^/  /'
	[ "$total" -ge 30 ] && pass "$name: $total samples" || bad "$name: only $total samples"
	grep -q ' <module>;main;train_loop;train_step;forward_pass' "$f" &&
		pass "$name: <module>;main;train_loop;train_step;forward_pass" ||
		bad "$name: no stack with <module>;main;train_loop;train_step;forward_pass"
	grep -q ';train_step;backward_pass' "$f" && pass "$name: train_step;backward_pass" ||
		bad "$name: no train_step;backward_pass"
	awk -v p="$pid" '$3 != p && / [^ ]*prepare_batches/' "$f" | grep -q . &&
		pass "$name: prepare_batches on the feeder thread" ||
		bad "$name: prepare_batches not seen on a thread of its own"
	odd=$(awk '/\[unreadable|\[not a code|<shim>/ { s += $1 } END { print s + 0 }' "$f")
	[ $((odd * 100)) -le "$total" ] && pass "$name: $odd samples with unreadable or shim frames" ||
		bad "$name: $odd of $total samples hold unreadable or shim frames (layout wrong?)"
}

# 1. launched
"$PY" "$LOOP" --seconds 3 --meta "$T/alone.json" >"$T/alone.out" 2>&1 ||
	{ echo "FAIL: the loop alone failed:"; tail -20 "$T/alone.out"; exit 1; }
"$LT" profile -t pysample -v 1 -o "$T/a.log" -- "$PY" "$LOOP" --seconds 3 --meta "$T/a.json" \
	>"$T/a.out" 2>"$T/a.err"
rc=$?
grep -E 'pysample|W[0-9]{4}' "$T/a.err" | head -10
tail -5 "$T/a.err"
if [ $rc != 0 ] || [ ! -s "$T/a.log" ]; then
	bad "profile -t pysample of the torch loop (rc $rc)"
else
	"$FOLD" "$T/a.log" --no-lines >"$T/a.folded" || bad "pys_folded could not read the whole log"
	check_stacks launched "$T/a.folded" "$("$PY" -c "import json; print(json.load(open('$T/a.json'))['pid'])")"
	echo "with file:line, the hottest:"
	"$FOLD" "$T/a.log" | sort -rn | head -2 | cut -c1-400 | sed 's/^/  /'
fi

# 2. attached to a running loop
"$PY" "$LOOP" --seconds 8 >"$T/b.out" 2>&1 &
bg=$!
wait_for "$T/b.out" '^training' 60 # import, set-up
sleep 0.5
"$LT" profile -t pysample -p "$bg" -d 1.5 -o "$T/b.log" >"$T/b.pout" 2>&1
rc=$?
wait "$bg"; brc=$?
if [ $rc != 0 ]; then bad "profile -t pysample -p (rc $rc)"; tail -5 "$T/b.pout"; else
	"$FOLD" "$T/b.log" --no-lines >"$T/b.folded"
	check_stacks attached "$T/b.folded" "$bg"
fi
[ $brc = 0 ] && pass "the attached loop ran to its end" || bad "the attached loop failed (rc $brc)"

# 3. overhead at 999 Hz
"$LT" profile -t pysample --freq 999 -o "$T/c.log" -- "$PY" "$LOOP" --seconds 3 --meta "$T/c.json" \
	>/dev/null 2>"$T/c.err" || bad "profile at 999 Hz failed"
"$PY" -c "import json; a=json.load(open('$T/alone.json')); b=json.load(open('$T/a.json')); c=json.load(open('$T/c.json'))
print('figure: %s loop %.1f steps/s alone, %.1f under -t pysample 99 Hz (x%.3f), %.1f at 999 Hz (x%.3f)'
      % (a['device'], a['steps_per_s'], b['steps_per_s'], b['steps_per_s']/a['steps_per_s'],
         c['steps_per_s'], c['steps_per_s']/a['steps_per_s']))" 2>/dev/null
grep -h "collector CPU" "$T/a.err" "$T/c.err" | sed 's/^/  /'
gpu_done
