"""Workers as a training job starts them, for tests/integration/pyhook_workers.sh:
a multiprocessing pool (fork, spawn or forkserver) or a torch DataLoader with
2 workers (forked). Every call of this file's functions but main's own runs in
a worker.

  py_workers.py MODE KIND N
    MODE  measure: run; ref: the same under sys.setprofile, in every process
          (workers too: inherited by forks, set by the initializer after a
          spawn), then print "name=calls ..." for this file's functions (the
          reference). Both modes make the same calls.
    KIND  fork | spawn | forkserver: Pool(3).map(task, [N] * 12)
          loader: DataLoader(DS(N), num_workers=2, batch_size=4) over 16 items
          of N calls of leaf() each

A worker sends its counts back with each result (take_counts() inside the
task, or inside the DataLoader's collate): nothing it counts is left behind
when it exits. init() and worker_init(), run in each worker before the
reference's profiler is on there (or before it forgets its parent's
counts), and the module's own code (<module>, the class body DS: run at
import, before any profiler of the reference, again in each spawned worker)
are left out of the reference ("init=-").
"""
import collections
import sys
import time

counts = collections.Counter()
REF = len(sys.argv) > 1 and sys.argv[1] == "ref"


def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == __file__:
        counts[frame.f_code.co_name] += 1


def take_counts():
    c = dict(counts)
    counts.clear()
    return c


def init(barrier=None):
    counts.clear()  # a fork's copy of its parent's
    if REF:
        sys.setprofile(prof)
    if barrier is not None:
        barrier.wait()  # every worker up before the first task: the tasks spread


def leaf(x):
    return x + 1


def work(n):
    s = 0
    for _ in range(n):
        s = leaf(s)
    return s


def task(n):
    time.sleep(0.02)  # the tasks spread over the workers
    return work(n), take_counts()


class DS:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return work(self.n) + i


def collate(batch):
    return sum(batch), take_counts()


def run_pool(kind, n):
    import multiprocessing as mp
    ctx = mp.get_context(kind)
    with ctx.Pool(3, initializer=init, initargs=(ctx.Barrier(3),)) as p:
        out = p.map(task, [n] * 12, chunksize=1)
        p.close()
        p.join()
    return out


def run_loader(n):
    import torch.utils.data as tud
    dl = tud.DataLoader(DS(n), batch_size=4, num_workers=2, collate_fn=collate, worker_init_fn=worker_init)
    return list(dl)


def worker_init(_):
    init()


def main():
    kind, n = sys.argv[2], int(sys.argv[3])
    out = run_loader(n) if kind == "loader" else run_pool(kind, n)
    print("checksum", sum(r for r, _ in out))
    total = collections.Counter(take_counts())
    for _, c in out:
        total.update(c)
    return total


if __name__ == "__main__":
    if REF:
        sys.setprofile(prof)
    total = main()
    sys.setprofile(None)
    if REF:
        print(" ".join("%s=%d" % kv for kv in sorted(total.items())), "init=- worker_init=- <module>=- DS=-")
