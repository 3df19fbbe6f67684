#!/bin/bash
# XLA's own XPlane reader (jax.profiler.ProfileData, C++) on XPlanes written
# here, carried to the GPU host, where JAX is:
#   tests/gpu/xplane_read.sh prepare NAME XPLANE   (here: counts its planes,
#       lines and events with the protobuf definitions, keeps both in
#       .carry/xplanes/NAME.{pb.zst,counts})
#   tests/gpu/xplane_read.sh run                   (on the GPU host: reads
#       each carried XPlane and checks the reader sees the same counts)
# e.g. the demo's run: prepare demo /tmp/llmtracker-demo/tb/plugins/profile/demo/*.xplane.pb
set -u
[ "${1:-}" = prepare ] && [ -n "${3:-}" ] && set -- "$1" "$2" "$(realpath "$3")"
. "$(dirname "$0")/common.inc"
here=$PWD
case "${1:-}" in
prepare)
	name=$2 pb=$3
	. "$here/tests/integration/xplane_check.inc"
	d=$(mktemp -d)
	xplane_check_setup "$d" >/dev/null || { echo "protoc --python_out failed" >&2; exit 1; }
	mkdir -p "$CARRY/xplanes"
	$XPLANE_PY - "$d/py" "$pb" >"$CARRY/xplanes/$name.counts" <<'PY' || exit 1
import sys
sys.path.insert(0, sys.argv[1])
import xplane_pb2
xs = xplane_pb2.XSpace()
xs.ParseFromString(open(sys.argv[2], "rb").read())
for p in sorted(xs.planes, key=lambda p: p.name):
    print(p.name, len(p.lines), sum(len(l.events) for l in p.lines))
PY
	zstd -q -f -19 "$pb" -o "$CARRY/xplanes/$name.pb.zst" || exit 1
	rm -rf "$d"
	ls -l "$CARRY/xplanes/$name".*
	exit 0;;
run) ;;
*) echo "usage: $0 prepare NAME XPLANE | run"; exit 2;;
esac

gpu_python python3
W=$(mktemp -d)
for z in "$CARRY"/xplanes/*.pb.zst; do
	[ -e "$z" ] || { bad "no XPlane carried"; break; }
	name=$(basename "$z" .pb.zst)
	"$PY" -c 'import sys, zstandard; open(sys.argv[2], "wb").write(zstandard.ZstdDecompressor().decompress(open(sys.argv[1], "rb").read(), max_output_size=1 << 31))' "$z" "$W/$name.xplane.pb" 2>/dev/null ||
		zstd -q -d "$z" -o "$W/$name.xplane.pb" 2>/dev/null ||
		{ bad "[$name] cannot decompress (no zstd, no python zstandard)"; continue; }
	t0=$EPOCHREALTIME
	"$PY" - "$W/$name.xplane.pb" >"$W/$name.got" 2>"$W/$name.err" <<'PY'
import sys
from jax.profiler import ProfileData
pd = ProfileData.from_file(sys.argv[1])
for p in sorted(pd.planes, key=lambda p: p.name):
    lines = list(p.lines)
    print(p.name, len(lines), sum(sum(1 for _ in l.events) for l in lines))
PY
	rc=$?
	secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	if [ $rc != 0 ]; then
		bad "[$name] XLA's reader failed: $(tail -2 "$W/$name.err" | tr '\n' ' ')"
	elif cmp -s "$W/$name.got" "$CARRY/xplanes/$name.counts"; then
		pass "[$name] XLA's reader read it in ${secs} s: $(wc -l <"$W/$name.got") planes, $(awk '{ e += $NF } END { print e }' "$W/$name.got") events, as written"
	else
		bad "[$name] XLA's reader saw other counts: $(diff "$CARRY/xplanes/$name.counts" "$W/$name.got" | head -6 | tr '\n' ' ')"
	fi
done
rm -rf "$W"
gpu_done
