#!/bin/bash
# -t cuda with a probe file whose glob covers all of libc (~2,200 functions)
# on a real process: refused by default with one line naming the entry, the
# library, how many functions it selects (counted here independently with
# readelf) and the limit; with --max-probes, `-d 1` ends within a bound and
# SIGTERM mid-run exits within a bound. Before uprobe_multi links were
# split around the few offsets the kernel refuses, one such offset sent all
# of libc to one perf event per function: `-d 1` took 506 s here.
set -u
. "$(dirname "$0")/collector_common.inc"
need_bpf
command -v readelf >/dev/null || skip "readelf missing"
BOUND_S=${PROBE_LIMIT_BOUND_S:-30}   # measured: ~4.5 s for -d 1, ~1.6 s after SIGTERM

# The target: a shell calling into libc all the time.
bash -c 'while :; do echo x >/dev/null; done' &
tgt=$!; tap_bg "$tgt"
wait_for "/proc/$tgt/maps" 'libc\.so' 10
libc=$(awk '$6 ~ /\/libc\.so/ { print $6; exit }' "/proc/$tgt/maps")
[ -n "$libc" ] || { nok "target maps libc"; tap_done; }
# Functions the glob selects: defined FUNC/IFUNC dynamic symbols, one per address.
want=$(readelf --dyn-syms -W "$libc" | awk '($4 == "FUNC" || $4 == "IFUNC") && $7 != "UND" { print $2 }' | sort -u | wc -l)
cat >"$T/libc.json" <<EOF
{ "uprobes": [ { "library": "libc.so.6", "class": "other", "symbols": ["*"] } ] }
EOF
echo "# $libc: $want functions"

"$LT" profile -t cuda --probe-file "$T/libc.json" -p "$tgt" -d 1 -o "$T/r.log" 2>"$T/r.err"
rc=$?
check "refused without --max-probes: exit 1" [ "$rc" -eq 1 ]
check "the line names the entry, the library, the count ($want) and the limit" \
	grep -q "entry \"libc.so.6\" selects $want functions in $libc; .* the limit of 1000 probes per profile: not probing it .*--max-probes N" "$T/r.err"
check "nothing written when refused" [ ! -e "$T/r.log" -a -z "$(ls -A "$T" | grep '\.partial$')" ]
sed 's/^/# /' "$T/r.err" | head -3

t0=$EPOCHREALTIME
timeout -s KILL $((BOUND_S * 2)) "$LT" profile -t cuda --probe-file "$T/libc.json" --max-probes 5000 \
	-p "$tgt" -d 1 -o "$T/f.log" -v 1 2>"$T/f.err"
rc=$?
took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
echo "# forced, -d 1: $took s (bound $BOUND_S s)"
check "forced: -d 1 finishes within $BOUND_S s" awk -v t="$took" -v m="$BOUND_S" "BEGIN { exit !($rc == 0 && t < m) }"
probed=$(sed -n 's/.*libc\.so\.6: \([0-9]*\) functions probed.*/\1/p' "$T/f.err")
check "forced: nearly all of libc probed ($probed of $want), through a few links" \
	bash -c "[ -n '$probed' ] && [ '$probed' -ge $((want - 20)) ] && grep -q ' [0-9]\{1,3\} links' '$T/f.err'"
check "forced: the target's libc calls were recorded" \
	bash -c "'$DUMP' '$T/f.log' | grep -c '^lib_call ' | awk '\$1 > 0 { ok = 1 } END { exit !ok }'"
grep -v '^libbpf' "$T/f.err" | sed 's/^/# /' | tail -4

"$LT" profile -t cuda --probe-file "$T/libc.json" --max-probes 5000 -p "$tgt" -o "$T/s.log" -v 1 2>"$T/s.err" &
lt=$!; tap_bg "$lt"
wait_for "$T/s.err" 'profiling 1 process' "$BOUND_S"
t0=$EPOCHREALTIME
kill -TERM "$lt"
wait_until "$BOUND_S" '! kill -0 "$lt" 2>/dev/null'
took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
echo "# forced, SIGTERM while profiling: exited after $took s (bound $BOUND_S s)"
check "forced: SIGTERM mid-run exits within $BOUND_S s, log published" \
	bash -c "! kill -0 $lt 2>/dev/null && wait $lt 2>/dev/null; [ -s '$T/s.log' ]"
check "--max-probes out of range is a clear error" \
	bash -c "'$LT' profile -t cuda --max-probes 0 -p $tgt -o '$T/x.log' 2>&1 | grep -q -- '--max-probes'"
tap_done
