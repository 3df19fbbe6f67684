"""A known Python call tree for tests: each iteration calls f() once, and
f() calls g() 3 times. Usage: py_calltree.py ITERATIONS [GO_FILE]
With GO_FILE, makes GO_FILE.ready, then waits (sleeping) until GO_FILE exists
before starting, so a profiler can attach first. PY_CALLTREE_DELAY=SECONDS
sleeps before starting."""
import os
import sys
import time


def g(x):
    return x * 2


def f(i):
    s = 0
    for k in range(3):
        s += g(i + k)
    return s


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    go = sys.argv[2] if len(sys.argv) > 2 else None
    time.sleep(float(os.environ.get("PY_CALLTREE_DELAY", "0")))
    if go:
        open(go + ".ready", "w").close()
        while not os.path.exists(go):
            time.sleep(0.01)
    total = 0
    for i in range(n):
        total += f(i)
    print("calltree done", n, total, flush=True)


if __name__ == "__main__":
    main()
