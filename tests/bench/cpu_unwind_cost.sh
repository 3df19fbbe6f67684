#!/bin/bash
# Cost of whole native stacks (-t cpu, CFI unwinding of a copied stack
# slice) against `perf record -e cpu-clock --call-graph dwarf` (its default
# 8 KiB copy, and ours: 16 KiB) on one workload built without frame pointers
# (Debian's xz -9 on a fixed input), at 99 Hz and 999 Hz, side by side:
#   target CPU   the workload's user+sys seconds, over its time alone (the
#                sampling interrupt and the stack copy are charged to it)
#   tool CPU     the collector's CPU (unwinding and symbols included); perf
#                record's + `perf script`'s (perf unwinds there)
#   bytes/sample what each writes per sample (our ring-buffer records are
#                transient: the log keeps the unwound addresses only)
# and our BPF program's own time per sample (kernel.bpf_stats_enabled,
# restored), with the stack copy and with frame pointers only.
# The configurations alternate over ROUNDS rounds (CPU_UNWIND_BENCH_ROUNDS,
# 3); each figure is the least over the rounds (others' load only adds).
# Prints figures; asserts nothing.
set -u
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker
ROUNDS=${CPU_UNWIND_BENCH_ROUNDS:-3}
[ "$(id -u)" = 0 ] || { echo "cpu_unwind_cost: needs root, skipped"; exit 0; }
command -v perf >/dev/null && [ -x /usr/bin/xz ] && [ -x /usr/bin/time ] ||
	{ echo "cpu_unwind_cost: needs perf, /usr/bin/xz and /usr/bin/time, skipped"; exit 0; }
stats_old=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
tmp=$(mktemp -d)
trap 'sysctl -qw kernel.bpf_stats_enabled="$stats_old" 2>/dev/null; rm -rf "$tmp"' EXIT
head -c "${CPU_UNWIND_BENCH_BYTES:-1500000}" /dev/urandom | base64 -w 100 >"$tmp/in"
WORK=(/usr/bin/time -f "%U %S" -o "$tmp/target" /usr/bin/xz -9 -c "$tmp/in")
secs() { awk '{ print $1 + $2 }' "$1"; } # a /usr/bin/time -f "%U %S" file
declare -A tgt tool n bytes
keep_min() { # keep_min ARRAY KEY VALUE
	local -n a=$1
	if [ -z "${a[$2]:-}" ] || awk -v x="$3" -v y="${a[$2]}" 'BEGIN { exit !(x < y) }'; then
		a[$2]=$3
	fi
}

run_alone() {
	"${WORK[@]}" >/dev/null
	keep_min tgt alone "$(secs "$tmp/target")"
}

run_ours() { # HZ
	local k="llmtracker $1 Hz" logb ring
	rm -f "$tmp/o.evlog"
	"$LLMT" profile -t cpu --freq "$1" -q -v 1 -o "$tmp/o.evlog" -- "${WORK[@]}" \
		>/dev/null 2>"$tmp/o.err"
	keep_min tgt "$k" "$(secs "$tmp/target")"
	keep_min tool "$k" "$(sed -n 's/.*collector CPU \([0-9.]*\) s.*/\1/p' "$tmp/o.err")"
	n[$k]=$(awk '$1 == "cpu" { print $2 }' "$tmp/o.err")
	logb=$(stat -c %s "$tmp/o.evlog")
	ring=$(sed -n 's/.* \([0-9]*\) ring-buffer bytes per sample.*/\1/p' "$tmp/o.err")
	bytes[$k]=$(awk -v b="$logb" -v n="${n[$k]}" -v r="$ring" \
		'BEGIN { printf "%.0f log, %s ring", n ? b / n : 0, r }')
}

run_perf() { # HZ STACK_BYTES
	local k="perf dwarf,$2 $1 Hz" t rec scr
	rm -f "$tmp/p.data"
	/usr/bin/time -f "%U %S" -o "$tmp/perf.t" perf record -q -e cpu-clock -F "$1" \
		--call-graph "dwarf,$2" -o "$tmp/p.data" -- "${WORK[@]}" >/dev/null 2>&1
	t=$(secs "$tmp/target")
	keep_min tgt "$k" "$t"
	rec=$(awk -v a="$(secs "$tmp/perf.t")" -v t="$t" 'BEGIN { print a - t }')
	/usr/bin/time -f "%U %S" -o "$tmp/script.t" perf script -i "$tmp/p.data" \
		-F comm,pid,ip,sym,dso --no-inline >"$tmp/p.txt" 2>/dev/null
	scr=$(secs "$tmp/script.t")
	keep_min tool "$k" "$(awk -v a="$rec" -v b="$scr" 'BEGIN { print a + b }')"
	n[$k]=$(grep -c '^[^[:space:]]' "$tmp/p.txt")
	bytes[$k]=$(awk -v b="$(stat -c %s "$tmp/p.data")" -v n="${n[$k]}" \
		'BEGIN { printf "%.0f", n ? b / n : 0 }')
}

