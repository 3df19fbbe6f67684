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
ms() { echo $(( $(date +%s%3N) + $1 * 1000 )); } # wall-clock ms, $1 seconds from now
# A worker killed while converting node-0: its lease ran out an hour ago...
k0=$(key node-0.log f); mkdir "$state/$k0"; touch "$state/$k0/lease.1.dead-host-1-deadbeef.$(ms -3600)"
# ...after it had begun publishing, and published one of its outputs.
touch "$state/$k0/publishing.dead-host-1-deadbeef"
mkdir -p "$out/plugins/profile/node-0" && echo "left by the dead worker" >"$out/plugins/profile/node-0/node-0.xplane.pb"
# A live claim of another host on node-1: its lease runs for another hour.
k1=$(key node-1.log f); mkdir "$state/$k1"; live=lease.1.other-host-1-00000000.$(ms 3600); touch "$state/$k1/$live"

for w in 1 2 3 4; do "$conv" batch --in "$in" --logdir "$out" --lease 30 >"$dir/w$w.log" 2>&1 & done
wait
cat "$dir"/w*.log | grep -v '^batch: converted' | sed 's/^/# /' | head -20

desc="every complete profile converted exactly once (20 = 19 logs + 1 directory)"
t bash -c "cat '$dir'/w*.log | grep '^batch: converted ' | sort | uniq -c | awk '\$1 != 1 {bad=1} END {exit bad}' &&
	[ \$(cat '$dir'/w*.log | grep -c '^batch: converted ') -eq 20 ]"
