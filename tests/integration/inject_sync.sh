#!/bin/bash
# CUDA synchronization and CUPTI overhead records end to end, without a GPU:
# the stand-in libcupti (tests/progs/fake_cupti.c, FAKE_CUPTI_SYNC) writes a
# stream-synchronize and a buffer-flush record after every 500th kernel; the
# inject library, injected with the real injector, writes them as gpu_sync
# and cupti_overhead events, and the converter shows them as
# PyTorch's profiler does: category cuda_sync ("Stream Sync", args
# cuda_sync_kind, stream, correlation, context) and category overhead
# ("Buffer Flush"), in the trace JSON and in the XPlane.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
CONV=$BUILD/bin/llmtracker-convert
need_built "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_tool" "$T/evlog_dump" "$LIB" "$CONV"
need_root "ptrace"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"
tap_tmpdir W llmt-inject-sync
tap_at_exit 'exec 9>&- 2>/dev/null'

mkfifo "$W/in"
FAKE_CUPTI_SYNC=500 FAKE_CUPTI_RATE=200000 "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in" >"$W/app.out" 2>&1 &
TP=$!; tap_bg $TP
exec 9>"$W/in"
wait_for "$W/app.out" '^ready' 10
check "target started" 'grep -q "^ready $TP" "$W/app.out"'
mkdir "$W/logs"
LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" attach $TP "$LIB" "$W/logs" 1 >"$W/attach.out" 2>&1
exec 9>&-
wait $TP
check "injected, finalized, unloaded" 'grep -q "finalized=1 unloaded=1" "$W/attach.out"'

log=$(ls "$W"/logs/*.evlog | head -1)
"$T/evlog_dump" "$log" >"$W/dump" 2>&1
ns=$(grep -c '^gpu_sync ' "$W/dump") no=$(grep -c '^cupti_overhead ' "$W/dump")
nk=$(grep -c '^gpu_kernel ' "$W/dump")
check "the log holds gpu_sync ($ns) and cupti_overhead ($no) events, one each per 500 kernels ($nk), none as a marker" \
	'[ "$ns" -gt 0 ] && [ "$ns" = "$no" ] && [ "$ns" = $((nk / 500)) ] && ! grep -Eq "^marker .* name=(cuda_sync|cupti_overhead):" "$W/dump" &&
	 grep -Eq "^# version=1\.[0-9]+" "$W/dump" &&
	 grep -m1 "^gpu_sync " "$W/dump" | grep -q " kind=3 context=1 stream=7 cuda_event=4294967295 correlation_id=500\$"'

"$CONV" -q -i "$log" -o "$W/t.json" && "$CONV" -q -i "$log" --logdir "$W/tb" --run r 2>"$W/err"
check "the trace JSON shows them as Kineto does (cuda_sync: Stream Sync; overhead: Buffer Flush)" \
	"python3 - '$W/t.json' $ns <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
n = int(sys.argv[2])
s = [e for e in ev if e.get('cat') == 'cuda_sync']
o = [e for e in ev if e.get('cat') == 'overhead']
assert len(s) == n and len(o) == n, (len(s), len(o))
assert all(e['name'] == 'Stream Sync' and e['ph'] == 'X' and e['dur'] == 5.0 for e in s), s[:1]
a = s[0]['args']
assert a['cuda_sync_kind'] == 'Stream Sync' and a['stream'] == 7 and a['context'] == 1, a
assert a['correlation'] % 500 == 0, a
assert all(e['name'] == 'Buffer Flush' and e['dur'] == 0.7 for e in o), o[:1]
assert not [e for e in ev if e.get('cat') == 'user_annotation'], 'a marker shown'
PY"
check "the XPlane names them so and carries cuda_sync_kind, correlation_id and overhead_kind" \
	'x=$(ls "$W"/tb/plugins/profile/r/*.xplane.pb) && grep -aq "Stream Sync" "$x" && grep -aq "Buffer Flush" "$x" &&
	 grep -aq cuda_sync_kind "$x" && grep -aq overhead_kind "$x"'
tap_done
