"""Loops with known steps, for the step detector's tests. Each step's true
bounds (CLOCK_REALTIME ns, the clock the trace JSON's baseTimeNanoseconds
is on) go to TRUTH as windows, one "train|eval S E in S_LO E_LO" line per
step (tests/integration/steps_check.py): it starts between the loop's clock
read before the step function's call and the function's first statement
[S_LO, S], and ends between its last statement and the loop's clock read
after the return [E_LO, E]. The call and return the detector sees lie
inside them however long the machine preempts the loop there.

    python3 steps_loop.py MODE TRUTH
    MODE: train    warm-up (a slow first step), forward/backward/optimizer
          twophase train steps with eval steps in between (train is the loop)
          variable generation: steps of very different lengths
          noloop   random sleeps and one compile: no steps
"""
import random
import sys
import time


# Steps of ~100 ms: the check allows 2% of a step, and a busy 2-core
# machine (tests running two at a time beside other work) delayed a thread
# by up to 1.9 ms between its own timestamp and the call the detector sees.
SCALE = 8


def busy(sec):
    end = time.monotonic() + sec * SCALE
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def forward(n):
    return busy(0.004 * n)


def backward(n):
    return busy(0.006 * n)


def optimizer_step():
    return busy(0.002)


INSIDE = [0, 0]   # the step function's first and last statement (time.time_ns: no Python call)


def train_step(i):
    INSIDE[0] = time.time_ns()
    forward(3 if i == 0 else 1)   # the first step is slow (warm-up)
    backward(1)
    optimizer_step()
    INSIDE[1] = time.time_ns()


def eval_step(i):
    INSIDE[0] = time.time_ns()
    forward(1)
    INSIDE[1] = time.time_ns()


def generate(i, rnd):
    INSIDE[0] = time.time_ns()
    for _ in range(rnd.randint(2, 25)):   # tokens: 2 ms each
        busy(0.002)
    INSIDE[1] = time.time_ns()


def now():
    return time.time_ns()


def log(out, kind, s, e):
    out.write(f"{kind} {INSIDE[0]} {e} in {s} {INSIDE[1]}\n")


def noloop():
    rnd = random.Random(3)
    time.sleep(rnd.uniform(0.05, 0.3))
    src = "\n".join(f"def f{i}(x):\n    return x * {i}" for i in range(3000))
    compile(src, "gen", "exec")
    time.sleep(rnd.uniform(0.05, 0.3))
    busy(0.1)
    time.sleep(rnd.uniform(0.05, 0.3))


def main():
    mode, truth = sys.argv[1], sys.argv[2]
    rnd = random.Random(11)
    time.sleep(0.3)  # the collector attaches (USDT) during the first moments
    with open(truth, "w") as out:
        if mode == "train":
            for i in range(30):
                s = now()
                train_step(i)
                log(out, "train", s, now())
        elif mode == "twophase":
            for epoch in range(3):
                for i in range(10):
                    s = now()
                    train_step(epoch * 10 + i + 1)
                    log(out, "train", s, now())
                for i in range(4):
                    s = now()
                    eval_step(i)
                    log(out, "eval", s, now())
        elif mode == "variable":
            for i in range(25):
                s = now()
                generate(i, rnd)
                log(out, "train", s, now())
        else:
            noloop()
    time.sleep(0.2)


if __name__ == "__main__":
    main()
