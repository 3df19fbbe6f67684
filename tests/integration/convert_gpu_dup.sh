#!/bin/bash
# A GPU host's logs: the collector's uprobes and the injected CUPTI library
# both record the same CUDA calls on the same thread, with slightly
# different bounds, and every uprobed return shows a uretprobe system call
# straddling it. The converter keeps one record per call (the uprobe's
# bounds and arguments, CUPTI's correlation id and launch flow), drops the
# profiler's own uretprobe calls, puts CUPTI's synchronization records on
# the waiting thread, and cuts no overlaps.
set -u
scratch=convert-gpudup
. "$(dirname "$0")/convert_common.inc"

mkdir -p "$dir/cupti"
steps=$("$gen" "$dir/node.log" -n 5000 --part host --uprobe-cuda | awk '{print $2}')
# the CUPTI part writes 8 events a step: the same number of steps
"$gen" "$dir/cupti/inject.log" -n $(( (steps - 1) * 8 )) --part gpu --uprobe-cuda >/dev/null

desc="node + CUPTI logs ($steps steps): converted, checker passes with every flow bound"
t bash -c "'$conv' -i '$dir/node.log' --cupti-dir '$dir/cupti' -o '$dir/t.json' 2>'$dir/err' && \
	$json_check '$dir/t.json' --expect-flows $((steps * 3)) && cat '$dir/err'"
desc="closing line: $((steps * 3)) uretprobe calls dropped, $((steps * 2)) calls kept once, no overlap cut"
t bash -c "cat '$dir/err'; grep -q ' $((steps * 3)) uretprobe syscalls' '$dir/err' && \
	grep -q ' $((steps * 2)) CUDA calls seen by both uprobes and CUPTI, kept once' '$dir/err' && \
	! grep -q 'overlaps cut' '$dir/err'"
desc="one record per call: the uprobe's bounds and library, CUPTI's correlation id, the flow from it"
t python3 - "$dir/t.json" "$steps" <<'PY'
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
steps = int(sys.argv[2])
x = [e for e in ev if e.get("ph") == "X"]
launch = [e for e in x if e["name"] == "cudaLaunchKernel"]
assert len(launch) == steps, len(launch)
assert all(e["args"].get("library") == "/usr/lib/libcudart.so.13" for e in launch)
assert all(e["dur"] == 10.0 and e["ts"] % 1000 == 100.0 for e in launch), launch[0]
assert sorted(e["args"]["correlation"] for e in launch) == [1 + 4 * s for s in range(steps)]
copies = [e for e in x if e["name"].startswith("cudaMemcpyAsync")]
assert len(copies) == steps and all(e["name"] == "cudaMemcpyAsync_ptsz" for e in copies)
starts = {(e["tid"], e["ts"]) for e in ev if e.get("ph") == "s"}
assert all((e["tid"], e["ts"]) in starts for e in launch + copies), "flow not on the kept record"
assert not [e for e in x if e.get("cat") == "syscall" and e["name"] in ("syscall_335", "uretprobe")]
# the driver call stays a child of the runtime call
drv = [e for e in x if e["name"] == "cuLaunchKernel"]
assert len(drv) == steps and all(e["dur"] == 7.0 for e in drv)
PY
desc="CUPTI's synchronization records sit on the thread that waited (not the main thread)"
t python3 - "$dir/t.json" "$steps" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
sync = [e for e in ev if e.get("cat") == "cuda_sync"]
assert len(sync) == int(sys.argv[2]), len(sync)
assert all(e["tid"] == 4001 for e in sync), {e["tid"] for e in sync}
PY
desc="node log alone: the uprobe records stand as they are, nothing merged, uretprobe still dropped"
t bash -c "'$conv' -i '$dir/node.log' -o '$dir/u.json' 2>'$dir/err2' && cat '$dir/err2' && \
	! grep -q 'kept once' '$dir/err2' && grep -q ' $((steps * 3)) uretprobe' '$dir/err2' && \
	python3 -c \"import json; ev=json.load(open('$dir/u.json'))['traceEvents']; \
l=[e for e in ev if e.get('ph')=='X' and e.get('name')=='cudaLaunchKernel']; assert len(l)==$steps and all(e['args'].get('library') for e in l)\""
desc="CUPTI log alone: its records stand, synchronization records still on the waiting thread"
t bash -c "'$conv' -i '$dir/cupti/inject.log' -o '$dir/c.json' 2>'$dir/err3' && ! grep -q 'kept once' '$dir/err3' && \
	python3 -c \"import json; ev=json.load(open('$dir/c.json'))['traceEvents']; \
s=[e for e in ev if e.get('cat')=='cuda_sync']; assert s and all(e['tid']==4001 for e in s)\""
# The job in a pid namespace of its own (a container): the injected library
# writes the namespace's tids (node's - 3900), the collector's log the node's
# plus an ns_tid marker per thread; the converter maps them, so the
# same calls merge as above.
mkdir -p "$dir/ns/cupti"
"$gen" "$dir/ns/node.log" -n 5000 --part host --uprobe-cuda --ns-tids 3900 >/dev/null
"$gen" "$dir/ns/cupti/inject.log" -n $(( (steps - 1) * 8 )) --part gpu --uprobe-cuda --ns-tids 3900 >/dev/null
desc="container tids: CUPTI's records mapped to the node's tids, $((steps * 2)) calls kept once, no marker shown"
t bash -c "'$conv' -i '$dir/ns/node.log' --cupti-dir '$dir/ns/cupti' -o '$dir/ns/t.json' 2>'$dir/ns/err' && \
	cat '$dir/ns/err' && grep -q ' $((steps * 2)) CUDA calls seen by both uprobes and CUPTI, kept once' '$dir/ns/err' && \
	python3 -c \"import json; ev=json.load(open('$dir/ns/t.json'))['traceEvents']; \
s=[e for e in ev if e.get('cat')=='cuda_sync']; assert s and all(e['tid']==4001 for e in s), s[:1]; \
assert not [e for e in ev if e.get('name')=='<marker>']; \
assert not [e for e in ev if e.get('pid')==4000 and e.get('tid') in (100, 101, 102, 103)]\""
desc="container tids, CUPTI log alone (no markers): its tids stay the namespace's"
t bash -c "'$conv' -i '$dir/ns/cupti/inject.log' -o '$dir/ns/c.json' 2>/dev/null && \
	python3 -c \"import json; ev=json.load(open('$dir/ns/c.json'))['traceEvents']; \
s=[e for e in ev if e.get('cat')=='cuda_sync']; assert s and all(e['tid']==101 for e in s), s[:1]\""
tap_done
