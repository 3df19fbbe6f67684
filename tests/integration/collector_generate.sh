#!/bin/bash
# generateCommand lists Python (and CUDA) processes, filtered by a container's
# cgroup, with the profiling command template and the Python path hint;
# export runs llmtracker-convert from the collector's directory.
. "$(dirname "$0")/collector_common.inc"
[ -x "$LT" ] || { echo "# missing $LT"; exit 1; }
py=/usr/bin/python3.11
[ -x "$py" ] || py=$(command -v python3)
[ -n "$py" ] || skip "no python interpreter"

"$py" -c 'import time; print("up", flush=True); time.sleep(20)' >"$T/py.out" & p=$!
tap_bg "$p"
# A GPU process: one mapping a (stand-in) libcudart.so, which it prints once loaded.
cp "$(ldd "$LT" | awk '/libz\.so/ { print $3 }')" "$T/libcudart.so.12"
"$py" -c 'import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); print("loaded", flush=True); time.sleep(20)' \
	"$T/libcudart.so.12" >"$T/gpu.out" & g=$!
tap_bg "$g"
wait_for "$T/py.out" up 10
wait_for "$T/gpu.out" loaded 10
"$LT" generateCommand >"$T/all.out" 2>"$T/all.err"
check "generateCommand exits 0" test $? -eq 0
check "glog-style lines" grep -qE '^I[0-9]{4} [0-9:.]{15} [0-9]+ generate\.c:[0-9]+\] ' "$T/all.out"
check "lists the python process" grep -qE "PID: $p, Name: \\{\"pid\":$p,\"name\":\"python" "$T/all.out"
# GPU PIDs holds only processes mapping libcuda/libcudart; Python-only ones follow under their own heading.
sed -n '/GPU PIDs/,/Python PIDs without/p' "$T/all.out" >"$T/gpu.sec"
sed -n '/Python PIDs without libcuda/,$p' "$T/all.out" >"$T/py.sec"
check "the libcudart process is under GPU PIDs" grep -q "PID: $g, .*\"cuda\":true" "$T/gpu.sec"
check "the Python-only process is not under GPU PIDs" test "$(grep -c "PID: $p," "$T/gpu.sec")" -eq 0
check "... but under the Python heading" grep -q "PID: $p, .*\"cuda\":false" "$T/py.sec"
"$LT" --help >"$T/help.out"
check "--help lists generateProbe" grep -q "llmtracker generateProbe -p PID" "$T/help.out"
check "--help lists export --logdir/--run" grep -q "llmtracker export .*--logdir DIR \[--run NAME\]" "$T/help.out"
cmd=$(sed -n 's/.*The profiling command is: //p' "$T/all.out")
check "prints a command for the GPU process found, no placeholders ($cmd)" \
	'[[ "$cmd" == "llmtracker profile "*"-p $g "* ]] && [[ "$cmd" != *"<"* ]] && [[ "$cmd" != *"-p $p "* ]]'
check "prints the Python path hint of that process" grep -qE "Profiling Python Path is: /.*export EBPF_USDT_PYTHON_PATH=/" "$T/all.out"
# The command runs as printed (its duration and output shortened here).
run=${cmd/#llmtracker /}
run=${run/ -d 30/ -d 1}
run=$(echo "$run" | sed "s| -o [^ ]*| -o $T/gen.evlog|")
# shellcheck disable=SC2086
"$LT" $run > "$T/gen.out" 2> "$T/gen.err"
rc=$?
check "the printed command runs (rc $rc): $run" '[ $rc -eq 0 ] && [ -s "$T/gen.evlog" ]' 

# --container-id: a cgroup named like a container's holds one python process;
# another python outside it must not be listed.
"$py" -c 'import time; time.sleep(20)' & q=$!
tap_bg "$q"
cid=cri-containerd-$(printf '%064x' $$)
cg=""
for root in /sys/fs/cgroup/pids /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if mkdir "$root/lt-test-$cid.scope" 2>/dev/null; then
		if echo "$p" >"$root/lt-test-$cid.scope/cgroup.procs" 2>/dev/null; then cg=$root/lt-test-$cid.scope; break; fi
		rmdir "$root/lt-test-$cid.scope"
	fi
done
if [ -n "$cg" ]; then
	"$LT" generateCommand --container-id "${cid#cri-containerd-}" >"$T/c.out" 2>&1
	check "--container-id keeps the process in that container's cgroup" grep -q "PID: $p," "$T/c.out"
	check "--container-id drops processes outside it" test "$(grep -c "PID: $q," "$T/c.out")" -eq 0
	echo "$p" >"$(dirname "$cg")/cgroup.procs" 2>/dev/null
	kill "$p"; wait "$p" 2>/dev/null
	rmdir "$cg" 2>/dev/null
else
	echo "# no writable cgroup hierarchy: --container-id filtering not checked"
fi
"$LT" generateCommand --container-id no-such-container-0123 >"$T/none.out" 2>&1
rc=$?
check "--container-id of no container fails (rc $rc) and lists nothing" \
	'[ $rc -eq 1 ] && [ "$(grep -c "PID: " "$T/none.out")" -eq 0 ]'
check "... saying so" grep -q "no process on this node is in container no-such-container-0123" "$T/none.out"
"$LT" generateCommand --pod-uid nope >"$T/nope.out" 2>&1
check "--pod-uid of no pod fails too" '[ $? -eq 1 ] && grep -q "no process on this node is in pod nope" "$T/nope.out"' 
"$LT" generateCommand --container-id a --pod-uid b >/dev/null 2>"$T/both.err"
check "--container-id with --pod-uid is refused" test $? -ne 0
check "... saying why" grep -q "at most one of --container-id ID or --pod-uid UID" "$T/both.err"
"$LT" generateCommand --bogus >/dev/null 2>"$T/bad.err"
check "an unknown option is refused (exit 2)" test $? -eq 2
check "... naming it, with the usage" grep -q "unknown option or missing value: --bogus (usage: " "$T/bad.err"

if [ -x "$BUILD/bin/llmtracker-convert" ]; then
	"$LT" export -i "$T/does-not-exist.evlog" -o "$T/out.json" >"$T/exp.out" 2>"$T/exp.err"
	rc=$?
	check "export runs llmtracker-convert (fails on a missing input, rc $rc)" \
		test "$rc" -ne 0 -a -s "$T/exp.err"
	check "... naming the input" grep -q "does-not-exist.evlog" "$T/exp.err"
fi
tap_done
