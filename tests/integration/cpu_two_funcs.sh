#!/bin/bash
# -t cpu on a program spending ~2/3 of its time in burn_alpha and ~1/3 in
# burn_beta, then a short read(/dev/zero) phase: the two functions are the
# top leaves in that order, the read phase has symbolized kernel frames,
# every sampled address has a symbol; both the launch (--) and -p forms.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker DUMP=$BUILD/tests/progs/evlog_dump PROG=$BUILD/tests/progs/cpu_two_funcs
AWK="awk -f $(dirname "$0")/cpu_stacks.awk"
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events)"
need_built "$LLMT" "$DUMP" "$PROG"
tap_tmpdir tmp llmt-test

# 2 s of the program's CPU time (not wall time: a busy machine delays it
# but samples the same work), 99 Hz: ~200 samples.
"$LLMT" profile -t cpu -o "$tmp/a.evlog" -- "$PROG" 2 0.1 cpu >"$tmp/a.out" 2>"$tmp/a.err"
check "profile -t cpu -- PROG exits 0" '[ $? = 0 ]'
"$DUMP" "$tmp/a.evlog" >"$tmp/a.txt" 2>&1
samples=$(grep -c '^cpu_sample ' "$tmp/a.txt")
check "at least 100 samples in 2 CPU seconds at 99 Hz (got $samples)" '[ "$samples" -ge 100 ]'
$AWK -v mode=leaf "$tmp/a.txt" | sort -rn >"$tmp/leaf"
head -4 "$tmp/leaf" | sed 's/^/# leaf: /'
check "top leaf symbols: burn_alpha then burn_beta" \
	'[ "$(head -2 "$tmp/leaf" | awk "{print \$2}" | tr "\n" " ")" = "burn_alpha burn_beta " ]'
a=$(awk '$2=="burn_alpha"{print $1}' "$tmp/leaf"); b=$(awk '$2=="burn_beta"{print $1}' "$tmp/leaf")
check "burn_alpha/burn_beta ratio near 2, 1.2-5 on a loaded machine (got $a/$b)" \
	'[ -n "$a" ] && [ -n "$b" ] && [ $((a * 10)) -ge $((b * 12)) ] && [ $((a * 10)) -le $((b * 50)) ]'
$AWK -v mode=any "$tmp/a.txt" | sort -rn >"$tmp/any"
kern=$(awk '$6 != "n_kernel=0"' "$tmp/a.txt" | grep -c '^cpu_sample ')
check "read phase: samples with kernel frames ($kern)" '[ "$kern" -ge 3 ]'
check "kernel frames symbolized from kallsyms (vfs_read in stacks)" 'grep -q " vfs_read$" "$tmp/any"'
check "user stack walked to main" 'grep -q " main$" "$tmp/any"'
check "kernel symbols use pid 0 and [kernel.kallsyms]" \
	'grep "^symbol " "$tmp/a.txt" | grep " pid=0 " | grep -q "module=\[kernel.kallsyms\]"'
miss=$($AWK -v mode=missing "$tmp/a.txt" | awk '{print $1}')
check "every sampled address has a symbol event (missing: $miss)" '[ "$miss" = 0 ]'
check "symbols name the module path" \
	'grep "^symbol .* name=burn_alpha " "$tmp/a.txt" | grep -q "module=$(readlink -f "$PROG")\|module=$PROG"'

# Attach form: -p PID of a running process, -d; it runs on to a clean exit.
"$PROG" 4 0 cpu >/dev/null & pid=$!
wait_exec "$pid" "$PROG"
"$LLMT" profile -t cpu -p "$pid" -d 2 -o "$tmp/b.evlog" >"$tmp/b.out" 2>"$tmp/b.err"
check "profile -t cpu -p PID -d 2 exits 0" '[ $? = 0 ]'
check "-p: the target is still running after detach" 'kill -0 "$pid" 2>/dev/null'
wait "$pid"; rc=$?
check "-p: the target then exits normally (status $rc)" '[ "$rc" = 0 ]'
"$DUMP" "$tmp/b.evlog" >"$tmp/b.txt" 2>&1
$AWK -v mode=leaf -v pid="$pid" "$tmp/b.txt" | sort -rn >"$tmp/bleaf"
sed 's/^/# -p leaf: /' "$tmp/bleaf" | head -3
grep -E "samples|lost|cpu" "$tmp/b.err" | head -4 | sed 's/^/# -p: /'
check "-p: burn_alpha is the top leaf" '[ "$(head -1 "$tmp/bleaf" | awk "{print \$2}")" = burn_alpha ]'
tap_done
