"""A target that holds the GIL in C when the profile stops.

  pyd_gil.py GO   runs Python (calls, short sleeps: the profile hook goes in
                  and is installed) until the file GO exists, then creates
                  GO.PID and enters one C call that never lets the GIL go (sum
                  over a range of 10**12 ints: hours), so a hook that needs the
                  GIL to come off cannot have it. Ended by a signal."""
import os
import sys
import time


def step(i):
    return i + 1


def main(go):
    i = 0
    while not os.path.exists(go):
        i = step(i)
        time.sleep(0.005)
    open("%s.%d" % (go, os.getpid()), "w").close()
    sum(range(10**12))


main(sys.argv[1])
