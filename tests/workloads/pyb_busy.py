"""A CPU-bound pure-Python workload for the busy-injection tests: no sleep,
no I/O and no blocking call while it runs, so no thread ever sleeps in a
system call (only the final print and exit do).

  pyb_busy.py measure GO N THREADS   GO=now: run the measured part at once;
                                      GO=signal: spin in warm() until SIGUSR1,
                                      then run it; GO=bare: the same, spinning
                                      without calls or allocations. Prints a
                                      checksum, exits 3.
  pyb_busy.py ref N THREADS          the measured part under sys.setprofile:
                                      prints "name=calls" for every function
                                      of this file it called (the reference)
  pyb_busy.py cycles THREADS ROUNDS  THREADS+1 threads recompute a known
                                      result until SIGUSR1 and at least ROUNDS
                                      times, checking it each time; prints
                                      one line that does not depend on timing

The measured part runs between calls of begin_measure() and end_measure()
(markers for the checker); worker threads start and end inside it. Every
function has a distinct name (events from the hook carry qualified names,
from USDT plain names: the checker compares the last component)."""
import collections
import signal
import sys
import threading

flag = [False]


def on_usr1(signum, frame):
    flag[0] = True


def warm(i):
    return (i * 31 + 7) % 100003  # ints past the small-int cache: allocated


def bare_spin():
    """No call, no allocation: nothing a busy thread can be stopped at."""
    i = 0
    while not flag[0]:
        i = (i + 1) & 7


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Acc:
    def __init__(self, start):
        self.v = start

    def add(self, x):
        self.v += x
        return self.v


def make_scaler(k):
    def scale(x):
        return x * k
    return scale


def mix(i):
    a = Acc(i)
    sc = make_scaler(3)
    for j in range(i % 5):
        a.add(sc(j))
    return a.v


def tail(n, acc):
    return acc if n == 0 else tail(n - 1, acc + n)


def unit(i):
    return fib(12) + mix(i) + tail(20, 0)


def work(n):
    total = 0
    for i in range(n):
        total += unit(i)
    return total


def work_thread(n, out, slot):
    out[slot] = work(n)


def measured(n, nthreads):
    out = [0] * (nthreads + 1)
    ths = [threading.Thread(target=work_thread, args=(n, out, k + 1)) for k in range(nthreads)]
    for t in ths:
        t.start()
    out[0] = work(n)
    for t in ths:
        t.join()
    return sum(out)


def begin_measure():
    return 0


def end_measure():
    return 0


def run_measure(go, n, nthreads):
    if go in ("signal", "bare"):
        signal.signal(signal.SIGUSR1, on_usr1)
        i = 0
        while go == "signal" and not flag[0]:
            i = warm(i + 1)
        bare_spin()
    begin_measure()
    total = measured(n, nthreads)
    end_measure()
    print("pyb_busy measure n=%d threads=%d total=%d" % (n, nthreads, total))
    sys.stdout.flush()
    sys.exit(3)


def run_ref(n, nthreads):
    per_thread = collections.defaultdict(collections.Counter)  # one writer each
    me = __file__

    def prof(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == me:
            per_thread[threading.get_ident()][frame.f_code.co_name] += 1
    threading.setprofile(prof)
    sys.setprofile(prof)
    measured(n, nthreads)
    sys.setprofile(None)
    threading.setprofile(None)
    calls = sum(per_thread.values(), collections.Counter())
    print(" ".join("%s=%d" % kv for kv in sorted(calls.items())))


def spin_check(want, stop, bad, rounds):
    done = 0
    while not stop[0] or done < rounds:
        if unit(7) != want:
            bad[0] += 1
        done += 1


def run_cycles(nthreads, rounds):
    signal.signal(signal.SIGUSR1, on_usr1)
    want = unit(7)
    bad = [0]
    ths = [threading.Thread(target=spin_check, args=(want, flag, bad, rounds)) for _ in range(nthreads)]
    for t in ths:
        t.start()
    spin_check(want, flag, bad, rounds)
    for t in ths:
        t.join()
    print("pyb_busy cycles threads=%d want=%d wrong=%d" % (nthreads, want, bad[0]))
    sys.stdout.flush()
    sys.exit(3)


if __name__ == "__main__":
    if sys.argv[1] == "measure":
        run_measure(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "ref":
        run_ref(int(sys.argv[2]), int(sys.argv[3]))
    else:
        run_cycles(int(sys.argv[2]), int(sys.argv[3]))
