#!/bin/bash
# batch on an object store: s3fs over a local S3 server, two mounts of one
# bucket as two nodes see it (A with s3fs's defaults, B with every cache s3fs
# has turned up: stat cache for an hour, negative lookups cached, a local
# file cache). 40 profiles written through A; 4 workers, two on each mount,
# started together, convert each exactly once (each worker says what it
# converted: the union is all 40 and disjoint), and every output reaches the
# store once (the server's log of writes), under its final name only, whole
# (every trace JSON and XPlane parses, read through the other mount). Then a
# sharded pass (--shard, I of 2 on A and B, from the Indexed Job's
# environment) converts each profile once with no claim written, each shard
# the profiles its hash gives it, and runs again without converting
# anything. Last, a worker killed -9 mid-conversion: its profile is left
# alone while its lease runs, and converted by a worker of the other mount
# once it has run out.
scratch=store-batch
. "$(dirname "$0")/convert_common.inc"
T=$dir
. "$(dirname "$0")/store.inc"
. "$(dirname "$0")/xplane_check.inc"
need_store
st_server_start
st_mount A
mkdir -p "$T/s3cache"
st_mount B "stat_cache_expire=3600,enable_noobj_cache,use_cache=$T/s3cache"
xplane_check_setup "$dir" || bail "cannot generate the XPlane checker"
conv=$(readlink -f "$conv")

# 39 logs and a directory holding one profile of two hosts: 40 profiles
mkdir -p "$dir/local/multi"
for i in $(seq 1 39); do "$gen" "$dir/local/node-$i.evlog" -n 1500 --host "node-$i" >/dev/null || bail "conv_genlog"; done
"$gen" "$dir/local/multi/a.evlog" -n 1500 --host host-a >/dev/null && "$gen" "$dir/local/multi/b.evlog" -n 1500 --host host-b >/dev/null ||
	bail "conv_genlog"
mkdir "$A/in" && cp -r "$dir/local/." "$A/in/" || bail "cannot write the profiles through mount A"
units=$( (cd "$dir/local" && ls) | sort)

