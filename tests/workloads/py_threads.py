"""The py_calltree call tree run in THREADS threads at once (f() calls g()
3 times, ITERATIONS per thread). Usage: py_threads.py THREADS ITERATIONS"""
import sys
import threading


def g(x):
    return x * 2


def f(i):
    s = 0
    for k in range(3):
        s += g(i + k)
    return s


def work(n):
    for i in range(n):
        f(i)


def main():
    threads, n = int(sys.argv[1]), int(sys.argv[2])
    ts = [threading.Thread(target=work, args=(n,)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("threads done", threads, n, flush=True)


if __name__ == "__main__":
    main()
