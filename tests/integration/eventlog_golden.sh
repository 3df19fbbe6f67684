#!/bin/bash
# The event log's bytes on disk: logs the real writer makes deterministically
# (tests/progs/evlog_cli: every type with random fields, and a realistic
# mix; tests/progs/conv_genlog and gpu_steps_genlog: the converter's corpus)
# are hashed over the file header's fixed part (magic, major and minor
# version) and every chunk (the header's fields hold the writer's clocks
# and command line) and compared with tests/golden/eventlog.sha256: a byte
# changed anywhere there fails. The format's types and field orders never
# change (schemas/eventlog.md 6): a change to the writer leaves every hash
# as it is. A change that means to alter the bytes (a new version)
# regenerates the file:
#   GOLDEN_UPDATE=1 TEST_FILTER='^eventlog_golden$' ./tests/run.sh
# and says why in its commit.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
B=$(realpath -m "$BUILD")
SHA=$PWD/tests/golden/eventlog.sha256
need_built "$B/tests/progs/evlog_cli" "$B/tests/progs/conv_genlog" "$B/tests/progs/gpu_steps_genlog"
tap_tmpdir W evlog-golden
cd "$W" || exit 1
# "all12": types 1-19, each in turn (a stream new types leave as it is).
"$B/tests/progs/evlog_cli" write all.cols 20000 all12 65536 &&
	"$B/tests/progs/evlog_cli" write mixed.cols 50000 mixed 262144 &&
	"$B/tests/progs/conv_genlog" conv.cols -n 100000 --odd-names --uprobe-cuda >/dev/null &&
	"$B/tests/progs/gpu_steps_genlog" gpu.cols gpu.truth graph >/dev/null ||
	{ echo "not ok 1 - the logs could not be written"; exit 1; }
python3 - all.cols mixed.cols conv.cols gpu.cols >got.sha256 <<'PY' ||
import hashlib, struct, sys
for f in sys.argv[1:]:
    b = open(f, "rb").read()
    body = struct.unpack_from("<I", b, 12)[0]
    print(f"{hashlib.sha256(b[:12] + b[20 + body:]).hexdigest()}  {f}")
PY
	{ echo "not ok 1 - hashing failed"; exit 1; }
if [ "${GOLDEN_UPDATE:-0}" = 1 ]; then
	cp got.sha256 "$SHA"
	echo "ok 1 - $SHA written ($(wc -l <got.sha256) logs)"
	exit 0
fi
diff "$SHA" got.sha256 | sed 's/^/# /'
cmp -s "$SHA" got.sha256
echo "$([ $? = 0 ] && echo ok || echo not ok) 1 - $(wc -l <"$SHA") logs' version bytes and chunks byte-identical to tests/golden/eventlog.sha256"
