#!/bin/bash
# Converter throughput and memory on realistic mixed logs (tests/progs/
# conv_genlog) of 1 M and 10 M events: events per second per CPU core
# (user+sys time, end to end: both passes, sort, output) and peak RSS, for
# trace JSON.gz and for the TensorBoard run directory (XPlane + JSON.gz +
# folded), side by side with plain `gzip -6` and `zstd -3` compressing the
# JSON the converter wrote. Figures are printed, never asserted.
#   BENCH_CONVERT_SIZES="1000000 10000000" (default) to choose the sizes.
set -u
BUILD=${BUILD:-build}
conv=$BUILD/bin/llmtracker-convert
gen=$BUILD/tests/progs/conv_genlog
for p in "$conv" "$gen"; do [ -x "$p" ] || { echo "$p not built"; exit 1; }; done
dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-convert.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# measure LABEL EVENTS CMD...: one line "label  wall  cpu  events/s/core  peak RSS"
measure() {
	local label=$1 events=$2
	shift 2
	/usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$@" >/dev/null 2>"$dir/stderr" || {
		echo "  $label: failed"; sed 's/^/    /' "$dir/stderr" | tail -3; return 1; }
	read -r wall user sys rss <"$dir/time"
	awk -v l="$label" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v n="$events" 'BEGIN {
		cpu = u + s; if (cpu <= 0) cpu = 0.01
		printf "  %-34s wall %7.2f s  cpu %7.2f s  %6.2f M events/s/core  peak RSS %6.0f MiB\n",
			l, w, cpu, n / cpu / 1e6, r / 1024 }'
}

size_of() { stat -c %s "$1" | awk '{ printf "%.1f MiB", $1 / 1048576 }'; }

for n in ${BENCH_CONVERT_SIZES:-1000000 10000000}; do
	echo "--- $n events (mixed: syscalls, CPU/Python samples, Python calls, CUDA launches, kernels, copies)"
	log=$dir/bench.log
	rm -f "$log"
	measure "generate log (writer)" "$n" "$gen" "$log" -n "$n" || continue
	echo "  log: $(size_of "$log")"
	measure "convert -> trace.json.gz" "$n" "$conv" -q -i "$log" -o "$dir/out.json.gz"
	measure "convert -> trace.json (plain)" "$n" "$conv" -q -i "$log" -o "$dir/out.json"
	measure "convert -> --logdir (xplane+json.gz)" "$n" "$conv" -q -i "$log" --logdir "$dir/tb" --run r
	echo "  outputs: json $(size_of "$dir/out.json"), json.gz $(size_of "$dir/out.json.gz"), run dir $(du -sm "$dir/tb" | cut -f1) MiB"
	measure "gzip -6 of that JSON" "$n" gzip -6 -k -f "$dir/out.json"
	echo "    -> $(size_of "$dir/out.json.gz")"
	measure "zstd -3 of that JSON" "$n" zstd -3 -q -f "$dir/out.json" -o "$dir/out.json.zst"
	echo "    -> $(size_of "$dir/out.json.zst")"
	rm -rf "$dir/tb" "$dir/out.json"* "$log"
done
exit 0
