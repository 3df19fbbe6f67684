#!/bin/bash
# Converter throughput and memory on realistic mixed logs (tests/progs/
# conv_genlog) of 1 M, 3 M and 10 M events: events per second per CPU core
# (events in the log / user+sys time of the converter, end to end: both
# passes, sort, output) and peak RSS, for trace JSON (plain and .gz) and for
# the TensorBoard run directory (XPlane + JSON.gz + folded), side by side
# with plain `gzip -6` and `zstd -3` compressing the JSON the converter
# wrote, and with `cat` copying that JSON through the page cache (what
# writing those bytes costs the kernel when buffered: the converter writes
# big outputs with O_DIRECT past their first 32 MiB, tb_layout/tb_seq.h;
# "user only" leaves the kernel's share out), and the --logdir conversion
# again with the profile-guided release build (make release) where make
# bench built one. Figures are printed,
# never asserted; the last lines say whether each output meets the goal of
# 3 M events/s per core on the largest log.
#   BENCH_CONVERT_SIZES="1000000 3000000 10000000" (default) to choose the sizes.
set -u
BUILD=${BUILD:-build}
conv=$BUILD/bin/llmtracker-convert
gen=$BUILD/tests/progs/conv_genlog
release=${RELEASE_CONV:-build-release/bin/llmtracker-convert}
for p in "$conv" "$gen"; do [ -x "$p" ] || { echo "$p not built"; exit 1; }; done
dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-convert.XXXXXX")
trap 'rm -rf "$dir"' EXIT
GOAL=3000000
rate=0

# measure LABEL EVENTS CMD...: one line "label  wall  cpu  events/s/core  peak RSS";
# sets $rate (events per CPU second).
measure() {
	local label=$1 events=$2
	shift 2
	rate=0
	/usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$@" >"$dir/stdout" 2>"$dir/stderr" || {
		echo "  $label: failed"; sed 's/^/    /' "$dir/stderr" | tail -3; return 1; }
	read -r wall user sys rss <"$dir/time"
	rate=$(awk -v u="$user" -v s="$sys" -v n="$events" 'BEGIN {
		cpu = u + s; if (cpu <= 0) cpu = 0.01; printf "%.0f", n / cpu }')
	awk -v l="$label" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v n="$events" 'BEGIN {
		cpu = u + s; if (cpu <= 0) cpu = 0.01
		printf "  %-36s wall %6.2f s  cpu %6.2f s (sys %5.2f)  %5.2f M events/s/core (user only %5.2f)  peak RSS %5.0f MiB\n",
			l, w, cpu, s, n / cpu / 1e6, n / (u > 0 ? u : 0.01) / 1e6, r / 1024 }'
}

size_of() { stat -c %s "$1" | awk '{ printf "%.1f MiB", $1 / 1048576 }'; }

declare -A last
for n in ${BENCH_CONVERT_SIZES:-1000000 3000000 10000000}; do
	log=$dir/bench.log
	rm -f "$log"
	echo "--- ~$n events (mixed: syscalls, CPU/Python samples, Python calls, CUDA launches, kernels, copies)"
	measure "generate log (writer)" "$n" "$gen" "$log" -n "$n" || continue
	# The generator writes whole steps: rates count what it really wrote.
	events=$(awk '/events/ { for (i = 1; i < NF; i++) if ($i == "events") print $(i + 1) }' "$dir/stdout")
	events=${events:-$n}
	echo "  log: $events events, $(size_of "$log")"
	# its own directory: the folded stacks beside each trace are named after it
	mkdir -p "$dir/gz"
	measure "convert -> trace.json.gz" "$events" "$conv" -q -i "$log" -o "$dir/gz/out.json.gz"
	last[json.gz]=$rate
	measure "convert -> trace.json (plain)" "$events" "$conv" -q -i "$log" -o "$dir/out.json"
	last[json]=$rate
	measure "convert -> --logdir (xplane+json.gz)" "$events" "$conv" -q -i "$log" --logdir "$dir/tb" --run r
	last[logdir]=$rate
	# The same with the profile-guided release build (make bench builds it
	# with GCC): what profile guidance is worth. The default build's rate
	# stays the one judged below.
	if [ -x "$release" ]; then
		plain_rate=$rate
		rm -rf "$dir/tb"
		measure "  same, release build (PGO)" "$events" "$release" -q -i "$log" --logdir "$dir/tb" --run r
		awk -v a="$rate" -v b="$plain_rate" 'BEGIN { if (b > 0) printf "  profile-guided build: %.2fx the events/s of the default build\n", a / b }'
		rate=$plain_rate
	fi
	# The default recording: kernels without CUPTI's API records, launches
	# linked by the converter from the uprobes' calls (launchpair.c).
	rm -rf "$dir/tb"
	lev=$("$gen" "$dir/links.log" -n "$n" --launch-args | awk '{ print $4 }') &&
		measure "  same, launches linked by the converter" "$lev" "$conv" -q -i "$dir/links.log" \
			--logdir "$dir/tb" --run r
	rm -f "$dir/links.log"
	# The same with a CUDA graph of 800 kernels replayed each step (the GPT
	# graph loop's shape, ~860): most of the log is graph kernels.
	rm -rf "$dir/tb"
	lev=$("$gen" "$dir/links.log" -n "$n" --launch-args --graph 800 | awk '{ print $4 }') &&
		measure "  same, a CUDA graph replayed a step" "$lev" "$conv" -q -i "$dir/links.log" \
			--logdir "$dir/tb" --run r
	rm -f "$dir/links.log"
	echo "  outputs: json $(size_of "$dir/out.json"), json.gz $(size_of "$dir/gz/out.json.gz"), run dir $(du -sm "$dir/tb" | cut -f1) MiB"
	measure "cat of that JSON (write cost)" "$events" sh -c "cat '$dir/out.json' > '$dir/copy.json'"
	rm -f "$dir/copy.json"
	measure "gzip -6 of that JSON" "$events" gzip -6 -k -f "$dir/out.json"
	echo "    -> $(size_of "$dir/out.json.gz")"
	measure "zstd -3 of that JSON" "$events" zstd -3 -q -f "$dir/out.json" -o "$dir/out.json.zst"
	echo "    -> $(size_of "$dir/out.json.zst")"
	rm -rf "$dir/tb" "$dir/gz" "$dir"/out.* "$log"
done
for k in json.gz json logdir; do
	[ -n "${last[$k]:-}" ] || continue
	awk -v k="$k" -v r="${last[$k]}" -v g="$GOAL" 'BEGIN {
		printf "goal >= 3 M ev/s per core, %-7s: %s (%.2f M)\n", k, (r >= g) ? "met" : "not met", r / 1e6 }'
done
exit 0
