#!/bin/bash
# batch: 4 workers started at once on one directory of 20 logs (plus a
# directory holding one profile of two hosts, and a crashed writer's partial
# log) convert each profile exactly once, publish no partial or temporary
# file, take over a stale claim left by a killed worker, and leave a live
# claim of another host alone. A worker of another host stalled past the
# lease loses its claim and publishes nothing; one that stalls for less
# keeps its claim however long it converts.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$(readlink -f "$BUILD/bin/llmtracker-convert")
gen=$BUILD/tests/progs/xplane_genlog
need_built "$conv" "$gen"
tap_tmpdir dir batch-w
in=$dir/in out=$dir/logs state=$dir/logs/.llmtracker-batch
mkdir -p "$in/multi" "$state"
for i in $(seq 0 19); do "$gen" "$in/node-$i.log" "node-$i" 2 || exit 1; done
"$gen" "$in/multi/a.log" host-a 1 && "$gen" "$in/multi/b.log" host-b 1
"$gen" "$in/crashed.log" node-x 1 --partial    # leaves .crashed.log.partial
echo "not a log" >"$in/notes.txt"

key() { # unit name, kind (f|d) -> state key, as batch names it
	/usr/bin/python3.11 - "$1" "$2" <<'PY'
import re, sys
name, kind = sys.argv[1], sys.argv[2]
h = 2166136261
for b in name.encode():
    h = ((h ^ b) * 16777619) & 0xffffffff
safe = re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()[:160]).decode()
if safe.startswith("."): safe = "_" + safe[1:]
print("%s-%s-%08x" % (kind, safe, h))
PY
}
# A worker killed while converting node-0: its claim names a dead pid on
# this host and has not been refreshed for an hour.
sleep 0 & dead=$!; wait $dead
k0=$(key node-0.log f); echo "$(hostname) $dead $(( $(date +%s) - 3600 ))" >"$state/$k0.claim"
touch -d '-1 hour' "$state/$k0.claim"
# ...it had published one of its outputs before dying.
mkdir -p "$out/plugins/profile/node-0" && echo "left by the dead worker" >"$out/plugins/profile/node-0/node-0.xplane.pb"
# A live claim of another host on node-1: refreshed just now.
k1=$(key node-1.log f); echo "other-host 1 $(date +%s)" >"$state/$k1.claim"

for w in 1 2 3 4; do "$conv" batch --in "$in" --logdir "$out" --lease 30 >"$dir/w$w.log" 2>&1 & done
wait
cat "$dir"/w*.log | grep -v '^batch: converted' | sed 's/^/# /' | head -20

desc="every complete profile converted exactly once (20 = 19 logs + 1 directory)"
t bash -c "cat '$dir'/w*.log | grep '^batch: converted ' | sort | uniq -c | awk '\$1 != 1 {bad=1} END {exit bad}' &&
	[ \$(cat '$dir'/w*.log | grep -c '^batch: converted ') -eq 20 ]"
