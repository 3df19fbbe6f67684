#!/bin/bash
# llmtracker generateProbe -p PID: CUDA libraries a process maps and the
# ones they need (resolved like ld.so, $ORIGIN included), with their
# exported functions; the file it writes is a valid probe file.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$BUILD/bin/llmtracker
PROG=$BUILD/tests/progs/cuda_calls
CUDA=${CUDA_HOME:-/usr/local/cuda}

[ -e "$CUDA/lib64/libcublas.so.13" ] || skip "no libcublas.so.13 in $CUDA/lib64"
need_built "$LT" "$PROG"
tap_tmpdir T cuda_generate

cublas=$(readlink -f "$CUDA/lib64/libcublas.so.13")
cublaslt=$(dirname "$cublas")/libcublasLt.so.13
"$PROG" mapfile "$cublas" >"$T/m.out" 2>&1 &
mp=$!
tap_bg $mp
wait_for "$T/m.out" mapped 5

"$LT" generateProbe -p "$mp" -o "$T/gen.json" 2>"$T/gen.err"
check "generateProbe exits 0 and writes the file" "[ $? = 0 ] && [ -s $T/gen.json ]"
py=/usr/bin/python3.11
j() { "$py" -c "import json,sys; d=json.load(open('$T/gen.json')); $1"; }
check "the mapped libcublas is listed with its class" \
	"j \"l=[u for u in d['uprobes'] if u['library']=='$cublas']; sys.exit(not(l and l[0]['class']=='cublas' and l[0]['resolved']=='mapped'))\""
check "libcublasLt found through DT_NEEDED + \$ORIGIN, not mapped" \
	"j \"l=[u for u in d['uprobes'] if u['library']=='$cublaslt']; sys.exit(not(l and l[0]['resolved']=='needed by libcublas.so.13'))\""
check "exported functions listed (cublasSgemm_v2 available)" \
	"j \"l=[u for u in d['uprobes'] if u['library']=='$cublas']; sys.exit('cublasSgemm_v2' not in l[0]['available'])\""
check "default selection filled in for a known library" \
	"j \"l=[u for u in d['uprobes'] if u['library']=='$cublas']; sys.exit('cublas*gemm*' not in l[0]['symbols'])\""
check "libc is not listed (not a CUDA library)" \
	"j \"sys.exit(any('libc.so' in u['library'] for u in d['uprobes']))\""
"$LT" generateProbe -p "$mp" -o "$T/gen.json" 2>"$T/gen2.err"
check "an existing file is not replaced without --force" \
	"[ $? != 0 ] && grep -q 'File exists (pass --force' $T/gen2.err"
"$LT" generateProbe -p "$mp" -o "$T/gen.json" --force 2>/dev/null
check "--force replaces it" "[ $? = 0 ]"
"$LT" generateProbe -p 999999999 2>"$T/bad.err" >/dev/null
check "a bad pid: clear error" "[ $? != 0 ] && grep -q 'pid' $T/bad.err"

# The written file drives a profile as is. It names what that process had:
# libcudart (linked) and cuBLAS, not NCCL, so the NCCL wait is kept short.
if [ "$(id -u)" = 0 ]; then
	CUDA_CALLS_WAIT=1.5 timeout 120 "$LT" profile -t cuda --probe-file "$T/gen.json" -o "$T/p.log" \
		-- "$PROG" calls >/dev/null 2>"$T/p.err"
	check "the generated file is accepted by profile --probe-file" "[ $? = 0 ]"
	"$BUILD/tests/progs/cuda_logcount" "$T/p.log" >"$T/p.calls"
	check "and records the runtime and cuBLAS calls" \
		"grep -qx 'count cudaMalloc 0 7' $T/p.calls && grep -qx 'count cublasSgemm_v2 0 1' $T/p.calls"
fi
tap_done
