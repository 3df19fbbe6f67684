# A small PyTorch training loop with named Python functions, for sampled
# Python stacks (-t pysample) on a GPU host:
#   <module> -> main -> train_loop -> train_step -> forward_pass / backward_pass
#   / optimizer_step, and a second thread in prepare_batches.
#   python pys_torch_loop.py [--seconds S] [--meta FILE]
# --meta writes {"steps", "seconds", "steps_per_s", "pid", "device"} as JSON.
import json
import os
import queue
import sys
import threading
import time

import torch


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def prepare_batches(q, device, stop):
    while not stop.is_set():
        x = torch.randn(32, 128, 256)
        x = (x - x.mean()) / (x.std() + 1e-6)
        try:
            q.put(x.to(device, non_blocking=True), timeout=0.1)
        except queue.Full:
            pass


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


def train_loop(model, opt, q, seconds, device):
    steps = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        train_step(model, opt, q.get())
        steps += 1
        if device == "cuda" and steps % 10 == 0:
            torch.cuda.synchronize()
    return steps


def main():
    seconds = float(arg("--seconds", "3"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    q = queue.Queue(maxsize=4)
    stop = threading.Event()
    feeder = threading.Thread(target=prepare_batches, args=(q, device, stop), name="feeder")
    feeder.start()
    print("training on", device, flush=True)
    t0 = time.monotonic()
    steps = train_loop(model, opt, q, seconds, device)
    took = time.monotonic() - t0
    stop.set()
    feeder.join()
    meta = {"steps": steps, "seconds": took, "steps_per_s": steps / took,
            "pid": os.getpid(), "device": device}
    print(json.dumps(meta), flush=True)
    if "--meta" in sys.argv:
        with open(arg("--meta", ""), "w") as f:
            json.dump(meta, f)


main()