desc="batch names where it published (the logdir), never the staging fd it wrote through"
t bash -c "! grep -q '/proc/self/fd' '$dir'/w*.log && cat '$dir'/w*.log | grep -q '^batch: converted .* into $out/plugins/profile/'"
desc="one done marker per converted profile, no failures, no claims left but the live one"
t bash -c "[ \$(ls '$state'/*/done | wc -l) -eq 20 ] && [ -z \"\$(find '$state' -name 'failed*')\" ] &&
	[ \"\$(cd '$state' && ls -d */lease.* */intent.* 2>/dev/null)\" = '$k1/$live' ]"
desc="the stale claim of the killed worker was taken over, its leftover output replaced"
t bash -c "[ -e '$state/$k0/done' ] && grep -q 'node-0.log: took over from worker dead-host-1-deadbeef' '$dir'/w*.log &&
	! grep -q 'dead worker' '$out/plugins/profile/node-0/node-0.xplane.pb'"
desc="the live claim of another host was left alone"
t bash -c "[ ! -e '$out/plugins/profile/node-1' ] && [ -e '$state/$k1/$live' ]"
desc="the directory profile became one run with both hosts"
t test -s "$out/plugins/profile/multi/host-a.xplane.pb" -a -s "$out/plugins/profile/multi/host-b.xplane.pb"
desc="the partial log and other files were not converted"
t bash -c "[ ! -e '$out/plugins/profile/crashed' ] && [ ! -e '$out/plugins/profile/notes' ] && [ \$(ls '$out/plugins/profile' | wc -l) -eq 20 ]"
desc="no partial or temporary file published anywhere under the logdir, no stage or marker left"
t test -z "$(find "$out/plugins" -name '.*' -o -name '*.partial' -o -name '*.tmp'; find "$state" -mindepth 2 ! -name done ! -name "$live")"
desc="every published xplane.pb decodes in full"
t bash -c "for f in '$out'/plugins/profile/*/*.xplane.pb; do protoc --decode=tensorflow.profiler.XSpace \
	--proto_path='$LLMT_ROOT/schemas' '$LLMT_ROOT/schemas/xplane.proto' <\"\$f\" >/dev/null || exit 1; done"
desc="a second pass converts nothing"
t bash -c "'$conv' batch --in '$in' --logdir '$out' 2>&1 | grep -q '^batch: 0 converted'"
desc="a worker killed -9 mid-conversion leaves only its lease; once that ran out, another takes over"
mkdir -p "$dir/in2"; "$gen" "$dir/in2/big.log" big 100000
"$conv" batch --in "$dir/in2" --logdir "$dir/logs2" --lease 3 >"$dir/k.log" 2>&1 & victim=$!
# Waits for a lease in logdir $1, or the state file $2 (*/.stage.*:
# converting); a slow, loaded machine may take seconds to start.
claimed() { for i in $(seq 1 3000); do compgen -G "$1/.llmtracker-batch/${2:-*/lease.*}" >/dev/null && return 0; sleep 0.01; done; return 1; }
claimed "$dir/logs2" '*/.stage.*'; kill -9 $victim; wait $victim 2>/dev/null
st2=$dir/logs2/.llmtracker-batch
# when the victim's newest lease runs out (ms): the last field of its name
exp=$(ls "$st2"/*/lease.* | sed 's/.*\.//' | sort -n | tail -1)
"$conv" batch --in "$dir/in2" --logdir "$dir/logs2" --lease 3 >"$dir/k1.log" 2>&1
# passes until one converts big
for i in $(seq 1 100); do
	"$conv" batch --in "$dir/in2" --logdir "$dir/logs2" --lease 3 >"$dir/k2.log" 2>&1
	grep -q '^batch: converted' "$dir/k2.log" && break; sleep 0.2
done; converted_at=$(date +%s%3N)
t bash -c "[ -n '$exp' ] && grep -q '^batch: 0 converted' '$dir/k1.log' && [ $converted_at -ge ${exp:-0} ] &&
	grep -q 'big.log: took over from worker' '$dir/k2.log' && [ -e \"\$(echo '$st2'/*/done)\" ] &&
	[ -z \"\$(find '$st2' -mindepth 2 ! -name done)\" ] &&
	protoc --decode=tensorflow.profiler.XSpace --proto_path='$LLMT_ROOT/schemas' '$LLMT_ROOT/schemas/xplane.proto' \
		<'$dir/logs2/plugins/profile/big/big.xplane.pb' >/dev/null || { cat '$dir/k1.log' '$dir/k2.log'; find '$st2'; false; }"
# A worker of another host (its own UTS namespace) converting big.
other() { exec unshare -u sh -c 'hostname stalled-host && exec "$@"' sh "$conv" batch "$@"; }
if ! unshare -u true 2>/dev/null; then
	ok "# SKIP stalled worker: cannot enter a UTS namespace (unshare -u)"
	ok "# SKIP slow worker: cannot enter a UTS namespace (unshare -u)"
else
desc="a worker stalled past the lease loses its claim: it publishes nothing, the taker's files stand"
mkdir -p "$dir/in3"; "$gen" "$dir/in3/mid.log" mid 40000
other --in "$dir/in3" --logdir "$dir/logs3" --lease 1 >"$dir/s.log" 2>&1 & stalled=$!; tap_bg $stalled
claimed "$dir/logs3" '*/.stage.*'; kill -STOP $stalled; sleep 1.5
"$conv" batch --in "$dir/in3" --logdir "$dir/logs3" --lease 1 >"$dir/t.log" 2>&1
pb=$dir/logs3/plugins/profile/mid/mid.xplane.pb; before=$(stat -c '%i %s %Y' "$pb" 2>&1)
kill -CONT $stalled; wait $stalled
t bash -c "grep -q 'took over' '$dir/t.log' && grep -q 'not publishing' '$dir/s.log' &&
	! grep -q '^batch: converted' '$dir/s.log' && [ \"\$(stat -c '%i %s %Y' '$pb')\" = '$before' ] &&
	[ -z \"\$(find '$dir/logs3/.llmtracker-batch' -mindepth 2 ! -name done)\" ] &&
	protoc --decode=tensorflow.profiler.XSpace --proto_path='$LLMT_ROOT/schemas' '$LLMT_ROOT/schemas/xplane.proto' <'$pb' >/dev/null ||
	{ echo 'before: $before after:' \$(stat -c '%i %s %Y' '$pb'); find '$dir/logs3/.llmtracker-batch'; cat '$dir/t.log' '$dir/s.log'; false; }"
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
	[ -z \"\$(find '$dir/logs4/.llmtracker-batch' -mindepth 2 ! -name done)\" ] ||
	{ find '$dir/logs4/.llmtracker-batch'; cat '$dir/v.log'; grep -v '^converted\|^wrote' '$dir/c.log'; false; }"
fi
desc="bad arguments are clear errors"
t bash -c "'$conv' batch --in '$in' 2>'$dir/e1'; [ \$? -eq 2 ] && grep -q required '$dir/e1' &&
	{ '$conv' batch --in '$in' --logdir '$out' --lease x 2>'$dir/e2'; [ \$? -eq 2 ]; } && grep -q positive '$dir/e2'"
tap_done
