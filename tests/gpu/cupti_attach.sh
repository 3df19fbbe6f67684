#!/bin/bash
# GPU validation of --enable-cuda-kernel by attach, in one call:
#   tests/gpu/cupti_attach.sh prepare     (here: build what the GPU host lacks
#                                          into .carry/: static collector, the
#                                          inject library, static tools)
#   tests/gpu/cupti_attach.sh run [OUTDIR] (on the GPU host)
# The run starts a launch-bound PyTorch training loop and measures its
# steps/s before, during and after each of: the inject library alone
# (injector tool) in each recording mode, twice for the default; the static
# collector `profile -p PID -t cpu --enable-cuda-kernel true -d 5 --delay 3`
# (A), and the same without CUDA kernels (N). Then the loop profiles the same
# number of steps with torch.profiler; the analysis prints PASS/FAIL lines
# (names and counts vs torch.profiler, pairing, drops, collector exit) and
# the figures. Everything the analysis printed is in OUTDIR/result.txt.
set -u
. "$(dirname "$0")/common.inc"
case "${1:-}" in
prepare)
	B=${BUILD:-/tmp/build-cupti}
	make -j2 BUILD="$B" static "$B/lib/libllmtracker-inject.so" "$B/tests/progs/inject_logdump" \
		"$B/share/llmtracker/probes.json" "$B/tests/progs/inject_tool-static" >/dev/null || exit 1
	mkdir -p "$CARRY/bin" "$CARRY/lib" "$CARRY/share/llmtracker"
	cp "$B/bin/llmtracker-static" "$CARRY/bin/llmtracker"
	cp "$B/lib/libllmtracker-inject.so" "$CARRY/lib/"
	cp "$B/tests/progs/inject_logdump" "$B/tests/progs/inject_tool-static" "$CARRY/bin/"
	cp "$B/share/llmtracker/probes.json" "$CARRY/share/llmtracker/"
	ls -la "$CARRY/bin" "$CARRY/lib"
	exit 0;;
run) ;;
*) echo "usage: $0 prepare | run [OUTDIR]"; exit 2;;
esac

OUT=${2:-/tmp/cupti-attach}
gpu_python /opt/torch/.venv/bin/python3
COLL=$CARRY/bin/llmtracker
mkdir -p "$OUT"
tap_tmpdir W cupti-attach
L=$W/logs   # text logs, brought back as one tar (the device returns 8 files)
mkdir -p "$L"
mono() { "$PY" -c 'import time; print(time.monotonic_ns())'; }
gpu_host 2

# SET=cost: torch.profiler's yardstick alternated as often as our windows.
[ "${SET:-}" = cost ] && export YARD_ROUNDS=${YARD_ROUNDS:-${ROUNDS:-4}}
PYTHONUNBUFFERED=1 "$PY" tests/gpu/cupti_attach.py train "$W" >"$L/train.log" 2>&1 &
TP=$!
tap_at_exit '[ -z "$TP" ] || kill $TP 2>/dev/null'
wait_until 120 '[ -e "$W/ready" ] || ! kill -0 $TP 2>/dev/null'
[ -e "$W/ready" ] || { echo "FAIL training loop did not start"; cat "$L/train.log"; exit 1; }
grep -E "libcupti|libcudart|libcuda\.so" /proc/$TP/maps | awk '{print "INFO maps:", $6}' | sort -u
sleep 2

