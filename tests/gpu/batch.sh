#!/bin/bash
# Several GPU checks in one device call, each under its own time cap, its
# whole output kept in OUTDIR/NAME.txt and its PASS/FAIL lines echoed:
#   tests/gpu/batch.sh prepare                    (here: every carried build)
#   tests/gpu/batch.sh run OUTDIR NAME:SECONDS:COMMAND ...   (on the GPU host)
# e.g. tests/gpu/batch.sh run $OUT "launch:120:tests/gpu/launch_kernels.sh run"
#      "steps:300:tests/gpu/steps_gpu.sh run \$OUT/steps"
# The carried builds are .carry/ (tests/gpu/steps_gpu.sh prepare) and, for
# the scripts that take BUILD=, .carry/build (set here for them).
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
prepare)
	B=${BUILD:-/tmp/build-cupti}
	bash tests/gpu/steps_gpu.sh prepare >/dev/null || exit 1
	make -j2 BUILD="$B" "$B/tests/progs/evlog_dump" "$B/tests/progs/cuda_logcount" >/dev/null || exit 1
	mkdir -p "$CARRY/build/bin" "$CARRY/build/tests/progs"
	cp "$CARRY/bin/llmtracker" "$CARRY/build/bin/llmtracker-static"
	cp "$B/tests/progs/evlog_dump" "$B/tests/progs/cuda_logcount" "$CARRY/build/tests/progs/"
	du -sh "$CARRY"
	exit 0;;
run) ;;
*) echo "usage: $0 prepare | run OUTDIR NAME:SECONDS:COMMAND ..."; exit 2;;
esac
OUT=$2
shift 2
mkdir -p "$OUT"
gpu_carry_libs
export PYTHONUNBUFFERED=1 BUILD=$CARRY/build
gpu_host
for spec in "$@"; do
	name=${spec%%:*} rest=${spec#*:}
	secs=${rest%%:*} cmd=${rest#*:}
	t0=$(date +%s)
	timeout -k 5 "$secs" bash -c "$cmd" >"$OUT/$name.txt" 2>&1
	rc=$?
	echo "=== $name: rc $rc in $(($(date +%s) - t0)) s$([ $rc = 124 ] && echo ' (time cap)')"
	grep -E '^(PASS|FAIL|RESULT|INFO)|(PASS|FAIL):' "$OUT/$name.txt" | cut -c1-300 | head -40
done
