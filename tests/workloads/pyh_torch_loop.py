"""A PyTorch training loop with a known Python call tree, for the profile
hook on a GPU host: each of STEPS steps calls train_step() once, and
train_step() calls forward_pass(), backward_pass() and optimizer_step()
once each. Imports torch and warms up, writes READY, waits (asleep) until
GO exists, runs the steps, prints "pyh_torch done STEPS steps_per_s", then
waits until HOLD exists and exits with status 3.
Usage: pyh_torch_loop.py STEPS READY GO HOLD"""
import os
import sys
import time

import torch


def forward_pass(model, x):
    return model(x).square().mean()


def backward_pass(loss):
    loss.backward()


def optimizer_step(opt):
    opt.step()
    opt.zero_grad(set_to_none=True)


def train_step(model, opt, x):
    loss = forward_pass(model, x)
    backward_pass(loss)
    optimizer_step(opt)
    return loss


def wait_file(path):
    while not os.path.exists(path):
        time.sleep(0.01)


def main():
    steps, ready, go, hold = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 256, device=dev)
    for _ in range(5):  # warm-up, before anyone attaches
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if dev == "cuda":
        torch.cuda.synchronize()
    open(ready, "w").close()
    wait_file(go)
    t0 = time.perf_counter()
    for _ in range(steps):
        train_step(model, opt, x)
    if dev == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print("pyh_torch done %d %.1f %s" % (steps, steps / dt, dev), flush=True)
    wait_file(hold)
    sys.exit(3)


if __name__ == "__main__":
    main()