# Every window is bracketed by marks; the analysis takes steps/s in the
# 3.5 s before, during, and 0.5-3.5 s after it.
mark() { echo "$1 $(mono)" >>"$W/marks.txt"; }
attach() { # TAG TYPES SECONDS [--no-cuda]
	mkdir -p "$W/$1"
	local ck="--enable-cuda-kernel true"
	[ "${4:-}" = --no-cuda ] && ck=""
	mark "$1_begin"
	local klog; klog=$(klog_mark)
	LLMT_CUPTI_START="${START:-}" "$COLL" profile -p $TP -t "$2" $ck -d "$3" --delay 3 -v 1 \
		-o "$W/$1/collector.evlog" --cupti-dir "$W/$1" >"$L/$1.collector.log" 2>&1
	local rc=$?
	mark "$1_end"
	echo "$1_rc $rc" >>"$W/marks.txt"
	echo "INFO [$1] collector exit $rc"
	klog_since "$klog" | grep -iE "trap|divide|segfault" |
		sed "s/^/INFO [$1] dmesg: /"
	grep -iE "cuda|cupti|kernel|error|cannot|cpu:|W[0-9]{4}" "$L/$1.collector.log" | head -12 | sed "s/^/INFO [$1] /"
	grep -E "^  (proc|syscall|cpu|cuda|python|gpu|pysample) |collector CPU" "$L/$1.collector.log" |
		sed "s/^/INFO [$1] summary: /"
	ls "$W/$1" | sed "s/^/INFO [$1] file: /"
	[ -n "${RATES_ONLY:-}" ] && return
	if ls "$W/$1"/llmtracker-cupti.*.evlog >/dev/null 2>&1; then
		"$CARRY/bin/inject_logdump" "$W/$1"/llmtracker-cupti.*.evlog >"$W/$1.tsv" 2>&1
	fi
	# The collector's own log: uprobe library calls (-t cuda) to align with.
	ls "$W/$1"/collector*.evlog >/dev/null 2>&1 &&
		"$CARRY/bin/inject_logdump" "$W/$1"/collector*.evlog >"$W/$1.coll.tsv" 2>&1
}
# CUPTI alone through the injector tool, one recording mode per window.
tool() { # TAG SECONDS ARGS
	local tag=$1 sec=$2; shift 2
	mkdir -p "$W/$tag"
	mark "${tag}_begin"
	"$CARRY/bin/inject_tool-static" attach $TP "$CARRY/lib/libllmtracker-inject.so" "$W/$tag" "$sec" "$@" \
		>"$L/$tag.tool.log" 2>&1
	mark "${tag}_end"
	sed "s/^/INFO [$tag] /" "$L/$tag.tool.log" | head -5
	[ -n "${RATES_ONLY:-}" ] || "$CARRY/bin/inject_logdump" "$W/$tag"/*.evlog >"$W/$tag.tsv" 2>&1
}
# The matrix (modes: inject/cupti.c kind_wanted): K kernels only;
# D kernels + every
# runtime call by activity (the default); F + every driver call (FULL=1).
# K, D and Z twice, apart, for the noise.
# SET picks the windows: modes (default: every recording mode twice), cost
# (a per-source cost table: ROUNDS rounds of idle, Python hook, kernels only,
# the default, uprobes, -t all), ke (ROUNDS rounds of idle, kernels only,
# -t cpu with kernels and links, -t all), parts (ROUNDS rounds of idle, kernels only, then kernels with
# -t cpu, -t python, -t cpu,cuda, -t all), diag (the same with -t cpu,syscall
# for -t python), floor,
# long (20 s windows), stat (8 s windows:
# kernels only, the default, the collector with uprobes), collector, none.
# RATES_ONLY=1: no per-window checks of the CUPTI logs, steps/s alone (a
# graph loop's millions of kernels a window take minutes to check).
GAP=${GAP:-4}
# MAX_S: start no round after that many seconds of this script, so that a
# call under a time cap still ends with the analysis of the rounds it ran.
round_fits() {
	[ -z "${MAX_S:-}" ] || [ "$SECONDS" -lt "$MAX_S" ] && return 0
	echo "INFO MAX_S=$MAX_S reached after $((i - 1)) round(s): no more rounds"
	return 1
}
sleep $GAP
# Z: nothing attached, the same marks: the noise floor of the method.
idle() { mark "$1_begin"; sleep "$2"; mark "$1_end"; }
if [ "${SET:-modes}" = modes ]; then
	tool K1 4 runtime=0 driver=0; sleep $GAP
	tool D1 4 runtime=1 driver=0; sleep $GAP
	idle Z1 4; sleep $GAP
	[ -n "${FULL:-}" ] && { tool F1 4 runtime=1 driver=1; sleep $GAP; }
	tool K2 4 runtime=0 driver=0; sleep $GAP
	tool D2 4 runtime=1 driver=0; sleep $GAP
	idle Z2 4; sleep $GAP
elif [ "${SET}" = floor ]; then # the cheapest recording (kernels only) against idle, alternated
	for i in 1 2 3; do idle Z$i 4; sleep $GAP; tool K$i 4 runtime=0 driver=0; sleep $GAP; done
	idle Z4 4; sleep $GAP
	tool D1 4 runtime=1 driver=0; sleep $GAP
	attach A cpu 5; sleep $GAP
elif [ "${SET}" = long ]; then # is the cost steady over 20 s (buffers filling)?
	idle Z1 4; sleep $GAP
	tool K1 20 runtime=0 driver=0; sleep $GAP
	idle Z2 4; sleep $GAP
	tool D1 20 runtime=1 driver=0; sleep $GAP
	idle Z3 4; sleep $GAP
elif [ "${SET}" = stat ]; then # 8 s windows, alternated: idle, kernels only, default, collector kernels-only + uprobes
	for i in 1 2; do
		idle Z$i 8; sleep $GAP
		tool K$i 8 runtime=0 driver=0; sleep $GAP
		tool D$i 8 runtime=1 driver=0; sleep $GAP
		START=runtime=0 attach V$i cpu,cuda 8; sleep $GAP
	done
	idle Z3 8; sleep $GAP
elif [ "${SET}" = cost ]; then # one row per source, ROUNDS rounds of 8 s windows in turn
	for i in $(seq "${ROUNDS:-4}"); do
		round_fits || break
		idle Z$i 8; sleep $GAP
		attach Y$i python 8 --no-cuda; sleep $GAP
		tool K$i 8 runtime=0 driver=0; sleep $GAP
		attach A$i cpu 8; sleep $GAP
		attach U$i cpu,cuda 8; sleep $GAP
		attach E$i all 8; sleep $GAP
	done
elif [ "${SET}" = parts ]; then # -t all's cost by part, each with kernels: which source costs what
	for i in $(seq "${ROUNDS:-4}"); do
		round_fits || break
		idle Z$i 8; sleep $GAP
		tool K$i 8 runtime=0 driver=0; sleep $GAP
		attach A$i cpu 8; sleep $GAP
		attach H$i python 8; sleep $GAP
		attach U$i cpu,cuda 8; sleep $GAP
		attach E$i all 8; sleep $GAP
	done
elif [ "${SET}" = diag ]; then # -t all's parts once more, with system calls apart (S)
	for i in $(seq "${ROUNDS:-4}"); do
		round_fits || break
		idle Z$i 8; sleep $GAP
		tool K$i 8 runtime=0 driver=0; sleep $GAP
		attach A$i cpu 8; sleep $GAP
		attach U$i cpu,cuda 8; sleep $GAP
		attach S$i cpu,syscall 8; sleep $GAP
		attach E$i all 8; sleep $GAP
	done
elif [ "${SET}" = ke ]; then # the issue's comparisons: kernels only against kernels with links (A) and everything on
	for i in $(seq "${ROUNDS:-6}"); do
		round_fits || break
		idle Z$i 8; sleep $GAP
		tool K$i 8 runtime=0 driver=0; sleep $GAP
		attach A$i cpu 8; sleep $GAP
		attach E$i all 8; sleep $GAP
	done
elif [ "${SET}" = collector ]; then # the collector as users run it, between idle windows
	idle Z1 4; sleep $GAP
	attach A1 cpu 5; sleep $GAP
	tool D1 4 runtime=1 driver=0; sleep $GAP
	idle Z2 4; sleep $GAP
	attach U1 cpu,cuda 5; sleep $GAP # + uprobes on the CUDA libraries: launches seen twice
	tool K1 4 runtime=0 driver=0; sleep $GAP
	idle Z3 4; sleep $GAP
	attach A3 cpu 5; sleep $GAP
fi # SET=none: no measuring windows (with STRESS)
# The full collector (static), as a user runs it: default recording.
[ "${SET:-modes}" = modes ] && { attach A cpu 5; sleep $GAP; }
# The same without CUDA kernel profiling: tells a crash of the cpu source
# from one of the CUPTI stop path.
[ "${SET:-modes}" != none ] && { attach N cpu 3 --no-cuda; sleep 2; }
# STRESS=N: N short attach/detach cycles of the default recording; the
# process must survive every unload (threads may be inside our callbacks
# when CUPTI is finalized).
# STRESS_MODES="runtime=1 runtime=0 uprobes": N cycles of each, in
# that order (commas separate start keys of one mode).
if [ -n "${STRESS:-}" ]; then
	for mode in ${STRESS_MODES:-runtime=1}; do
		alive=0
		for i in $(seq "$STRESS"); do
			mkdir -p "$W/S$mode$i"
			if [ "$mode" = uprobes ]; then # the collector's -t cuda alone, no CUPTI
				"$COLL" profile -p $TP -t cuda -d 1 -o "$W/S$mode$i/c.evlog" \
					>"$L/S$mode.$i.tool.log" 2>&1 && echo "finalized=1 unloaded=1" >>"$L/S$mode.$i.tool.log"
			else
				"$CARRY/bin/inject_tool-static" attach $TP "$CARRY/lib/libllmtracker-inject.so" \
					"$W/S$mode$i" 1 ${mode//,/ } >"$L/S$mode.$i.tool.log" 2>&1
			fi
			sleep 0.3
			kill -0 $TP 2>/dev/null || { echo "FAIL [$mode] the process died after detach $i"; break; }
			alive=$i
		done
		echo "INFO stress [$mode]: $alive of $STRESS attach/detach cycles, process alive after each;" \
			"finalized and unloaded in $(cat "$L"/S$mode.*.tool.log | grep -c 'finalized=1 unloaded=1')"
		[ $alive = "$STRESS" ] || break
	done
fi
touch "$W/stop"
wait $TP; trc=$? TP=
echo "INFO training loop exit $trc"
[ $trc = 0 ] || echo "FAIL the training loop exited $trc"
tail -3 "$L/train.log"
cp "$W/marks.txt" "$W/train.json" "$L/" 2>/dev/null
"$PY" tests/gpu/cupti_attach.py analyze "$W" | tee "$OUT/result.txt"
rc=${PIPESTATUS[0]}
# Launch links of the collector's windows: every kernel, copy and set
# linked, no flow unbound.
for tag in A1 E1; do
	[ -e "$W/$tag/collector.evlog" ] || continue
	LD_LIBRARY_PATH=$PWD/$CARRY/lib "$CARRY/bin/llmtracker-convert" -i "$W/$tag/collector.evlog" -o "$W/$tag/trace.json.gz" \
		>/dev/null 2>"$L/$tag.convert.log"
	grep -E "^launch links|^converted" "$L/$tag.convert.log" | cut -c1-400 | sed "s/^/INFO [$tag] /" | tee -a "$OUT/result.txt"
	m=$(sed -n 's/^launch links from uprobes: \([0-9]*\) of \([0-9]*\) .*/\1 \2/p' "$L/$tag.convert.log")
	if [ -n "$m" ] && [ "${m% *}" = "${m#* }" ] && [ "${m% *}" -gt 0 ] && ! grep -q "unbound flows" "$L/$tag.convert.log"; then
		echo "PASS [$tag] every kernel, copy and set linked to its launch ($m), no flow unbound" | tee -a "$OUT/result.txt"
	else
		echo "FAIL [$tag] launch links: ${m:-none} (linked, of), unbound: $(grep -o '[0-9]* unbound flows' "$L/$tag.convert.log")" | tee -a "$OUT/result.txt"
		"$PY" tests/gpu/edge_links.py "$W/$tag/trace.json.gz" 2>&1 | sed "s/^INFO edge:/INFO [$tag] edge:/" | tee -a "$OUT/result.txt"
		# its logs, to convert here (in parts that the device call brings back)
		(cd "$W" && tar -cf - "$tag"/*.evlog) | split -b 15M - "$OUT/$tag.evlogs.tar."
		rc=1
	fi
done
tar -C "$W" -czf "$OUT/logs.tar.gz" logs 2>/dev/null
exit $rc
