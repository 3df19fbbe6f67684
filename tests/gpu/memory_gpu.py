#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GPU memory of known sizes through PyTorch's caching allocator (memory_gpu.sh).

  memory_gpu.py TRUTH

CUDA is brought up and used first (its own first allocations, cuBLAS's
workspace), then, after WARM seconds (default 3: recording has begun), the
window: tensors whose sizes each take a segment of their own (the caching
allocator rounds a request of 10 MB or more up to 2 MiB and calls cudaMalloc
once for it), pinned host memory, then everything freed and
torch.cuda.empty_cache() (cudaFree per segment). TRUTH (JSON) holds the
window's bounds (CLOCK_MONOTONIC ns, the event log's clock), the segments
torch.cuda.memory_snapshot() shows appearing and going in it (address and
size), and torch.cuda.memory_stats()'s segment counts and reserved bytes
before and after each phase.
"""
import json
import os
import sys
import time

# one cudaMalloc per segment (expandable segments map memory instead)
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
os.environ.setdefault("PYTORCH_ALLOC_CONF", os.environ["PYTORCH_CUDA_ALLOC_CONF"])
import torch  # noqa: E402

MIB = 1 << 20
SIZES_MIB = [64, 96, 128, 34]  # each >= 10 MB and a multiple of 2 MiB: one segment each
PINNED = 8 * MIB


def stats():
    s = torch.cuda.memory_stats()
    keys = ("segment.all.allocated", "segment.all.freed", "reserved_bytes.all.allocated",
            "reserved_bytes.all.freed", "reserved_bytes.all.current")
    return {k: int(s.get(k, 0)) for k in keys}


def segments():
    return {(s["address"], s["total_size"]) for s in torch.cuda.memory_snapshot()
            if s.get("device", 0) == torch.cuda.current_device()}


def main():
    truth_path = sys.argv[1]
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    a = torch.randn(512, 512, device=dev)
    (a @ a).sum().item()  # context, cuBLAS and its workspace, before the window
    torch.cuda.synchronize()
    time.sleep(float(os.environ.get("WARM", "3")))
    torch.cuda.empty_cache()  # no cached free block serves the window's requests

    t = {"device": 0, "sizes": [m * MIB for m in SIZES_MIB]}
    seg0, st0 = segments(), stats()
    t["begin"] = time.monotonic_ns()
    held = [torch.empty(m * MIB, dtype=torch.uint8, device=dev) for m in SIZES_MIB]
    torch.cuda.synchronize()
    t["allocated_end"] = time.monotonic_ns()
    seg1, st1 = segments(), stats()
    pinned = torch.empty(PINNED, dtype=torch.uint8, pin_memory=True)
    t["pinned_end"] = time.monotonic_ns()
    del held
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    t["end"] = time.monotonic_ns()
    seg2, st2 = segments(), stats()
    del pinned

    t["new_segments"] = sorted(seg1 - seg0)
    t["freed_segments"] = sorted(seg1 - seg2)
    t["stats"] = [st0, st1, st2]
    t["pinned_bytes"] = PINNED
    with open(truth_path, "w") as f:
        json.dump(t, f)
    print("segments new %d (%d bytes), freed %d (%d bytes)" % (
        len(t["new_segments"]), sum(s for _, s in t["new_segments"]),
        len(t["freed_segments"]), sum(s for _, s in t["freed_segments"])))


if __name__ == "__main__":
    main()