CONFIGS=("llmtracker 99 Hz" "perf dwarf,8192 99 Hz" "perf dwarf,16384 99 Hz"
	 "llmtracker 999 Hz" "perf dwarf,8192 999 Hz" "perf dwarf,16384 999 Hz")
for ((r = 0; r < ROUNDS; r++)); do
	run_alone
	for hz in 99 999; do
		run_ours "$hz"
		run_perf "$hz" 8192
		run_perf "$hz" 16384
	done
done
printf "xz -9 alone: %.2f s CPU (least of %d runs)\n" "${tgt[alone]}" "$ROUNDS"
printf "%-24s %7s %8s %8s %10s %10s %7s %20s\n" "" "target" "target" "tool" "tool/ours" \
	"tool per" "samples" "bytes per sample"
printf "%-24s %7s %8s %8s %10s %10s %7s %20s\n" "" "CPU s" "x alone" "CPU s" "same Hz" \
	"sample" "" ""
for k in "${CONFIGS[@]}"; do
	hz=${k% Hz}; hz=${hz##* }
	awk -v k="$k" -v t="${tgt[$k]}" -v a="${tgt[alone]}" -v c="${tool[$k]}" \
	    -v o="${tool[llmtracker $hz Hz]}" -v n="${n[$k]}" -v b="${bytes[$k]}" 'BEGIN {
		printf "%-24s %7.2f %8.3f %8.3f %10.2f %8.0f us %7d %20s\n", k, t, t / a, c,
			o ? c / o : 0, n ? c * 1e6 / n : 0, n, b }'
done

# The BPF program's time per sample, in the target's interrupt. Other
# profilers may run an lt_cpu_sample too: ours is the one that appeared
# after our collector started.
prog_stats() { # [ID]: "id run_time_ns run_cnt" of each lt_cpu_sample (or of ID)
	bpftool -j prog show name lt_cpu_sample 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        p = json.loads(line)
    except ValueError:
        continue
    for q in p if isinstance(p, list) else [p]:
        if len(sys.argv) < 2 or str(q["id"]) == sys.argv[1]:
            print(q["id"], q.get("run_time_ns", 0), q.get("run_cnt", 0))' "$@" 2>/dev/null
}
head -c 6000000 /dev/urandom | base64 -w 100 >"$tmp/big"
bpf_us() { # STACK_BYTES: profile a running xz for 3 s at 999 Hz
	local xz col before id="" i
	before=$(prog_stats | awk '{ print $1 }')
	/usr/bin/xz -9 -c "$tmp/big" >/dev/null & xz=$!
	"$LLMT" profile -t cpu --freq 999 --cpu-stack-bytes "$1" -q -d 3 -p "$xz" \
		-o "$tmp/s$1.evlog" >/dev/null 2>"$tmp/s$1.err" & col=$!
	for ((i = 0; i < 200; i++)); do # loaded and attached
		sleep 0.05
		id=$(prog_stats | awk -v b=" $(echo $before) " 'index(b, " " $1 " ") == 0 { print $1 }' | tail -1)
		[ -n "$id" ] && break
	done
	sleep 1.5
	[ -n "$id" ] && st=$(prog_stats "$id") || st=""
	wait "$col"; kill "$xz" 2>/dev/null; wait "$xz" 2>/dev/null
	# run_cnt counts every CPU's ticks, the other processes' too (they
	# return at once): per run is a lower bound of a target sample's time.
	echo "$st" | awk '$3 > 0 { printf "%.2f us per run (%d runs)", $2 / $3 / 1000, $3; ok = 1 }
		END { if (!ok) printf "n/a" }'
}
sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null
for ((r = 0; r < ROUNDS; r++)); do
	echo "BPF program at 999 Hz on xz: $(bpf_us 16384) with the 16 KiB stack copy;" \
		"$(bpf_us 0) with frame pointers only"
done
