#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A bf16 GPT-style training loop that replays one CUDA graph per step
(run by graph_stress.sh), the workload whose process died when CUPTI was
detached.

  graph_train.py train DIR [STEPS]
      Builds the model (fixed seed, deterministic algorithms), captures the
      whole step (forward, backward, AdamW with capturable=True) in a CUDA
      graph, writes DIR/ready, then replays it until DIR/stop appears (or for
      STEPS steps). RECAPTURE=S: capture a new graph every S seconds (in the
      same memory pool), so graphs are also made while a profiler is
      attached. Every step's loss is kept on the GPU and written to
      DIR/losses.txt at the end (one per line, repr of the float), with the
      step count and steps/s per second in DIR/rate.txt. EAGER=1: the same
      step run eagerly every time (thousands of launches a step, no graph
      replayed), the launch-bound loop where launch callbacks were tried.
"""
import os
import sys
import time


def build(torch):
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        # Attention by plain matmuls and softmax: deterministic, so two runs
        # of the same steps give the same losses bit for bit.
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mask):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5 + mask
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=2048, d=256, layers=4, heads=8, seq=128):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(1, seq, d))
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))

        def forward(self, idx, tgt):
            x = self.emb(idx) + self.pos
            for b in self.blocks:
                x = b(x, self.mask)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))

    return GPT


class Loop:
    """The model, optimizer, batches and captured graph of train(). one(n)
    runs step n: the batch copied in, then the graph replayed, or with
    eager the same step run eagerly on the stream the graph was captured on
    (thousands of launches a step). Returns the step's loss (on the GPU)."""

    def __init__(self, torch, eager):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts
        self.torch, self.eager = torch, eager
        torch.manual_seed(0)
        torch.use_deterministic_algorithms(True)
        dev = "cuda"
        self.model = build(torch)().to(dev)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-4, capturable=True)
        gen = torch.Generator(device=dev).manual_seed(1)
        self.batches = [(torch.randint(0, 2048, (16, 128), device=dev, generator=gen),
                         torch.randint(0, 2048, (16, 128), device=dev, generator=gen)) for _ in range(8)]
        self.s_idx, self.s_tgt = self.batches[0][0].clone(), self.batches[0][1].clone()
        self.side = torch.cuda.Stream()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):  # warm-up outside the graph, as capture requires
            for _ in range(3):
                self.step()
        torch.cuda.current_stream().wait_stream(self.side)
        torch.cuda.synchronize()
        self.graph, self.s_loss = self.capture()
        if eager:  # the captured graph is never replayed
            self.s_loss = torch.zeros((), device=dev)

    def step(self):
        with self.torch.autocast("cuda", dtype=self.torch.bfloat16):
            loss = self.model(self.s_idx, self.s_tgt)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        return loss

    def capture(self, pool=None):
        g = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(g, pool=pool):
            out = self.step()
        return g, out

    def recapture(self):
        self.graph, self.s_loss = self.capture(self.graph.pool())

    def one(self, n):
        x, y = self.batches[n % len(self.batches)]
        self.s_idx.copy_(x)
        self.s_tgt.copy_(y)
        if self.eager:
            cur = self.torch.cuda.current_stream()
            with self.torch.cuda.stream(self.side):
                self.side.wait_stream(cur)
                self.s_loss.copy_(self.step())
            cur.wait_stream(self.side)
        else:
            self.graph.replay()
        return self.s_loss


def train(d, steps):
    import torch

    dev = "cuda"
    eager = os.environ.get("EAGER") == "1"
    loop = Loop(torch, eager)
    losses = torch.zeros(1 << 20, device=dev)
    recap = float(os.environ.get("RECAPTURE", "0"))
    open(os.path.join(d, "ready"), "w").close()
    stop = os.path.join(d, "stop")
    n, t0 = 0, time.monotonic()
    last_cap = t0
    rate = []
    mark_t, mark_n = t0, 0
    while (steps and n < steps) or (not steps and n < len(losses)):
        losses[n].copy_(loop.one(n))
        n += 1
        if n % 64 == 0:
            torch.cuda.synchronize()  # a fault surfaces here, within a few steps
            now = time.monotonic()
            if now - mark_t >= 1.0:
                rate.append((round(now - t0, 2), n, round((n - mark_n) / (now - mark_t), 1)))
                mark_t, mark_n = now, n
            if not steps and os.path.exists(stop):
                break
            if recap and not eager and now - last_cap >= recap:
                loop.recapture()
                last_cap = now
    torch.cuda.synchronize()
    with open(os.path.join(d, "losses.txt"), "w") as f:
        for v in losses[:n].tolist():
            f.write(repr(v) + "\n")
    with open(os.path.join(d, "rate.txt"), "w") as f:
        for r in rate:
            f.write("%s %d %s\n" % r)
    print("steps %d in %.1f s" % (n, time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "train":
        sys.exit(__doc__)
    train(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
