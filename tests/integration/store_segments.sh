#!/bin/bash
# The event log on an object store (s3fs over a local S3 server): a profile
# in small segments through one mount is published as NAME.1 ... and NAME,
# each object once and uploaded once (the bytes sent are within 1.1x of the
# objects'); another mount converts it whole, with the counts the collector
# wrote; a missing or altered segment is named; a collector killed mid-way
# leaves complete segments and a partial file that convert, said unfinished.
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/store.inc"
CONV=$BUILD/bin/llmtracker-convert
need_bpf "$PROGS/busy_rate" "$CONV"
need_store
st_server_start
st_mount A
st_mount B
mkdir "$A/run" "$A/run2" || bail "mkdir on the store"

# what the converter says it converted: "converted N events ..."
converted() { sed -n 's/^converted \([0-9]*\) events.*/\1/p' "$1"; }
# the collector summary's figure for a source row / its "wrote" line
summary_events() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }
wrote_events() { sed -n 's/.*bytes, \([0-9]*\) events in.*/\1/p' "$1"; }
objects_bytes() { # the sizes of the objects under run/ named PREFIX*
	local k sum=0
	for k in $(st_objects | grep "^run/$1"); do sum=$((sum + $(st_size "$k"))); done
	echo "$sum"
}

# ---- a profile in 1-s segments through mount A
sent0=$(st_sent_bytes)
"$LT" profile -t syscall -d 5 --segment-seconds 1 -o "$A/run/node.evlog" -- \
	"$PROGS/busy_rate" "$T/rate" 8 >/dev/null 2>"$T/p1.err"
check "profile through the store ends (rc $?)" '[ $? = 0 ]' || sed 's/^/# /' "$T/p1.err"
sent1=$(st_sent_bytes)
st_objects | grep '^run/.' >"$T/objs"
nseg=$(grep -c '^run/node\.evlog\.[0-9]*$' "$T/objs")
check "published in segments ($nseg numbered, and the last as NAME)" \
	'[ "$nseg" -ge 3 ] && grep -qx run/node.evlog "$T/objs"'
want=$( (for k in $(seq 1 "$nseg"); do echo "run/node.evlog.$k"; done; echo run/node.evlog) | sort)
check "every object once, nothing else (no partial left): $(tr '\n' ' ' <"$T/objs")" \
	'[ "$(sort "$T/objs")" = "$want" ] && [ "$(sort -u "$T/objs" | wc -l)" = "$(wc -l <"$T/objs")" ]'
# Each segment uploaded once (its partial file stored once, at its close)
# and each published object written once, by its rename's server-side copy.
st_writes | grep '^run/' >"$T/writes"
pubw=$(grep -c '^run/node\.evlog\(\.[0-9]*\)\?$' "$T/writes")
partw=$(grep -c '^run/\.node\.evlog\.partial$' "$T/writes")
check "each segment uploaded once ($partw stores of the partial file for $((nseg + 1))), each object written once ($pubw)" \
	'[ "$partw" = $((nseg + 1)) ] && [ "$pubw" = $((nseg + 1)) ] && [ "$(sort "$T/writes" | uniq -d | grep -v partial)" = "" ]'
# Uploaded once: what s3fs sent (requests, headers and all) against the objects' bytes.
obj=$(objects_bytes node.evlog)
sent=$((sent1 - sent0))
check "bytes sent to the store $sent, objects $obj: at most 1.1x" \
	'[ "$obj" -gt 0 ] && [ $((sent * 10)) -le $((obj * 11)) ]'

# ---- read back through mount B: the whole log, as the collector wrote it
wait_until 20 "[ -e '$B/run/node.evlog' ]" || nok "mount B sees the log"
"$CONV" --no-progress "$B/run/node.evlog" -o "$T/b.json" >"$T/b.out" 2>&1
check "mount B converts it (rc $?)" '[ $? = 0 ]' || sed 's/^/# /' "$T/b.out" | tail -5
w=$(wrote_events "$T/p1.err") c=$(converted "$T/b.out")
check "converted events ($c) = the events the collector wrote ($w)" '[ -n "$c" ] && [ "$c" = "$w" ]'
sys_sum=$(summary_events "$T/p1.err" syscall)
sys_read=$("$DUMP" "$B/run/node.evlog" 2>/dev/null | grep -c '^syscall ')
check "syscall events read through mount B ($sys_read) = the summary's ($sys_sum)" \
	'[ "$sys_read" = "$sys_sum" ] && [ "$sys_read" -gt 1000 ]'