desc="batch names where it published (the logdir), never the staging fd it wrote through"
t bash -c "! grep -q '/proc/self/fd' '$dir'/w*.log && cat '$dir'/w*.log | grep -q '^batch: converted .* into $out/plugins/profile/'"
desc="one .done marker per converted profile, no failures, no claims left but the live one"
t bash -c "[ \$(ls '$state' | grep -c '\.done$') -eq 20 ] && ! ls '$state' | grep -q '\.failed$' &&
	[ \"\$(ls '$state' | grep '\.claim$')\" = '$k1.claim' ]"
desc="the stale claim of the killed worker was taken over, its leftover output replaced"
t bash -c "[ -e '$state/$k0.done' ] && grep -q 'took over' '$dir'/w*.log &&
	! grep -q 'dead worker' '$out/plugins/profile/node-0/node-0.xplane.pb'"
desc="the live claim of another host was left alone"
t bash -c "[ ! -e '$out/plugins/profile/node-1' ] && grep -q other-host '$state/$k1.claim'"
desc="the directory profile became one run with both hosts"
t test -s "$out/plugins/profile/multi/host-a.xplane.pb" -a -s "$out/plugins/profile/multi/host-b.xplane.pb"
desc="the partial log and other files were not converted"
t bash -c "[ ! -e '$out/plugins/profile/crashed' ] && [ ! -e '$out/plugins/profile/notes' ] && [ \$(ls '$out/plugins/profile' | wc -l) -eq 20 ]"
desc="no partial or temporary file published anywhere under the logdir, no stage left"
t test -z "$(find "$out/plugins" -name '.*' -o -name '*.partial' -o -name '*.tmp'; ls -A "$state" | grep -v '\.done$\|\.claim$')"
desc="every published xplane.pb decodes in full"
t bash -c "for f in '$out'/plugins/profile/*/*.xplane.pb; do protoc --decode=tensorflow.profiler.XSpace \
	--proto_path='$LLMT_ROOT/schemas' '$LLMT_ROOT/schemas/xplane.proto' <\"\$f\" >/dev/null || exit 1; done"
desc="a second pass converts nothing"
t bash -c "'$conv' batch --in '$in' --logdir '$out' 2>&1 | grep -q '^batch: 0 converted'"
desc="a worker killed -9 mid-conversion leaves only its claim; after the lease another takes over"
mkdir -p "$dir/in2"; "$gen" "$dir/in2/big.log" big 100000
"$conv" batch --in "$dir/in2" --logdir "$dir/logs2" >"$dir/k.log" 2>&1 & victim=$!
# Waits for a claim in logdir $1, or the state file $2 (.stage.*: converting);
# a slow, loaded machine may take seconds to start.
claimed() { for i in $(seq 1 3000); do compgen -G "$1/.llmtracker-batch/${2:-*.claim}" >/dev/null && return 0; sleep 0.01; done; return 1; }
claimed "$dir/logs2"; kill -9 $victim; wait $victim 2>/dev/null
t bash -c "ls '$dir/logs2/.llmtracker-batch/' | grep -q '\.claim\$' && ! ls '$dir/logs2/.llmtracker-batch/' | grep -q '\.done\$' &&
	[ -z \"\$(ls '$dir/logs2/plugins/profile/big' 2>/dev/null | grep -v '^\.')\" ] &&
	'$conv' batch --in '$dir/in2' --logdir '$dir/logs2' --lease 60 2>&1 | grep -q '^batch: 0 converted' &&
	sleep 2 && '$conv' batch --in '$dir/in2' --logdir '$dir/logs2' --lease 1 >'$dir/k2.log' 2>&1 &&
	grep -q 'took over' '$dir/k2.log' && ls '$dir/logs2/.llmtracker-batch/' | grep -q '\.done\$' &&
	[ -z \"\$(ls -A '$dir/logs2/.llmtracker-batch/' | grep -v '\.done\$')\" ] &&
	protoc --decode=tensorflow.profiler.XSpace --proto_path='$LLMT_ROOT/schemas' '$LLMT_ROOT/schemas/xplane.proto' \
		<'$dir/logs2/plugins/profile/big/big.xplane.pb' >/dev/null"
# A worker of another host (its own UTS namespace) converting big.
other() { exec unshare -u sh -c 'hostname stalled-host && exec "$@"' sh "$conv" batch "$@"; }
if ! unshare -u true 2>/dev/null; then
	ok "# SKIP stalled worker: cannot enter a UTS namespace (unshare -u)"
	ok "# SKIP slow worker: cannot enter a UTS namespace (unshare -u)"
else
desc="a worker stalled past the lease loses its claim: it publishes nothing, the taker's files stand"
mkdir -p "$dir/in3"; "$gen" "$dir/in3/mid.log" mid 40000
other --in "$dir/in3" --logdir "$dir/logs3" --lease 1 >"$dir/s.log" 2>&1 & stalled=$!; tap_bg $stalled
claimed "$dir/logs3" '.stage.*'; kill -STOP $stalled; sleep 1.5
"$conv" batch --in "$dir/in3" --logdir "$dir/logs3" --lease 1 >"$dir/t.log" 2>&1
pb=$dir/logs3/plugins/profile/mid/mid.xplane.pb; before=$(stat -c '%i %s %Y' "$pb" 2>&1)
kill -CONT $stalled; wait $stalled
t bash -c "grep -q 'took over' '$dir/t.log' && grep -q 'not publishing' '$dir/s.log' &&
	! grep -q '^batch: converted' '$dir/s.log' && [ \"\$(stat -c '%i %s %Y' '$pb')\" = '$before' ] &&
	[ \"\$(ls -A '$dir/logs3/.llmtracker-batch')\" = \"\$(ls '$dir/logs3/.llmtracker-batch' | grep '\.done\$')\" ] &&
	protoc --decode=tensorflow.profiler.XSpace --proto_path='$LLMT_ROOT/schemas' '$LLMT_ROOT/schemas/xplane.proto' <'$pb' >/dev/null ||
	{ echo 'before: $before after:' \$(stat -c '%i %s %Y' '$pb'); ls -A '$dir/logs3/.llmtracker-batch'; cat '$dir/t.log' '$dir/s.log'; false; }"
desc="a worker stalled often but never for a lease keeps its claim: nobody takes over"
other --in "$dir/in2" --logdir "$dir/logs4" --lease 2 >"$dir/v.log" 2>&1 & slow=$!; tap_bg $slow
claimed "$dir/logs4"; start=$(date +%s%N)
# 0.6 s stopped of every 0.7 s for 4.5 s (over 2 leases): a claim that is
# not refreshed while converting would be taken over by the contenders.
( for i in $(seq 1 6); do kill -STOP $slow 2>/dev/null || break; sleep 0.6; kill -CONT $slow; sleep 0.1; done ) & stopper=$!
while kill -0 $slow 2>/dev/null && ! grep -q '^batch: ' "$dir/v.log"; do
	"$conv" batch --in "$dir/in2" --logdir "$dir/logs4" --lease 2 >>"$dir/c.log" 2>&1; sleep 0.3
done
wait $stopper; kill -CONT $slow 2>/dev/null; wait $slow
echo "# slow worker converted in $(( ($(date +%s%N) - start) / 1000000 )) ms with a 2000 ms lease"
t bash -c "grep -q '^batch: converted big.log' '$dir/v.log' && ! grep -q 'took over\|^batch: converted' '$dir/c.log' &&
	[ \"\$(ls -A '$dir/logs4/.llmtracker-batch')\" = \"\$(ls '$dir/logs4/.llmtracker-batch' | grep '\.done\$')\" ] ||
	{ ls -A '$dir/logs4/.llmtracker-batch'; cat '$dir/v.log'; grep -v '^converted\|^wrote' '$dir/c.log'; false; }"
fi
desc="bad arguments are clear errors"
t bash -c "'$conv' batch --in '$in' 2>'$dir/e1'; [ \$? -eq 2 ] && grep -q required '$dir/e1' &&
	{ '$conv' batch --in '$in' --logdir '$out' --lease x 2>'$dir/e2'; [ \$? -eq 2 ]; } && grep -q positive '$dir/e2'"
tap_done
