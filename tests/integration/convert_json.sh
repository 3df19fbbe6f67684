#!/bin/bash
# llmtracker-convert end to end on logs written by the real event-log writer:
# trace JSON (.json and .json.gz) checked by an independent Python reader
# (nesting per thread, flows bound at both ends, names for every pid/tid, ts
# relative to baseTimeNanoseconds, categories), the sorted-run merge path,
# merging a host log with the injected library's log (--cupti-dir), two hosts
# on one timeline, folded stacks, archives, --logdir, summary, dump, export.
set -u
scratch=convert-json
. "$(dirname "$0")/convert_common.inc"

"$gen" "$dir/m.log" -n 20000 --overlap --odd-names --unbound 7 >/dev/null || bail "generator failed"
steps=$(( 20000 / 28 + 1 ))
mkdir -p "$dir/a" "$dir/b"

desc="convert to .json.gz: exit 0, closing line counts events and repairs"
t bash -c "'$conv' -i '$dir/m.log' -o '$dir/a/m.json.gz' 2>'$dir/a.err' && \
	grep -E '^converted [0-9]+ events .*overlaps cut.*unbound flows' '$dir/a.err' && ! grep -q ' 0 overlaps cut' '$dir/a.err'"
desc="JSON.gz: nesting, flows bound, names, relative ts, categories (python json+gzip)"
t $json_check "$dir/a/m.json.gz" --min-events 20000 --expect-base 1790000000001000000 --expect-flows $((steps * 3))
desc="plain .json has the same events; the .gz (one ISA-L stream) and the .gz of an asked level (libdeflate, several gzip members) read whole with gzip -t, zcat and python"
t bash -c "'$conv' -q --force -i '$dir/m.log' -o '$dir/a/m.json' && $json_check '$dir/a/m.json' && \
	LLMT_GZIP_LEVEL=6 '$conv' -q -i '$dir/m.log' -o '$dir/a/m6.json.gz' && \
	cmp <(zcat '$dir/a/m.json.gz') '$dir/a/m.json' && gzip -t '$dir/a/m.json.gz' && \
	cmp <(zcat '$dir/a/m6.json.gz') '$dir/a/m.json' && gzip -t '$dir/a/m6.json.gz' && \
	python3 -c \"
import gzip, zlib, sys
def members(p):
    data, n = open(p, 'rb').read(), 0
    while data:
        d = zlib.decompressobj(31); d.decompress(data); data = d.unused_data; n += 1
    return n
same = gzip.open('$dir/a/m.json.gz').read() == gzip.open('$dir/a/m6.json.gz').read()
sys.exit(0 if same and members('$dir/a/m6.json.gz') > 1 else 1)\""
desc="invalid UTF-8 and control bytes become valid JSON (U+FFFD, \\u0001)"
t python3 -c "
import json, sys
names = {e.get('name') for e in json.load(open('$dir/a/m.json'))['traceEvents']}
sys.exit(0 if 'bad\\ufffd\\x01name\\x22q\\x5c' in names else 1)"
desc="memory-bounded path: 1 MiB sort runs merged give byte-identical output"
t bash -c "LLMT_CONV_RUN_MB=1 '$conv' -q -i '$dir/m.log' -o '$dir/a/runs.json' && cmp '$dir/a/runs.json' '$dir/a/m.json'"
desc="~30 sort runs under 'ulimit -n 24' (one sort file for every run): same output as one run"
t bash -c "'$gen' '$dir/big.log' -n 300000 >/dev/null && mkdir -p '$dir/r' && \
	(ulimit -n 24; LLMT_CONV_RUN_MB=1 '$conv' -q -i '$dir/big.log' -o '$dir/r/runs.json') && \
	'$conv' -q -i '$dir/big.log' -o '$dir/r/one.json' && cmp '$dir/r/runs.json' '$dir/r/one.json'"
desc="O_DIRECT from the first byte, from 1 MiB, or never: byte-identical .json, .json.gz and --logdir files"
t bash -c "for a in 0 1 off; do mkdir -p '$dir/d'\$a && \
	LLMT_DIRECT_AFTER_MB=\$a '$conv' -q -i '$dir/big.log' -o '$dir/d'\$a/o.json && \
	LLMT_DIRECT_AFTER_MB=\$a '$conv' -q -i '$dir/big.log' -o '$dir/d'\$a/oz.json.gz && \
	LLMT_DIRECT_AFTER_MB=\$a '$conv' -q -i '$dir/big.log' --logdir '$dir/d'\$a/tb --run r || exit 1; done && \
	cmp '$dir/d0/o.json' '$dir/r/one.json' && cmp '$dir/d1/o.json' '$dir/r/one.json' && cmp '$dir/doff/o.json' '$dir/r/one.json' && \
	cmp '$dir/d0/oz.json.gz' '$dir/doff/oz.json.gz' && cmp '$dir/d1/oz.json.gz' '$dir/doff/oz.json.gz' && \
	for f in node-a.xplane.pb node-a.trace.json.gz; do cmp '$dir/d0/tb/plugins/profile/r/'\$f '$dir/doff/tb/plugins/profile/r/'\$f && \
		cmp '$dir/d1/tb/plugins/profile/r/'\$f '$dir/doff/tb/plugins/profile/r/'\$f || exit 1; done && \
	[ \$(stat -c %s '$dir/r/one.json') -gt 2097152 ] && rm -rf '$dir'/d0 '$dir'/d1 '$dir'/doff"
