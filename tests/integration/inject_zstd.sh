#!/bin/bash
# The inject library writes zstd frames without linking libzstd (its static
# archive is not PIC): through the process's libzstd.so.1, or as raw-block
# frames. Both must decode with the real libzstd.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
P=$BUILD/tests/progs/inject_rawzstd
need_built "$P"
for mode in raw lib; do
	if [ $mode = raw ]; then out=$(LLMT_INJECT_ZSTD=raw "$P"); else out=$(LLMT_INJECT_ZSTD= "$P"); fi
	rc=$?
	echo "$out" | sed 's/^/# /'
	want=$([ $mode = raw ] && echo "mode raw" || echo "mode libzstd")
	check "$mode frames decode with libzstd at 8 sizes" \
		'[ $rc = 0 ] && echo "$out" | grep -q "^$want" && [ "$(echo "$out" | grep -c "^ok ")" = 8 ]'
done
tap_done
