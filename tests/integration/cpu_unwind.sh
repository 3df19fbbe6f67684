#!/bin/bash
# -t cpu on programs built without frame pointers: Debian's xz -9, sort -n
# and python3.11 running a pure-Python loop, and a C++ program built with
# -O2 -fomit-frame-pointer. Each runs once under both llmtracker (2999 Hz)
# and `perf record -e cpu-clock --call-graph dwarf,16384` (2999 Hz) at the
# same time, so both sample the same execution: >= 95% of our samples reach
# main/_start/__libc_start_call_main, and the inclusive share of each of
# perf's top 10 functions is within 3 points of ours. Frame pointers alone
# (--cpu-stack-bytes 0) reach the root far less often on xz: the check can
# fail.
source "$(dirname "$0")/collector_common.inc"
CHECK="python3 $(dirname "$0")/cpu_unwind_check.py"
CXX_PROG=$PROGS/cpu_unwind_cxx
# Both tools sample the same run but at different instants: a share's
# difference has a sampling error of sqrt(p(1-p)(1/n1+1/n2)), 2.2 points at
# p=50% with 1000 samples each. At 2999 Hz a second of CPU gives ~3000
# samples each, the error ~1.3 points, well inside the 3 allowed.
FREQ=2999
need_bpf "$CXX_PROG"
command -v perf >/dev/null || skip "perf is not installed"
for b in xz sort python3.11; do
	[ -x "/usr/bin/$b" ] || skip "/usr/bin/$b is not installed"
done

head -c 1500000 /dev/urandom | base64 -w 100 >"$T/xz.in"
awk 'BEGIN { srand(1); for (i = 0; i < 1000000; i++) printf "%d.%06d\n", rand() * 1e9, rand() * 1e6 }' \
	>"$T/sort.in"
cat >"$T/loop.py" <<'PY'
def step(i):
    return i * i % 7


def run(n):
    s = 0
    for i in range(n):
        s += step(i)
    return s


run(6000000)
PY

# compare NAME COMM CMD ARGS...: profile CMD under both tools, print the
# table, set res_* from the check's result line.
profile_both() { # NAME COMM CMD ARGS...
	local name=$1 comm=$2
	shift 2
	rm -f "$T/$name.evlog" "$T/$name.data"
	"$LT" profile -t cpu --freq "$FREQ" -q -o "$T/$name.evlog" -- \
		perf record -q -e cpu-clock -F "$FREQ" --call-graph dwarf,16384 -o "$T/$name.data" -- "$@" \
		>/dev/null 2>"$T/$name.err" || return 1
	"$DUMP" "$T/$name.evlog" >"$T/$name.txt" 2>&1
	perf script -i "$T/$name.data" -F comm,pid,ip,sym,dso --no-inline >"$T/$name.perf" 2>/dev/null
	$CHECK "$T/$name.txt" "$T/$name.perf" "$comm" 10 >"$T/$name.cmp"
	sed "s/^# /# $name: /" "$T/$name.cmp" | grep '^#'
	read -r _ res_n res_pn res_root res_proot res_diff < <(grep '^result ' "$T/$name.cmp")
	echo "# $name: samples ours $res_n, perf $res_pn; reach the root: ours $res_root%, perf $res_proot%; largest difference $res_diff points"
}

# The shares are two samplings of one run: a difference past 3 points,
# about 2.5 sampling errors, is measured once more on a new run (seen once
# here on a loaded machine under ASan) before it counts as a failure; so is
# a run where perf's own stacks fall short of the root bar.
compare() { # NAME COMM CMD ARGS...
	local name=$1
	profile_both "$@"
	check "$name: profile -t cpu -- perf record -- $3 exits 0" [ $? = 0 ]
	if ! awk -v v="${res_diff:-100}" 'BEGIN { exit !(v <= 3) }'; then
		echo "# $name: $res_diff points apart: once more"
		profile_both "$@"
	elif ! awk -v v="${res_proot:-0}" 'BEGIN { exit !(v >= 95) }'; then
		# perf's own stacks fell short too (once, beside two CPU hogs and
		# other jobs: 71.9% for sort, ours 71.3%): that run, not our
		# unwinder; a new run must reach the bar
		echo "# $name: perf's stacks reach the root in only $res_proot%: once more"
		profile_both "$@"
	fi
	check "$name: at least 1000 samples ($res_n)" [ "${res_n:-0}" -ge 1000 ]
	check "$name: >= 95% of samples reach main/_start/__libc_start_call_main ($res_root%)" \
		awk -v v="${res_root:-0}" 'BEGIN { exit !(v >= 95) }'
	check "$name: top-10 inclusive shares within 3 points of perf's ($res_diff)" \
		awk -v v="${res_diff:-100}" 'BEGIN { exit !(v <= 3) }'
}

compare xz xz /usr/bin/xz -9 -c "$T/xz.in"
compare sort sort /usr/bin/sort --parallel=1 -S 256M -n "$T/sort.in" -o "$T/sort.out"
compare python python3.11 /usr/bin/python3.11 "$T/loop.py"
compare cxx cpu_unwind_cxx "$CXX_PROG" 40

# The same xz with frame pointers only: junk after the leaf.
"$LT" profile -t cpu --freq 999 -q --cpu-stack-bytes 0 -o "$T/fp.evlog" -- \
	/usr/bin/xz -9 -c "$T/xz.in" >/dev/null 2>"$T/fp.err"
"$DUMP" "$T/fp.evlog" >"$T/fp.txt" 2>&1
: >"$T/empty.perf"
fp_root=$($CHECK "$T/fp.txt" "$T/empty.perf" xz | awk '/^result/ { print $4 }')
echo "# xz with frame pointers only: ${fp_root}% of samples reach the root"
check "frame pointers alone reach the root on xz far less often (${fp_root}% < 50%)" \
	awk -v v="${fp_root:-100}" 'BEGIN { exit !(v < 50) }'
tap_done
