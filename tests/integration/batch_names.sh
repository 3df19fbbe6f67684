#!/bin/bash
# batch: units never share a run (train.rank0.evlog and train.rank1.evlog
# become runs train.rank0 and train.rank1; names that sanitize alike or
# differ only by a log extension get a hash), with one worker and with two
# at once; a unit that fails is tried again by later passes (after
# --retry-after, up to --attempts) with each attempt's reason recorded.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$(readlink -f "$BUILD/bin/llmtracker-convert")
gen=$BUILD/tests/progs/xplane_genlog
need_built "$conv" "$gen"
tap_tmpdir dir batch-n
in=$dir/in
mkdir -p "$in/dup"
# Each unit's log has its own host, so a run holding two units shows.
"$gen" "$in/train.rank0.evlog" rank0 1 && "$gen" "$in/train.rank1.evlog" rank1 1 &&
"$gen" "$in/a:b.log" colon 1 && "$gen" "$in/a_b.log" underscore 1 &&
"$gen" "$in/dup.log" dupfile 1 && "$gen" "$in/dup/x.log" dupdir 1 || exit 1
fnv() { /usr/bin/python3.11 -c 'import sys
h = 2166136261
for b in sys.argv[1].encode(): h = ((h ^ b) * 16777619) & 0xffffffff
print("%08x" % h)' "$1"; }
# run name -> the one host its files must be from
expect="train.rank0 rank0
train.rank1 rank1
a_b-$(fnv 'a:b.log') colon
a_b underscore
dup-$(fnv dup.log) dupfile
dup-$(fnv dup) dupdir"
# Every expected run holds its own host's files only, and there are no others.
runs_ok() { # logdir
	local run host
	[ "$(ls "$1/plugins/profile" | wc -l)" -eq 6 ] || { ls "$1/plugins/profile"; return 1; }
	while read -r run host; do
		[ -s "$1/plugins/profile/$run/$host.xplane.pb" ] || { echo "no $run/$host.xplane.pb"; return 1; }
		ls "$1/plugins/profile/$run" | grep -v "^$host\." && { echo "$run mixes hosts"; return 1; }
	done <<<"$expect"
	return 0
}

one_worker() { "$conv" batch --in "$in" --logdir "$dir/one" -q && runs_ok "$dir/one"; }
desc="one worker: six units, six runs, each with its own unit's files only"
t one_worker
desc="one worker: no failure recorded"
t test -z "$(find "$dir/one/.llmtracker-batch" -name 'failed*')"
for w in 1 2; do "$conv" batch --in "$in" --logdir "$dir/two" >"$dir/w$w.log" 2>&1 & done
wait
desc="two workers at once: the same six runs, nothing mixed"
t runs_ok "$dir/two"
once() {
	[ "$(cat "$dir"/w*.log | grep -c '^batch: converted ')" -eq 6 ] &&
	[ "$(cat "$dir"/w*.log | grep '^batch: converted ' | sort -u | wc -l)" -eq 6 ] &&
	[ "$(grep -c ', 0 failed$' "$dir"/w*.log | awk -F: '{ s += $2 } END { print s }')" -eq 2 ] &&
	[ "$(ls "$dir"/two/.llmtracker-batch/*/done | wc -l)" -eq 6 ] || { cat "$dir"/w*.log; false; }
}
desc="two workers at once: each unit converted exactly once, no failure"
t once

# Retries: a run directory that already holds another tool's file makes
# the unit fail ("already holds files") until the file goes away.
mkdir -p "$dir/rin" "$dir/r/plugins/profile/busy" "$dir/r/plugins/profile/stuck"
"$gen" "$dir/rin/busy.log" busy 1 && "$gen" "$dir/rin/stuck.log" stuck 1 || exit 1
echo other >"$dir/r/plugins/profile/busy/other.txt"; echo other >"$dir/r/plugins/profile/stuck/other.txt"
st=$dir/r/.llmtracker-batch
has() { compgen -G "$st/$1" >/dev/null; } # a unit's state file: UNIT-GLOB/NAME
pass() { "$conv" batch --in "$dir/rin" --logdir "$dir/r" --attempts 2 "$@" >"$dir/p.log" 2>&1; }
show() { cat "$dir/p.log"; ls -R "$st"; false; }
first_fail() {
	! pass --retry-after 0 &&
	grep -q '^batch: busy.log: .*already holds files.*(attempt 1 of 2; tried again' "$dir/p.log" &&
	has 'f-busy.log-*/failed.1' && grep -q 'already holds files' "$st"/f-busy.log-*/failed.1 &&
	! has '*/failed' || show
}
desc="a failing unit: exit 1, one line naming the unit, the reason and the attempt, recorded"
t first_fail
too_soon() {
	pass --retry-after 3600 && grep -q '^batch: 0 converted, 2 skipped' "$dir/p.log" &&
	! has '*/failed.2' || show
}
desc="not tried again before --retry-after has passed"
t too_soon
rm "$dir/r/plugins/profile/busy/other.txt"
retried() {
	! pass --retry-after 0 && grep -q '^batch: converted busy.log' "$dir/p.log" &&
	has 'f-busy.log-*/done' &&
	grep -q '^batch: stuck.log: .*(attempt 2 of 2, the last: not tried again' "$dir/p.log" &&
	has 'f-stuck.log-*/failed' || show
}
desc="tried again by a later pass: converted once its cause is gone; stuck's last attempt fails for good"
t retried
settled() { pass --retry-after 0 && grep -q '^batch: 0 converted, 2 skipped' "$dir/p.log" || show; }
desc="a unit failed for good is left alone by later passes"
t settled
bad_args() {
	"$conv" batch --in "$in" --logdir "$dir/x" --attempts 0 2>"$dir/e1"; [ $? -eq 2 ] &&
	grep -q -- '--attempts wants a number of attempts from 1 to 100' "$dir/e1" &&
	{ "$conv" batch --in "$in" --logdir "$dir/x" --retry-after -1 2>"$dir/e2"; [ $? -eq 2 ]; } &&
	grep -q -- '--retry-after wants a number of seconds' "$dir/e2"
}
desc="bad --attempts / --retry-after are clear errors"
t bad_args
tap_done
