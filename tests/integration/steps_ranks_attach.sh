#!/bin/bash
# Four gloo ranks on CPU started by hand, one collector attached to all of
# them once they are set up (profile -v 1 -t python,cpu -p P0 -p P1 -p P2
# -p P3); each rank waits for the attach, then runs ddp_loop.py's forward(); backward();
# update() loop, rank 2 made 60 ms late at steps 5, 9 and 13. What was
# running at the attach is not recorded: the loop's calls are at the top of
# what each thread recorded. Each rank's steps match its truth, iterations
# are numbered alike on all ranks, the summary names rank 2 at its late
# steps and no rank elsewhere, summary --json the same. (nice -10: see
# steps_ranks.sh.)
. "$(dirname "$0")/ranks.inc"
c=four
mkdir -p "$T/$c"
port=$(free_port)
pids=()
for r in 0 1 2 3; do
	env $(rank_env $r 4 "$port") timeout 180 nice -n -10 "$PY" "$WL" fbu "$T/$c/truth$r" \
		--steps 40 --late 2:60:5,9,13 --go "$T/$c/go" >"$T/$c/out$r" 2>&1 &
	pids+=(-p $!)
	tap_bg $!
done
ready() { [ "$(ls "$T/$c"/go.ready.* 2>/dev/null | wc -l)" = 4 ]; }
wait_until 120 ready
check "the four ranks are set up (torch imported, the process group formed)" ready
"$LT" profile -v 1 -t python,cpu "${pids[@]}" -o "$T/$c/job.evlog" >/dev/null 2>"$T/$c/coll.err" &
lt=$!
tap_bg $lt
traced() { [ "$(grep -cE 'python: pid [0-9]+: tracing functions' "$T/$c/coll.err")" -ge 4 ]; }
wait_until 90 traced
check "one collector traces the four ranks' Python functions" traced
touch "$T/$c/go"
wait "$lt"
check_rc $? "the collector exits 0 when the ranks are done"
convert_check "$c" "$T/$c/job.evlog" 4
check "$c: the late steps' where names straggle()" \
	"grep -E '^ +(5|9|13) +2 ' '$T/$c.sum' | grep -c 'straggle (ddp_loop.py' | grep -qx '[23]'"
tap_done
