#!/bin/bash
# CUDA synchronization and CUPTI overhead records end to end, without a GPU:
# the stand-in libcupti (tests/progs/fake_cupti.c, FAKE_CUPTI_SYNC) writes a
# stream-synchronize and a buffer-flush record after every 500th kernel; the
# inject library, injected with the real injector, writes them as gpu_sync
# and cupti_overhead events (format 1.3), and the converter shows them as
# PyTorch's profiler does: category cuda_sync ("Stream Sync", args
# cuda_sync_kind, stream, correlation, context) and category overhead
# ("Buffer Flush"), in the trace JSON and in the XPlane.
set -u
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
CONV=$BUILD/bin/llmtracker-convert
for f in "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_tool" "$T/evlog_dump" "$LIB" "$CONV"; do
	[ -e "$f" ] || { echo "not ok 1 - missing $f (make tests-bin)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "skip: needs root for ptrace"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "skip: the injector supports x86-64 only"; exit 77; }

W=$(mktemp -d /tmp/llmt-inject-sync.XXXXXX)
trap 'exec 9>&- 2>/dev/null; kill $TP 2>/dev/null; rm -rf "$W"' EXIT
n=0
check() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi; }

mkfifo "$W/in"
FAKE_CUPTI_SYNC=500 FAKE_CUPTI_RATE=200000 "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in" >"$W/app.out" 2>&1 &
TP=$!
exec 9>"$W/in"
for _ in $(seq 100); do grep -q '^ready' "$W/app.out" && break; sleep 0.05; done
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
	 grep -q "^# version=1.3" "$W/dump" &&
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
