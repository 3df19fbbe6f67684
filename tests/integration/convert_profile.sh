#!/bin/bash
# End to end: `llmtracker profile -t syscall,cpu` on a real program, then
# llmtracker-convert to trace JSON: the independent checker passes, read()
# system calls are named, CPU samples carry symbolized stacks down to
# burn_alpha, and the folded-stack file's hottest leaves are burn_alpha and
# burn_beta.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT_ROOT=${LLMT_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
llmt=$BUILD/bin/llmtracker conv=$BUILD/bin/llmtracker-convert prog=$BUILD/tests/progs/cpu_two_funcs
json_check="python3 $LLMT_ROOT/tests/integration/convert_check.py"
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events)"
need_built "$llmt" "$conv" "$prog"
tap_tmpdir dir convert-profile

desc="profile -t syscall,cpu -- cpu_two_funcs (1 s)"
t "$llmt" profile -t syscall,cpu -o "$dir/p.log" -- "$prog" 1 0.15
desc="convert to JSON.gz; the independent checker passes"
t bash -c "'$conv' -q -i '$dir/p.log' -o '$dir/p.json.gz' && $json_check '$dir/p.json.gz' --min-events 50"
desc="read() system calls by name with ret/fd/size, CPU samples with burn_alpha stacks"
t python3 - "$dir/p.json.gz" <<'EOF'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
reads = [e for e in ev if e.get("cat") == "syscall" and e["name"] == "read"]
assert len(reads) >= 10, len(reads)
assert all({"ret", "fd", "size"} <= e["args"].keys() for e in reads)
samples = [e for e in ev if e.get("cat") == "cpu_sample"]
# 99 Hz of the program's time on a CPU: a machine busy elsewhere gives it
# less of its second (18 seen under load 12 on 2 cores).
assert len(samples) >= 5, len(samples)
assert any(e["args"]["stack"].split(";")[-1] == "burn_alpha" for e in samples)
assert any("main" in e["args"]["stack"].split(";") for e in samples)
names = {e["args"]["name"] for e in ev if e.get("name") == "process_name"}
assert any("cpu_two_funcs" in n for n in names), names
EOF
# The program spins ~2/3 in burn_alpha and ~1/3 in burn_beta: with 30
# samples or more burn_alpha leads (a chance of a flip under 1 in 300);
# a machine busy elsewhere may leave fewer, where only both leading counts.
desc="folded stacks: the hottest leaves are burn_alpha, then burn_beta"
t bash -c "f=\$(ls '$dir'/*.cpu.folded) && awk '{n=split(\$1,a,\";\"); c[a[n]]+=\$NF} END {for (k in c) print c[k], k}' \"\$f\" | \
	sort -rn | head -5 >'$dir/leaves' && awk 'NR == 1 { t1 = \$2; n1 = \$1 } NR == 2 { t2 = \$2; n2 = \$1 }
		END { exit !((t1 == \"burn_alpha\" && t2 == \"burn_beta\") || (n1 + n2 < 30 && t1 t2 == \"burn_betaburn_alpha\")) }' '$dir/leaves' ||
	{ echo 'top leaves (samples, leaf):'; cat '$dir/leaves'; exit 1; }"
tap_done
