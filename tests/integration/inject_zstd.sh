#!/bin/bash
# The inject library writes zstd frames without linking libzstd (its static
# archive is not PIC): through the process's libzstd.so.1, or as raw-block
# frames. Both must decode with the real libzstd.
set -u
BUILD=${BUILD:-build}
P=$BUILD/tests/progs/inject_rawzstd
[ -x "$P" ] || { echo "not ok 1 - missing $P (make tests-bin)"; exit 1; }
n=0
for mode in raw lib; do
	if [ $mode = raw ]; then out=$(LLMT_INJECT_ZSTD=raw "$P"); else out=$(LLMT_INJECT_ZSTD= "$P"); fi
	rc=$?
	echo "$out" | sed 's/^/# /'
	n=$((n + 1))
	want=$([ $mode = raw ] && echo "mode raw" || echo "mode libzstd")
	if [ $rc = 0 ] && echo "$out" | grep -q "^$want" && [ "$(echo "$out" | grep -c '^ok ')" = 8 ]; then
		echo "ok $n - $mode frames decode with libzstd at 8 sizes"
	else
		echo "not ok $n - $mode frames decode with libzstd at 8 sizes"
	fi
done
