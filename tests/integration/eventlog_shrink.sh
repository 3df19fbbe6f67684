#!/bin/bash
# A log that another process cuts while it is being read (a cleanup job on a
# shared directory, a writer cutting a torn chunk after ENOSPC) ends the read
# cleanly: the events before the cut are returned, the stats say the file
# shrank, the reader never crashes (a mapped reader would die of SIGBUS).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
cli=$BUILD/tests/progs/evlog_cli
need_built "$cli"
tap_tmpdir dir evlog-shrink

total=1500000
log=$dir/big.evlog
"$cli" write "$log" $total mixed >/dev/null 2>"$dir/err" || { nok "write: $(cat "$dir/err")"; exit 1; }
full=$(stat -c %s "$log")
echo "# log of $total events, $full bytes"

# Deterministic: read 1000 events (inside the first chunk), cut the file to
# half, read on.
cp "$log" "$dir/cut.evlog"
mkfifo "$dir/to" "$dir/from"
"$cli" pauseread "$dir/cut.evlog" 1000 <"$dir/to" >"$dir/from" 2>"$dir/rerr" &
rpid=$!
exec 3>"$dir/to" 4<"$dir/from"
read -r -t 30 line <&4
if [ "$line" = paused ]; then
	truncate -s $((full / 2)) "$dir/cut.evlog"
fi
echo go >&3
res=$(cat <&4)
wait "$rpid"; res="$res rc=$?"
exec 3>&- 4<&-
echo "# $(echo "$res" | head -1 | cut -c1-300)"
events=$(echo "$res" | sed -n 's/^events=\([0-9]*\).*/\1/p')
if [[ $res =~ rc=0 ]] && [[ $res =~ shrank=1 ]] && [[ $res =~ truncated=1 ]] &&
   [[ $res =~ "file shrank" ]]; then
	ok "cut to half while read: clean end, shrank=1, \"file shrank\" in the error"
else
	nok "cut to half while read: $res $(cat "$dir/rerr")"
fi
if [ -n "$events" ] && [ "$events" -ge 1000 ] && [ "$events" -lt "$total" ]; then
	ok "the $events events before the cut were returned"
else
	nok "events before the cut: '${events}' (expected 1000..$((total - 1)))"
fi

# The same cut at random moments of a free-running read: never a crash.
crashes=0 shrank=0 trials=${EVLOG_SHRINK_TRIALS:-8}
for t in $(seq 1 "$trials"); do
	cp "$log" "$dir/r$t.evlog"
	"$cli" count "$dir/r$t.evlog" >"$dir/out$t" 2>"$dir/err$t" &
	pid=$!
	sleep "0.0$((RANDOM % 10))"
	truncate -s $((full / 2)) "$dir/r$t.evlog"
	wait "$pid"; rc=$?
	[ "$rc" -gt 1 ] && { crashes=$((crashes + 1)); echo "# trial $t: exit $rc $(cat "$dir/err$t")"; }
	grep -q 'truncated=1' "$dir/out$t" && shrank=$((shrank + 1))
	rm -f "$dir/r$t.evlog"
done
echo "# $shrank of $trials reads saw the cut (the others finished first)"
if [ "$crashes" -eq 0 ]; then
	ok "$trials reads cut at random moments: no crash"
else
	nok "$crashes of $trials reads cut at random moments crashed"
fi

# A log that was cut before the read is a torn tail, not a shrink.
truncate -s $((full / 2)) "$log"
res=$("$cli" count "$log" 2>&1)
if [[ $res =~ truncated=1 ]]; then
	ok "a log cut before the read: torn tail ($res)"
else
	nok "a log cut before the read: $res"
fi
tap_done
