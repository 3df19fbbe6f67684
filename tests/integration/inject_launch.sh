#!/bin/bash
# Launch mode of --enable-cuda-kernel on a node without a GPU driver: a
# program linked against libcudart keeps its output and exit status, the
# collector says in one line why CUDA kernel profiling cannot start, and the
# other sources go on. Also: with CUDA_INJECTION64_PATH forced (as on a GPU
# node) and with InitializeInjection called directly, the library stays
# quiet, writes nothing and returns.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
COLL=$BUILD/bin/llmtracker
need_built "$T/inject_cudart" "$T/inject_tool" "$LIB"
if [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidiactl ]; then
	skip "this node has a GPU driver; tests/gpu/ covers it"
fi
tap_tmpdir W llmt-launch

"$T/inject_cudart" >"$W/ref.out" 2>&1; ref_rc=$?
check "reference run of the libcudart program" '[ $ref_rc = 5 ] && grep -q "^hash " "$W/ref.out"'

# 1. Through the collector, when it can run here (root, BPF).
if [ -x "$COLL" ] && [ "$(id -u)" = 0 ]; then
	mkdir "$W/c"
	"$COLL" profile --enable-cuda-kernel true -t syscall -o "$W/c/out.evlog" -d 10 \
		-- "$T/inject_cudart" >"$W/c.out" 2>"$W/c.err"; crc=$?
	sed 's/^/# /' "$W/c.err" | head -20
	check "collector launch: program output unchanged" 'cmp -s "$W/ref.out" "$W/c.out"'
	check "collector launch: exit status 5 kept" 'grep -q "command exited with status 5" "$W/c.err"'
	check "collector says in one line that CUDA kernel profiling cannot start" \
		'[ "$(grep -c "CUDA kernel profiling cannot start" "$W/c.err")" = 1 ]'
	check "... and why" 'grep -q "no NVIDIA GPU driver" "$W/c.err"'
	check "the other sources went on (syscall events recorded)" \
		'[ $crc = 0 ] && [ -s "$W/c/out.evlog" ] && grep -qE "syscall +[1-9]" "$W/c.err"'
	check "no CUPTI log written without a GPU" '[ "$(ls "$W/c")" = out.evlog ]'
else
	echo "# collector not built or not root: collector launch checks skipped"
fi

# 2. CUDA_INJECTION64_PATH forced, as on a GPU node (the library is only
#    loaded by a working driver, so here CUDA just fails as before).
mkdir "$W/f"
LLMT_SKIP_DRIVER_CHECK=1 "$T/inject_tool" launch "$LIB" "$W/f" -- "$T/inject_cudart" >"$W/f.out" 2>&1
sed 's/^/# /' "$W/f.out"
grep -vE '^(D|I|W|E) |^totals |^child exit ' "$W/f.out" >"$W/f.prog"
check "forced injection: program output unchanged" 'cmp -s "$W/ref.out" "$W/f.prog"'
check "forced injection: exit status 5 kept" 'grep -q "^child exit 5" "$W/f.out"'
check "forced injection: says no CUDA kernel profiling started" \
	'grep -q "no process of it started CUDA kernel profiling" "$W/f.out"'
check "forced injection: nothing written" '[ -z "$(ls -A "$W/f")" ]'

# 3. InitializeInjection called directly in a process without CUDA.
PY=$(command -v python3.11 || command -v python3)
if [ -n "$PY" ]; then
	mkdir "$W/d"
	res=$(LLMT_CUPTI_DIR="$W/d" "$PY" -c "
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print('init', lib.InitializeInjection())
print('fini_other', lib.llmt_inject_fini(ctypes.c_uint64(12345)))
print('fini', lib.llmt_inject_fini(ctypes.c_uint64(0)))
" "$(realpath "$LIB")" 2>&1); rc=$?
	echo "# $res" | tr '\n' ' '; echo
	check "InitializeInjection without CUDA returns 1 and leaves the library unloadable" \
		'[ $rc = 0 ] && echo "$res" | grep -q "^init 1" && echo "$res" | grep -q "^fini 1"'
	check "... but not to a fini with another attach's token (a new image's copy at the old address)" \
		'echo "$res" | grep -q "^fini_other 0"'
	check "... and writes nothing" '[ -z "$(ls -A "$W/d")" ]'
fi
tap_done
