#!/bin/bash
# Cost bound: a log with 200,000 threads (one process, four events each)
# converts to --logdir, to JSON and to a summary in time linear in the
# threads. The XPlane sink once scanned every line for each new one
# (40k threads: 6.8 s, 200k: minutes); now ~2.5 s here. The bound is wide
# for a loaded 2-core machine (and sanitizers) yet far below the quadratic.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT_ROOT=${LLMT_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$LLMT_ROOT/tests/integration/xplane_check.inc"
conv=$BUILD/bin/llmtracker-convert
gen=$BUILD/tests/progs/conv_genlog
need_built "$conv" "$gen"
$XPLANE_PY -c 'import google.protobuf' 2>/dev/null || skip "python3-protobuf missing for $XPLANE_PY"
THREADS=200000
BOUND_S=${MANY_THREADS_BOUND_S:-60}
tap_tmpdir dir many-threads
xplane_check_setup "$dir" >/dev/null || bail "protoc --python_out failed"
timed() { # what cmd...: run under the bound, say how long it took
	local what=$1 t0 rc; shift
	t0=$EPOCHREALTIME
	timeout "$BOUND_S" "$@"; rc=$?
	awk -v a="$t0" -v b="$EPOCHREALTIME" -v w="$what" -v m="$BOUND_S" \
		'BEGIN { printf "# %s: %.2f s (bound %s s)\n", w, b - a, m }' >&2
	return $rc
}

desc="generate a log of $THREADS threads"
t "$gen" "$dir/t.evlog" -n 1 --threads $THREADS --part host
desc="--logdir (XPlane + trace JSON) within $BOUND_S s"
t timed logdir "$conv" -q -i "$dir/t.evlog" --logdir "$dir/logs" --run r
grep '^# ' "$dir/out"
pb=$dir/logs/plugins/profile/r/node-a.xplane.pb
cat >"$dir/lines.py" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import xplane_pb2
xs = xplane_pb2.XSpace()
xs.ParseFromString(open(sys.argv[2], "rb").read())
want = int(sys.argv[3])
host = [p for p in xs.planes if p.name == "/host:CPU"][0]
ids = {l.id: l for l in host.lines}
assert len(host.lines) == want, "%d lines, want %d" % (len(host.lines), want)
assert len(ids) == want, "line ids repeat"
last = ids[4000 + want - 1]
assert last.display_name == "worker-%d %d (python3 4000)" % (want - 1, 4000 + want - 1), last.display_name
assert ids[4000].name == "python3", ids[4000].name
print("ok")
PYEOF
desc="the host plane has one line per thread, each named after its thread"
t $XPLANE_PY "$dir/lines.py" "$dir/py" "$pb" "$THREADS"
desc="-o trace JSON within $BOUND_S s"
t timed json "$conv" -q -i "$dir/t.evlog" -o "$dir/t.json"
grep '^# ' "$dir/out"
desc="the JSON names every thread"
t test "$(grep -o '"thread_name"' "$dir/t.json" | wc -l)" -eq $THREADS
desc="summary within $BOUND_S s"
t timed summary "$conv" summary "$dir/t.evlog"
grep '^# ' "$dir/out"
tap_done
