"""Two-rank NCCL workload for tests/gpu/nccl_two_rank.sh.

Each rank (one per GPU) does all-reduces and training steps of a small model
for --seconds, and records per-step end times so that steps/s before, during
and after a profiling window can be compared. Rank r writes its pid to
DIR/rank<r>.pid once CUDA and NCCL are up, and at the end DIR/rank<r>.json
with the time of every all_reduce it issued and of every step's end.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    dev = torch.device("cuda", rank)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1024, device=dev)
    buf = torch.ones(1 << 20, device=dev)
    calls = []  # CLOCK_MONOTONIC ns of every all_reduce issued

    def all_reduce(t):
        calls.append(time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        dist.all_reduce(t)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        for p in model.parameters():  # data-parallel gradient all-reduce
            all_reduce(p.grad)
        all_reduce(buf)
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    with open(os.path.join(args.dir, f"rank{rank}.pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(args.dir, f"rank{rank}.pid.tmp"), os.path.join(args.dir, f"rank{rank}.pid"))
    t_start = time.monotonic()
    ends = []
    while time.monotonic() - t_start < args.seconds:
        step()
        torch.cuda.synchronize()
        ends.append(time.clock_gettime_ns(time.CLOCK_MONOTONIC))
    dist.barrier()
    res = {"rank": rank, "pid": os.getpid(), "allreduce_ns": calls, "step_end_ns": ends}
    with open(os.path.join(args.dir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--world", type=int, default=2)
    args = ap.parse_args()
    mp.spawn(rank_main, args=(args.world, args), nprocs=args.world, join=True)