converted() { grep -h '^batch: converted ' "$@" | awk '{ print $3 }' | sort; }
# Keys written under PREFIX that are files, but for temporary (dot-) names.
final_writes() { st_writes | grep "^$1" | grep -v '/$' | grep -v '/\.[^/]*$'; }
phase() { echo "# $1 at $(( ($(date +%s%N) - t_start) / 1000000 )) ms"; }
# requests the server answered so far (its log has a line for each)
requests() { sed 's/\x1b\[[0-9;]*m//g' "$T/s3rver.log" | grep -cE ' [1-5][0-9][0-9] [0-9.]+m?s '; }
t_start=$(date +%s%N)
# Outputs of the runs under logdir prefix $1: written once each, all there,
# nothing under a temporary or partial name, 4 per host (41 hosts).
outputs_once() {
	local w o
	w=$(final_writes "$1/plugins/profile/") o=$(st_objects | grep "^$1/plugins/profile/.*[^/]$")
	[ -z "$(sort <<<"$w" | uniq -d)" ] || { echo "written twice:"; sort <<<"$w" | uniq -d; return 1; }
	[ "$(sort -u <<<"$w")" = "$o" ] || { echo "written: $(wc -l <<<"$w"), there: $(wc -l <<<"$o")"; return 1; }
	! grep -q '/\.\|\.tmp$\|\.partial$' <<<"$o" || { echo "temporary names:"; grep '/\.\|\.tmp$\|\.partial$' <<<"$o"; return 1; }
	[ "$(wc -l <<<"$o")" -eq 164 ] || { echo "$(wc -l <<<"$o") outputs, not 164"; return 1; }
}
# Every output parses (convert_check.py, xplane_check: one interpreter
# runs them all), read through mount B: 41 traces and 41 XPlanes.
outputs_parse() { # logdir on B
	"$XPLANE_PY" - "$LLMT_ROOT/tests/integration/convert_check.py" "$dir/py" "$1"/plugins/profile/*/* <<'PY'
import contextlib, io, runpy, sys
check_json, pydir, files = sys.argv[1], sys.argv[2], sys.argv[3:]
def run(script, argv):  # exit status and output of a checker script
    sys.argv = [script] + argv
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(script, run_name="__main__")
            rc = 0
        except SystemExit as e:
            rc = e.code or 0
    return rc, out.getvalue()
n = bad = 0
for f in files:
    if f.endswith(".trace.json.gz"):
        rc, out = run(check_json, [f])
    elif f.endswith(".xplane.pb"):
        rc, out = run(pydir + "/check_xplane.py", [pydir, f])
    else:
        continue
    n += 1
    if rc:
        print("%s: %s" % (f, out.strip())); bad += 1
if n != 82:
    print("%d outputs parsed, not 82" % n); bad += 1
sys.exit(1 if bad else 0)
PY
}

# --- claims: 4 workers on two mounts
phase "40 profiles written"
r0=$(requests)
t0=$(date +%s%N)
for w in A1 A2 B1 B2; do
	m=${w:0:1}; m=${!m}
	"$conv" batch --in "$m/in" --logdir "$m/tb" --lease 30 >"$dir/$w.log" 2>&1 &
	pids+=($!)
done
rcs=""
for p in "${pids[@]}"; do wait "$p"; rcs+="$? "; done
r1=$(requests)
echo "# claims: $((r1 - r0)) requests to the store, $(( (r1 - r0) / 40 )) a profile"
echo "# 4 workers on 2 mounts converted 40 profiles in $(( ($(date +%s%N) - t0) / 1000000 )) ms; each converted:" \
	"$(for w in A1 A2 B1 B2; do echo -n "$w $(converted "$dir/$w.log" | wc -l) "; done)"
check "4 workers on two mounts: all exit 0 (got: $rcs)" '[ "$rcs" = "0 0 0 0 " ] || { cat "$dir"/[AB]?.log; false; }'
check "each of the 40 profiles was converted by exactly one worker" \
	'[ "$(converted "$dir"/[AB]?.log)" = "$units" ] || { converted "$dir"/[AB]?.log | uniq -c | grep -v " 1 "; false; }'
check "every output reached the store once, under its final name only" 'outputs_once tb'
check "every trace JSON and XPlane parses (read through mount B)" 'outputs_parse "$B/tb"'
state=$(st_objects | grep '^tb/.llmtracker-batch/.*[^/]$')
check "no claim left: 40 done markers and nothing else in the state" \
	'[ "$(grep -c "/done$" <<<"$state")" -eq 40 ] && [ -z "$(grep -v "/done$" <<<"$state")" ] || { echo "$state"; false; }'

phase "claims checked"
# --- shards: an Indexed Job of 2 (index 0 on A, index 1 on B), no claims
keys_of_shard() { # I N: the names of --in whose key hashes to shard I of N
	/usr/bin/python3.11 - "$1" "$2" "$dir/local" <<'PY'
import hashlib, os, re, sys
i, n, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for name in sorted(os.listdir(d)):
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    safe = re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()[:160]).decode()
    if safe.startswith("."): safe = "_" + safe[1:]
    kind = "d" if os.path.isdir(os.path.join(d, name)) else "f"
    key = "%s-%s-%08x" % (kind, safe, h)
    if int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % n == i:
        print(name)
PY
}
r1=$(requests)
JOB_COMPLETION_INDEX=0 "$conv" batch --in "$A/in" --logdir "$A/tb2" --shard 2 >"$dir/S0.log" 2>&1 & s0=$!
JOB_COMPLETION_INDEX=1 LLMT_BATCH_SHARDS=2 "$conv" batch --in "$B/in" --logdir "$B/tb2" >"$dir/S1.log" 2>&1 & s1=$!
wait $s0; rc0=$?; wait $s1; rc1=$?
r2=$(requests)
echo "# shards: $((r2 - r1)) requests to the store, $(( (r2 - r1) / 40 )) a profile"
check "shards 0 and 1 of 2 on two mounts: both exit 0 (got $rc0 $rc1)" '[ $rc0 = 0 ] && [ $rc1 = 0 ] || { cat "$dir"/S?.log; false; }'
check "each shard converted the profiles its hash gives it ($(converted "$dir/S0.log" | wc -l) and $(converted "$dir/S1.log" | wc -l)), together all 40 once" \
	'[ "$(converted "$dir/S0.log")" = "$(keys_of_shard 0 2)" ] && [ "$(converted "$dir/S1.log")" = "$(keys_of_shard 1 2)" ] &&
	 [ "$(converted "$dir"/S?.log)" = "$units" ]'
check "no claim was ever written by the shards (no lease, no intent in the server's log of writes)" \
	'[ -n "$(st_writes | grep "^tb2/.llmtracker-batch/.*/done$")" ] &&
	 ! st_writes | grep -E "^tb2/.llmtracker-batch/[^/]+/(lease|intent)\."'
