#!/bin/bash
# Run every test and print one closing line "N passed, N failed".
#   - tests/unit/test_*.c (cmocka): each test case counts.
#   - tests/integration/*.sh: each "ok ..." / "not ok ..." line counts; a
#     script that prints none counts once, by its exit status. Exit 77 = skip.
#   - fuzz targets run briefly (FUZZ_SMOKE_SECONDS, default 10) on their seeds.
# TEST_FILTER=regex limits which tests run.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
export LLMT_ROOT=$PWD
filter=${TEST_FILTER:-.}
passed=0 failed=0 skipped=0
failures=()
log_dir=$BUILD/test-logs
mkdir -p "$log_dir"

count_cmocka() { # name logfile rc
	local p f
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$2" | tail -1)
	p=${p:-0}; f=${f:-0}
	if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi # crashed before reporting
	passed=$((passed + p)); failed=$((failed + f))
	[ "$f" -gt 0 ] && failures+=("$1 (see $2)")
}

count_tap() { # name logfile rc
	local p f
	p=$(grep -c '^ok ' "$2"); f=$(grep -c '^not ok ' "$2")
	if [ "$3" -eq 77 ]; then skipped=$((skipped + 1)); return; fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		if [ "$3" -eq 0 ]; then p=1; else f=1; fi
	elif [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p)); failed=$((failed + f))
	[ "$f" -gt 0 ] && failures+=("$1 (see $2)")
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	n=$(basename "$t"); [[ $n =~ $filter ]] || continue
	echo "== unit $n"
	"$t" >"$log_dir/$n.log" 2>&1; rc=$?
	grep -E '^\[  (FAILED|  OK  |PASSED|  ERROR)' "$log_dir/$n.log" | grep -v '  OK  ' | sed 's/^/   /'
	count_cmocka "$n" "$log_dir/$n.log" $rc
done

for t in tests/integration/*.sh; do
	[ -f "$t" ] || continue
	n=$(basename "$t" .sh); [[ $n =~ $filter ]] || continue
	echo "== integration $n"
	timeout 900 bash "$t" >"$log_dir/$n.log" 2>&1; rc=$?
	# a failure shows its diagnostics (the "# " lines around it) here, where
	# a CI log that keeps only the output sees them
	awk '/^(ok|not ok) / { bad = /^not ok/; print "   " $0
			if (bad) for (i = 0; i < nb; i++) print "      " buf[i]
			nb = 0; next }
		/^#/ { if (bad) print "      " $0; else if (nb < 30) buf[nb++] = $0 }' "$log_dir/$n.log"
	count_tap "$n" "$log_dir/$n.log" $rc
done

for f in "$BUILD"/fuzz/fuzz_*; do
	[ -x "$f" ] || continue
	n=$(basename "$f"); [[ $n =~ $filter ]] || continue
	echo "== fuzz smoke $n"
	corpus=$BUILD/fuzz/smoke-$n; mkdir -p "$corpus"
	"$f" -max_total_time="${FUZZ_SMOKE_SECONDS:-10}" -rss_limit_mb=2048 "$corpus" "tests/fuzz/seeds/$n" \
		>"$log_dir/$n.log" 2>&1; rc=$?
	count_tap "$n" "$log_dir/$n.log" $rc
done

if [ ${#failures[@]} -gt 0 ]; then
	echo "failed:"; printf '  %s\n' "${failures[@]}"
fi
[ "$skipped" -gt 0 ] && echo "($skipped test scripts skipped)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
