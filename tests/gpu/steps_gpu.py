#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Loops with known steps on a GPU, for the step detector (steps_gpu.sh).

  steps_gpu.py MODE TRUTH
  MODE train     eager training of a small GPT-style model (forward, backward,
                 AdamW), loss.item() every step, warm-up included
       generate  greedy generation with variable output lengths (8-64 new
                 tokens a request, data dependent), one request a step
       graph     the whole training step captured once as a CUDA graph and
                 replayed every step
Each step's true start and end go to TRUTH as "train start_rt end_rt
start_mono end_mono" (CLOCK_REALTIME ns as the trace JSON's
baseTimeNanoseconds, CLOCK_MONOTONIC ns beside), taken around the call of
the step function, which is what the detector sees. About 8 s of steps.
"""
import os
import random
import sys
import time


def now():
    return time.time_ns(), time.monotonic_ns()


def model(torch):
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab=2048, d=256, layers=4, heads=8):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            x = self.emb(idx)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    return GPT().cuda()


def train(torch, out, graph):
    import torch.nn.functional as F

    m = model(torch)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, capturable=graph)
    x = torch.randint(0, 2048, (16, 128), device="cuda")
    y = torch.randint(0, 2048, (16, 128), device="cuda")

    def train_step():
        loss = F.cross_entropy(m(x).view(-1, 2048), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                train_step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_loss = train_step()

        def replay_step():
            g.replay()
            return static_loss.item()
        step = replay_step
    else:
        def eager_step():
            return train_step().item()
        step = eager_step
    t_end = time.monotonic() + 8
    while time.monotonic() < t_end:
        s = now()
        step()
        log(out, s, now())


def generate(torch, out):
    m = model(torch).eval()
    rnd = random.Random(5)

    @torch.no_grad()
    def generate_request(prompt, new_tokens):
        idx = prompt
        for _ in range(new_tokens):
            nxt = m(idx[:, -128:])[:, -1].argmax(-1, keepdim=True)
            idx = torch.cat([idx, nxt], 1)
        return idx[:, -new_tokens:].tolist()

    t_end = time.monotonic() + 8
    while time.monotonic() < t_end:
        prompt = torch.randint(0, 2048, (1, rnd.randint(16, 64)), device="cuda")
        n = rnd.randint(8, 64)
        s = now()
        generate_request(prompt, n)
        log(out, s, now())


def log(out, s, e):
    out.write(f"train {s[0]} {e[0]} {s[1]} {e[1]}\n")


def main():
    mode, truth = sys.argv[1], sys.argv[2]
    import torch

    torch.manual_seed(0)
    with open(truth, "w") as out:
        if mode in ("train", "graph"):
            train(torch, out, mode == "graph")
        elif mode == "generate":
            generate(torch, out)
        else:
            sys.exit(__doc__)
    torch.cuda.synchronize()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main()