desc="folded stacks beside the trace: format, counts = samples in the trace"
t bash -c "test -s '$dir/a/m.cpu.folded' && test -s '$dir/a/m.python.folded' && \
	! grep -vE '^[^;]+(;[^;]+)* [0-9]+$' '$dir/a/m.cpu.folded' && \
	[ \$(awk '{s+=\$NF} END {print s}' '$dir/a/m.cpu.folded') = \$(grep -c '\"cat\":\"cpu_sample\"' '$dir/a/m.json') ] && \
	grep -q '^<module> (/app/train.py:1);train_step (/app/train.py:10);forward (/app/model.py:42) ' '$dir/a/m.python.folded'"
desc="symbols resolved and demangled; module+0xoff and 0xaddr for unknown frames; kernel frames marked"
t bash -c "grep -q 'torch::autograd::Engine::execute()' '$dir/a/m.cpu.folded' && grep -q 'libfoo.so.1+0x' '$dir/a/m.cpu.folded' && \
	grep -q ';0x401e00' '$dir/a/m.cpu.folded' && grep -q 'schedule_\[k\]' '$dir/a/m.cpu.folded' && grep -q 'compute:with:semicolons' '$dir/a/m.cpu.folded'"
desc="syscall numbers named for x86_64 (read, write, futex); kernels demangled"
t bash -c "grep -q '\"cat\":\"syscall\",\"name\":\"futex\"' '$dir/a/m.json' && grep -q '\"name\":\"gemm_kernel(float\*, float\*, int)\"' '$dir/a/m.json'"

# Host-side log + the injected library's log in a --cupti-dir full of junk.
mkdir -p "$dir/cupti"
"$gen" "$dir/host.log" -n 20000 --part host >/dev/null
"$gen" "$dir/cupti/inject-4000.log" -n 6000 --part gpu >/dev/null
head -c 5000 /dev/urandom >"$dir/cupti/junk.bin"; echo hello >"$dir/cupti/notes.txt"
desc="host log + --cupti-dir log merge on one timeline, launches bound to kernels"
t bash -c "'$conv' -i '$dir/host.log' --cupti-dir '$dir/cupti' -o '$dir/b/merged.json' 2>'$dir/b.err' && \
	grep -q 'ignored 2 files that are not event logs' '$dir/b.err' && $json_check '$dir/b/merged.json' --min-events 20000 && \
	[ \$(grep -c '\"ph\":\"f\"' '$dir/b/merged.json') -ge 600 ]"
desc="the same file named twice (-i and inside --cupti-dir) is read once"
t bash -c "'$conv' -q -i '$dir/cupti/inject-4000.log' --cupti-dir '$dir/cupti' -i '$dir/host.log' -o '$dir/b/twice.json' && \
	[ \$(grep -c '\"cat\":\"kernel\"' '$dir/b/twice.json') = \$(grep -c '\"cat\":\"kernel\"' '$dir/b/merged.json') ]"

mkdir -p "$dir/shared"
cp "$dir/cupti/inject-4000.log" "$dir/shared/inject-new.log"
cp "$dir/cupti/inject-4000.log" "$dir/shared/inject-old.log"; touch -d '2020-01-01' "$dir/shared/inject-old.log"
"$gen" "$dir/shared/inject-elsewhere.log" -n 300 --part gpu --host other-node >/dev/null
desc="--cupti-dir skips another host's log and logs older than the profile, saying so"
t bash -c "'$conv' -i '$dir/host.log' --cupti-dir '$dir/shared' -o '$dir/b/shared.json' 2>'$dir/s.err' && \
	grep -q 'inject-old.log: last written before the profile started' '$dir/s.err' && \
	grep -q 'inject-elsewhere.log: from host other-node' '$dir/s.err' && \
	[ \$(grep -c '\"cat\":\"kernel\"' '$dir/b/shared.json') = \$(grep -c '\"cat\":\"kernel\"' '$dir/b/merged.json') ]"

# Two hosts, different monotonic clocks, aligned by wall time (B starts 2 ms later).
"$gen" "$dir/ha.log" -n 3000 --host gpu-a:0 --mono 5000000000000 --realtime 1790000000000000000 >/dev/null
"$gen" "$dir/hb.log" -n 3000 --host gpu-b --boot other --mono 9000000000000 --realtime 1790000000002000000 >/dev/null
desc="two hosts in one JSON: distinct pids, host names, wall-clock alignment"
t bash -c "'$conv' -q -i '$dir/ha.log' -i '$dir/hb.log' -o '$dir/hosts.json' && $json_check '$dir/hosts.json' --hosts 2 && \
	python3 -c \"
