"""A known call tree for the profile-hook tests: each iteration calls f()
once and f() calls g() 3 times, on the main thread and on THREADS extra
threads (each THREADS worker runs the same loop). The loop starts only once
GO exists, so a profiler can attach first, and no call of f or g happens
outside it. Afterwards the script prints a line, then sleeps (in a system
call) until HOLD exists, so a profiler can detach from an idle process, and
exits with status 3.
Usage: pyh_calltree.py N GO HOLD [THREADS]"""
import os
import sys
import threading
import time


def g(x):
    return x * 2


def f(i):
    s = 0
    for k in range(3):
        s += g(i + k)
    return s


def loop(n):
    total = 0
    for i in range(n):
        total += f(i)
    return total


def wait_file(path):
    open(path + ".ready", "w").close()  # started and waiting for it (no output: tests compare it)
    while not os.path.exists(path):
        time.sleep(0.01)


def main():
    n, go, hold = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    nthreads = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    wait_file(go)
    workers = [threading.Thread(target=loop, args=(n,)) for _ in range(nthreads)]
    for w in workers:
        w.start()
    total = loop(n)
    for w in workers:
        w.join()
    print("pyh_calltree done", n, nthreads, total, flush=True)
    wait_file(hold)
    sys.exit(3)


if __name__ == "__main__":
    main()
