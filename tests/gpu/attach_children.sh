#!/bin/bash
# CUDA kernels of processes started after attach, on the GPU host (after
# tests/gpu/cupti_attach.sh prepare): a parent shell is profiled with
# `-p PARENT -t cpu --enable-cuda-kernel true -d 180`; once the collector
# says it is profiling, the parent starts two torch workers (as torchrun
# does), each reading a DataLoader with two forked workers after its CUDA
# start, and one Python process that never touches CUDA. Checks: each
# worker gets the library once it has initialized CUDA, its published CUPTI
# log holds the kernels the collector was told of (> 0), the summary's gpu
# row counts them all, each worker exits 0 with its own output; no other
# process gets the library (the DataLoader's forks inherit the driver's
# mapping, not a usable CUDA), the process without CUDA never has it mapped.
# Run twice: `-t cpu`, then `-t cpu,python`, where the workers get the Python
# hook at Py_RunMain, before CUDA: the same copy of the library (one memfd
# mapped) starts CUPTI once torch has loaded CUDA, and each worker's Python
# log is published beside its CUPTI log.
#   tests/gpu/attach_children.sh run [OUTDIR]
set -u
. "$(dirname "$0")/common.inc"
[ "${1:-}" = run ] || { echo "usage: $0 run [OUTDIR]"; exit 2; }
OUT=${2:-/tmp/attach-children}
gpu_python python3
gpu_carry_libs
tap_tmpdir T attach-children
mkdir -p "$OUT"
injected() { grep -qE "libllmtracker-inject|memfd:llmtracker" "/proc/$1/maps" 2>/dev/null; }

# A worker: initializes CUDA, then runs matmuls until $T/stop appears.
cat > "$T/worker.py" <<'PY'
import os, sys, torch
from torch.utils.data import DataLoader, TensorDataset
stop = sys.argv[1]
a = torch.randn(1024, 1024, device="cuda")
data = DataLoader(TensorDataset(torch.arange(100000.0)), batch_size=100, num_workers=2)
n = 0
while not os.path.exists(stop):
    for (b,) in data:
        a = (a @ a).tanh() + b.sum().to("cuda") * 0
        n += 1
        if os.path.exists(stop):
            break
    torch.cuda.synchronize()
