#!/bin/bash
# -t cuda against the real CUDA runtime (no GPU needed: calls fail fast),
# NCCL and cuBLAS loaded later with dlopen, nested calls, attaching to a
# running process, detaching cleanly, kprobes on a kernel without them, and
# probe-file errors.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$BUILD/bin/llmtracker
PROG=$BUILD/tests/progs/cuda_calls
COUNT=$BUILD/tests/progs/cuda_logcount
CUDA=${CUDA_HOME:-/usr/local/cuda}

[ "$(id -u)" = 0 ] || skip "needs root for BPF"
[ -e /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF"
[ -e "$CUDA/lib64/libcudart.so.13" ] || skip "no CUDA runtime at $CUDA/lib64"
need_built "$LT" "$PROG" "$COUNT" "$BUILD/share/llmtracker/probes.json"

tap_tmpdir T cuda_calls

# ---- 1. the fixed call sequence with the default probe file (no kernels
# recorded: launches probed at the runtime, which names their kernels)
CUDA_CALLS_WAIT=10 timeout 120 "$LT" profile -t cuda -o "$T/a.log" -- "$PROG" calls \
	>"$T/a.out" 2>"$T/a.err"
rc=$?
check "profile -t cuda -- cuda_calls exits 0" "[ $rc = 0 ] && grep -q '^done' $T/a.out"
"$COUNT" "$T/a.log" --dump >"$T/a.calls" 2>&1
cnt() { awk -v s="$1" -v d="${2:-0}" '$1=="count" && $2==s && $3==d {print $4}' "$T/a.calls"; }
check "cudaMalloc recorded 7 times" "[ '$(cnt cudaMalloc)' = 7 ]"
check "cudaMemcpy recorded 11 times" "[ '$(cnt cudaMemcpy)' = 11 ]"
check "cudaLaunchKernel recorded 5 times" "[ '$(cnt cudaLaunchKernel)' = 5 ]"
check "cudaStreamSynchronize recorded 3 times" "[ '$(cnt cudaStreamSynchronize)' = 3 ]"
expect=26
if grep -q '^ret ncclAllReduce' "$T/a.out"; then
	expect=$((expect + 2))
	check "ncclAllReduce (libnccl dlopen'ed later, glob nccl*) recorded 2 times" "[ '$(cnt ncclAllReduce)' = 2 ]"
	check "ncclAllReduce decoded (7th argument from the stack)" \
		"grep -q 'ncclAllReduce .*| stream=0x5000 bytes=4000 | count=1000 datatype=float32 op=sum comm=0x0\$' $T/a.calls"
fi
if grep -q '^ret cublasSgemm_v2' "$T/a.out"; then
	expect=$((expect + 1))
	check "cublasSgemm_v2 recorded with its shape" \
		"grep -q 'cublasSgemm_v2 .*| m=64 n=32 k=16 transa=T transb=N\$' $T/a.calls"
fi
check "no other call recorded (total $expect)" "grep -qx 'total $expect' $T/a.calls"
# The summary: what the probes cost, per function (calls x one call's measured cost).
pc=$(sed -n 's/.*probes cost the targets ~[0-9.]* s: \([0-9]*\) calls x \([0-9.]*\) us each.*/\1 \2/p' "$T/a.err")
check "summary: probe cost over all $expect calls, 0.05-100 us each ($pc)" \
	"[ \"\${pc% *}\" = $expect ] && awk -v c=\"\${pc#* }\" 'BEGIN { exit !(c >= 0.05 && c <= 100) }'"
check "summary: cudaMemcpy's 11 calls named with their cost" \
	"grep -Eq 'cuda:   cudaMemcpy +11 calls  ~[0-9.]+ s' $T/a.err"

# Return codes, in call order, as the program saw them.
grep '^ret ' "$T/a.out" | awk '{print $2, $3}' >"$T/ret.want"
awk '$1=="call" {print $9, $6}' "$T/a.calls" >"$T/ret.got"
check "every return code matches what the program got" "cmp -s $T/ret.want $T/ret.got"

# The typed fields a call was decoded to (cuda_logcount's DECODED).
decoded() { awk -v s="$1" '$9==s' "$T/a.calls" | sed 's/^[^|]*| *//; s/ *|.*//'; }

# Copy sizes and kinds (cudaMemcpyKind 0-3 as CUPTI's: HtoH 9, HtoD 1, DtoH 2, DtoD 8).
kinds=(9 1 2 8)
: >"$T/cp.want"
for i in $(seq 0 10); do echo "bytes=$(((i + 1) * 1000)) kind=${kinds[$((i % 4))]}" >>"$T/cp.want"; done
decoded cudaMemcpy >"$T/cp.got"
check "cudaMemcpy sizes and kinds decoded" "cmp -s $T/cp.want $T/cp.got"

# Kernel launches: host stub -> demangled kernel name, dim3s, stack args
# (the default stream: 0, not shown).
: >"$T/k.want"
for i in 1 2 3 4 5; do
	echo "kernel=vector_step(float*, int) grid=4,2,1 block=256,1,1 smem=$((128 * i))" >>"$T/k.want"
done
decoded cudaLaunchKernel >"$T/k.got"
check "cudaLaunchKernel: kernel named from its host stub, grid/block/smem/stream" "cmp -s $T/k.want $T/k.got"
check "cudaStreamSynchronize(0): nothing decoded but the default stream" \
	"[ \"\$(decoded cudaStreamSynchronize | sort -u)\" = '' ] && [ \$(decoded cudaStreamSynchronize | wc -l) = 3 ]"
check "cudaMalloc sizes in the first arguments" \
	"[ \"\$(awk '\$9==\"cudaMalloc\" {split(\$12,b,\",\"); printf \"%s \", b[2]}' $T/a.calls)\" = '1048576 2097152 3145728 4194304 5242880 6291456 7340032 ' ]"

# Soname resolution: the copy the target mapped, not a guess.
real=$(readlink -f "$CUDA/lib64/libcudart.so.13")
check "libcudart.so resolved to the mapped $real" \
	"[ \"\$(awk '\$9==\"cudaMalloc\" {print \$10}' $T/a.calls | sort -u)\" = '$real' ]"
check "durations are positive and calls are timed in order" \
	"awk '\$1==\"call\" { if (\$5 <= 0 || \$4 < last) bad=1; last=\$4 } END {exit bad}' $T/a.calls"

# The converter shows them as Kineto-style library-call events.
if [ -x "$BUILD/bin/llmtracker-convert" ] && "$BUILD/bin/llmtracker-convert" -i "$T/a.log" -o "$T/a.json" >/dev/null 2>&1; then
	check "trace JSON: 5 cudaLaunchKernel events (cat cuda_runtime) with the kernel name" \
		"/usr/bin/python3.11 -c \"import json,sys; d=json.load(open('$T/a.json')); ev=d['traceEvents'] if isinstance(d,dict) else d; l=[e for e in ev if e.get('ph')=='X' and e.get('cat')=='cuda_runtime' and e.get('name')=='cudaLaunchKernel' and 'vector_step' in json.dumps(e.get('args'))]; sys.exit(len(l)!=5)\""
	check "trace JSON: a launch's and a copy's arguments as text" \
		"/usr/bin/python3.11 -c \"import json,sys; d=json.load(open('$T/a.json')); ev=d['traceEvents'] if isinstance(d,dict) else d; a=[e['args'].get('args') for e in ev if e.get('ph')=='X' and e.get('cat')=='cuda_runtime']; sys.exit(not ('kernel=vector_step(float*, int) grid=4,2,1 block=256,1,1 smem=256 stream=0x0' in a and 'bytes=2000 kind=HtoD' in a))\""
fi

# ---- 2. nested calls pair per thread; a probe file naming the program by path
prog_abs=$(readlink -f "$PROG")
cat >"$T/nested.json" <<JSON
{ "uprobes": [ { "path": "$prog_abs", "class": "other", "symbols": ["cp_outer", {"name": "cp_inner", "args": 1}] } ] }
JSON
CUDA_CALLS_WAIT=10 timeout 60 "$LT" profile -t cuda --probe-file "$T/nested.json" -o "$T/n.log" -- "$PROG" nested 500 \
	>"$T/n.out" 2>"$T/n.err"
"$COUNT" "$T/n.log" --dump >"$T/n.calls" 2>&1
check "nested: cp_outer at depth 0, 500 times" "grep -qx 'count cp_outer 0 500' $T/n.calls"
check "nested: cp_inner at depth 1, 500 times" "grep -qx 'count cp_inner 1 500' $T/n.calls"
check "nested: per-symbol args option (1 argument kept)" \
	"awk '\$9==\"cp_inner\" && \$11!=\"nargs=1\" {bad=1} END {exit bad}' $T/n.calls"
check "nested: every inner call lies within an outer call" \
	"awk '\$9==\"cp_outer\" {s=\$4; e=\$4+\$5} \$9==\"cp_inner\" {if (\$4<s || \$4+\$5>e) bad=1; k++} END {exit bad || k!=500}' <(sort -k4,4n $T/n.calls | grep '^call')"

# Two entries selecting the same functions: each call is still recorded once.
cat >"$T/dup.json" <<JSON
{ "uprobes": [ { "path": "$prog_abs", "symbols": ["cp_outer"] },
               { "library": "$(basename "$prog_abs")", "symbols": ["cp_outer", "cp_inner"] } ] }
JSON
CUDA_CALLS_WAIT=10 timeout 60 "$LT" profile -t cuda --probe-file "$T/dup.json" -o "$T/d.log" -- "$PROG" nested 50 \
	>/dev/null 2>&1
"$COUNT" "$T/d.log" >"$T/d.calls" 2>&1
check "a function selected by two entries is probed once" \
	"grep -qx 'count cp_outer 0 50' $T/d.calls && grep -qx 'count cp_inner 1 50' $T/d.calls && grep -qx 'total 100' $T/d.calls"

# ---- 3. a followed child that execs is probed too
CUDA_CALLS_WAIT=10 timeout 60 "$LT" profile -t cuda --probe-file "$T/nested.json" -o "$T/c.log" -- "$PROG" spawn 300 \
	>"$T/c.out" 2>"$T/c.err"
"$COUNT" "$T/c.log" --dump >"$T/c.calls" 2>&1
child=$(awk '/^child/ {print $2}' "$T/c.out")
{ grep -E '^(count|total)' "$T/c.calls"; grep -iE 'probe|never|warn|error' "$T/c.err" "$T/c.out" | head -5; } | sed 's/^/# /'
check "followed child: its 300 cp_outer calls recorded under its own pid ($child)" \
	"grep -qx 'count cp_outer 0 300' $T/c.calls && [ \"\$(awk '\$1==\"call\" {print \$2}' $T/c.calls | sort -u)\" = '$child' ]"

# ---- 4. attach to a running process, detach and leave it as found
"$PROG" watch >"$T/w.out" 2>&1 &
wpid=$!
wait_for "$T/w.out" "^watching" 10
timeout 30 "$LT" profile -p "$wpid" -t cuda --probe-file "$T/nested.json" -d 1 -o "$T/w.log" >"$T/w.err" 2>&1
prc=$?
wait "$wpid"; wrc=$?
"$COUNT" "$T/w.log" >"$T/w.calls" 2>&1
check "-p PID: calls of a running process recorded" \
	"[ $prc = 0 ] && awk '\$1==\"count\" && \$2==\"cp_outer\" && \$4>=10 {f=1} END {exit !f}' $T/w.calls"
check "-p PID: breakpoints removed at the end, target ran on" \
	"[ $wrc = 0 ] && grep -q '^probed' $T/w.out && grep -q '^unprobed' $T/w.out"

# ---- 5. kprobes: a clear warning where the kernel has none, the rest runs
cat >"$T/k.json" <<JSON
{ "uprobes": [ { "path": "$prog_abs", "symbols": ["cp_outer"] } ], "kprobes": ["tcp_sendmsg"] }
JSON
CUDA_CALLS_WAIT=10 timeout 60 "$LT" profile -t cuda --probe-file "$T/k.json" -o "$T/k.log" -- "$PROG" nested 20 \
	>/dev/null 2>"$T/k.err"
krc=$?
"$COUNT" "$T/k.log" >"$T/kk.calls" 2>&1
if [ -e /sys/bus/event_source/devices/kprobe ]; then
	check "kprobe tcp_sendmsg attached, uprobes recorded" "[ $krc = 0 ] && grep -qx 'count cp_outer 0 20' $T/kk.calls"
else
	check "kprobe on a kernel without kprobes: one clear warning" \
		"[ \$(grep -c 'kprobe tcp_sendmsg skipped: this kernel has no kprobe support (CONFIG_KPROBES unset' $T/k.err) = 1 ]"
	check "kprobe skipped, uprobes still recorded" "[ $krc = 0 ] && grep -qx 'count cp_outer 0 20' $T/kk.calls"
fi

# ---- 6. probe-file errors name file, line, column and what is expected
printf '{\n  "uprobes": [\n    { "library": "libcudart.so", "symbols": [ "cudaMalloc", 42 ] }\n  ]\n}\n' >"$T/bad1.json"
"$LT" profile -t cuda --probe-file "$T/bad1.json" -o "$T/b1.log" -- /bin/true >/dev/null 2>"$T/b1.err"
brc=$?
check "bad symbol entry: error with file:3:61 and what is expected" \
	"[ $brc != 0 ] && grep -q '$T/bad1.json:3:61: uprobes\[0\].symbols\[1\]: expected a symbol name' $T/b1.err"
printf '{\n  "uprobes": [\n    { "library": "libcudart.so",\n      "symbols": [ "cudaMalloc" ]\n    \n}\n' >"$T/bad2.json"
"$LT" profile -t cuda --probe-file "$T/bad2.json" -o "$T/b2.log" -- /bin/true >/dev/null 2>"$T/b2.err"
check "JSON syntax error: file:line:col" "grep -q '$T/bad2.json:[0-9]*:[0-9]*: invalid JSON' $T/b2.err"
check "no log left behind by a bad probe file" "[ ! -e $T/b1.log ] && [ ! -e $T/b2.log ]"

tap_done
