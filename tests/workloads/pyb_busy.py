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
  pyb_busy.py cycles THREADS ROUNDS [rates]
                                     THREADS+1 threads recompute a known
                                      result until SIGUSR1 and at least ROUNDS
                                      times, checking it each time; prints
                                      one line that does not depend on timing.
                                      With "rates": prints "warm" once it ran
                                      RATE_S seconds; each SIGUSR2 is a mark;
                                      at the end (run on RATE_S past the
                                      second mark) one more line, "pyb_busy
                                      rates before=R after=R cpu_before=R
                                      cpu_after=R": steps of all threads per
                                      second, and per second of the
                                      process's CPU time, in the RATE_S before
                                      the first mark and after the second

The measured part runs between calls of begin_measure() and end_measure()
(markers for the checker); worker threads start and end inside it. Every
function has a distinct name (events from the hook carry qualified names,
from USDT plain names: the checker compares the last component)."""
import collections
import signal
import sys
import threading
import time

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


RATE_S = 1.5        # the windows the step rate is measured over
SAMPLE_S = 0.05     # how often the main thread notes (time, CPU time, steps)
marks = []          # SIGUSR2's times


def on_usr2(signum, frame):
    marks.append(time.monotonic())


def spin_check(want, stop, bad, rounds, progress=None, slot=0, samples=None):
    """progress: every thread's steps so far (this one's at slot), or None
    (no clock read); samples: the main thread's notes, which also says
    "warm" once RATE_S of them ran."""
    done = 0
    t0 = time.monotonic()
    next_at, warm = t0, samples is not None
    while not stop[0] or done < rounds or (progress is not None and
                                           (len(marks) < 2 or time.monotonic() < marks[1] + RATE_S)):
        if unit(7) != want:
            bad[0] += 1
        done += 1
        if progress is None:
            continue
        progress[slot] = done
        if samples is None:
            continue
        now = time.monotonic()
        if now >= next_at:
            samples.append((now, time.process_time(), sum(progress)))
            next_at = now + SAMPLE_S
        if warm and now >= t0 + RATE_S:
            warm = False
            print("warm", flush=True)


def rates(samples, a, b):
    """Steps per wall second and per CPU second of the process, between the
    first note at or after a and the last at or before b."""
    inside = [x for x in samples if a <= x[0] <= b]
    if len(inside) < 2:
        return 0.0, 0.0
    (t0, c0, n0), (t1, c1, n1) = inside[0], inside[-1]
    return (n1 - n0) / (t1 - t0), ((n1 - n0) / (c1 - c0) if c1 > c0 else 0.0)


def run_cycles(nthreads, rounds, with_rates):
    signal.signal(signal.SIGUSR2, on_usr2)
    signal.signal(signal.SIGUSR1, on_usr1)
    want = unit(7)
    bad = [0]
    progress = [0] * (nthreads + 1) if with_rates else None
    samples = [] if with_rates else None
    ths = [threading.Thread(target=spin_check, args=(want, flag, bad, rounds, progress, k + 1))
           for k in range(nthreads)]
    for t in ths:
        t.start()
    spin_check(want, flag, bad, rounds, progress, 0, samples)
    for t in ths:
        t.join()
    print("pyb_busy cycles threads=%d want=%d wrong=%d" % (nthreads, want, bad[0]))
    if with_rates:
        wb, cb = rates(samples, marks[0] - RATE_S, marks[0])
        wa, ca = rates(samples, marks[1], marks[1] + RATE_S)
        print("pyb_busy rates before=%.0f after=%.0f cpu_before=%.0f cpu_after=%.0f" % (wb, wa, cb, ca))
    sys.stdout.flush()
    sys.exit(3)


if __name__ == "__main__":
    if sys.argv[1] == "measure":
        run_measure(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "ref":
        run_ref(int(sys.argv[2]), int(sys.argv[3]))
    else:
        run_cycles(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] == ["rates"])
