#!/bin/bash
# make bench: run every benchmark binary (build/bench/bench_*) and script
# (tests/bench/*.sh except this one) and let each print its figures.
set -u
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build}
export LLMT_ROOT=$PWD
filter=${BENCH_FILTER:-.}
status=0
for b in "$BUILD"/bench/bench_*; do
	[ -x "$b" ] || continue
	[[ $(basename "$b") =~ $filter ]] || continue
	echo "=== $(basename "$b")"
	"$b" || status=1
done
for s in tests/bench/*.sh; do
	[ "$(basename "$s")" = run.sh ] && continue
	[[ $(basename "$s") =~ $filter ]] || continue
	echo "=== $(basename "$s" .sh)"
	bash "$s" || status=1
done
exit $status
