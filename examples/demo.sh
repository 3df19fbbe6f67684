#!/bin/bash
# The main job on the bundled example: profile examples/train_sim.py with
# every source this host supports, then write a TensorBoard run directory and
# a Perfetto trace, and say where they are and how to open them.
#   OUT=/tmp/llmtracker-demo ./examples/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/llmtracker-demo}
if [ "$(id -u)" != 0 ]; then
	echo "demo: the collector needs root (or CAP_BPF+CAP_PERFMON+CAP_SYS_PTRACE); run as root" >&2
	exit 1
fi
./scripts/install-deps.sh
mkdir -p "$out"
echo "== building (make -j$(nproc); its output: $out/build.log)"
make -j"$(nproc)" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; echo "demo: the build failed" >&2; exit 1; }

# /usr/bin/python3.11 on Debian is built with USDT probes: Python functions
# are then traced too. Other interpreters still get syscalls and CPU stacks.
py=python3 types=syscall,cpu,pysample
if [ -x /usr/bin/python3.11 ]; then py=/usr/bin/python3.11 types=syscall,cpu,pysample,python; fi

find "$out" -mindepth 1 -maxdepth 1 ! -name build.log -exec rm -rf {} +
echo "== profiling: $py examples/train_sim.py  (-t $types)"
build/bin/llmtracker profile -t "$types" -o "$out/data.evlog" -v 1 -- \
	"$py" examples/train_sim.py --steps 100 --data "$out/work"
echo "== converting"
build/bin/llmtracker export -i "$out/data.evlog" --logdir "$out/tb" --run demo
# Perfetto's own format, and the JSON beside it from the same pass (its
# shortest Python calls folded to keep it under 100 MB, as the line says)
build/bin/llmtracker export -i "$out/data.evlog" -o "$out/trace.pftrace" -o "$out/trace.json.gz"
echo "== summary"
build/bin/llmtracker-convert summary -n 8 "$out/data.evlog" >"$out/summary.txt"
cat "$out/summary.txt"
run_dir=$out/tb/plugins/profile/demo
cat <<MSG

Results
  event log         $out/data.evlog
  summary           $out/summary.txt
  TensorBoard run   $run_dir/  ($(cd "$run_dir" && ls | tr '\n' ' '))
  Perfetto trace    $out/trace.pftrace  ($(du -h "$out/trace.pftrace" | cut -f1))
  trace JSON        $out/trace.json.gz
How to open them
  TensorBoard: pip install tensorboard tensorboard-plugin-profile (xprof);
               tensorboard --logdir $out/tb  → PROFILE tab, run "demo"
  Perfetto:    open https://ui.perfetto.dev, "Open trace file", pick $out/trace.pftrace
               (or drop it on the page); the JSON opens there and in chrome://tracing
  Flame graph: flamegraph.pl $run_dir/*.cpu.folded > cpu.svg
MSG
