"""A call-heavy loop for measuring the profile hook's cost: waits (asleep)
until GO exists, so a profiler can attach, then makes N calls of a tiny
function, timed inside the process. Prints "calls_per_s <rate> elapsed <s>".
PYH_MIX=1: the function also calls three C builtins, as a training step's
Python calls C ops (the profile function sees those too, from 3.12 on).
PYH_MIX=2: the function loops 90 times first (~1.5 us a call: about a
million events/s traced, the rate at which the hook's ring is drained off
the program's thread).
Usage: pyh_callheavy.py CALLS [GO]"""
import os
import sys
import time


def leaf(x):
    return x + 1


def mixed(x):
    return abs(x) + len((x,)) + min(x, 5)


def work(x):
    s = 0
    for i in range(90):
        s += i
    return x + 1


def loop(n):
    acc = 0
    fn = {"1": mixed, "2": work}.get(os.environ.get("PYH_MIX", ""), leaf)
    for i in range(n):
        acc = fn(acc)
    return acc


def main():
    n = int(sys.argv[1])
    if len(sys.argv) > 2:
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.01)
    t0 = time.perf_counter()
    loop(n)
    dt = time.perf_counter() - t0
    print("calls_per_s %.0f elapsed %.4f" % (n / dt, dt), flush=True)


if __name__ == "__main__":
    main()
