#!/bin/bash
# -t cpu on targets whose binary the host cannot open by path: a copy in a
# private tmpfs of another mount namespace (as in a container), and a copy
# deleted while it runs. Symbols come through /proc/PID/map_files or
# /proc/PID/root.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker DUMP=$BUILD/tests/progs/evlog_dump PROG=$(readlink -f "$BUILD/tests/progs/cpu_two_funcs")
AWK="awk -f $(dirname "$0")/cpu_stacks.awk"
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events, mount namespaces)"
unshare -m true 2>/dev/null || skip "cannot create a mount namespace here"
need_built "$LLMT" "$DUMP" "$PROG"
tap_tmpdir tmp llmt-test

# unshare -> sh -> exec the copy: one pid, two execs (maps re-read on exec).
ns=$tmp/ns; mkdir -p "$ns"
"$LLMT" profile -t cpu -o "$tmp/c.evlog" -- unshare -m --propagation private sh -c \
	"mount -t tmpfs none $ns && cp $PROG $ns/prog && exec $ns/prog 1.5 0" >"$tmp/out" 2>"$tmp/err"
check "profile -- unshare -m ... exits 0" '[ $? = 0 ]'
check "the copy is not visible from the host" '[ ! -e "$ns/prog" ]'
"$DUMP" "$tmp/c.evlog" >"$tmp/c.txt" 2>&1
$AWK -v mode=leaf "$tmp/c.txt" | sort -rn >"$tmp/leaf"
head -3 "$tmp/leaf" | sed 's/^/# leaf: /'
# The 2:1 split itself is checked by cpu_two_funcs.sh; here, where the
# binary lives elsewhere, what matters is that both functions are named.
check "other mount namespace: burn_alpha and burn_beta are the top leaves" \
	'[ "$(head -2 "$tmp/leaf" | awk "{print \$2}" | sort | tr "\n" " ")" = "burn_alpha burn_beta " ]'
check "module path is the path inside the namespace" \
	'grep "^symbol .* name=burn_alpha " "$tmp/c.txt" | grep -q "module=$ns/prog "'

# A copy deleted while it runs (a child of the launched shell: followed).
cp "$PROG" "$tmp/gone"
"$LLMT" profile -t cpu -o "$tmp/d.evlog" -- sh -c \
	"$tmp/gone 1.5 0 & until [ \"\$(readlink /proc/\$!/exe)\" = $tmp/gone ] || ! kill -0 \$!; do sleep 0.05; done
	 rm -f $tmp/gone; wait" >"$tmp/out2" 2>"$tmp/err2"
check "profile -- (binary deleted while running) exits 0" '[ $? = 0 ]'
check "the binary is gone" '[ ! -e "$tmp/gone" ]'
"$DUMP" "$tmp/d.evlog" >"$tmp/d.txt" 2>&1
$AWK -v mode=leaf "$tmp/d.txt" | sort -rn >"$tmp/dleaf"
head -3 "$tmp/dleaf" | sed 's/^/# leaf: /'
# The 2:1 split itself is checked by cpu_two_funcs.sh; here, where the
# binary lives elsewhere, what matters is that both functions are named.
check "deleted binary: burn_alpha and burn_beta are the top leaves" \
	'[ "$(head -2 "$tmp/dleaf" | awk "{print \$2}" | sort | tr "\n" " ")" = "burn_alpha burn_beta " ]'
tap_done
