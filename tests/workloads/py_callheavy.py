"""A call-heavy Python loop for measuring tracing cost: N calls of a tiny
function, timed inside the process. Prints "calls_per_s <rate> elapsed <s>".
Usage: py_callheavy.py [CALLS]"""
import sys
import time


def leaf(x):
    return x + 1


def loop(n):
    acc = 0
    for i in range(n):
        acc = leaf(acc)
    return acc


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    t0 = time.perf_counter()
    loop(n)
    dt = time.perf_counter() - t0
    print("calls_per_s %.0f elapsed %.4f" % (n / dt, dt), flush=True)


if __name__ == "__main__":
    main()