check "every shard output reached the store once, under its final name only" 'outputs_once tb2'
check "every trace JSON and XPlane of the shards parses" 'outputs_parse "$B/tb2"'
JOB_COMPLETION_INDEX=0 "$conv" batch --in "$B/in" --logdir "$B/tb2" --shard 2 >"$dir/S0b.log" 2>&1
check "shard 0 run again (the Job retrying an index) exits 0 and converts nothing" \
	'[ $? = 0 ] && grep -q "^batch: shard 0/2: 0 converted" "$dir/S0b.log" || { cat "$dir/S0b.log"; false; }'

phase "shards checked"
# --- a worker killed -9 mid-conversion: stopped as soon as its conversion
# has begun (its stage is in a TMPDIR we watch), then killed
mkdir -p "$dir/local3" && "$gen" "$dir/local3/big.evlog" -n 400000 --host big >/dev/null && mkdir "$A/in3" &&
	cp "$dir/local3/big.evlog" "$A/in3/" || bail "cannot write the big profile"
mkdir "$dir/ktmp"
TMPDIR=$dir/ktmp "$conv" batch --in "$A/in3" --logdir "$A/tb3" --lease 4 >"$dir/K.log" 2>&1 & victim=$!
wait_until 60 "compgen -G '$dir/ktmp/*/.stage.*/plugins/profile/big/.big.trace.json.gz.*.tmp' >/dev/null" ||
	bail "the victim never began converting: $(cat "$dir/K.log")"
kill -STOP $victim
published=$(st_objects | grep '^tb3/plugins/profile/.*[^/]$\|/publishing\.')
kill -9 $victim; wait $victim 2>/dev/null
check "the victim was killed mid-conversion: nothing of it was published" '[ -z "$published" ] || echo "$published"'
touch -d '-2 minutes' "$dir"/ktmp/*  # its local stage, as a later worker finds it
exp=$(ls "$A"/tb3/.llmtracker-batch/*/ | sed -n 's/^lease\..*\.//p' | sort -n | tail -1)
"$conv" batch --in "$B/in3" --logdir "$B/tb3" --lease 4 >"$dir/K1.log" 2>&1
for i in $(seq 1 120); do
	TMPDIR=$dir/ktmp "$conv" batch --in "$B/in3" --logdir "$B/tb3" --lease 4 >"$dir/K2.log" 2>&1
	grep -q '^batch: converted' "$dir/K2.log" && break; sleep 0.25
done
at=$(date +%s%3N)
echo "# the victim's lease ran out at $exp; converted by mount B's worker at $at"
check "while the killed worker's lease runs, nobody converts its profile" 'grep -q "^batch: 0 converted" "$dir/K1.log" || { cat "$dir/K1.log"; false; }'
check "once it has run out, a worker of the other mount takes over and converts it" \
	'[ -n "$exp" ] && [ "$at" -ge "$exp" ] && grep -q "big.evlog: took over from worker" "$dir/K2.log" &&
	 grep -q "^batch: converted big.evlog" "$dir/K2.log" || { cat "$dir/K.log" "$dir/K2.log"; false; }'
w3=$(final_writes tb3/plugins/profile/)
check "the taker's outputs reached the store once each, and parse" \
	'[ "$(wc -l <<<"$w3")" -eq 4 ] && [ -z "$(sort <<<"$w3" | uniq -d)" ] &&
	 protoc --decode=tensorflow.profiler.XSpace --proto_path="$LLMT_ROOT/schemas" "$LLMT_ROOT/schemas/xplane.proto" \
		<"$B/tb3/plugins/profile/big/big.xplane.pb" >/dev/null &&
	 $json_check "$B/tb3/plugins/profile/big/big.trace.json.gz" || echo "$w3"'
check "nothing of the killed worker is left: in the state (its lease), in TMPDIR (its stage)" \
	'[ -z "$(st_objects | grep "^tb3/.llmtracker-batch/.*[^/]$" | grep -v "/done$")" ] && [ -z "$(ls -A "$dir/ktmp")" ] ||
	 { st_objects | grep "^tb3/"; find "$dir/ktmp"; false; }'
phase "killed worker checked"
echo "# bytes sent to the store: $(st_sent_bytes)"
tap_done