import json; d = json.load(open('$dir/hosts.json'))
st = {}
for e in d['traceEvents']:
    if e.get('name') == 'ProfilerStep#0': st[e['pid']] = e['ts']
a, b = st[4000], st[10004000]
assert abs((b - a) - 2000.0) < 0.01, (a, b)
assert d['baseTimeNanoseconds'] == 1790000000001000000
\""

desc="--logdir: <run>/<host>.trace.json.gz (host name file-safe) + folded stacks"
t bash -c "'$conv' -q -i '$dir/ha.log' -i '$dir/hb.log' --logdir '$dir/tb' --run r1 && \
	$json_check '$dir/tb/plugins/profile/r1/gpu-a_0.trace.json.gz' && $json_check '$dir/tb/plugins/profile/r1/gpu-b.trace.json.gz' && \
	test -s '$dir/tb/plugins/profile/r1/gpu-a_0.cpu.folded'"
desc="--logdir refuses to replace an existing run's files (no --force), keeps them"
t bash -c "before=\$(md5sum < '$dir/tb/plugins/profile/r1/gpu-b.trace.json.gz'); \
	! '$conv' -q -i '$dir/hb.log' --logdir '$dir/tb' --run r1 2>/dev/null && \
	[ \"\$(md5sum < '$dir/tb/plugins/profile/r1/gpu-b.trace.json.gz')\" = \"\$before\" ] && \
	[ -z \"\$(ls -A '$dir/tb/plugins/profile/r1' | grep -E '^\\.')\" ]"
desc="-o and --logdir at once: every output written and valid"
t bash -c "'$conv' -q -i '$dir/ha.log' -o '$dir/both.json.gz' --logdir '$dir/tb' --run both && $json_check '$dir/both.json.gz' && \
	$json_check '$dir/tb/plugins/profile/both/gpu-a_0.trace.json.gz' && test -s '$dir/tb/plugins/profile/both/gpu-a_0.xplane.pb' && \
	test -s '$dir/tb/plugins/profile/both/gpu-a_0.cpu.folded'"
desc="every output's data is synced (fdatasync) before it gets its name"
if command -v strace >/dev/null; then
	# LeakSanitizer cannot run under ptrace: no leak check for this run.
	t bash -c "ASAN_OPTIONS='${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0' \
		strace -f -y -e trace=fdatasync,renameat,renameat2,rename -o '$dir/sync.st' \
		'$conv' -q -i '$dir/ha.log' -o '$dir/sync.json.gz' --logdir '$dir/tb' --run sync && python3 -c \"
import re, sys
synced, renamed = set(), 0
for line in open('$dir/sync.st'):
    m = re.search(r'fdatasync\\(\\d+<([^>]*)>\\) = 0', line)
    if m:
        synced.add(m.group(1).rsplit('/', 1)[-1])
        continue
    m = re.search(r'rename(?:at2?)?\\((?:\\d+<[^>]*>, )?\\\"([^\\\"]+)\\\".* = 0', line)
    if m:
        renamed += 1
        assert m.group(1).rsplit('/', 1)[-1] in synced, ('renamed before its data was synced', line)
assert renamed >= 5, ('expected every output published by rename', renamed)
\""
else
	ok "# SKIP $desc (no strace)"
fi

desc="logs inside .tar.gz and .tar.zst archives"
t bash -c "tar -C '$dir' -czf '$dir/logs.tar.gz' ha.log hb.log && tar -C '$dir' --zstd -cf '$dir/logs.tar.zst' ha.log && \
	'$conv' -q -i '$dir/logs.tar.gz' -o '$dir/tgz.json' && $json_check '$dir/tgz.json' --hosts 2 && \
	'$conv' -q -i '$dir/logs.tar.zst' -o '$dir/tzst.json' && $json_check '$dir/tzst.json'"

desc="summary: aligned top-N tables per source"
t bash -c "'$conv' summary '$dir/m.log' 2>/dev/null >'$dir/sum.txt' && grep -q '^GPU kernels by total time' '$dir/sum.txt' && \
	grep -qE '^ +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+  gemm_kernel\(float\*, float\*, int\)$' '$dir/sum.txt' && \
	grep -q '^System calls' '$dir/sum.txt' && grep -q '^Python functions' '$dir/sum.txt' && grep -q '^CPU samples: hottest stacks' '$dir/sum.txt'"
desc="dump prints every event as text"
t bash -c "[ \$('$conv' dump '$dir/ha.log' | grep -c '^gpu_kernel ') -gt 100 ]"

coll=$BUILD/bin/llmtracker
desc="the seed's command: llmtracker export -i DIR -o OUT.json --cupti-dir DIR"
if [ -x "$coll" ]; then
	mkdir -p "$dir/data" "$dir/output"
	cp "$dir/host.log" "$dir/data/data.json"
	t bash -c "'$coll' export -i '$dir/data' -o '$dir/output/out.json' --cupti-dir '$dir/cupti' 2>/dev/null && \
		$json_check '$dir/output/out.json' --min-events 20000"
else
	ok "# SKIP $desc ($coll not built)"
fi
tap_done
