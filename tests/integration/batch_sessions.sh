#!/bin/bash
# batch on a flat --in holding several profiles' logs side by side (the way
# `profile -o DIR/x.evlog` leaves them: the injected library's logs beside
# the collector's): the logs of one session are one run, named after the
# main log, holding the library logs' events; a main log waits while a
# partial log of its session is being written, and a library log waits while
# its main log is partial; a library log with no main log of its session in
# --in is a run of its own; logs without a session are runs
# of their own; a stale partial (a dead writer's) holds nothing
# back, and is left out of its session's main log, which does not record
# it (the collector records each library log it publishes: only those join).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$(readlink -f "$BUILD/bin/llmtracker-convert")
gen=$(readlink -f "$BUILD/tests/progs/conv_genlog")
dump=$(readlink -f "$BUILD/tests/progs/evlog_dump")
need_built "$conv" "$gen" "$dump"
tap_tmpdir dir batch-s
in=$dir/in
mkdir -p "$in"
S1=11111111111111111111111111111111 S2=22222222222222222222222222222222
S3=33333333333333333333333333333333 S4=44444444444444444444444444444444
S5=55555555555555555555555555555555
g() { "$gen" "$@" > /dev/null || bail "conv_genlog $*"; }
# A library log is made first (in $lib, under its final name), so that its
# main log records it: lib NAME PID SESSION
mkdir -p "$dir/lib"
lib() { g "$dir/lib/$1" -n 800 --part gpu --pid $2 --session $3; }
lib llmtracker-cupti.node-a.4001.1.evlog 4001 $S1
g "$in/train.evlog" -n 3000 --part host --pid 4001 --session $S1 --lib-log "$dir/lib/llmtracker-cupti.node-a.4001.1.evlog"
cp "$dir/lib/llmtracker-cupti.node-a.4001.1.evlog" "$in/"
# S2: the main log is published, its library log still being written
lib llmtracker-cupti.node-a.4002.1.evlog 4002 $S2
g "$in/other.evlog" -n 1000 --part host --pid 4002 --session $S2 --lib-log "$dir/lib/llmtracker-cupti.node-a.4002.1.evlog"
cp "$dir/lib/llmtracker-cupti.node-a.4002.1.evlog" "$in/.llmtracker-cupti.node-a.4002.1.evlog.partial"
# S3: a library log alone
g "$in/orphan.evlog" -n 800 --part gpu --pid 4003 --session $S3
# S4: the library log is published, the main log still being written
lib llmtracker-cupti.node-a.4004.1.evlog 4004 $S4
cp "$dir/lib/llmtracker-cupti.node-a.4004.1.evlog" "$in/"
g "$in/.eval.evlog.partial" -n 1000 --part host --pid 4004 --session $S4 --lib-log "$dir/lib/llmtracker-cupti.node-a.4004.1.evlog"
# S5: a partial library log left behind by a dead writer long ago
g "$in/stale.evlog" -n 1000 --part host --pid 4005 --session $S5
g "$in/.llmtracker-cupti.node-a.4005.1.evlog.partial" -n 800 --part gpu --pid 4005 --session $S5
touch -d '-2 hours' "$in/.llmtracker-cupti.node-a.4005.1.evlog.partial"
g "$in/old.evlog" -n 1000 --part host --pid 4006

runs() { ls "$dir/tb/plugins/profile" 2>/dev/null | tr '\n' ' '; }
# kernels in a run's trace
kernels() {
	python3 - "$dir/tb/plugins/profile/$1/node-a.trace.json.gz" <<'PY'
import gzip, json, sys
try:
    ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
except OSError:
    print(-1); sys.exit()
print(sum(1 for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X"))
PY
}
"$conv" batch --in "$in" --logdir "$dir/tb" --lease 600 > "$dir/b1.out" 2>&1
rc=$?
sed 's/^/# /' "$dir/b1.out"
check "pass 1 converts the complete profiles only: old, orphan, stale, train (got: $(runs))" \
	'[ $rc = 0 ] && [ "$(runs)" = "old orphan stale train " ]'
check "the injected library's logs joined their main log's run, none a run of its own" \
	'! ls "$dir/tb/plugins/profile" | grep -q cupti'
k1=$(kernels train) ko=$(kernels orphan)
kd=$("$dump" "$in/llmtracker-cupti.node-a.4001.1.evlog" | grep -c "^gpu_kernel ")
check "the train run holds its library log's kernels ($k1 of $kd)" '[ "$k1" -gt 0 ] && [ "$k1" = "$kd" ]'
check "the stale partial held nothing back, and stale's main log, which does not record it, left it out" \
	'[ "$(kernels stale)" = 0 ] && grep -q "left out 1 injected-library log .*4005.1.evlog.partial (no collector log" "$dir/b1.out"'
check "the library log alone is a run with its kernels ($ko)" '[ "$ko" -gt 0 ]'
# The writers finish: their partials are published.
mv "$in/.llmtracker-cupti.node-a.4002.1.evlog.partial" "$in/llmtracker-cupti.node-a.4002.1.evlog"
mv "$in/.eval.evlog.partial" "$in/eval.evlog"
"$conv" batch --in "$in" --logdir "$dir/tb" --lease 600 > "$dir/b2.out" 2>&1
rc=$?
sed 's/^/# /' "$dir/b2.out"
check "pass 2 converts the two profiles completed since, nothing else (got: $(runs))" \
	'[ $rc = 0 ] && [ "$(runs)" = "eval old orphan other stale train " ] &&
	 [ "$(grep -c "^batch: converted" "$dir/b2.out")" = 2 ]'
check "each holds its library log's kernels (other $(kernels other), eval $(kernels eval))" \
	'[ "$k1" -gt 0 ] && [ "$(kernels other)" = "$k1" ] && [ "$(kernels eval)" = "$k1" ]'
tap_done
