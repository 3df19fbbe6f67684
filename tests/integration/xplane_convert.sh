#!/bin/bash
# End to end: event logs written by the real writer -> llmtracker-convert
# --logdir -> <logdir>/plugins/profile/<run>/<host>.xplane.pb, decoded and
# checked by an independent decoder (protoc's text decoder and python3
# protobuf): planes and ids, metadata ids resolve, lines sorted and nested,
# kernels carry kernel_details and a correlation_id matching a launch, steps
# (the job's markers, or found by the converter) and every kernel launched in
# a step inside that step's root through its launch.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT_ROOT=${LLMT_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$LLMT_ROOT/tests/integration/xplane_check.inc"
conv=$BUILD/bin/llmtracker-convert
gen=$BUILD/tests/progs/xplane_genlog
mixed=$BUILD/tests/progs/conv_genlog
need_built "$conv" "$gen" "$mixed"
$XPLANE_PY -c 'import google.protobuf' 2>/dev/null || skip "python3-protobuf missing for $XPLANE_PY"
tap_tmpdir dir xplane-e2e
xplane_check_setup "$dir" || bail "protoc --python_out failed"

"$gen" "$dir/a.log" "gpu-node:0" 5 && "$gen" "$dir/b.log" "gpu-node-b" 3
desc="convert two hosts' logs into one run"
t "$conv" -i "$dir/a.log" -i "$dir/b.log" --logdir "$dir/logs" --run r1
run=$dir/logs/plugins/profile/r1
desc="one file per host, host name made file-safe"
t test -s "$run/gpu-node_0.xplane.pb" -a -s "$run/gpu-node-b.xplane.pb"
desc="protoc decodes the whole file against schemas/xplane.proto"
t bash -c "protoc --decode=tensorflow.profiler.XSpace --proto_path='$LLMT_ROOT/schemas' \
	'$LLMT_ROOT/schemas/xplane.proto' <'$run/gpu-node_0.xplane.pb' | grep -q 'Stream #7(Compute,Memcpy)'"
desc="host A: planes, metadata, order, nesting, kernel<->launch correlation, 5 steps"
t xplane_check "$dir" "$run/gpu-node_0.xplane.pb" 5
desc="host B: same checks, 3 steps"
t xplane_check "$dir" "$run/gpu-node-b.xplane.pb" 3
desc="no temporary or spill files left in the run directory"
t test -z "$(ls -A "$run" | grep -v -e '\.xplane\.pb$' -e '\.trace\.json\.gz$' -e '\.folded$')"
desc="a second conversion into the same run is refused, files kept"
before=$(md5sum "$run/gpu-node_0.xplane.pb")
t bash -c "! '$conv' -i '$dir/a.log' --logdir '$dir/logs' --run r1 && [ \"\$(md5sum '$run/gpu-node_0.xplane.pb')\" = '$before' ]"
desc="a symlink planted as the run directory is not followed"
ln -s "$dir/elsewhere" "$dir/logs/plugins/profile/evil"; mkdir "$dir/elsewhere"
t bash -c "! '$conv' -i '$dir/a.log' --logdir '$dir/logs' --run evil && [ -z \"\$(ls -A '$dir/elsewhere')\" ]"
desc="default run name is the profile start time YYYY_MM_DD_HH_MM_SS"
t bash -c "TZ=UTC '$conv' -i '$dir/a.log' --logdir '$dir/logs2' && ls '$dir/logs2/plugins/profile' | grep -qE '^[0-9]{4}(_[0-9]{2}){5}$'"
nsteps=$("$mixed" "$dir/nm.log" -n 3000 --no-markers | awk '{ print $2 }')
desc="steps found without markers: one step root per train_step ($nsteps) on the main thread, each kernel in its step's root through its launch"
nm_check() {
	"$conv" -q -i "$dir/nm.log" --logdir "$dir/logs3" --run nm &&
	xplane_check "$dir" "$dir/logs3/plugins/profile/nm/node-a.xplane.pb" "$nsteps" >"$dir/nm.out"
	local rc=$?
	cat "$dir/nm.out"
	[ $rc = 0 ] && grep -q "kernels launched in a step=$nsteps\$" "$dir/nm.out"
}
t nm_check
tap_done
