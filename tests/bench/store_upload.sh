#!/bin/bash
# What a profile uploads to an object store (s3fs over a local S3 server,
# tests/integration/store.inc): the bytes s3fs sent the server, requests
# and headers included, against the bytes of the objects published. Each
# segment is written once and closed once, so it is uploaded once: the
# anchor is at most 1.1x. A busy target under -t syscall for
# STORE_SECONDS (60) with the default segments. Skips (status 0) where
# s3fs cannot run.
set -u
export BUILD=${BUILD:-build}
LLMT_ROOT=${LLMT_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SECONDS_=${STORE_SECONDS:-60}
. "$LLMT_ROOT/tests/lib/tap.sh"
skip() { echo "store_upload: skipped: $*"; exit 0; }
LT=$BUILD/bin/llmtracker
PROG=$BUILD/tests/progs/busy_rate
[ -x "$LT" ] && [ -x "$PROG" ] || { echo "store_upload: build $LT and $PROG first"; exit 1; }
tap_tmpdir T lt-bench
. "$LLMT_ROOT/tests/integration/store.inc"
need_store
st_server_start
st_mount A
mkdir "$A/run" || { echo "store_upload: mkdir on the store failed"; exit 1; }

"$PROG" "$T/rate" $((SECONDS_ + 30)) & tp=$!
tap_bg "$tp"
sent0=$(st_sent_bytes)
"$LT" profile -p "$tp" -t syscall -q -d "$SECONDS_" -o "$A/run/node.evlog" 2>"$T/p.err" ||
	{ echo "store_upload: the profile failed:"; grep -v "^  " "$T/p.err" | tail -4; exit 1; }
sent=$(($(st_sent_bytes) - sent0))
obj=0 n=0
for k in $(st_objects | grep '^run/.'); do
	obj=$((obj + $(st_size "$k")))
	n=$((n + 1))
done
echo "a ${SECONDS_}-s profile (-t syscall, a busy target) through s3fs: $n objects ($(st_objects | grep '^run/.' | sed 's|^run/||' | tr '\n' ' '))"
echo "objects $obj bytes; sent to the store $sent bytes (requests and headers included)"
awk -v s="$sent" -v o="$obj" 'BEGIN { printf "uploaded / published: %.3fx (anchor: at most 1.1x, each segment uploaded once)\n", o ? s / o : 0 }'
