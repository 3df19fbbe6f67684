# SPDX-License-Identifier: Apache-2.0
"""GPU check of -t cuda against PyTorch (driven by cuda_lib_torch.sh).

  kernels --meta FILE [--steps N]   train a small model; the measured steps run
                                    under torch.profiler (its kernel count is the
                                    yardstick); writes the window and counts
  nccl --meta FILE [--iters N]      all_reduce on a one-rank NCCL communicator
  check-kernels META DUMP           compare with `cuda_logcount LOG --dump`
  check-nccl META DUMP
Times are CLOCK_MONOTONIC ns, the clock of the event log.
"""
import json
import os
import sys
import time

LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
            "cudaLaunchKernelExC_ptsz", "cudaLaunchCooperativeKernel",
            "cudaLaunchCooperativeKernel_ptsz", "cuLaunchKernel", "cuLaunchKernel_ptsz",
            "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", "cuLaunchCooperativeKernel",
            "cuLaunchCooperativeKernel_ptsz")


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def model_and_step(torch):
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 128, 256, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
    return step


def run_kernels():
    import torch
    from torch.profiler import ProfilerActivity, profile
    steps = int(arg("--steps", "20"))
    step = model_and_step(torch)
    for _ in range(5):          # warm-up: allocator, cuBLAS handles, lazy modules
        step()
    torch.cuda.synchronize()
    trace = arg("--meta", "meta.json") + ".trace.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.monotonic_ns()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        t1 = time.monotonic_ns()
    prof.export_chrome_trace(trace)
    with open(trace) as f:
        ev = json.load(f).get("traceEvents", [])
    kernels = sum(1 for e in ev if e.get("cat") == "kernel")
    runtime = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "aunch" in e.get("name", ""):
            runtime[e["name"]] = runtime.get(e["name"], 0) + 1
    # the same steps once more without torch.profiler: the loop's own rate
    torch.cuda.synchronize()
    a = time.monotonic_ns()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    rate = steps / ((time.monotonic_ns() - a) / 1e9)
    meta = {"pid": os.getpid(), "t0": t0, "t1": t1, "steps": steps, "kernels": kernels,
            "profiler_launch_calls": runtime, "steps_per_s": rate}
    with open(arg("--meta", "meta.json"), "w") as f:
        json.dump(meta, f)
    print("kernels: %d steps, torch.profiler saw %d kernels; %.1f steps/s without profiler"
          % (steps, kernels, rate))


def run_nccl():
    import torch
    import torch.distributed as dist
    iters = int(arg("--iters", "10"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)          # creates the communicator
    torch.cuda.synchronize()
    t0 = time.monotonic_ns()
    for _ in range(iters):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    t1 = time.monotonic_ns()
    dist.destroy_process_group()
    with open(arg("--meta", "meta.json"), "w") as f:
        json.dump({"pid": os.getpid(), "t0": t0, "t1": t1, "iters": iters, "count": 1 << 20}, f)
    print("nccl: %d all_reduce of %d float32 on one rank" % (iters, 1 << 20))


def read_dump(path):
    calls = []
    with open(path) as f:
        for line in f:
            if not line.startswith("call "):
                continue
            head, _, detail = line.rstrip("\n").partition(" | ")
            p = head.split()
            calls.append({"pid": int(p[1]), "tid": int(p[2]), "ts": int(p[3]), "dur": int(p[4]),
                          "ret": int(p[5]), "depth": int(p[6]), "sym": p[8], "lib": p[9],
                          "detail": detail})
    return calls


def outer_launches(calls):
    """Launch calls not nested in another launch on their thread (the
    runtime's cudaLaunchKernel may call the driver's cuLaunchKernel)."""
    by_tid = {}
    for c in calls:
        if c["sym"] in LAUNCHES:
            by_tid.setdefault(c["tid"], []).append(c)
    n = 0
    for lst in by_tid.values():
        lst.sort(key=lambda c: (c["ts"], -c["dur"]))
        end = -1
        for c in lst:
            if c["ts"] >= end:
                n += 1
                end = c["ts"] + c["dur"]
    return n


def report(ok, what):
    print("%s: %s" % ("PASS" if ok else "FAIL", what))
    return ok


def check_kernels(meta_path, dump_path):
    meta = json.load(open(meta_path))
    calls = [c for c in read_dump(dump_path) if meta["t0"] <= c["ts"] <= meta["t1"]]
    by = {}
    for c in calls:
        by[(c["sym"], c["depth"])] = by.get((c["sym"], c["depth"]), 0) + 1
    print("calls recorded in the profiled window: %d" % len(calls))
    for (s, d), n in sorted(by.items(), key=lambda kv: -kv[1])[:25]:
        print("  %-36s depth %d  %7d" % (s, d, n))
    print("torch.profiler launch API events: %s" % json.dumps(meta["profiler_launch_calls"]))
    ours = outer_launches(calls)
    ok = report(len(calls) > 0, "library calls recorded from the torch process")
    ok &= report(ours == meta["kernels"], "launch calls recorded (%d) == kernels seen by torch.profiler (%d)"
                 % (ours, meta["kernels"]))
    named = [c for c in calls if c["sym"].startswith("cudaLaunchKernel") and "kernel=" in c["detail"]]
    rt = [c for c in calls if c["sym"].startswith("cudaLaunchKernel")]
    if rt:
        print("example: %s | %s" % (rt[0]["sym"], rt[0]["detail"]))
        # Informational: the wheels' libtorch_cuda.so is stripped of the
        # kernels' host-stub symbols; --enable-cuda-kernel names them.
        print("INFO: cudaLaunchKernel kernels named from their host stub: %d of %d"
              % (len(named), len(rt)))
    return ok


def check_nccl(meta_path, dump_path):
    meta = json.load(open(meta_path))
    all_calls = read_dump(dump_path)
    calls = [c for c in all_calls if meta["t0"] <= c["ts"] <= meta["t1"]]
    nccl = {}
    for c in all_calls:
        if c["sym"].startswith(("nccl", "pnccl")):
            nccl[c["sym"]] = nccl.get(c["sym"], 0) + 1
    print("NCCL calls over the whole run: %s" % json.dumps(nccl))
    ar = [c for c in calls if c["sym"] in ("ncclAllReduce", "pncclAllReduce")]
    if ar:
        print("example: %s ret=%d %s | %s" % (ar[0]["sym"], ar[0]["ret"], ar[0]["lib"], ar[0]["detail"]))
    ok = report(len(ar) == meta["iters"], "ncclAllReduce calls in the window (%d) == all_reduce calls (%d)"
                % (len(ar), meta["iters"]))
    # the decoded fields, then the detail text (cuda_logcount --dump)
    want = ("bytes=%d |" % (meta["count"] * 4), "| count=%d datatype=float32 op=sum" % meta["count"])
    ok &= report(bool(ar) and all(all(w in c["detail"] for w in want) and c["ret"] == 0 for c in ar),
                 "all_reduce decoded as '%s ... %s', returned ncclSuccess" % want)
    ok &= report(any(s.startswith(("ncclCommInit", "pncclCommInit")) for s in nccl),
                 "communicator creation recorded")
    return ok


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "kernels":
        run_kernels()
    elif mode == "nccl":
        run_nccl()
    elif mode == "check-kernels":
        sys.exit(0 if check_kernels(sys.argv[2], sys.argv[3]) else 1)
    elif mode == "check-nccl":
        sys.exit(0 if check_nccl(sys.argv[2], sys.argv[3]) else 1)
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
