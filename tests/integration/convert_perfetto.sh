#!/bin/bash
# Perfetto's protobuf trace (-o OUT.pftrace) and the trace size budget
# (--max-trace-mb), on logs the real writer makes (tests/progs/conv_genlog)
# and on a real Python profile: every output decoded against Perfetto's own
# .proto files (tests/perfetto/protos) by protoc and by an independent
# checker (perfetto_check.py: sequences, interning, clocks, slices, flows,
# and the same events per track as the trace JSON of the same conversion);
# folded traces keep every call (counted in their folds), nest, fit their
# budget and come out the same every time; the Perfetto trace of the
# demo's workload is at most a fifth of its JSON.
set -u
scratch=convert-perfetto
. "$(dirname "$0")/convert_common.inc"
PY=/usr/bin/python3 # Debian's, with python3-protobuf
PROTOS=$LLMT_ROOT/tests/perfetto
command -v protoc >/dev/null || skip "protoc (protobuf-compiler) missing"
$PY -c 'import google.protobuf' 2>/dev/null || skip "python3-protobuf missing"
mkdir -p "$dir/py"
protoc --proto_path="$PROTOS" --python_out="$dir/py" $(cd "$PROTOS" && find protos -name '*.proto') ||
	bail "protoc cannot compile tests/perfetto/protos"
pf_check="$PY $LLMT_ROOT/tests/integration/perfetto_check.py $dir/py"
decode() { protoc --proto_path="$PROTOS" --decode=perfetto.protos.Trace \
	"$PROTOS/protos/perfetto/trace/trace.proto" <"$1"; }

"$gen" "$dir/m.log" -n 20000 --overlap --odd-names --unbound 7 >/dev/null || bail "generator failed"
steps=$(( 20000 / 28 + 1 ))

desc="-o m.json -o m.pftrace in one conversion: both written, the closing line counts the Perfetto slices"
t bash -c "'$conv' -i '$dir/m.log' -o '$dir/m.json' -o '$dir/m.pftrace' --max-trace-mb 0 2>'$dir/m.err' && \
	grep -qE '; Perfetto: [0-9]+ slices, [0-9]+ instants, [0-9]+ bytes' '$dir/m.err' && \
	grep -q '^wrote $dir/m.pftrace' '$dir/m.err' && test -s '$dir/m.json' && test -s '$dir/m.cpu.folded'"
desc="protoc decodes the whole file as perfetto.protos.Trace, every field one Perfetto's protos define"
t bash -c "$(declare -f decode); PROTOS='$PROTOS'; decode '$dir/m.pftrace' >'$dir/m.txt' && \
	[ \$(grep -c '^packet {' '$dir/m.txt') -gt 30000 ] && ! grep -qE '^ *[0-9]+: ' '$dir/m.txt'"
desc="sequences, clocks, interning, slices and flows hold; the same events per track as the JSON"
t $pf_check "$dir/m.pftrace" --json "$dir/m.json" --expect-flows $((steps * 3))
desc="interned: each name written once on its sequence (train_step once in the file, names << slices)"
t bash -c "[ \$(grep -c '^ *name: \"train_step\"' '$dir/m.txt') = 1 ] && \
	names=\$(grep -c '^    event_names {' '$dir/m.txt') && slices=\$(grep -c 'type: TYPE_SLICE_BEGIN' '$dir/m.txt') && \
	[ \$names -gt 0 ] && [ \$((names * 10)) -lt \$slices ]"
desc="invalid UTF-8 in a name is repaired as in the JSON (U+FFFD), so both decode"
t grep -q 'bad\\357\\277\\275\\001name' "$dir/m.txt"

"$gen" "$dir/ha.log" -n 3000 --host gpu-a:0 --mono 5000000000000 --realtime 1790000000000000000 >/dev/null
"$gen" "$dir/hb.log" -n 3000 --host gpu-b --boot other --mono 9000000000000 --realtime 1790000000002000000 >/dev/null
desc="two hosts in one Perfetto trace: the JSON's pids per host, the same events per track"
t bash -c "'$conv' -q -i '$dir/ha.log' -i '$dir/hb.log' -o '$dir/h.json' -o '$dir/h.perfetto-trace' && \
	$pf_check '$dir/h.perfetto-trace' --json '$dir/h.json' && \
	$(declare -f decode); PROTOS='$PROTOS'; decode '$dir/h.perfetto-trace' | grep -q 'pid: 10004000'"
