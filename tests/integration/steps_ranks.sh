#!/bin/bash
# Two gloo ranks on CPU, each launched under its own collector
# (profile -t python,cpu -- python3.11 ddp_loop.py inline): the loop body is
# inline at module level and its batches come from a DataLoader; rank 1 is
# made 60 ms late at steps 5, 9 and 13. The directory of both profiles is
# one job: each rank's steps match the truth it wrote, one iteration has
# one ProfilerStep number on both ranks, the summary names rank 1 at its
# late steps and no rank elsewhere (summary --json the same), and one
# TensorBoard run holds both ranks, each named "rank R (pid P)".
# The ranks run at nice -10: a job owns its node, and on a busy test
# machine a rank left waiting for a CPU is late as truly as a slow one.
. "$(dirname "$0")/ranks.inc"
c=two
mkdir -p "$T/$c"
port=$(free_port)
for r in 0 1; do
	env $(rank_env $r 2 "$port") timeout 180 nice -n -10 "$LT" profile -t python,cpu \
		-o "$T/$c/rank$r.evlog" -- "$PY" "$WL" inline "$T/$c/truth$r" --steps 40 --loader \
		--late 1:60:5,9,13 >"$T/$c/out$r" 2>&1 &
	eval "pid$r=$!"
done
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
check "two ranks, each under its own collector, exit 0 ($rc0, $rc1)" '[ $rc0 = 0 ] && [ $rc1 = 0 ]'
sed 's/^/# /' "$T/$c/out1" | grep -v '^# I' | head -5
convert_check "$c" "$T/$c" 2
check "$c: the late steps' where names straggle()" \
	"grep -E '^ +(5|9|13) +1 ' '$T/$c.sum' | grep -c 'straggle (ddp_loop.py' | grep -qx '[23]'"
check "$c: each rank's breakdown has time in input (DataLoader __next__)" \
	"grep -E '^ +[0-9.]+ ms +[0-9.]+%  input' '$T/$c.sum' | awk '\$1 > 0' | grep -q ."
"$CONV" -q -i "$T/$c" --logdir "$T/tb" --run job >/dev/null 2>&1
pb=$(ls "$T"/tb/plugins/profile/job/*.xplane.pb 2>/dev/null)
check "one TensorBoard run, one host file, both ranks named in it" \
	"[ \$(echo '$pb' | wc -w) = 1 ] && grep -aq 'rank 0 (pid ' '$pb' && grep -aq 'rank 1 (pid ' '$pb'"
tap_done
