#!/bin/bash
# The inject library's activity-buffer path (pool, encoder thread, flush at
# stop, finalize at an API exit, unload) without a GPU: a program loads a
# stand-in libcupti.so.13 (tests/progs/fake_cupti.c) that writes numbered
# kernel records into the library's buffers at a set rate; the library is
# injected twice with the real injector. Every record generated must be in
# the logs exactly once and in order, none dropped, every buffer handed to
# CUPTI zeroed (ZEROED_OUT_ACTIVITY_BUFFER) and aligned, CUPTI finalized and
# the library unloaded each time.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
need_built "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_tool" "$T/inject_logdump" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root for ptrace"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"

tap_tmpdir W llmt-inject-buf
TP2=
tap_at_exit 'exec 9>&- 8>&- 2>/dev/null; kill $TP $TP2 2>/dev/null'

mkfifo "$W/in"
FAKE_CUPTI_RATE=${RATE:-150000} "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in" >"$W/app.out" 2>&1 &
TP=$!
exec 9>"$W/in"
wait_for "$W/app.out" '^ready' 5
check "target started" 'grep -q "^ready $TP" "$W/app.out"'

total=0
for round in 1 2; do
	mkdir "$W/r$round"
	LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $TP "$LIB" "$W/r$round" 1.5 >"$W/r$round.out" 2>&1
	sed "s/^/# [$round] /" "$W/r$round.out" | tail -2
	check "[$round] finalized, unloaded, nothing dropped" \
		'grep -q "dropped=0 finalized=1 unloaded=1" "$W/r$round.out"'
	"$T/inject_logdump" "$W/r$round"/*.evlog >"$W/r$round.tsv" 2>&1
	k=$(grep -c '^K' "$W/r$round.tsv")
	check "[$round] the log holds the kernels the library counted ($k)" \
		'grep -q "kernels=$k " "$W/r$round.out" && [ "$k" -gt 100000 ]'
	# Correlation ids restart at 1 with each enable: 1..k, in order, once each.
	check "[$round] every record once, in order (correlation ids 1..$k)" \
		'awk -F"\t" "\$1==\"K\" { if (\$4 != ++i) bad++ } END { exit bad || i != $k }" "$W/r$round.tsv"'
	total=$((total + k))
done
exec 9>&-
wait $TP
check "target exited 0 after two injections" '[ $? = 0 ]'
stats=$(grep '^generated=' "$W/app.out")
echo "# fake CUPTI: $stats"
check "every generated record reached a log ($total)" 'echo "$stats" | grep -q "^generated=$total "'
check "every buffer handed to CUPTI was zeroed and aligned" \
	'echo "$stats" | grep -q "unzeroed=0 misaligned=0"'
check "CUPTI finalized once per injection" 'echo "$stats" | grep -q "finalized=2"'

tap_done
