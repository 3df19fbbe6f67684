#!/bin/bash
# GPU host check of -t python through the injected profile hook, on the
# host's python3.12 (no USDT function probes there), in one call:
#   tests/gpu/pyhook_torch.sh prepare      (here: static collector, the inject
#                                           library, a static evlog_dump -> .carry/)
#   tests/gpu/pyhook_torch.sh run [OUTDIR] (on the GPU host)
# A: `profile -p PID -t python` on a PyTorch loop (tests/workloads/pyh_torch_loop.py)
#    that starts its steps once the collector traces: exact train_step /
#    forward_pass / backward_pass / optimizer_step counts, nesting per thread,
#    output and exit status unchanged, the library gone from the maps after.
# B: the same with --enable-cuda-kernel true: the hook and CUPTI side by side
#    (two copies of the library), exact counts again and kernels recorded.
# Figures: steps/s alone, under A, under B. PASS/FAIL lines; exit 0 if all pass.
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
prepare)
	B=${BUILD:-/tmp/build-pyhook}
	make -j2 BUILD="$B" static "$B/lib/libllmtracker-inject.so" >/dev/null || exit 1
	gcc -O2 -static -D_GNU_SOURCE -I. -o "$B/evlog_dump-static" tests/progs/evlog_dump.c \
		eventlog/*.c common/*.c -lzstd -ldeflate -lnettle || exit 1
	mkdir -p "$CARRY/bin" "$CARRY/lib"
	cp "$B/bin/llmtracker-static" "$CARRY/bin/llmtracker"
	cp "$B/lib/libllmtracker-inject.so" "$CARRY/lib/"
	cp "$B/evlog_dump-static" "$CARRY/bin/evlog_dump"
	ls -la "$CARRY/bin" "$CARRY/lib"
	exit 0;;
run) ;;
*) echo "usage: $0 prepare | run [OUTDIR]"; exit 2;;
esac

OUT=${2:-/tmp/pyhook-torch}
gpu_python /opt/torch/.venv/bin/python3
COLL=$CARRY/bin/llmtracker
DUMP=$CARRY/bin/evlog_dump
LOOP=$PWD/tests/workloads/pyh_torch_loop.py
CHECK=$PWD/tests/integration/python_check.py
STEPS=${STEPS:-300}
mkdir -p "$OUT"
tap_tmpdir W pyhook-torch
gpu_need "$COLL" "$DUMP" "$CARRY/lib/libllmtracker-inject.so"
echo "python: $("$PY" -c 'import sys, sysconfig, torch; print(sys.executable, sys.version.split()[0], "WITH_DTRACE", sysconfig.get_config_var("WITH_DTRACE"), "torch", torch.__version__, "cuda", torch.cuda.is_available())')"
rate() { awk '/^pyh_torch done/ { print $4 }' "$1"; }

# alone: the loop's steps/s without profiling
mkdir -p "$W/alone"; touch "$W/alone/go" "$W/alone/hold"
"$PY" "$LOOP" "$STEPS" "$W/alone/ready" "$W/alone/go" "$W/alone/hold" > "$W/alone/out" 2>&1
echo "INFO alone: $(cat "$W/alone/out")"

run_case() { # TAG EXTRA-ARGS...
	local tag=$1 d=$W/$1 tp cp; shift
	mkdir -p "$d"
	"$PY" "$LOOP" "$STEPS" "$d/ready" "$d/go" "$d/hold" > "$d/out" 2> "$d/stderr" & tp=$!
	wait_until 60 '[ -e "$d/ready" ]'
	[ -e "$d/ready" ] || { bad "[$tag] loop did not start"; cat "$d/stderr"; kill $tp; return; }
	"$COLL" profile -p $tp -t python -o "$d/c.log" --cupti-dir "$d" -v 1 "$@" > "$OUT/$tag.collector.log" 2>&1 & cp=$!
	wait_for "$OUT/$tag.collector.log" "tracing functions|cannot trace" 30 && touch "$d/go"
	wait_for "$d/out" "pyh_torch done" 120
	local during; during=$(grep -c "memfd:llmtracker-inject" /proc/$tp/maps)
	kill -INT $cp; wait $cp; local crc=$?
	local after; after=$(grep -c "memfd:llmtracker-inject" /proc/$tp/maps)
	touch "$d/hold"; wait $tp; local rc=$?
	grep -E "python|pid $tp|cuda|CUPTI|W[0-9]{4}" "$OUT/$tag.collector.log" | cut -c1-240 | head -12 | sed "s/^/INFO [$tag] /"
	echo "INFO [$tag] $(cat "$d/out"); library mappings during $during, after $after"
	grep -q "tracing functions through the injected profile hook" "$OUT/$tag.collector.log" &&
		pass "[$tag] traced through the injected hook" || bad "[$tag] the hook did not go in"
	"$DUMP" "$d"/llmtracker-python.*.evlog > "$d/dump" 2>/dev/null
	python3 "$CHECK" train_step=$STEPS forward_pass=$STEPS backward_pass=$STEPS optimizer_step=$STEPS \
		< "$d/dump" > "$d/check"; local ck=$?
	sed "s/^/INFO [$tag] /" "$d/check"
	[ $ck = 0 ] && pass "[$tag] exact counts ($STEPS steps), nested per thread" || bad "[$tag] counts or nesting"
	[ $crc = 0 ] && [ $rc = 3 ] && [ ! -s "$d/stderr" ] && pass "[$tag] collector exit 0, target exit 3, no stderr" ||
		bad "[$tag] collector exit $crc, target exit $rc, stderr: $(head -c 300 "$d/stderr")"
	# B: CUPTI's copy of the library stays until CUPTI lets go (an idle loop
	# makes no CUDA call to finalize at), so only A must be clean.
	if [ "$tag" = A ]; then
		[ "$after" = 0 ] && pass "[$tag] library unloaded after detach" ||
			bad "[$tag] $after library mappings left after detach"
	fi
	echo "INFO [$tag] top functions: $(awk '$1 == "py_enter" { for (i = 2; i <= NF; i++) if ($i ~ /^func=/) print $i }' "$d/dump" | sort | uniq -c | sort -rn | head -8 | tr -s ' ' | tr '\n' ',')"
}
run_case A
run_case B --enable-cuda-kernel true
k=$(ls "$W/B"/llmtracker-cupti.*.evlog 2>/dev/null | head -1)
if [ -n "$k" ]; then
	nk=$("$DUMP" "$k" 2>/dev/null | grep -c '^gpu_kernel')
	[ "$nk" -gt 0 ] && pass "[B] CUPTI log beside the hook's: $nk kernels" || bad "[B] CUPTI log has no kernels"
else
	bad "[B] no CUPTI log (see $OUT/B.collector.log)"
fi
echo "FIGURES steps/s: alone $(rate "$W/alone/out"), hook $(rate "$W/A/out"), hook+CUPTI $(rate "$W/B/out")"
tar -C "$W" -czf "$OUT/logs.tar.gz" A B 2>/dev/null
gpu_done
