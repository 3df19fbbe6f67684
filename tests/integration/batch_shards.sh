#!/bin/bash
# batch --shard I/N (a Kubernetes Indexed Job's index I of N): 3 shards run
# at once convert each profile once, each the profiles whose key's SHA-256
# gives its index (whatever the listing order), with no claim; the index
# comes from JOB_COMPLETION_INDEX with --shard N or LLMT_BATCH_SHARDS=N. A
# shard pass is safe to run again: done profiles are skipped, a profile an
# interrupted pass began publishing is replaced, and a failing profile makes
# every pass exit 1 (no --attempts: the Job's backoff retries) until its
# cause is gone. Bad shard arguments are clear errors.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$(readlink -f "$BUILD/bin/llmtracker-convert")
gen=$BUILD/tests/progs/xplane_genlog
need_built "$conv" "$gen"
tap_tmpdir dir batch-sh
in=$dir/in out=$dir/tb state=$dir/tb/.llmtracker-batch
mkdir -p "$in/multi"
for i in $(seq 1 29); do "$gen" "$in/node-$i.log" "node-$i" 1 || exit 1; done
"$gen" "$in/multi/a.log" host-a 1 && "$gen" "$in/multi/b.log" host-b 1 || exit 1

shard_of() { # I N: the entries of --in whose state key hashes to I of N, sorted
	/usr/bin/python3.11 - "$1" "$2" "$in" <<'PY'
import hashlib, os, re, sys
i, n, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for name in sorted(os.listdir(d)):
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    safe = re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()[:160]).decode()
    if safe.startswith("."): safe = "_" + safe[1:]
    key = "%s-%s-%08x" % ("d" if os.path.isdir(os.path.join(d, name)) else "f", safe, h)
    if int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % n == i:
        print(name)
PY
}
converted() { grep -h '^batch: converted ' "$@" | awk '{ print $3 }' | sort; }

"$conv" batch --in "$in" --logdir "$out" --shard 0/3 >"$dir/s0.log" 2>&1 & p0=$!
JOB_COMPLETION_INDEX=1 "$conv" batch --in "$in" --logdir "$out" --shard 3 >"$dir/s1.log" 2>&1 & p1=$!
JOB_COMPLETION_INDEX=2 LLMT_BATCH_SHARDS=3 "$conv" batch --in "$in" --logdir "$out" >"$dir/s2.log" 2>&1 & p2=$!
wait $p0; r0=$?; wait $p1; r1=$?; wait $p2; r2=$?
check "3 shards at once (--shard 0/3; JOB_COMPLETION_INDEX with --shard 3; with LLMT_BATCH_SHARDS=3) exit 0" \
	'[ "$r0 $r1 $r2" = "0 0 0" ] || cat "$dir"/s?.log'
check "each shard converted the profiles its hash gives it ($(for i in 0 1 2; do converted "$dir/s$i.log" | wc -l; done | tr '\n' ' '))" \
	'for i in 0 1 2; do [ "$(converted "$dir/s$i.log")" = "$(shard_of $i 3)" ] || exit 1; done'
check "together all 30 profiles, each once, each shard naming how many are others'" \
	'[ "$(converted "$dir"/s?.log)" = "$(ls "$in" | sort)" ] &&
	 grep -q "^batch: shard 0/3: .* converted, 0 skipped (done before), 0 failed; .* profiles are other shards" "$dir/s0.log"'
check "no claim: 30 done markers and nothing else in the state" \
	'[ "$(ls "$state"/*/done | wc -l)" = 30 ] && [ -z "$(find "$state" -mindepth 2 ! -name done)" ]'

