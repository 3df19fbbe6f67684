# SPDX-License-Identifier: Apache-2.0
# The Python side of tests/integration/hostile_inject.sh: a target that, on
# each stdin line "probe TAG", lists every fd it holds ("TAG fd N type=...
# link=...") and tries to get out through each one it did not hold at its
# first probe: openat(fd, ".."), /proc/self/fd/N/.., creating a file through
# the fd and beside the fd's path; what works is printed as "TAG escape fd N:
# HOW". Between lines it keeps calling work(), which the hook records.
import os, select, stat, sys
PLANT = "hostile-planted"
def kind(m):
    return ("reg" if stat.S_ISREG(m) else "dir" if stat.S_ISDIR(m) else "sock" if stat.S_ISSOCK(m)
            else "fifo" if stat.S_ISFIFO(m) else "chr" if stat.S_ISCHR(m) else "other")
def attempt(tag, fd, how, fn):
    try:
        x = fn()
    except OSError:
        return
    os.close(x)
    print(f"{tag} escape fd {fd}: {how}")
own = None  # the fds it had before anyone came: its own business
def probe(tag):
    global own
    fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
    for fd in fds:
        try:
            m = os.fstat(fd).st_mode
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        print(f"{tag} fd {fd} type={kind(m)} link={link}")
        if own is None or fd in own:
            continue
        D = os.O_RDONLY | os.O_DIRECTORY
        attempt(tag, fd, 'openat(fd, "..")', lambda: os.open("..", D, dir_fd=fd))
        attempt(tag, fd, f"/proc/self/fd/{fd}/..", lambda: os.open(f"/proc/self/fd/{fd}/..", D))
        attempt(tag, fd, "created through it", lambda: os.open(PLANT, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
        if link.startswith("/"):
            p = os.path.dirname(link) + "/" + PLANT
            attempt(tag, fd, f"created {p} beside its file", lambda: os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
    if own is None:
        own = set(fds)
    print(f"{tag} probe done", flush=True)
def work(i):
    return i * 2
print(f"ready {os.getpid()}", flush=True)
buf = b""
while True:
    r, _, _ = select.select([0], [], [], 0.001)
    if r:
        d = os.read(0, 256)
        if not d:
            break
        buf += d
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.startswith(b"probe "):
                probe(line[6:].decode())
    for i in range(100):
        work(i)
