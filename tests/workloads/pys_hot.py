# A CPU-bound Python program with known hot functions, for sampled Python
# stacks (-t pysample): the main thread spends its time in
# hot_outer -> hot_inner, a second thread named "other" in other_worker.
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5


def hot_inner(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def hot_outer(end):
    # the main thread's CPU time: a busy machine delays the end, never
    # shortens the work sampled
    while time.thread_time() < end:
        hot_inner(20000)


def other_worker(done):
    x = 0
    while not done.is_set():
        for _ in range(20000):
            x = (x * 31 + 7) % 1000003
        time.sleep(0.003)  # off CPU most of the time: main stays the hottest


# At module level, so the hottest stack is <module>;hot_outer;hot_inner.
END = time.thread_time() + SECONDS
DONE = threading.Event()
worker = threading.Thread(target=other_worker, args=(DONE,), name="other")
worker.start()
hot_outer(END)
DONE.set()
worker.join()
