"""A small CPU-only training loop to profile: data loading (file reads), a
forward/backward pass of a two-layer perceptron in plain Python, an optimizer
step, and a checkpoint every few steps. It needs nothing but the standard
library, so it runs anywhere the profiler does.

    python3 examples/train_sim.py [--steps N] [--data DIR]
"""
import argparse
import math
import os
import random
import struct
import tempfile
import threading
import time

BATCH, IN, HIDDEN, OUT = 16, 32, 24, 4


def make_dataset(path, rows=4096):
    rnd = random.Random(7)
    with open(path, "wb") as f:
        for _ in range(rows):
            x = [rnd.uniform(-1, 1) for _ in range(IN)]
            chunk = IN // OUT  # a learnable label: the strongest quarter
            y = max(range(OUT), key=lambda k: sum(x[k * chunk:(k + 1) * chunk]))
            f.write(struct.pack(f"<{IN}fI", *x, y))


def load_batch(f, step):
    """Read one batch; small reads on purpose, like an unbuffered loader."""
    rec = struct.calcsize(f"<{IN}fI")
    xs, ys = [], []
    for i in range(BATCH):
        f.seek(((step * BATCH + i) % 4096) * rec)
        vals = struct.unpack(f"<{IN}fI", f.read(rec))
        xs.append(list(vals[:IN]))
        ys.append(vals[IN])
    return xs, ys


def matmul(a, b):
    bt = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in bt] for row in a]


def relu(m):
    return [[v if v > 0 else 0.0 for v in row] for row in m]


def softmax_xent(logits, ys):
    loss, grads = 0.0, []
    for row, y in zip(logits, ys):
        mx = max(row)
        ex = [math.exp(v - mx) for v in row]
        s = sum(ex)
        p = [e / s for e in ex]
        loss -= math.log(p[y] + 1e-12)
        p[y] -= 1.0
        grads.append([g / len(ys) for g in p])
    return loss / len(ys), grads


def forward_backward(w1, w2, xs, ys):
    h = relu(matmul(xs, w1))
    logits = matmul(h, w2)
    loss, dlogits = softmax_xent(logits, ys)
    dw2 = matmul(list(zip(*h)), dlogits)
    dh = matmul(dlogits, list(zip(*w2)))
    dh = [[g if hv > 0 else 0.0 for g, hv in zip(grow, hrow)] for grow, hrow in zip(dh, h)]
    dw1 = matmul(list(zip(*xs)), dh)
    return loss, dw1, dw2


def sgd_step(w, dw, lr=0.02):
    for row, grow in zip(w, dw):
        for j, g in enumerate(grow):
            row[j] -= lr * g


def save_checkpoint(path, w1, w2):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for m in (w1, w2):
            for row in m:
                f.write(struct.pack(f"<{len(row)}f", *row))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def train_step(step, f, w1, w2):
    xs, ys = load_batch(f, step)
    loss, dw1, dw2 = forward_backward(w1, w2, xs, ys)
    sgd_step(w1, dw1)
    sgd_step(w2, dw2)
    return loss


def heartbeat(stop):
    """A second thread, as real jobs have (loggers, watchdogs)."""
    while not stop.is_set():
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--data", default=None)
    args = ap.parse_args()
    work = args.data or tempfile.mkdtemp(prefix="llmt-example-")
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "train.bin")
    if not os.path.exists(data):
        make_dataset(data)
    rnd = random.Random(1)
    w1 = [[rnd.gauss(0, 0.2) for _ in range(HIDDEN)] for _ in range(IN)]
    w2 = [[rnd.gauss(0, 0.2) for _ in range(OUT)] for _ in range(HIDDEN)]
    stop = threading.Event()
    hb = threading.Thread(target=heartbeat, args=(stop,), name="heartbeat")
    hb.start()
    t0 = time.monotonic()
    with open(data, "rb", buffering=0) as f:
        for step in range(args.steps):
            loss = train_step(step, f, w1, w2)
            if step % 100 == 99:
                save_checkpoint(os.path.join(work, "ckpt.bin"), w1, w2)
                print(f"step {step + 1} loss {loss:.4f}", flush=True)
    stop.set()
    hb.join()
    dt = time.monotonic() - t0
    print(f"{args.steps} steps in {dt:.2f} s ({args.steps / dt:.1f} steps/s)")


if __name__ == "__main__":
    main()
