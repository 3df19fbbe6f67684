#!/bin/bash
# The demo's XPlane read by XLA's own reader (jax.profiler.ProfileData, C++)
# on the GPU host, where JAX is:
#   tests/gpu/xplane_read.sh run [OUTDIR]
# It runs the demo's profile there with the carried build (.carry/, made by
# `tests/gpu/steps_gpu.sh prepare`): examples/train_sim.py under
# `profile -t syscall,cpu,pysample,python` (the hook: that Python has no
# USDT probes), converts it in one pass to a TensorBoard run and a Perfetto
# trace, and checks XLA's reader reads the XPlane and sees every event the
# converter wrote: the Perfetto trace's slices and instants, the same events.
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
run) ;;
*) echo "usage: $0 run [OUTDIR]"; exit 2;;
esac
OUT=${2:-/tmp/xplane-read}
gpu_python python3
gpu_carry_libs
LT=$CARRY/bin/llmtracker CONV=$CARRY/bin/llmtracker-convert
gpu_need "$LT" "$CONV"
rm -rf "$OUT" && mkdir -p "$OUT"
"$LT" profile -t syscall,cpu,pysample,python -o "$OUT/data.evlog" -- \
	"$PY" examples/train_sim.py --steps 100 --data "$OUT/work" >"$OUT/profile.log" 2>&1 ||
	{ bad "the demo's profile: $(tail -3 "$OUT/profile.log" | tr '\n' ' ')"; gpu_done; }
"$CONV" -i "$OUT/data.evlog" --logdir "$OUT/tb" --run demo -o "$OUT/trace.pftrace" \
	>"$OUT/convert.log" 2>&1 ||
	{ bad "the demo's conversion: $(tail -3 "$OUT/convert.log" | tr '\n' ' ')"; gpu_done; }
want=$(sed -n 's/.*Perfetto: \([0-9]*\) slices, \([0-9]*\) instants.*/\1 \2/p' "$OUT/convert.log" |
	awk '{ print $1 + $2; exit }')
pb=$(ls "$OUT"/tb/plugins/profile/demo/*.xplane.pb | head -1)
echo "INFO the demo: $(grep -m1 '^converted' "$OUT/convert.log" | cut -c1-200); XPlane $(stat -c %s "$pb") bytes"
t0=$EPOCHREALTIME
"$PY" - "$pb" >"$OUT/xla.txt" 2>&1 <<'PY'
import sys
from jax.profiler import ProfileData
pd = ProfileData.from_file(sys.argv[1])
total = 0
for p in pd.planes:
    lines = list(p.lines)
    n = sum(sum(1 for _ in l.events) for l in lines)
    total += n
    print("plane", p.name, len(lines), n)
print("total", total)
PY
rc=$?
secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
got=$(awk '$1 == "total" { print $2 }' "$OUT/xla.txt")
sed 's/^/INFO /' "$OUT/xla.txt" | head -8
if [ $rc != 0 ]; then
	bad "XLA's reader failed on the demo's XPlane: $(tail -2 "$OUT/xla.txt" | tr '\n' ' ')"
elif [ -n "$want" ] && [ "${got:-0}" = "$want" ]; then
	pass "XLA's reader read the demo's XPlane in $secs s: $got events, every one the converter wrote"
else
	bad "XLA's reader saw ${got:-no} events; the converter wrote ${want:-an unknown number}"
fi
gpu_done