desc="-o: a second Perfetto output is refused (exit 2); an existing one is kept without --force"
t bash -c "'$conv' -q -i '$dir/ha.log' -o '$dir/x.pftrace' -o '$dir/y.pftrace' 2>'$dir/o.err'; [ \$? = 2 ] && \
	grep -q 'a Perfetto trace is already asked for' '$dir/o.err' && [ ! -e '$dir/x.pftrace' ] && \
	md5=\$(md5sum <'$dir/h.perfetto-trace') && ! '$conv' -q -i '$dir/ha.log' -o '$dir/h.perfetto-trace' 2>/dev/null && \
	[ \"\$(md5sum <'$dir/h.perfetto-trace')\" = \"\$md5\" ]"

# The budget: a log whose JSON is ~51 MB, of which ~37 MB never folds.
"$gen" "$dir/b.log" -n 300000 >/dev/null
mkdir -p "$dir/b"
"$conv" -q -i "$dir/b.log" -o "$dir/b/full.json" -o "$dir/b/full.pftrace" --max-trace-mb 0 || bail "full conversion failed"
desc="--max-trace-mb 45: the JSON fits, its folds nest, and the closing line says what was folded"
t bash -c "'$conv' -i '$dir/b.log' -o '$dir/b/f45.json' --max-trace-mb 45 2>'$dir/b/f45.err' && \
	[ \$(stat -c %s '$dir/b/f45.json') -le 45000000 ] && [ \$(stat -c %s '$dir/b/full.json') -gt 45000000 ] && \
	grep -qE 'trace JSON: [0-9]+ calls shorter than [0-9.]+ us folded into [0-9]+ slices \\([0-9]+ [a-z_]+' '$dir/b/f45.err' && \
	$json_check '$dir/b/f45.json'"
# calls by category: unfolded = kept + folded (the folds' "calls"), and the closing line's total
count_calls() { # json -> "cat n" lines, and "folded N" (calls the folds stand for)
	python3 -c "
import json, sys, collections
c = collections.Counter()
for e in json.load(open(sys.argv[1]))['traceEvents']:
    if e.get('ph') == 'X':
        c[e['cat']] += 1
        if e['cat'] == 'folded': c['folded calls'] += e['args']['calls']
for k in sorted(c): print(k, c[k])" "$1"
}
desc="no call dropped: each category's calls kept plus those in the folds equal the unfolded JSON's, as the closing line counts them"
t bash -c "$(declare -f count_calls); count_calls '$dir/b/full.json' >'$dir/b/full.n' && count_calls '$dir/b/f45.json' >'$dir/b/f45.n' && \
	python3 -c \"
import re, sys
def rd(p): return {l.rsplit(' ', 1)[0]: int(l.rsplit(' ', 1)[1]) for l in open(p)}
full, f = rd('$dir/b/full.n'), rd('$dir/b/f45.n')
err = open('$dir/b/f45.err').read()
m = re.search(r'trace JSON: (\d+) calls .* slices \(([^)]*)\)', err)
said = {k: int(n) for n, k in (x.split(' ', 1) for x in m.group(2).split(', '))}
assert int(m.group(1)) == f['folded calls'] == sum(said.values()), (m.group(1), f, said)
for cat, n in full.items():
    assert f.get(cat, 0) + said.get(cat, 0) == n, (cat, n, f.get(cat), said.get(cat))
assert f['folded'] > 0
\""
desc="--logdir's trace JSON keeps the budget too; its XPlane keeps every call"
t bash -c "'$conv' -q -i '$dir/b.log' --logdir '$dir/b/tb' --run r --max-trace-mb 45 && \
	r='$dir/b/tb/plugins/profile/r' && [ \$(zcat \$r/node-a.trace.json.gz | wc -c) -le 45000000 ] && \
	zcat \$r/node-a.trace.json.gz | grep -q '\"cat\":\"folded\"' && \
	'$conv' -q -i '$dir/b.log' --logdir '$dir/b/tb' --run r0 --max-trace-mb 0 && \
	cmp \$r/node-a.xplane.pb '$dir/b/tb/plugins/profile/r0/node-a.xplane.pb'"
desc="a budget it cannot meet: every foldable call under 1 ms folded, and the closing line says how far off it stays"
t bash -c "'$conv' -i '$dir/b.log' -o '$dir/b/f10.json' --max-trace-mb 10 2>'$dir/b/f10.err' && \
	grep -q 'still about [0-9.]* MB: the rest never folds' '$dir/b/f10.err' && $json_check '$dir/b/f10.json'"
