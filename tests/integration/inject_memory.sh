#!/bin/bash
# GPU memory end to end, without a GPU: the stand-in libcupti
# (tests/progs/fake_cupti.c, FAKE_CUPTI_MEMORY) writes a MEMORY2 record after
# every 40th kernel (device memory allocated, then freed; pinned host memory;
# a pool's stream-ordered allocation; a free of memory allocated before
# recording); the inject library, injected with the real injector, writes
# them as gpu_memory events; the converter shows them in the
# trace JSON as instants on the process's "GPU 0" track with a counter of the
# bytes held, and in the XPlane as xprof's memory profile reads them
# (MemoryAllocation / MemoryDeallocation on /host:CPU, int64 stats); the
# trace JSON keeps the contract and the Perfetto trace agrees with it. The
# totals are recomputed here from the log's own events.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
CONV=$BUILD/bin/llmtracker-convert
need_built "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_tool" "$T/evlog_dump" "$LIB" "$CONV"
need_root "ptrace"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"
. "$LLMT_ROOT/tests/integration/xplane_check.inc"
tap_tmpdir W llmt-inject-memory
tap_at_exit 'exec 9>&- 2>/dev/null'
xplane_check_setup "$W" || bail "protoc --python_out failed"

mkfifo "$W/in"
FAKE_CUPTI_MEMORY=40 FAKE_CUPTI_RATE=40000 "$T/fake_cuda_app" "$T/fake_cupti" <"$W/in" >"$W/app.out" 2>&1 &
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
"$CONV" -q -i "$log" -o "$W/t.json" -o "$W/t.pftrace" && "$CONV" -q -i "$log" --logdir "$W/tb" --run r ||
	bail "converting the log failed"

# The log's memory events, and the totals they make: per class (device,
# host = pinned/pageable), bytes allocated since recording began and not
# freed, a free of an address never seen allocated changing nothing.
cat >"$W/mem.py" <<'PY'
import re

def events(dump):
    out = []
    for line in open(dump):
        if line.startswith("gpu_memory "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            out.append({k: int(v, 0) for k, v in f.items()})
    return out

def totals(evs):
    """[(event, class, total after it, peak so far)] in time order."""
    live, total, peak, out = {}, [0, 0], [0, 0], []
    for e in sorted(evs, key=lambda e: e["ts"]):
        c = 1 if e["memory_kind"] in (1, 2) else 0
        k = (e["address"], c)
        if e["op"] == 2:
            if k in live:
                total[c] -= live.pop(k)
        else:
            total[c] += e["bytes"]
            live[k] = e["bytes"]
            peak[c] = max(peak[c], total[c])
        out.append((e, c, total[c], peak[c]))
    return out
PY

check "the log holds gpu_memory events as CUPTI gave them (every shape, exact fields)" \
	"python3 - '$W' <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import mem
evs = mem.events(sys.argv[1] + '/dump')
assert len(evs) >= 40, len(evs)
seen = set()
for e in evs:
    assert e['pid'] > 0 and e['tid'] == 0 and e['device'] == 0 and e['context'] == 1, e
    c = e['correlation_id']
    assert c % 40 == 0, e
    i = c // 40
    k = i % 8
    seen.add(k)
    if k in (1, 5):
        want = dict(op=1, memory_kind=3, address=0x7f0000000000 + (i << 20), bytes=i * 4096, stream=0xffffffff, pool_type=0, pool_address=0)
    elif k in (2, 6):
        want = dict(op=2, memory_kind=3, address=0x7f0000000000 + ((i - 1) << 20), bytes=(i - 1) * 4096, stream=0xffffffff)
    elif k in (3, 7):
        want = dict(op=1, memory_kind=2, address=0x7e0000000000 + (i << 16), bytes=i * 8192)
    elif k == 0:
        want = dict(op=1, memory_kind=3, stream=7, bytes=65536, pool_type=1, pool_address=0x7c0000000000)
    else:
        want = dict(op=2, memory_kind=3, address=0x7d0000000000 + i, bytes=1 << 30)
    bad = {f: (e[f], v) for f, v in want.items() if e[f] != v}
    assert not bad, (e, bad)
assert seen == set(range(8)), seen
print('# %d memory events' % len(evs))
PY"

check "the trace JSON: an instant per event on the process's GPU 0 track, each followed by its counter at the recomputed total" \
	"python3 - '$W' <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import mem
W = sys.argv[1]
want = mem.totals(mem.events(W + '/dump'))
ev = json.load(open(W + '/t.json'))['traceEvents']
names = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e.get('ph') == 'M' and e['name'] == 'thread_name'}
inst = [e for e in ev if e.get('cat') == 'gpu_memory' and e['ph'] == 'i']
ctr = [e for e in ev if e.get('cat') == 'gpu_memory' and e['ph'] == 'C']
assert len(inst) == len(want) == len(ctr), (len(inst), len(want), len(ctr))
track = {(e['pid'], e['tid']) for e in inst}
assert len(track) == 1 and names[next(iter(track))] == 'GPU 0', (track, names)
inst.sort(key=lambda e: e['ts']); ctr.sort(key=lambda e: e['ts'])
for (e, c, total, peak), i, k in zip(want, inst, ctr):
    assert i['name'] == ('MemoryDeallocation' if e['op'] == 2 else 'MemoryAllocation'), i
    a = i['args']
    assert a['bytes'] == e['bytes'] and a['address'] == e['address'] and a['memory kind'] == e['memory_kind'], (a, e)
    assert a['stream'] == (-1 if e['stream'] == 0xffffffff else e['stream']) and a['correlation'] == e['correlation_id'], a
    assert a.get('pool', 0) == e['pool_address'], a
    assert k['ts'] == i['ts'] and k['pid'] == i['pid'], (k, i)
    assert k['name'] == ('GPU 0 host memory allocated' if c else 'GPU 0 memory allocated'), k
    assert k['args'] == {'bytes': total}, (k, total)