# Run again, as the Job does with an index that failed: an interrupted pass
# of index 1 had begun publishing one of its profiles (its marker, one file
# of the run), another profile's run holds a file of another tool.
k=$(ls "$state" | while read -r key; do
	/usr/bin/python3.11 -c 'import hashlib,sys; print(sys.argv[1]) if int.from_bytes(hashlib.sha256(sys.argv[1].encode()).digest()[:8], "big") % 3 == 1 else None' "$key"
done | grep -v '^d-' | head -2)
k1=$(sed -n 1p <<<"$k") k2=$(sed -n 2p <<<"$k")
run1=$(sed 's/^f-\(.*\)\.log-.*/\1/' <<<"$k1") run2=$(sed 's/^f-\(.*\)\.log-.*/\1/' <<<"$k2")
rm "$state/$k1/done" "$state/$k2/done" "$out/plugins/profile/$run1/$run1.trace.json.gz"
echo partial >"$out/plugins/profile/$run1/$run1.xplane.pb"; touch "$state/$k1/publishing.other-host-1-00000000"
rm -r "$out/plugins/profile/$run2"/*; echo other >"$out/plugins/profile/$run2/notes.txt"
JOB_COMPLETION_INDEX=1 "$conv" batch --in "$in" --logdir "$out" --shard 3 >"$dir/r1.log" 2>&1; rc=$?
sed 's/^/# /' "$dir/r1.log" | grep -v '^# batch: converted\|^# converted'
check "index 1 again: $run1 (begun) replaced, $run2 (another tool's file) fails: exit 1, the others skipped" \
	'[ $rc = 1 ] && [ "$(converted "$dir/r1.log")" = "$run1.log" ] &&
	 grep -q "^batch: $run2.log: .*already holds files.*(attempt 1; details in" "$dir/r1.log" &&
	 grep -q "^batch: shard 1/3: 1 converted, $(( $(shard_of 1 3 | wc -l) - 2 )) skipped (done before), 1 failed" "$dir/r1.log" &&
	 ! grep -q partial "$out/plugins/profile/$run1/$run1.xplane.pb" && [ -s "$out/plugins/profile/$run1/$run1.trace.json.gz" ] &&
	 [ -z "$(find "$state/$k1" -mindepth 1 ! -name done)" ]'
JOB_COMPLETION_INDEX=1 "$conv" batch --in "$in" --logdir "$out" --shard 3 --attempts 1 --retry-after 3600 >"$dir/r2.log" 2>&1; rc=$?
check "and again: tried again at once (no --attempts, no --retry-after), failing as long as its cause is there" \
	'[ $rc = 1 ] && grep -q "^batch: $run2.log: .*(attempt 2; details in" "$dir/r2.log" && [ ! -e "$state/$k2/failed" ]'
rm "$out/plugins/profile/$run2/notes.txt"
JOB_COMPLETION_INDEX=1 "$conv" batch --in "$in" --logdir "$out" --shard 3 >"$dir/r3.log" 2>&1; rc=$?
check "and once the cause is gone, converted: exit 0" '[ $rc = 0 ] && [ "$(converted "$dir/r3.log")" = "$run2.log" ]'

bad() { # EXPECTED-MESSAGE ARGS...: exit 2 with that message
	local want=$1; shift
	"$conv" batch --in "$in" --logdir "$dir/x" "$@" >"$dir/e.log" 2>&1
	[ $? = 2 ] && grep -q -- "$want" "$dir/e.log" || { echo "$* :"; cat "$dir/e.log"; return 1; }
}
bad_args() {
	bad "an index I from 0 to N-1, got '3'" --shard 3/3 &&
	bad "a shard count from 1 to 100000, got '0'" --shard 0/0 &&
	bad "a shard count from 1 to 100000, got 'x'" --shard x &&
	bad "2 shards but no index: give --shard I/N, or run where \$JOB_COMPLETION_INDEX is set" --shard 2 &&
	JOB_COMPLETION_INDEX=abc bad "JOB_COMPLETION_INDEX wants an index from 0 to the shard count - 1, got 'abc'" --shard 2 &&
	JOB_COMPLETION_INDEX=0 LLMT_BATCH_SHARDS=-1 bad "LLMT_BATCH_SHARDS wants a shard count" &&
	[ ! -e "$dir/x" ]
}
desc="bad shard arguments and environments are clear errors, before anything is written"
t bad_args
tap_done
