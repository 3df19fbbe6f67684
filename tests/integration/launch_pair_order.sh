#!/bin/bash
# The converter's launch pairing (converter/pairing/launchpair.c) where work of one
# signature starts in another order than its calls were made: three threads
# launch the same kernel on streams of their own, the main thread's stream
# running behind and one thread's call slower (tests/progs/lp_order_genlog.c,
# exact times, CUPTI's correlation ids in the records, no API records).
# The stream each thread's handle feeds is learnt from a first pairing
# without streams; taken by start, the work took the calls of other threads,
# and the threads were mapped to each other's streams (every item linked,
# two of three to the wrong call). Every item must link to the very call
# that made it.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
GEN=$BUILD/tests/progs/lp_order_genlog
CONV=$BUILD/bin/llmtracker-convert
LP_CHECK=$(dirname "$0")/launch_pair_check.py
need_built "$GEN" "$CONV"
tap_tmpdir W llmt-lp-order
ROUNDS=200
N=$((ROUNDS * 3))

check "the log written ($ROUNDS rounds of 3 launches)" \
	'"$GEN" "$W/x.evlog" "$ROUNDS" > "$W/app.out" && [ "$(grep -c "^truth" "$W/app.out")" = 3 ]'
"$CONV" -i "$W/x.evlog" -o "$W/trace.json" > "$W/conv.out" 2> "$W/conv.err"
check_rc $? "converted"
grep -E "^launch links" "$W/conv.err" | sed "s/^/# /"
check "every kernel linked from the uprobes ($N of $N), none out of its thread's call order" \
	'grep -q "launch links from uprobes: $N of $N kernels/copies/sets linked; 0 of $N links out of" "$W/conv.err"'
python3 "$LP_CHECK" truth "$W/trace.json" "$W/app.out" "$N" > "$W/truth" 2>&1
rc=$?
sed "s/^/# /" "$W/truth"
check_rc "$rc" "every kernel's flow starts at the call that made it (exact, $N of $N)"
check "a bad round count is refused with one line" \
	'! "$GEN" "$W/y.evlog" 0 2> "$W/bad.err" && [ "$(wc -l < "$W/bad.err")" = 1 ] && [ ! -e "$W/y.evlog" ]'
tap_done
