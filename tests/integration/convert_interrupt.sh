#!/bin/bash
# Interrupted conversions: SIGINT/SIGTERM mid-conversion of a large log
# (-o .json, .json.gz, .pftrace, --logdir) remove every temporary file the conversion
# made (and the run directory it created) and publish nothing; the
# temporaries a SIGKILLed conversion leaves are removed by the next
# conversion into the same place, but only provably dead ones (our name
# pattern, the pid not alive, no lock held). Progress: plain lines when
# stderr is not a terminal, none with -q.
set -u
scratch=convert-interrupt
. "$(dirname "$0")/convert_common.inc"

"$gen" "$dir/big.log" -n 3000000 >/dev/null || bail "generator failed"
mkdir -p "$dir/a" "$dir/b" "$dir/k"

# wait_tmp DIR: until a temporary file of ours shows in DIR (10 s at most)
wait_tmp() { wait_until 10 tmp_in "$1"; }
tmp_in() { ls -A "$1" 2>/dev/null | grep -qE '^\..*\.[0-9]+\.[0-9a-f]{8}\.tmp$'; }
export -f wait_until tmp_in # for the checks' own shells (bash -c)
export TAP_TIME_SCALE

# interrupt SIG WATCHDIR ARGS...: start a conversion, signal it once its
# temporary exists, leave its exit status in $dir/rc and stderr in $dir/err
interrupt() {
	local sig=$1 watch=$2; shift 2
	"$conv" -i "$dir/big.log" "$@" 2>"$dir/err" & local p=$!
	wait_tmp "$watch" || { echo "no temporary file appeared in $watch"; kill -9 $p; wait $p; return 1; }
	kill -"$sig" $p; wait $p; echo $? >"$dir/rc"
}
# nothing_left DIR: DIR holds no file at all (hidden ones included)
nothing_left() { [ -z "$(find "$1" -mindepth 1 -not -type d)" ]; }

desc="SIGINT during -o .json.gz: exit by the signal, says so, nothing published, no temporary left"
t bash -c "$(declare -f wait_tmp interrupt nothing_left); conv='$conv' dir='$dir'; \
	interrupt INT '$dir/a' -o '$dir/a/t.json.gz' && [ \$(cat '$dir/rc') = 130 ] && \
	grep -q 'interrupted (SIGINT); nothing published, temporary files removed' '$dir/err' && nothing_left '$dir/a'"
desc="SIGTERM during -o .json: the same"
t bash -c "$(declare -f wait_tmp interrupt nothing_left); conv='$conv' dir='$dir'; \
	interrupt TERM '$dir/b' -o '$dir/b/t.json' && [ \$(cat '$dir/rc') = 143 ] && \
	grep -q 'interrupted (SIGTERM)' '$dir/err' && nothing_left '$dir/b'"
desc="SIGINT during -o .pftrace and .json at once: neither published, no temporary left"
mkdir -p "$dir/p"
t bash -c "$(declare -f wait_tmp interrupt nothing_left); conv='$conv' dir='$dir'; \
	interrupt INT '$dir/p' -o '$dir/p/t.pftrace' -o '$dir/p/t.json' && [ \$(cat '$dir/rc') = 130 ] && \
	grep -q 'interrupted (SIGINT)' '$dir/err' && nothing_left '$dir/p'"
desc="SIGINT during --logdir: no file and no run directory left"
t bash -c "$(declare -f wait_tmp interrupt nothing_left); conv='$conv' dir='$dir'; \
	interrupt INT '$dir/tb/plugins/profile/r' --logdir '$dir/tb' --run r && [ \$(cat '$dir/rc') = 130 ] && \
	[ ! -e '$dir/tb/plugins/profile/r' ] && nothing_left '$dir/tb'"

desc="SIGKILL during -o: its temporaries stay; the next conversion there removes them and says so"
t bash -c "$(declare -f wait_tmp interrupt); conv='$conv' dir='$dir'; \
	interrupt KILL '$dir/k' -o '$dir/k/t.json.gz' && [ -n \"\$(ls -A '$dir/k' | grep '\\.tmp\$')\" ] && \
	'$conv' -i '$dir/big.log' -o '$dir/k/u.json' 2>'$dir/k.err' && grep -q '^removed [0-9]* temporary files of an earlier conversion' '$dir/k.err' && \
	[ \"\$(ls -A '$dir/k' | sort | tr '\\n' ' ')\" = 'u.cpu.folded u.json u.python.folded ' ]"
desc="SIGKILL during --logdir: the next conversion into the logdir removes its temporaries and its empty run directory"
t bash -c "$(declare -f wait_tmp interrupt); conv='$conv' dir='$dir'; \
	interrupt KILL '$dir/tk/plugins/profile/dead' --logdir '$dir/tk' --run dead && [ -d '$dir/tk/plugins/profile/dead' ] && \
	'$conv' -q -i '$dir/big.log' --logdir '$dir/tk' --run next && [ ! -e '$dir/tk/plugins/profile/dead' ] && \
	test -s '$dir/tk/plugins/profile/next/node-a.xplane.pb'"

# What is not provably a dead conversion's stays: a live pid in the name, a
# lock still held, a name not ours.
mkdir -p "$dir/s"
sleep 60 & live=$!
true & dead=$!; wait $dead
echo x >"$dir/s/.o.json.$live.0badcafe.tmp"
echo x >"$dir/s/.p.json.$dead.0badcafe.tmp"
echo x >"$dir/s/.q.json.$dead.0badcafe.tmp"
echo x >"$dir/s/.user.$dead.notours.tmp"
flock "$dir/s/.p.json.$dead.0badcafe.tmp" sleep 60 & holder=$!
wait_until 5 '! flock -n "$dir/s/.p.json.$dead.0badcafe.tmp" true'
desc="only temporaries whose pid is dead, unlocked and named as ours are removed"
t bash -c "'$conv' -q -i '$dir/big.log' -o '$dir/s/o.json' && [ ! -e '$dir/s/.q.json.$dead.0badcafe.tmp' ] && \
	[ -e '$dir/s/.o.json.$live.0badcafe.tmp' ] && [ -e '$dir/s/.p.json.$dead.0badcafe.tmp' ] && \
	[ -e '$dir/s/.user.$dead.notours.tmp' ]"
kill $live $holder 2>/dev/null; wait $live $holder 2>/dev/null

desc="progress: plain lines when stderr is not a terminal (LLMT_PROGRESS_SECONDS apart)"
t bash -c "LLMT_PROGRESS_SECONDS=0.1 '$conv' -i '$dir/big.log' -o '$dir/p1.json' 2>'$dir/p.err' && \
	grep -qE '^llmtracker-convert: (sorting|writing) [0-9]+% \\([0-9]+ of [0-9]+ events\\), [0-9]+ s$' '$dir/p.err'"
desc="... none with -q or --no-progress"
t bash -c "LLMT_PROGRESS_SECONDS=0.1 '$conv' -q -i '$dir/big.log' -o '$dir/p2.json' 2>'$dir/q.err' && \
	LLMT_PROGRESS_SECONDS=0.1 '$conv' --no-progress -i '$dir/big.log' -o '$dir/p3.json' 2>>'$dir/q.err' && \
	! grep -q '%' '$dir/q.err'"
tap_done
