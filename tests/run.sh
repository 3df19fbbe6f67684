#!/bin/bash
# Run every test and print one closing line "N passed, N failed".
#   - tests/unit/test_*.c (cmocka): each test case counts.
#   - tests/integration/*.sh: each "ok ..." / "not ok ..." line counts; a
#     script that prints none counts once, by its exit status. Exit 77 = skip.
#   - fuzz targets run briefly (FUZZ_SMOKE_SECONDS, default 10) on their seeds.
# TEST_FILTER=regex limits which tests run. TEST_JOBS tests run at once
# (default: the number of CPUs); the slowest of the last run start first
# ($BUILD/test-logs/durations). Sections print in a fixed order, each with
# its time, whatever order the tests finish in.
set -u
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
export LLMT_ROOT=$PWD
filter=${TEST_FILTER:-.}
jobs_max=${TEST_JOBS:-$(nproc)}
passed=0 failed=0 skipped=0
failures=()
log_dir=$BUILD/test-logs
mkdir -p "$log_dir"
t_start=$(date +%s.%N)

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

# One test: its output into its log, then "rc seconds" into $log_dir/N.rc.
run_one() { # kind name path
	local log=$log_dir/$2.log t0 rc
	t0=$(date +%s.%N)
	case $1 in
	unit) "$3" >"$log" 2>&1; rc=$? ;;
	integration) timeout 900 bash "$3" >"$log" 2>&1; rc=$? ;;
	fuzz)
		local corpus=$BUILD/fuzz/smoke-$2
		mkdir -p "$corpus"
		"$3" -max_total_time="${FUZZ_SMOKE_SECONDS:-10}" -rss_limit_mb=2048 "$corpus" \
			"tests/fuzz/seeds/$2" >"$log" 2>&1; rc=$? ;;
	esac
	echo "$rc $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" \
		>"$log_dir/$2.rc.tmp" && mv "$log_dir/$2.rc.tmp" "$log_dir/$2.rc"
}

# A finished test's section: what failed (with the "# " lines before it),
# and its counts.
show() { # kind name
	local log=$log_dir/$2.log rc secs
	read -r rc secs <"$log_dir/$2.rc"
	echo "== $1 $2 (${secs} s)"
	echo "$2 $secs" >>"$log_dir/durations.new"
	case $1 in
	unit)
		grep -E '^\[  (FAILED|  OK  |PASSED|  ERROR)' "$log" | grep -v '  OK  ' | sed 's/^/   /'
		count_cmocka "$2" "$log" "$rc" ;;
	integration)
		# a failure shows its diagnostics (the "# " lines around it) here,
		# where a CI log that keeps only the output sees them
		awk '/^(ok|not ok) / { bad = /^not ok/; print "   " $0
				if (bad) for (i = 0; i < nb; i++) print "      " buf[i]
				nb = 0; next }
			/^#/ { if (bad) print "      " $0; else if (nb < 30) buf[nb++] = $0 }' "$log"
		count_tap "$2" "$log" "$rc" ;;
	fuzz) count_tap "$2" "$log" "$rc" ;;
	esac
}

kinds=() names=() paths=()
add() { [[ $2 =~ $filter ]] || return 0; kinds+=("$1"); names+=("$2"); paths+=("$3"); }
for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && add unit "$(basename "$t")" "$t"; done
for t in tests/integration/*.sh; do [ -f "$t" ] && add integration "$(basename "$t" .sh)" "$t"; done
for f in "$BUILD"/fuzz/fuzz_*; do [ -x "$f" ] && add fuzz "$(basename "$f")" "$f"; done
for n in "${names[@]}"; do rm -f "$log_dir/$n.rc"; done
rm -f "$log_dir/durations.new"

# Start order: longest first by the last run's times (unknown ones first:
# they may be long), so the last test to finish is a short one.
order=$(for i in "${!names[@]}"; do
	d=$(awk -v n="${names[$i]}" '$1 == n { d = $2 } END { print d == "" ? 1e9 : d }' \
		"$log_dir/durations" 2>/dev/null || echo 1e9)
	echo "$d $i"
done | sort -k1,1gr -k2,2n | awk '{ print $2 }')

shown=0
show_ready() { # print every finished section that is next in the fixed order
	while [ "$shown" -lt "${#names[@]}" ] && [ -e "$log_dir/${names[$shown]}.rc" ]; do
		show "${kinds[$shown]}" "${names[$shown]}"
		shown=$((shown + 1))
	done
}
running=0
for i in $order; do
	while [ "$running" -ge "$jobs_max" ]; do
		wait -n 2>/dev/null
		running=$((running - 1))
		show_ready
	done
	run_one "${kinds[$i]}" "${names[$i]}" "${paths[$i]}" &
	running=$((running + 1))
done
wait
show_ready
# this run's times replace the last ones; tests not run keep theirs
[ -s "$log_dir/durations.new" ] && awk 'NR == FNR { d[$1] = $2; next } !($1 in d) { print }
	END { for (n in d) print n, d[n] }' "$log_dir/durations.new" "$log_dir/durations" 2>/dev/null \
	>"$log_dir/durations.tmp" && mv "$log_dir/durations.tmp" "$log_dir/durations"
rm -f "$log_dir/durations.new"

if [ ${#failures[@]} -gt 0 ]; then
	echo "failed:"; printf '  %s\n' "${failures[@]}"
fi
[ "$skipped" -gt 0 ] && echo "($skipped test scripts skipped)"
awk -v a="$t_start" -v b="$(date +%s.%N)" -v j="$jobs_max" \
	'BEGIN { printf "(%.0f s, %d at a time)\n", b - a, j }'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
