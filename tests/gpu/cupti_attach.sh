#!/bin/bash
# GPU validation of --enable-cuda-kernel by attach, in one call:
#   tests/gpu/cupti_attach.sh prepare     (here: build what the GPU host lacks
#                                          into .carry/: static collector, the
#                                          inject library, static tools)
#   tests/gpu/cupti_attach.sh run [OUTDIR] (on the GPU host)
# The run starts a launch-bound PyTorch training loop, attaches twice with
# `llmtracker profile -p PID --enable-cuda-kernel true -d 5 --delay 3`
# (A: -t cpu, B: -t cuda, to compare uprobe and CUPTI timestamps), and twice
# with the injector tool alone (C: default recording, D: kernels only), then the
# loop profiles the same number of steps with torch.profiler; the analysis
# prints PASS/FAIL lines and steps/s before, during and after.
set -u
cd "$(dirname "$0")/../.."
CARRY=${CARRY:-.carry}
case "${1:-}" in
prepare)
	B=${BUILD:-/tmp/build-cupti}
	make -j2 BUILD="$B" static "$B/lib/libllmtracker-inject.so" "$B/tests/progs/inject_logdump" \
		"$B/share/llmtracker/probes.json" >/dev/null || exit 1
	gcc -O2 -static -D_GNU_SOURCE -I. -o "$B/inject_tool-static" tests/progs/inject_tool.c \
		collector/injector.c collector/cuda_kernel.c -lelf -lz -lzstd || exit 1
	mkdir -p "$CARRY/bin" "$CARRY/lib" "$CARRY/share/llmtracker"
	cp "$B/bin/llmtracker-static" "$CARRY/bin/llmtracker"
	cp "$B/lib/libllmtracker-inject.so" "$CARRY/lib/"
	cp "$B/tests/progs/inject_logdump" "$B/inject_tool-static" "$CARRY/bin/"
	cp "$B/share/llmtracker/probes.json" "$CARRY/share/llmtracker/"
	ls -la "$CARRY/bin" "$CARRY/lib"
	exit 0;;
run) ;;
*) echo "usage: $0 prepare | run [OUTDIR]"; exit 2;;
esac

OUT=${2:-/tmp/cupti-attach}
PY=${PY:-/opt/torch/.venv/bin/python3}
COLL=$CARRY/bin/llmtracker
mkdir -p "$OUT"
W=$(mktemp -d /tmp/cupti-attach.XXXXXX)
mono() { "$PY" -c 'import time; print(time.monotonic_ns())'; }
nvidia-smi -L 2>/dev/null | head -2

PYTHONUNBUFFERED=1 "$PY" tests/gpu/cupti_attach.py train "$W" >"$OUT/train.log" 2>&1 &
TP=$!
trap 'kill $TP 2>/dev/null' EXIT
for _ in $(seq 240); do [ -e "$W/ready" ] && break; kill -0 $TP 2>/dev/null || break; sleep 0.5; done
[ -e "$W/ready" ] || { echo "FAIL training loop did not start"; cat "$OUT/train.log"; exit 1; }
grep -E "libcupti|libcudart|libcuda\.so" /proc/$TP/maps | awk '{print "INFO maps:", $6}' | sort -u
sleep 6

attach() { # TAG TYPES SECONDS
	mkdir -p "$W/$1"
	echo "$1_begin $(mono)" >>"$W/marks.txt"
	"$COLL" profile -p $TP -t "$2" --enable-cuda-kernel true -d "$3" --delay 3 -v 1 \
		-o "$W/$1/collector.evlog" --cupti-dir "$W/$1" >"$OUT/$1.collector.log" 2>&1
	echo "INFO [$1] collector exit $?"
	echo "$1_end $(mono)" >>"$W/marks.txt"
	grep -iE "cuda|cupti|kernel|error|cannot|W[0-9]{4}" "$OUT/$1.collector.log" | head -12 | sed "s/^/INFO [$1] /"
	ls "$W/$1" | sed "s/^/INFO [$1] file: /"
	"$CARRY/bin/inject_logdump" "$W/$1"/*.evlog >"$W/$1.tsv" 2>&1
}
# CUPTI alone through the injector tool: the default recording (C) and
# kernels, copies and sets only (D), for the cost of each.
tool() { # TAG ARGS
	local tag=$1; shift
	mkdir -p "$W/$tag"
	echo "${tag}_begin $(mono)" >>"$W/marks.txt"
	"$CARRY/bin/inject_tool-static" attach $TP "$CARRY/lib/libllmtracker-inject.so" "$W/$tag" 5 "$@" \
		>"$OUT/$tag.tool.log" 2>&1
	echo "${tag}_end $(mono)" >>"$W/marks.txt"
	sed "s/^/INFO [$tag] /" "$OUT/$tag.tool.log" | head -5
	"$CARRY/bin/inject_logdump" "$W/$tag"/*.evlog >"$W/$tag.tsv" 2>&1
}
attach A cpu 5
sleep 6
tool C
sleep 6
tool D --kernels-only
sleep 6
attach B cuda 2
sleep 3
touch "$W/stop"
wait $TP; echo "INFO training loop exit $?"
trap - EXIT
tail -3 "$OUT/train.log"
cp "$W/marks.txt" "$W/train.json" "$OUT/" 2>/dev/null
"$PY" tests/gpu/cupti_attach.py analyze "$W" | tee "$OUT/result.txt"
rc=${PIPESTATUS[0]}
tar -C "$W" -czf "$OUT/logs.tar.gz" A B C D 2>/dev/null
exit $rc
