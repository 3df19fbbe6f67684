#!/bin/bash
# Two gloo ranks on CPU in DistributedDataParallel (ddp_loop.py ddp: the
# inline body, the gradients' all-reduce run by DDP's reducer in C++ inside
# backward, no collective call from Python in the loop), each under its own
# collector; rank 1 made 60 ms late at steps 5, 9 and 13. DDP's backward
# stands for the collectives: the summary names rank 1 at its late steps
# and no rank elsewhere. (nice -10: see steps_ranks.sh.)
. "$(dirname "$0")/ranks.inc"
c=ddp
mkdir -p "$T/$c"
port=$(free_port)
for r in 0 1; do
	env $(rank_env $r 2 "$port") timeout 180 nice -n -10 "$LT" profile -t python,cpu \
		-o "$T/$c/rank$r.evlog" -- "$PY" "$WL" ddp "$T/$c/truth$r" --steps 40 \
		--late 1:60:5,9,13 >"$T/$c/out$r" 2>&1 &
	eval "pid$r=$!"
done
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
check "two DDP ranks, each under its own collector, exit 0 ($rc0, $rc1)" '[ $rc0 = 0 ] && [ $rc1 = 0 ]'
convert_check "$c" "$T/$c" 2
check "$c: the late steps' where names straggle()" \
	"grep -E '^ +(5|9|13) +1 ' '$T/$c.sum' | grep -c 'straggle (ddp_loop.py' | grep -qx '[23]'"
check "$c: the early rank's wait inside backward is counted as waiting" \
	"awk '/^Ranks:/ { on = 1; next } on && \$1 == 0 { exit !(\$8 > 1) }' '$T/$c.sum'"
tap_done
