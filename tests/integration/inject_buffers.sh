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
FAKE_CUPTI_RATE=${RATE:-300000} "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in" >"$W/app.out" 2>&1 &
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

# runtime=2: launches by callback, from the main thread and 3 more at once
mkfifo "$W/in2"
FAKE_APP_THREADS=3 FAKE_CUPTI_RATE=50000 "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in2" >"$W/app2.out" 2>&1 &
TP2=$!
exec 8>"$W/in2"
wait_for "$W/app2.out" '^ready' 5
mkdir "$W/r2" "$W/r3"
LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $TP2 "$LIB" "$W/r2" 0.5 runtime=2 >"$W/r2.out" 2>&1
check "[cb] runtime=2 without cbrisk=1: launches by activity instead, and why" \
	'grep -q "runtime=2 needs cbrisk=1" "$W/r2.out" && grep -q "finalized=1 unloaded=1" "$W/r2.out"'
LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $TP2 "$LIB" "$W/r3" 1.5 runtime=2 cbrisk=1 >"$W/r3.out" 2>&1
sed "s/^/# [cb] /" "$W/r3.out" | tail -2
exec 8>&-
wait $TP2
check "[cb] target exited 0" '[ $? = 0 ]'
check "[cb] nothing dropped; CUPTI kept after launch callbacks (and why), library not unloaded" \
	'grep -q "dropped=0 finalized=0 unloaded=0" "$W/r3.out" && grep -q "launches were taken by callback" "$W/r3.out"'
"$T/inject_logdump" "$W/r3"/*.evlog >"$W/r3.tsv" 2>&1
# A tsv: ts dur pid tid corr cbid class name
awk -F'\t' '$1=="A" && $9=="cudaLaunchKernel"' "$W/r3.tsv" >"$W/r3.rt"
awk -F'\t' '$1=="A" && $9=="cuLaunchKernel"' "$W/r3.tsv" >"$W/r3.drv"
a=$(wc -l <"$W/r3.rt") d=$(wc -l <"$W/r3.drv")
cbs=$(sed -n 's/.* launch_cbs=\([0-9]*\).*/\1/p' "$W/app2.out")
dcbs=$(sed -n 's/.* drv_cbs=\([0-9]*\).*/\1/p' "$W/app2.out")
echo "# [cb] in the log: $a runtime, $d driver launches; delivered: $cbs, $dcbs"
# A call in its callback when the stop comes may miss the ring: at most one per thread.
within() { [ "$1" -gt "$3" ] && [ "$1" -le "$2" ] && [ $(($2 - $1)) -le 4 ]; }
check "[cb] every runtime launch delivered is in the log once ($a of $cbs)" \
	'within "$a" "$cbs" 1000 && [ "$(cut -f6 "$W/r3.rt" | sort -u | wc -l)" = "$a" ]'
check "[cb] every direct driver launch too, and no runtime launch's own driver call ($d of $dcbs)" \
	'within "$d" "$dcbs" 100 && [ "$(cut -f6 "$W/r3.drv" | sort -u | wc -l)" = "$d" ] &&
	awk -F"\t" "\$8 != 2 { exit 1 }" "$W/r3.drv" && awk -F"\t" "\$8 != 1 { exit 1 }" "$W/r3.rt"'
check "[cb] the library counted them all as API records" 'grep -q " api=$((a + d)) " "$W/r3.out"'
check "[cb] each record spans its call (runtime >= 20 us, driver >= 5 us), from 4 threads" \
	'awk -F"\t" "\$3 < 20000 { exit 1 }" "$W/r3.rt" && awk -F"\t" "\$3 < 5000 { exit 1 }" "$W/r3.drv" &&
	[ "$(cut -f5 "$W/r3.rt" | sort -u | wc -l)" = 4 ] && [ "$(cut -f5 "$W/r3.drv" | sort -u | wc -l)" = 4 ]'
check "[cb] kernels still recorded beside the calls" '[ "$(grep -c "^K" "$W/r3.tsv")" -gt 10000 ]'
tap_done
