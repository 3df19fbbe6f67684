"""Prints the first two bytes, in the running process PID, of the CPython
functions the injector may patch to stop a busy thread, one line each:
"NAME HEX" ("ebfe" is the injector's `jmp .`; anything else the original).
Symbols from `nm -D` of the interpreter file mapped (libpython, else the
executable), placed with its /proc/PID/maps base (ET_EXEC: absolute).
Usage: pyb_patch.py PID"""
import subprocess
import sys

SYMS = ["PyObject_Malloc", "PyObject_Free", "PyMem_Malloc", "PyMem_Free",
        "_PyEval_EvalFrameDefault", "PyObject_GetAttr", "_PyObject_MakeTpCall",
        "PyObject_Vectorcall"]
pid = int(sys.argv[1])
base, path = None, None
with open("/proc/%d/maps" % pid) as f:
    for line in f:
        parts = line.split()
        if len(parts) >= 6 and parts[2] == "00000000" and "python" in parts[5].rsplit("/", 1)[-1]:
            cand = parts[5]
            if path is None or "libpython" in cand:
                base, path = int(parts[0].split("-")[0], 16), cand
with open(path, "rb") as f:
    is_exec = f.read(18)[16] == 2  # e_type ET_EXEC
values = {}
for line in subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True).stdout.splitlines():
    p = line.split()
    if len(p) == 3 and p[2] in SYMS:
        values[p[2]] = int(p[0], 16)
with open("/proc/%d/mem" % pid, "rb") as mem:
    for name in SYMS:
        if name in values:
            mem.seek(values[name] if is_exec else base + values[name])
            print(name, mem.read(2).hex())