# the free of memory allocated before recording left the total as it was
pre = [t for (e, c, t, p), k in zip(want, ctr) if e['address'] >> 40 == 0x7d]
assert pre, 'no free of earlier memory'
print('# final device %d, host %d bytes' % ([t for e, c, t, p in want if c == 0][-1], [t for e, c, t, p in want if c == 1][-1]))
PY"

PROTOS=$LLMT_ROOT/tests/perfetto
mkdir -p "$W/pf"
protoc --proto_path="$PROTOS" --python_out="$W/pf" $(cd "$PROTOS" && find protos -name '*.proto') ||
	bail "protoc cannot compile tests/perfetto/protos"
check "the trace JSON keeps the contract (convert_check.py), the Perfetto trace shows the same instants (perfetto_check.py)" \
	"python3 '$LLMT_ROOT/tests/integration/convert_check.py' '$W/t.json' &&
	 '$XPLANE_PY' '$LLMT_ROOT/tests/integration/perfetto_check.py' '$W/pf' '$W/t.pftrace' --json '$W/t.json' --stats |
	 grep -q '\"gpu_memory\": [1-9]'"

check "the XPlane: MemoryAllocation / MemoryDeallocation on /host:CPU with xprof's int64 stats at the recomputed totals" \
	"'$XPLANE_PY' - '$W' \"\$(ls '$W'/tb/plugins/profile/r/*.xplane.pb)\" <<'PY'
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + '/py')
import mem, xplane_pb2
want = mem.totals(mem.events(sys.argv[1] + '/dump'))
xs = xplane_pb2.XSpace(); xs.ParseFromString(open(sys.argv[2], 'rb').read())
host = [p for p in xs.planes if p.name == '/host:CPU']
assert len(host) == 1
p = host[0]
sn = {k: m.name for k, m in p.stat_metadata.items()}
got = []
# as xprof's GenerateMemoryProfile walks it: every line, events by their
# metadata's name, stats by name, numbers by int64_value
for ln in p.lines:
    for e in ln.events:
        name = p.event_metadata[e.metadata_id].name
        if name not in ('MemoryAllocation', 'MemoryDeallocation'):
            continue
        st = {}
        for s in e.stats:
            k = s.WhichOneof('value')
            st[sn[s.metadata_id]] = sn[s.ref_value] if k == 'ref_value' else (k, getattr(s, k))
        got.append((ln.timestamp_ns * 1000 + e.offset_ps, name, st))
for ln in p.lines:
    if any(p.event_metadata[e.metadata_id].name.startswith('Memory') for e in ln.events):
        assert ln.name == 'GPU 0', ln.name
assert len(got) == len(want), (len(got), len(want))
got.sort(key=lambda g: g[0])
allocators = set()
for (e, c, total, peak), (at, name, st) in zip(want, got):
    assert name == ('MemoryDeallocation' if e['op'] == 2 else 'MemoryAllocation'), name
    pid = e['pid']
    assert st['allocator_name'] == ('GPU 0 host (pid %d)' % pid if c else 'GPU 0 (pid %d)' % pid), st
    allocators.add(st['allocator_name'])
    assert st['bytes_allocated'] == ('int64_value', total), (st, total)
    assert st['peak_bytes_in_use'] == ('int64_value', peak), (st, peak)
    assert st['allocation_bytes'] == ('int64_value', e['bytes']) == st['requested_bytes'], st
    assert st['addr'] == ('int64_value', e['address']), st
    assert st['region_type'] == ('pinned' if e['memory_kind'] == 2 else 'device'), st
    assert st['correlation_id'] == ('uint64_value', e['correlation_id']), st
assert len(allocators) == 2, allocators
print('# %d memory events, allocators %s' % (len(got), sorted(allocators)))
PY"
tap_done
