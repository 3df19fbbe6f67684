#!/bin/bash
# -t cpu on a CPU-bound Python workload under /usr/bin/python3.11: the
# native stacks are symbolized inside the interpreter (_PyEval_EvalFrameDefault).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker DUMP=$BUILD/tests/progs/evlog_dump PY=/usr/bin/python3.11
AWK="awk -f $(dirname "$0")/cpu_stacks.awk"
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events)"
[ -x "$PY" ] || skip "$PY not installed"
need_built "$LLMT" "$DUMP"
tap_tmpdir tmp llmt-test

cat >"$tmp/work.py" <<'PY'
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
end = time.process_time() + 1.5  # CPU time: a busy machine delays, not shortens, it
while time.process_time() < end:
    fib(18)
PY
"$LLMT" profile -t cpu -o "$tmp/p.evlog" -- "$PY" "$tmp/work.py" >"$tmp/out" 2>"$tmp/err"
check "profile -t cpu -- python3.11 exits 0" '[ $? = 0 ]'
"$DUMP" "$tmp/p.evlog" >"$tmp/p.txt" 2>&1
samples=$(grep -c '^cpu_sample ' "$tmp/p.txt")
check "samples recorded ($samples)" '[ "$samples" -ge 30 ]'
$AWK -v mode=any "$tmp/p.txt" | sort -rn >"$tmp/any"
head -5 "$tmp/any" | sed 's/^/# in stacks: /'
ev=$(awk '$2=="_PyEval_EvalFrameDefault"{print $1}' "$tmp/any")
check "_PyEval_EvalFrameDefault in the stacks of most samples (${ev:-0}/$samples)" \
	'[ -n "$ev" ] && [ $((ev * 2)) -ge "$samples" ]'
check "interpreter symbols carry the interpreter's path" \
	'grep "^symbol .* name=_PyEval_EvalFrameDefault " "$tmp/p.txt" | grep -q "module=$PY "'
# Frame-pointer unwinding through the interpreter (built without frame
# pointers) meets saved data; such frames must not reach the log.
bad=$(awk '$1 == "cpu_sample" {
	nk = 0; st = ""
	for (i = 2; i <= NF; i++) {
		if ($i ~ /^n_kernel=/) nk = substr($i, 10) + 0
		if ($i ~ /^stack=/) st = substr($i, 7)
	}
	n = split(st, f, ",")
	for (i = nk + 1; i <= n; i++) {
		h = substr(f[i], 3)
		if (length(h) > 12 || (length(h) == 12 && h ~ /^[89a-f]/) || length(h) <= 3) bad++
	}
} END { print bad + 0 }' "$tmp/p.txt")
check "no user frame outside canonical user addresses ($bad)" '[ "$bad" = 0 ]'
miss=$($AWK -v mode=missing "$tmp/p.txt" | awk '{print $1}')
check "every sampled address has a symbol event (missing: $miss)" '[ "$miss" = 0 ]'

# With the injected Python hook: the library is mapped from a memfd, and its
# frames (the profile function on every call) are named, not [anon].
"$LLMT" profile -t cpu,python --python-method hook -o "$tmp/h.evlog" -- "$PY" "$tmp/work.py" \
	>"$tmp/h.out" 2>"$tmp/h.err"
check "profile -t cpu,python --python-method hook exits 0" '[ $? = 0 ]'
"$DUMP" "$tmp/h.evlog" >"$tmp/h.txt" 2>&1
hs=$(grep -c '^cpu_sample ' "$tmp/h.txt")
$AWK -v mode=any "$tmp/h.txt" | sort -rn >"$tmp/hany"
hook=$(awk '$2 == "pyh_profile" { print $1 }' "$tmp/hany")
check "the hook's profile function named in the stacks (${hook:-0} of $hs samples)" \
	'[ "${hook:-0}" -gt 0 ] && grep "^symbol .* name=pyh_profile " "$tmp/h.txt" | grep -q "module=/memfd:llmtracker-inject "'
tap_done
