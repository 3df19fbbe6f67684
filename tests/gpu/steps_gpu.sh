#!/bin/bash
# The step detector on real GPU loops no test here was tuned on, in one call:
#   tests/gpu/steps_gpu.sh prepare        (here: .carry/ as cupti_attach.sh
#                                          makes it, plus the converter and
#                                          the shared libraries it needs)
#   tests/gpu/steps_gpu.sh run [OUTDIR]   (on the GPU host)
# Each loop of tests/gpu/steps_gpu.py (eager training, variable-length
# generation, a CUDA graph replayed per step) runs under
# `llmtracker profile -t python --enable-cuda-kernel true -- ...`, logging its
# true steps. Checks per loop: the detected steps against the truth
# (tests/integration/steps_check.py: count within 1, every boundary within 2%
# of the mean step, each step at a true start); the summary's step time
# breakdown adds up; XLA's own XPlane reader (jax.profiler.ProfileData)
# reads the XPlane, which has one step root per detected step on the driving
# thread, and every kernel launched inside a step lies in that step's root
# through its launch.
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
prepare)
	B=${BUILD:-/tmp/build-cupti}
	bash tests/gpu/cupti_attach.sh prepare >/dev/null || exit 1
	make -j2 BUILD="$B" "$B/bin/llmtracker-convert" >/dev/null || exit 1
	cp "$B/bin/llmtracker-convert" "$CARRY/bin/"
	# its libraries but the C runtime's (the GPU host has a newer glibc)
	ldd "$B/bin/llmtracker-convert" | awk '$3 ~ /^\// { print $3 }' |
		grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
		xargs -I{} cp -L {} "$CARRY/lib/"
	du -sh "$CARRY"
	exit 0;;
run) ;;
*) echo "usage: $0 prepare | run [OUTDIR]"; exit 2;;
esac

OUT=${2:-/tmp/steps-gpu}
gpu_python python3
mkdir -p "$OUT"
tap_tmpdir W steps-gpu
gpu_carry_libs
CONV=$CARRY/bin/llmtracker-convert
gpu_host

for m in ${LOOPS:-train generate graph}; do
	d=$W/$m; mkdir -p "$d"
	"$CARRY/bin/llmtracker" profile -q -t python --enable-cuda-kernel true -o "$d/p.evlog" \
		--cupti-dir "$d" -- "$PY" tests/gpu/steps_gpu.py "$m" "$d/truth" >"$d/collector.log" 2>&1 ||
		{ say "FAIL [$m] profile: $(tail -2 "$d/collector.log" | tr '\n' ' ')"; continue; }
	"$CONV" -q -i "$d/p.evlog" --cupti-dir "$d" -o "$d/p.json" &&
	"$CONV" -q -i "$d/p.evlog" --cupti-dir "$d" --logdir "$d/tb" --run r &&
	"$CONV" summary --cupti-dir "$d" "$d/p.evlog" >"$d/summary.txt" 2>&1 ||
		{ say "FAIL [$m] convert"; continue; }
	job_exited_0 "$d/collector.log" && say "PASS [$m] the job exited 0" ||
		say "FAIL [$m] the job: $(job_status "$d/collector.log")"
	echo "INFO [$m] $(grep -c '^train' "$d/truth") true steps; $(grep '^Steps:' "$d/summary.txt")"
	python3 tests/integration/steps_check.py "$d/p.json" "$d/truth" | sed "s/^ok - /PASS [$m] /; s/^not ok - /FAIL [$m] /" |
		while read -r l; do echo "$l"; done >"$d/check.txt"
	while IFS= read -r l; do say "$l"; done <"$d/check.txt"
	# the breakdown's parts add up to the steps' time
	awk '/step time breakdown \(adds up to the steps/ { want = $(NF - 1); on = 1; next }
		on && /ms .*%/ { sum += $1; next } on { exit } END {
		ok = want > 0 && (sum - want < 0.01 * want) && (want - sum < 0.01 * want)
		printf "%s [breakdown] parts add up to %.3f ms of %.3f ms\n", ok ? "PASS" : "FAIL", sum, want }' \
		"$d/summary.txt" | sed "s/\[breakdown\]/[$m]/" >"$d/bd.txt"
	while IFS= read -r l; do say "$l"; done <"$d/bd.txt"
	xp=$(ls "$d"/tb/plugins/profile/r/*.xplane.pb 2>/dev/null | head -1)
	"$PY" - "$xp" "$m" <<'PY' >"$d/xla.txt" 2>&1
import sys
from jax.profiler import ProfileData
path, m = sys.argv[1], sys.argv[2]
pd = ProfileData.from_file(path)
roots, launches, kernels = {}, {}, []


def num(v):  # stats come as numbers or as their text
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


planes = list(pd.planes)
for plane in planes:
    for li, line in enumerate(plane.lines):
        for ev in line.events:
            st = {k: num(v) for k, v in ev.stats}
            if plane.name == "/host:CPU":
                if st.get("_r") == 1 and st.get("step_num") is not None:
                    roots.setdefault(li, []).append((ev.start_ns, ev.start_ns + ev.duration_ns))
                if st.get("correlation_id"):
                    launches[st["correlation_id"]] = (li, ev.start_ns)
            elif plane.name.startswith("/device:GPU:") and st.get("correlation_id"):
                kernels.append(st["correlation_id"])
n_roots = sum(len(v) for v in roots.values())
# roots on one line do not overlap when sorted by start: a launch lies in
# the last root starting at or before it, if that root has not ended
import bisect
for r in roots.values():
    r.sort()
last_end = {li: max(b for _, b in r) for li, r in roots.items()}
overlaps = sum(b > r[i + 1][0] for r in roots.values() for i, (_, b) in enumerate(r[:-1]))
inside = bad = 0
for c in kernels:
    line, at = launches.get(c, (None, 0))
    r = roots.get(line)
    if not r or not (r[0][0] <= at < last_end[line]):
        continue
    i = bisect.bisect_right(r, (at, float("inf"))) - 1
    if i >= 0 and r[i][0] <= at < r[i][1]:
        inside += 1
    else:
        bad += 1
bad += overlaps
print(f"{'PASS' if n_roots and inside and not bad else 'FAIL'} [{m}] XLA's reader: {len(planes)} planes, "
      f"{n_roots} step roots, {inside} kernels launched inside one step's root, {bad} in none or several")
PY
	while IFS= read -r l; do say "$l"; done <"$d/xla.txt"
	cp "$d/summary.txt" "$OUT/$m.summary.txt"
done
tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.evlog' --exclude='*.json' --exclude='tb' . 2>/dev/null
gpu_done
