#!/bin/bash
# tests/gpu/graph_stress.sh several times at once on one GPU, so that many
# attach/detach cycles of every recording mode fit one device call:
#   tests/gpu/graph_stress_par.sh run OUTDIR SPEC...
# SPEC = MODE[@RECAPTURE_SECONDS] (MODE as graph_stress.sh's MODES takes one);
# each SPEC is one training loop with its own cycles (CYCLES, WIN as there).
# Prints each loop's RESULT and PASS/FAIL lines, then one total per mode;
# everything else goes into OUTDIR/stress.tar.gz.
set -u
. "$(dirname "$0")/common.inc"
[ "${1:-}" = run ] && [ $# -ge 3 ] || { echo "usage: $0 run OUTDIR MODE[@RECAPTURE]..."; exit 2; }
OUT=$2
shift 2
tap_tmpdir W graph-stress-par
pids=()
i=0
for spec in "$@"; do
	i=$((i + 1))
	mode=${spec%@*} recap=
	[ "$mode" != "$spec" ] && recap=${spec#*@}
	RECAPTURE=${recap:-0} MODES="$mode" bash "${GS:-tests/gpu/graph_stress.sh}" run "$W/$i" >"$W/$i.txt" 2>&1 &
	pids+=($!)
	sleep 1 # loops start one after another: CUDA initialization is the slow part
done
for p in "${pids[@]}"; do wait "$p"; done
i=0
for spec in "$@"; do
	i=$((i + 1))
	grep -E "^(RESULT|PASS|FAIL)|Xid lines|steps/s before" "$W/$i.txt" | sed "s|^|[$i $spec] |"
done
echo "TOTAL mode | cycles | alive | deaths | Xid lines | loops with losses equal to an unprofiled run's"
for mode in $(printf '%s\n' "$@" | sed 's/@.*//' | sort -u); do
	i=0 c=0 a=0 d=0 x=0 eq=0 n=0
	for spec in "$@"; do
		i=$((i + 1))
		[ "${spec%@*}" = "$mode" ] || continue
		n=$((n + 1))
		r=$(grep "^RESULT" "$W/$i.txt" | tail -1)
		c=$((c + $(sed -n 's/.* cycles=\([0-9]*\).*/\1/p' <<<"$r" | grep . || echo 0)))
		a=$((a + $(sed -n 's/.* alive=\([0-9]*\).*/\1/p' <<<"$r" | grep . || echo 0)))
		d=$((d + $(sed -n 's/.* deaths=\([0-9]*\).*/\1/p' <<<"$r" | grep . || echo 0)))
		x=$((x + $(sed -n 's/.* xid=\([0-9]*\).*/\1/p' <<<"$r" | grep . || echo 0)))
		grep -q "^PASS losses" "$W/$i.txt" && eq=$((eq + 1))
	done
	echo "TOTAL $mode | $c | $a | $d | $x | $eq of $n"
done
tar -C "$W" -czf "$OUT/stress.tar.gz" . 2>/dev/null
exit 0
