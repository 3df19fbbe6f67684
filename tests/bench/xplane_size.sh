#!/bin/bash
# XPlane output size and cost on real and generated profiles:
#  1. examples/train_sim.py profiled with -t syscall,cpu,python, converted to
#     a TensorBoard run directory: bytes per timeline item of the .xplane.pb
#     and of the .trace.json.gz side by side, and of a plain event (no stats);
#  2. a generated mixed log (tests/progs/conv_genlog): CPU time of
#     `-o trace.json.gz` alone and of `--logdir` (XPlane + JSON.gz + folded),
#     the difference being mostly the XPlane writer.
# Prints figures; asserts nothing.
#   XPLANE_BENCH_STEPS=20 XPLANE_BENCH_EVENTS=1000000 (defaults)
set -u
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
GEN=$BUILD/tests/progs/conv_genlog
PY=/usr/bin/python3.11
ROOT=${LLMT_ROOT:-$PWD}
for p in "$LT" "$CONV" "$GEN"; do [ -x "$p" ] || { echo "xplane_size: $p not built"; exit 0; }; done
T=$(mktemp -d /tmp/xplane-size.XXXXXX)
trap 'rm -rf "$T"' EXIT
protoc --proto_path="$ROOT/schemas" --python_out="$T" "$ROOT/schemas/xplane.proto" ||
	{ echo "xplane_size: protoc failed"; exit 0; }

# items FILE: "events plain_events plain_bytes" of an .xplane.pb
items() {
	$PY - "$T" "$1" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import xplane_pb2
xs = xplane_pb2.XSpace()
xs.ParseFromString(open(sys.argv[2], "rb").read())
n = plain = pb = 0
for p in xs.planes:
    for ln in p.lines:
        n += len(ln.events)
        for e in ln.events:
            if not e.stats:
                plain += 1
                pb += e.ByteSize() + 2  # + tag and length of the XLine.events entry
print(n, plain, pb)
EOF
}

if [ "$(id -u)" = 0 ] && readelf -n $PY 2>/dev/null | grep -q function__entry; then
	steps=${XPLANE_BENCH_STEPS:-20}
	"$LT" profile -t syscall,cpu,python -o "$T/p.evlog" -- \
		$PY "$ROOT/examples/train_sim.py" --steps "$steps" --data "$T/w" >/dev/null 2>"$T/err" ||
		{ echo "xplane_size: profile failed"; tail -3 "$T/err"; }
	if [ -s "$T/p.evlog" ] && "$CONV" -q -i "$T/p.evlog" --logdir "$T/tb" --run r 2>"$T/err"; then
		xp=$(ls "$T"/tb/plugins/profile/r/*.xplane.pb) js=$(ls "$T"/tb/plugins/profile/r/*.trace.json.gz)
		read -r n plain pb < <(items "$xp")
		awk -v n="$n" -v x="$(stat -c %s "$xp")" -v j="$(stat -c %s "$js")" -v p="$plain" -v pb="$pb" \
			-v s="$steps" 'BEGIN {
			printf "train_sim.py --steps %d (-t syscall,cpu,python): %d items\n", s, n
			printf "  xplane.pb %8.1f MiB  %5.1f bytes/item\n", x / 1048576, x / n
			printf "  json.gz   %8.1f MiB  %5.1f bytes/item   (xplane/json.gz %.2fx)\n", j / 1048576, j / n, x / j
			if (p) printf "  plain events (no stats): %d, %.1f bytes each\n", p, pb / p }'
	else
		echo "xplane_size: convert failed"; tail -3 "$T/err"
	fi
else
	echo "xplane_size: train_sim part needs root and $PY with USDT probes; skipped"
fi

events=${XPLANE_BENCH_EVENTS:-1000000}
"$GEN" "$T/g.log" -n "$events" >/dev/null || { echo "xplane_size: conv_genlog failed"; exit 0; }
cpu() { # command...: user+sys seconds
	/usr/bin/time -f '%U %S' -o "$T/time" "$@" >/dev/null 2>&1 || { echo fail; return; }
	awk '{ print $1 + $2 }' "$T/time"
}
json=$(cpu "$CONV" -q -i "$T/g.log" -o "$T/g.json.gz")
logdir=$(cpu "$CONV" -q -i "$T/g.log" --logdir "$T/tbg" --run r)
xp=$(ls "$T"/tbg/plugins/profile/r/*.xplane.pb 2>/dev/null)
awk -v e="$events" -v j="$json" -v l="$logdir" -v x="$(stat -c %s "$xp" 2>/dev/null || echo 0)" \
	-v g="$(stat -c %s "$T/g.json.gz" 2>/dev/null || echo 0)" 'BEGIN {
	printf "conv_genlog -n %d: cpu %s s for -o json.gz, %s s for --logdir (+%.0f%%, XPlane and folded)\n", e, j, l, (j > 0 ? 100 * (l - j) / j : 0)
	printf "  xplane.pb %.1f MiB, json.gz %.1f MiB (%.2fx)\n", x / 1048576, g / 1048576, (g ? x / g : 0) }'
exit 0
