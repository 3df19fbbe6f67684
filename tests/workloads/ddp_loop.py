"""A data-parallel training loop on CPU (torch.distributed, gloo), for the
step detector and the straggler report. Each rank is started by hand
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK in its environment).

    python3 ddp_loop.py MODE TRUTH [--steps N] [--late RANK:MS:S1,S2,...] [--go FILE]
                        [--loader] [--device cpu|cuda] [--torch-profiler DIR]
    MODE: inline  the loop body inline at module level:
                  x = load_batch(step); loss = loss_fn(model(x), y);
                  loss.backward(); all_reduce of each gradient; opt.step()
          fbu     a loop calling forward(); backward(); update()
          ddp     the inline body with the model in DistributedDataParallel
                  (its gradients' all-reduce runs in C++ inside backward)
    --late R:MS:STEPS  rank R sleeps MS ms (in straggle()) before the
                  forward pass of those steps: it reaches the collectives late
    --device cuda the model, batches and gradients on cuda:0 (every rank on
                  the one GPU), still all-reduced by gloo
    --torch-profiler DIR  the loop under torch.profiler (CPU, and CUDA with
                  --device cuda), one ProfilerStep#N per iteration N (prof.step()
                  at its end), its chrome trace written to DIR/rankR.json

The model's forward and backward each sleep a few ms beside their small
matrix products (the time a GPU would take): ranks spend most of a step off
the CPU, so four of them share two busy cores without delaying each other
more than the scheduler does.

TRUTH gets one line per step, "train START END" (CLOCK_REALTIME ns, the clock
of the trace JSON's baseTimeNanoseconds): START is read at the top of the
iteration, END at the top of the next one (after the last, when its body is
done), and "late STEP MS" lines for the steps this rank was made late at.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

FWD_S, BWD_S, LOAD_S = 0.050, 0.070, 0.020


class Sleepy(torch.autograd.Function):
    """Identity whose backward takes BWD_S (a device's backward pass)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        time.sleep(BWD_S)
        return g


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        time.sleep(FWD_S)
        return self.fc2(torch.relu(Sleepy.apply(self.fc1(x))))


def load_batch(step):
    time.sleep(LOAD_S)
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(32, 64, generator=g), torch.randn(32, 8, generator=g)
    if CUDA:
        return x.to(DEVICE), y.to(DEVICE)
    return x, y


def straggle(ms):
    time.sleep(ms / 1000)


def average_gradients(model, world):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def parse():
    mode, truth = sys.argv[1], sys.argv[2]
    steps, late, go, loader, device, prof = 20, (None, 0, ()), None, False, "cpu", None
    a = sys.argv[3:]
    while a:
        if a[0] == "--steps":
            steps = int(a[1])
        elif a[0] == "--device":
            device = a[1]
        elif a[0] == "--torch-profiler":
            prof = a[1]
        elif a[0] == "--late":
            r, ms, at = a[1].split(":")
            late = (int(r), float(ms), tuple(int(s) for s in at.split(",")))
        elif a[0] == "--go":
            go = a[1]
        elif a[0] == "--loader":
            loader, a = True, a[1:]
            continue
        else:
            sys.exit("unknown option " + a[0])
        a = a[2:]
    if device not in ("cpu", "cuda"):
        sys.exit("--device: cpu or cuda, not " + device)
    return mode, truth, steps, late, go, loader, torch.device(device, 0) if device == "cuda" else None, prof


class Batches(torch.utils.data.Dataset):
    """load_batch(i) as a data set: the DataLoader's __next__ takes LOAD_S."""

    def __len__(self):
        return STEPS

    def __getitem__(self, i):
        return load_batch(i)


def torch_profiler(out_dir):
    """torch.profiler over the loop: a schedule that records every step (only
    a schedule makes it write ProfilerStep#N), the trace written at stop()."""
    from torch.profiler import ProfilerAction, ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else [])
    path = os.path.join(out_dir, f"rank{RANK}.json")
    return profile(activities=acts, schedule=lambda _: ProfilerAction.RECORD,
                   on_trace_ready=lambda p: p.export_chrome_trace(path))


MODE, TRUTH, STEPS, LATE, GO, LOADER, DEVICE, PROF_DIR = parse()
CUDA = DEVICE is not None
RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.set_num_threads(1)
torch.manual_seed(0)
if CUDA:
    torch.cuda.set_device(DEVICE)
dist.init_process_group("gloo", rank=RANK, world_size=WORLD)
net = Net().to(DEVICE) if CUDA else Net()
model = torch.nn.parallel.DistributedDataParallel(net) if MODE == "ddp" else net
loss_fn = torch.nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
late_here = LATE[2] if LATE[0] == RANK else ()
marks = []
state = {}


def forward(step, batch=None):
    x, y = batch if batch else load_batch(step)
    if step in late_here:
        straggle(LATE[1])
    state["loss"] = loss_fn(model(x), y)


def backward():
    state["loss"].backward()
    average_gradients(model, WORLD)


def update():
    opt.step()
    opt.zero_grad()


if GO:
    open(f"{GO}.ready.{RANK}", "w").close()
while GO and not os.path.exists(GO):
    time.sleep(0.02)
dist.barrier()
batches = torch.utils.data.DataLoader(Batches(), batch_size=None) if LOADER else None
prof = torch_profiler(PROF_DIR) if PROF_DIR else None
if prof:
    prof.start()  # opens ProfilerStep#0: the first iteration starts here
if MODE == "inline" and LOADER:
    marks.append(time.time_ns())  # the loop's first __next__ starts the first step
    for step, (x, y) in enumerate(batches):
        if step in late_here:
            straggle(LATE[1])
        loss = loss_fn(model(x), y)
        loss.backward()
        average_gradients(model, WORLD)
        opt.step()
        opt.zero_grad()
        if prof:
            prof.step()
        marks.append(time.time_ns())  # the next step starts with __next__
elif MODE in ("inline", "ddp"):
    for step in range(STEPS):
        marks.append(time.time_ns())
        x, y = load_batch(step)
        if step in late_here:
            straggle(LATE[1])
        loss = loss_fn(model(x), y)
        loss.backward()
        if MODE == "inline":
            average_gradients(model, WORLD)
        opt.step()
        opt.zero_grad()
        if prof:
            prof.step()
elif MODE == "fbu" and LOADER:
    marks.append(time.time_ns())
    for step, batch in enumerate(batches):
        forward(step, batch)
        backward()
        update()
        if prof:
            prof.step()
        marks.append(time.time_ns())
elif MODE == "fbu":
    for step in range(STEPS):
        marks.append(time.time_ns())
        forward(step)
        backward()
        update()
        if prof:
            prof.step()
else:
    sys.exit("unknown mode " + MODE)
if not LOADER:  # the end of the last step (with a DataLoader: before its last __next__)
    marks.append(time.time_ns())
if prof:
    prof.stop()  # writes the trace
if CUDA:
    torch.cuda.synchronize()
with open(TRUTH, "w") as out:
    for s, e in zip(marks, marks[1:]):
        out.write(f"train {s} {e}\n")
    for s in late_here:
        out.write(f"late {s} {LATE[1]:g}\n")
dist.barrier()
dist.destroy_process_group()
