#!/bin/bash
# Multi-rank NCCL job profiled on every rank, one merged run (issue: two ranks
# on two GPUs). One call on the GPU machine:
#   tests/gpu/nccl_two_rank.sh run OUTDIR [WORLD]   (WORLD=2 by default; 1 on one GPU)
# then, here (the converter needs nothing from the node):
#   tests/gpu/nccl_two_rank.sh check OUTDIR
# Needs .carry/ filled by `tests/gpu/cupti_attach.sh prepare` (static collector,
# inject library, default probe file).
set -u
. "$(dirname "$0")/common.inc"
gpu_python /opt/torch/.venv/bin/python3
mode=${1:-}; OUT=${2:-/tmp/nccl-ranks}; WORLD=${3:-2}

run() {
	local W COLL=$CARRY/bin/llmtracker rc
	tap_tmpdir W nccl-ranks
	mkdir -p "$OUT" "$W/logs"
	gpu_host "$WORLD"
	echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"
	PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 "$PY" tests/gpu/nccl_two_rank.py --dir "$W" \
		--seconds 24 --world "$WORLD" >"$OUT/ranks.log" 2>&1 &
	local job=$!
	wait_until 120 '[ "$(ls "$W"/rank*.pid 2>/dev/null | wc -l)" -ge "$WORLD" ] || ! kill -0 $job 2>/dev/null'
	local pids=()
	for f in "$W"/rank*.pid; do pids+=(-p "$(cat "$f")"); done
	[ ${#pids[@]} -ge "$WORLD" ] || { echo "FAIL ranks did not start"; tail -30 "$OUT/ranks.log"; exit 1; }
	echo "INFO ranks: ${pids[*]}"
	sleep 5    # steps/s before profiling
	"$COLL" profile "${pids[@]}" -t cuda,syscall,cpu --enable-cuda-kernel true -d 5 --delay 3 -v 1 \
		-o "$W/logs/node.evlog" --cupti-dir "$W/logs" >"$OUT/collector.log" 2>&1
	rc=$?
	echo "INFO collector exit $rc"
	tail -12 "$OUT/collector.log"
	wait $job
	echo "INFO job exit $?"
	tail -3 "$OUT/ranks.log"
	cp "$W"/rank*.json "$W/logs/"
	tar -C "$W" -czf "$OUT/nccl-logs.tar.gz" logs
	ls -la "$W/logs"
}

check_logs() {
	local B=${BUILD:-build} T
	tap_tmpdir T nccl-check
	tar -C "$T" -xzf "$OUT/nccl-logs.tar.gz" || exit 1
	"$B/bin/llmtracker-convert" -i "$T/logs" --logdir "$T/tb" --run nccl -o "$T/trace.json.gz" || {
		echo "FAIL conversion"; exit 1; }
	python3 tests/gpu/nccl_check.py "$T/trace.json.gz" "$T/logs" "$T/tb/plugins/profile/nccl" || exit 1
	# One session: every CUPTI log carries the node log's session id, and the
	# node log alone brings them all (the same kernels as the whole directory).
	local s f k_all k_alone
	s=$("$B/bin/llmtracker-convert" dump "$T/logs/node.evlog" | sed -n '/^# session=/p;/^[^#]/q')
	for f in "$T"/logs/llmtracker-cupti.*.evlog; do
		[ "$("$B/bin/llmtracker-convert" dump "$f" | sed -n '/^# session=/p;/^[^#]/q')" = "$s" ] ||
			{ echo "FAIL $f: not of the node log's session ($s)"; exit 1; }
	done
	"$B/bin/llmtracker-convert" -q -i "$T/logs/node.evlog" -o "$T/alone.json.gz" || exit 1
	k_all=$(zcat "$T/trace.json.gz" | grep -o '"cat":"kernel"' | wc -l)
	k_alone=$(zcat "$T/alone.json.gz" | grep -o '"cat":"kernel"' | wc -l)
	[ -n "$s" ] && [ "$k_alone" = "$k_all" ] && [ "$k_all" -gt 0 ] ||
		{ echo "FAIL the node log alone: $k_alone kernels, the directory: $k_all (session '$s')"; exit 1; }
	echo "PASS one session ($s): the node log alone brings all $k_all kernels"
}

case "$mode" in
run) run ;;
check) check_logs ;;
*) echo "usage: $0 run OUTDIR [WORLD] | check OUTDIR"; exit 2 ;;
esac
