#!/bin/bash
# A stalled object store never hurts the target nor holds the collector:
# the S3 server stopped (SIGSTOP) for 30 s in the middle of a profile of a
# busy process. The target's own work rate during the stall is what it was
# before, per second of its own CPU time (this machine is shared: its other
# load moves the wall-clock rate, which is printed, and the CPU one by up to
# a third), and it never stops for long (a target the store held would stop
# for the stall's 30 s); the collector ends within -d plus its store bound (LT_STORE_WAIT_S,
# 10 s) while the store still does not answer, saying so; its writer process
# publishes the log once the store answers, and the log converts with what
# the stall cost counted as lost, as the collector's summary counts it.
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/store.inc"
CONV=$BUILD/bin/llmtracker-convert
need_bpf "$PROGS/busy_rate" "$CONV"
need_store
st_server_start
st_mount A
mkdir "$A/run" || bail "mkdir on the store"
D=20             # -d
BOUND=10         # LT_STORE_WAIT_S (collector/session/store.h)
STALL=30

"$PROGS/busy_rate" "$T/rate" 120 & tp=$!
tap_bg "$tp"
wait_until 10 "[ -s '$T/rate' ]" || bail "the target reports no progress"
t_launch=${EPOCHREALTIME/./}
"$LT" profile -p "$tp" -t syscall -d "$D" --segment-seconds 2 --segment-mb 0.25 -v 1 \
	-o "$A/run/node.evlog" 2>"$T/p.err" & lt=$!
tap_bg "$lt"
wait_for "$T/p.err" "profiling 1 process" 20 || bail "the collector did not attach"
# Some segments published first: the writer is at work when the store stops.
wait_until 30 "st_objects | grep -q '^run/node.evlog.2$'" || bail "no segment published"
sleep 2
t_pause=$(python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC))')
st_server_pause
tap_at_exit st_server_resume
t_paused=${EPOCHREALTIME/./}

# The collector ends on its own while the store still does not answer.
wait_until $((D + BOUND + 10)) "! kill -0 $lt 2>/dev/null"
wait "$lt"
rc=$?
t_end=${EPOCHREALTIME/./}
stalled_for=$(((t_end - t_paused) / 1000000))
took=$(((t_end - t_launch) / 1000000))
sed -n '/^llmtracker: profiled/,$s/^/# /p' "$T/p.err" # its summary, for a failure's log
tail -3 "$T/rate" | sed 's/^/# rate: /'
check "the collector ended ${took} s after its start (-d $D + $BOUND s bound + 5 s to start), the store stalled then" \
	"[ $took -le $((D + BOUND + 5 * TAP_TIME_SCALE)) ] && [ $stalled_for -lt $STALL ]"
check "it says the log is not published yet, and why (rc $rc)" \
	'[ $rc = 1 ] && grep -q "is not published yet: the output store has not answered for" "$T/p.err"'
stall_line=$(grep "the output store stalled for" "$T/p.err")
check "one line says the store stalled: ${stall_line#llmtracker: }" '[ -n "$stall_line" ]'
lost=$(awk '$1 == "syscall" && NF >= 3 { print $3 }' "$T/p.err" | tail -1)
check "the summary counts syscall events lost ($lost)" '[ "${lost:-0}" -gt 0 ]'
check "a stall warning came while it lasted" grep -q "the output store has not answered for" "$T/p.err"

# A work rate: iterations per second in a window of a progress log, of wall
# time (COL 1) or of its own CPU time (COL 3).
rate() { # LOG COL FROM_NS TO_NS
	awk -v c="$2" -v a="$3" -v b="$4" '$1 >= a && $1 <= b { if (!n++) { t0 = $c; i0 = $2 } t1 = $c; i1 = $2 }
		END { if (t1 > t0) printf "%.0f", (i1 - i0) / ((t1 - t0) / 1e9); else print 0 }' "$1"
}
# The longest time between two of its progress lines (written every 100 ms).
longest_gap_ms() { # LOG FROM_NS TO_NS
	awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { if (p && $1 - p > g) g = $1 - p; p = $1 }
		END { printf "%.0f", g / 1e6 }' "$1"
}
b0=$((t_pause - 4000000000)) b1=$t_pause
d0=$((t_pause + 1000000000)) d1=$((t_pause + (D - 8) * 1000000000))
before=$(rate "$T/rate" 3 $b0 $b1) during=$(rate "$T/rate" 3 $d0 $d1)
check "the target's work rate during the stall is what it was before: $during against $before iterations a CPU second (wall: $(rate "$T/rate" 1 $d0 $d1)/s against $(rate "$T/rate" 1 $b0 $b1)/s)" \
	"[ $before -gt 0 ] && [ $((during * 100)) -ge $((before * 60)) ]"
gap=$(longest_gap_ms "$T/rate" $d0 $d1)
check "it never stopped: its longest pause between progress lines in the stall $gap ms" \
	"[ $gap -lt $((1000 * TAP_TIME_SCALE)) ]"

# The store answers again: the writer left behind publishes the log.
left=$((STALL - (${EPOCHREALTIME/./} - t_paused) / 1000000))
[ "$left" -gt 0 ] && sleep "$left"
st_server_resume
check "the writer publishes the log once the store answers" \
	wait_until 120 "st_objects | grep -qx run/node.evlog"
check "...and says so" wait_for "$T/p.err" "the output store answered .* published" 30
"$CONV" --no-progress "$A/run/node.evlog" -o "$T/c.json" >"$T/c.out" 2>&1
crc=$?
check "the log converts (rc $crc)" '[ $crc = 0 ]' || tail -3 "$T/c.out" | sed 's/^/# /'
clost=$(sed -n 's/.*lost at the source:.* syscall \([0-9]*\).*/\1/p' "$T/c.out")
check "with the loss counted as the summary counts it (log: ${clost:-none}, summary: $lost)" \
	'[ -n "$clost" ] && [ "$clost" = "$lost" ]'
tap_done
