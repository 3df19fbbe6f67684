#!/bin/bash
# A writer killed with SIGKILL at random moments leaves a partial log from
# which the reader recovers every chunk flushed before the kill, exactly, and
# nothing else; the reader never crashes.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
prog=$BUILD/tests/progs/evlog_crashwriter
need_built "$prog"
tap_tmpdir dir evlog-crash
trials=${EVLOG_CRASH_TRIALS:-60}
fails=0 nonempty=0 torn=0
for t in $(seq 1 "$trials"); do
	out=$dir/t$t.evlog
	"$prog" write "$out" "$t" >"$dir/progress$t" 2>"$dir/err$t" &
	pid=$!
	# Random kill moment: 0..60 ms after start.
	sleep "0.0$((RANDOM % 60 / 10))$((RANDOM % 10))"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	durable=$(grep -E '^[0-9]+$' "$dir/progress$t" | tail -1)
	durable=${durable:-0}
	log=$(ls "$dir"/.t$t.evlog*.partial "$out" 2>/dev/null | head -1)
	if [ -z "$log" ] || [ ! -s "$log" ]; then
		# Killed before the partial file existed, or before its header was
		# written: nothing may have been reported durable.
		[ "$durable" -eq 0 ] || { echo "# trial $t: no file but $durable durable"; fails=$((fails + 1)); }
		continue
	fi
	if ! res=$("$prog" check "$log" "$t" "$durable" 2>&1); then
		echo "# trial $t: durable=$durable: $res"
		fails=$((fails + 1))
		continue
	fi
	[ "$durable" -gt 0 ] && nonempty=$((nonempty + 1))
	[[ $res =~ truncated=1 ]] && torn=$((torn + 1))
	rm -f "$log"
done
echo "# $torn trials left a torn last chunk"
if [ "$fails" -eq 0 ]; then
	ok "$trials SIGKILL trials: every flushed event recovered, exact prefix, no damaged chunk"
else
	nok "$fails of $trials SIGKILL trials lost flushed events or read garbage"
fi
if [ "$nonempty" -ge $((trials / 2)) ]; then
	ok "$nonempty trials were killed after at least one flush"
else
	nok "only $nonempty of $trials trials were killed after a flush (timing too short)"
fi
tap_done