desc="the Perfetto trace gets five times the budget (--max-trace-mb 2: 10 MB): it fits, decodes, and its folds count every call"
t bash -c "'$conv' -i '$dir/b.log' -o '$dir/b/f2.pftrace' --max-trace-mb 2 2>'$dir/b/f2.err' && \
	[ \$(stat -c %s '$dir/b/f2.pftrace') -le 10000000 ] && grep -q 'Perfetto trace: [0-9]* calls' '$dir/b/f2.err' && \
	$pf_check '$dir/b/full.pftrace' --stats >'$dir/b/pfull.st' && $pf_check '$dir/b/f2.pftrace' --stats >'$dir/b/pf2.st' && \
	python3 -c \"
import json
a, b = json.load(open('$dir/b/pfull.st')), json.load(open('$dir/b/pf2.st'))
folded = b['folded_calls']
kept = sum(n for c, n in b['cats'].items() if c != 'folded')
assert folded > 0 and kept + folded == sum(a['cats'].values()), (a, b)
\""
desc="folding is deterministic: the same bytes twice, and through 1 MiB sort runs merged from disk"
t bash -c "'$conv' -q -i '$dir/b.log' -o '$dir/b/again.json' -o '$dir/b/again.pftrace' --max-trace-mb 9 && \
	LLMT_CONV_RUN_MB=1 '$conv' -q -i '$dir/b.log' -o '$dir/b/runs.json' -o '$dir/b/runs.pftrace' --max-trace-mb 9 && \
	'$conv' -q -i '$dir/b.log' -o '$dir/b/once.json' -o '$dir/b/once.pftrace' --max-trace-mb 9 && \
	cmp '$dir/b/again.json' '$dir/b/once.json' && cmp '$dir/b/runs.json' '$dir/b/once.json' && \
	cmp '$dir/b/again.pftrace' '$dir/b/once.pftrace' && cmp '$dir/b/runs.pftrace' '$dir/b/once.pftrace' && \
	grep -q '\"cat\":\"folded\"' '$dir/b/once.json'"
desc="--max-trace-mb refuses what is not a whole number of MB"
t bash -c "'$conv' -i '$dir/b.log' -o '$dir/b/z.json' --max-trace-mb 1.5 2>'$dir/z.err'; [ \$? = 2 ] && \
	grep -q 'give a whole number of MB' '$dir/z.err' && [ ! -e '$dir/b/z.json' ]"

# A real profile: the demo's workload (examples/train_sim.py, Python calls by USDT).
LT=$BUILD/bin/llmtracker
PY311=/usr/bin/python3.11
desc="the demo's workload: Perfetto trace vs trace JSON"
if [ "$(id -u)" = 0 ] && [ -x "$LT" ] && readelf -n $PY311 2>/dev/null | grep -q function__entry; then
	mkdir -p "$dir/p"
	"$LT" profile -t syscall,cpu,pysample,python -o "$dir/p/p.evlog" -- \
		$PY311 "$LLMT_ROOT/examples/train_sim.py" --steps 8 --data "$dir/p/w" >/dev/null 2>"$dir/p/err" ||
		bail "profiling train_sim.py failed: $(tail -3 "$dir/p/err")"
	"$conv" -q -i "$dir/p/p.evlog" -o "$dir/p/p.json" -o "$dir/p/p.pftrace" --max-trace-mb 0 ||
		bail "converting the profile failed"
	js=$(stat -c %s "$dir/p/p.json") ps=$(stat -c %s "$dir/p/p.pftrace")
	ratio=$(awk -v p="$ps" -v j="$js" 'BEGIN { printf "%.3f", p / j }')
	desc="train_sim.py --steps 8: JSON $js bytes, Perfetto $ps bytes: ratio $ratio, at most 0.2"
	t awk -v r="$ratio" 'BEGIN { exit !(r <= 0.2) }'
	desc="... the same events per track in both, the Perfetto trace decodes and holds"
	t $pf_check "$dir/p/p.pftrace" --json "$dir/p/p.json"
	desc="... with a budget of a third of it, the JSON fits, folds its shortest calls and still checks"
	mb=$(( js / 3000000 ))
	t bash -c "'$conv' -q -i '$dir/p/p.evlog' -o '$dir/p/d.json' --max-trace-mb $mb && \
		[ \$(stat -c %s '$dir/p/d.json') -le $((mb * 1000000)) ] && grep -q '\"cat\":\"folded\"' '$dir/p/d.json' && \
		$json_check '$dir/p/d.json'"
else
	ok "# SKIP $desc (needs root, $LT and $PY311 with USDT probes)"
fi
tap_done