nrec=$("$DUMP" "$B/run/node.evlog" 2>/dev/null | grep -c '^segment ')
check "each earlier segment recorded once ($nrec of $nseg)" '[ "$nrec" = "$nseg" ]'

# ---- a missing segment, then an altered one: named
mv "$B/run/node.evlog.2" "$B/run/moved" || nok "rename on the store"
"$CONV" --no-progress "$B/run/node.evlog" -o "$T/m.json" >"$T/m.out" 2>&1
rc=$?
check "a missing segment fails the conversion, named: $(tail -1 "$T/m.out")" \
	'[ $rc != 0 ] && grep -q "node.evlog.2: missing (No such file or directory): segment 2 of the log, recorded by .*node.evlog.3" "$T/m.out"'
mv "$B/run/moved" "$B/run/node.evlog.2"
printf 'X' | dd of="$B/run/node.evlog.1" bs=1 seek=300 conv=notrunc status=none
"$CONV" --no-progress "$B/run/node.evlog" -o "$T/x.json" >"$T/x.out" 2>&1
rc=$?
check "an altered segment fails it, named: $(tail -1 "$T/x.out")" \
	'[ $rc != 0 ] && grep -q "node.evlog.1: its content differs from the SHA-256 that .*node.evlog.2 records" "$T/x.out"'

# ---- a collector killed mid-profile
"$LT" profile -t syscall --segment-seconds 1 -o "$A/run2/killed.evlog" -v 1 -- \
	"$PROGS/busy_rate" "$T/rate2" 60 >/dev/null 2>"$T/k.err" &
lt=$!
tap_bg "$lt"
wait_until 30 "st_objects | grep -q '^run2/killed.evlog.3$'" || nok "three segments published"
writer=$(pgrep -P "$lt" -x llmt-store)
kill -9 "$lt"
wait "$lt" 2>/dev/null
pkill -x busy_rate
# Its writer writes what the collector had handed over, and stops.
check "the writer process ($writer) ends after its collector" \
	wait_until 20 "[ -n '$writer' ] && ! kill -0 '$writer' 2>/dev/null"
st_objects | grep '^run2/.' >"$T/kobjs"
kseg=$(grep -c '^run2/killed\.evlog\.[0-9]*$' "$T/kobjs")
check "left: $kseg segments and the partial file, no NAME ($(tr '\n' ' ' <"$T/kobjs"))" \
	'[ "$kseg" -ge 3 ] && grep -qx "run2/.killed.evlog.partial" "$T/kobjs" && ! grep -qx run2/killed.evlog "$T/kobjs"'
wait_until 20 "[ -e '$B/run2/.killed.evlog.partial' ]"
"$CONV" --no-progress "$B/run2/.killed.evlog.partial" -o "$T/k.json" >"$T/k.out" 2>&1
check "the partial file converts with the segments before it (rc $?)" \
	'[ $? = 0 ] && grep -q "read with its $kseg earlier segments" "$T/k.out"'
check "said unfinished: $(grep 'never published' "$T/k.out" | cut -c1-90)..." \
	grep -q "killed.evlog.partial: never published" "$T/k.out"
last=$("$DUMP" "$B/run2/killed.evlog.$kseg" 2>/dev/null | grep -vc '^#')
kc=$(converted "$T/k.out")
check "it holds every event of the published segments ($kc > $last)" '[ -n "$kc" ] && [ "$kc" -gt "$last" ]'
"$CONV" --no-progress "$B/run2" -o "$T/d.json" >"$T/d.out" 2>&1
rc=$?
check "its directory converts the same: one log of $(converted "$T/d.out") events" \
	'[ $rc = 0 ] && [ "$(converted "$T/d.out")" = "$kc" ] && grep -q "from 1 logs" "$T/d.out"'
tap_done