print("worker done", n)
PY
cat > "$T/parent.sh" <<'SH'
#!/bin/bash
T=$1 PY=$2
read -r _ < "$T/go"
for i in 0 1; do "$PY" "$T/worker.py" "$T/stop" > "$T/w$i.out" 2>&1 & echo $! > "$T/w$i.pid"; done
"$PY" -c 'import os, time
while not os.path.exists(os.sys.argv[1]): time.sleep(0.05)' "$T/stop" & echo $! > "$T/plain.pid"
for i in 0 1; do wait "$(cat "$T/w$i.pid")"; echo "status $?" > "$T/w$i.status"; done
wait
SH
one_run() {
TYPES=$1
rm -f "$T"/go "$T"/stop "$T"/*.pid "$T"/*.status "$T"/*.out "$T"/llmtracker-*.evlog "$T"/p.log "$T"/err
echo "== -t $TYPES --enable-cuda-kernel true"
mkfifo "$T/go"
bash "$T/parent.sh" "$T" "$PY" & PARENT=$!
tap_bg $PARENT
"$CARRY/bin/llmtracker" profile -p $PARENT -t "$TYPES" --enable-cuda-kernel true -d 180 -v 1 -o "$T/p.log" \
	--cupti-dir "$T" > /dev/null 2> "$T/err" & CP=$!
tap_bg $CP
wait_for "$T/err" "profiling 1 process" 120 || say "FAIL the collector did not start: $(tail -3 "$T/err")"
echo go > "$T/go"
for i in 0 1; do
	wait_for "$T/w$i.pid" . 120
	w=$(cat "$T/w$i.pid")
	if [ "$TYPES" = cpu ]; then
		wait_for "$T/err" "CUDA kernel profiling (of|cannot start in) pid $w" 120
	else # the hook's start carried CUDA: the library starts CUPTI itself, said at the end
		for _ in $(seq 1200); do grep -q "/libcuda.so" "/proc/$w/maps" 2>/dev/null && break; sleep 0.1; done
		sleep 2 # a few of the library's 200 ms looks for CUDA
	fi
	grep -qE "CUDA kernel profiling of pid $w started|pid $w: .*cuda_wait|python: pid $w: tracing" "$T/err" &&
		say "PASS worker $i (pid $w) got the library after its CUDA start" ||
		say "FAIL worker $i (pid $w): $(grep "pid $w" "$T/err" | tail -2 | tr '\n' ' ')"
	copies=$(awk '/memfd:llmtracker-inject/ { print $5 }' "/proc/$w/maps" 2>/dev/null | sort -u | wc -l)
	[ "$copies" = 1 ] && say "PASS worker $i: one copy of the library mapped" ||
		say "FAIL worker $i: $copies copies of the library mapped"
done
plain=$(cat "$T/plain.pid")
if [ "$TYPES" = cpu ]; then
	injected "$plain" && say "FAIL the process without CUDA has the library mapped" ||
		say "PASS the process without CUDA is left untouched"
fi
touch "$T/stop"
wait $CP; rc=$?
cp "$T/err" "$OUT/collector.log"
[ $rc = 0 ] && say "PASS profile exits 0" || say "FAIL profile exits $rc: $(tail -3 "$T/err" | tr '\n' ' ')"
sed -n '/^  source /,$p' "$T/err"
sum=0
for i in 0 1; do
	w=$(cat "$T/w$i.pid")
	grep -q "status 0" "$T/w$i.status" 2>/dev/null && grep -q "^worker done" "$T/w$i.out" &&
		say "PASS worker $i exited 0 with its own output" ||
		say "FAIL worker $i: $(cat "$T/w$i.status" 2>/dev/null) $(tail -2 "$T/w$i.out" | tr '\n' ' ')"
	told=$(grep -oE "pid $w: [0-9]+ kernels" "$T/err" | grep -oE "^pid $w: [0-9]+" | grep -oE "[0-9]+$")
	logged=$("$CARRY/bin/inject_logdump" "$T"/llmtracker-cupti.*."$w".*.evlog 2>/dev/null | grep -c "^K")
	[ "${told:-0}" -gt 0 ] && [ "$logged" = "$told" ] &&
		say "PASS worker $i: its published CUPTI log holds the $told kernels the collector was told of" ||
		say "FAIL worker $i: told ${told:-none}, logged $logged"
	sum=$((sum + ${told:-0}))
	if [ "$TYPES" != cpu ]; then
		pl=$(ls "$T"/llmtracker-python.*."$w".*.evlog 2>/dev/null | head -1)
		[ -n "$pl" ] && grep -q "python: pid $w: tracing functions through the injected profile hook" "$T/err" &&
			say "PASS worker $i: traced by the hook, its Python log $(basename "$pl") published" ||
			say "FAIL worker $i: no Python log or no hook"
	fi
done
[ "$TYPES" = cpu ] || ! ls "$T"/llmtracker-cupti.*."$plain".*.evlog > /dev/null 2>&1 &&
	say "PASS the process without CUDA has no CUDA log" || say "FAIL the process without CUDA has a CUDA log"
started=$(grep -c "CUDA kernel profiling of pid [0-9]* started" "$T/err")
[ "$started" = 2 ] && say "PASS only the two workers got the library (not their DataLoader forks)" ||
	say "FAIL $started processes got the library: $(grep -oE "profiling of pid [0-9]+ started" "$T/err" | tr '\n' ' ')"
row=$(awk '$1 == "gpu" { print $2 }' "$T/err")
memcpy=$(grep -oE "[0-9]+ kernels, [0-9]+ memcpy, [0-9]+ memset" "$T/err" |
	awk '{ s += $3 + $5 } END { print s + 0 }')
[ "$row" = $((sum + memcpy)) ] && say "PASS the gpu row counts both workers ($row)" ||
	say "FAIL the gpu row: $row, want $((sum + memcpy))"
mkdir -p "$OUT/$TYPES"; cp "$T/err" "$OUT/$TYPES/collector.log"
}
one_run cpu
one_run cpu,python
gpu_done
