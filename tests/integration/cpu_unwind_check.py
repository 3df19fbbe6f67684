#!/usr/bin/env python3
# Compare the CPU stacks of one process as llmtracker recorded them
# (evlog_dump listing) with `perf script` of `perf record --call-graph dwarf`
# on the same run: the share of samples whose user stack reaches the
# program's root, and each function's inclusive share (samples holding it
# anywhere in the user stack) for perf's top functions.
#   cpu_unwind_check.py DUMP PERF_SCRIPT COMM [TOP [THREADS]]
#   cpu_unwind_check.py --folded DUMP COMM   (our stacks, root first)
# PERF_SCRIPT: perf script -F comm,pid,ip,sym,dso --no-inline output (may
# be empty: then only our side is summed up). COMM: the process's name, or
# pid=N. THREADS=1: a thread's own root (start_thread, clone3) counts too.
# Prints "# ..." lines and one line "result ours_n perf_n ours_root perf_root
# max_diff" (shares in percent). A frame is its function's name without
# arguments, or "[unknown] module+offset" (the ELF address) when unnamed;
# kernel frames are left out (kernel stacks are not what is compared).
import os
import re
import subprocess
import sys

ROOTS = {"main", "_start", "__libc_start_call_main", "__libc_start_main",
         "__libc_start_main_impl"}
THREAD_ROOTS = {"start_thread", "clone3", "clone", "__clone", "__clone3"}
KERNEL = 0xffff800000000000  # kernel addresses (our Python frames have bit 62 set)


def unescape(s):
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), s)


def norm(name):
    """The function, as both tools can spell it: no arguments, no symbol
    version (perf: "__libc_start_main@@GLIBC_2.34"), no leading return type
    (a demangled template function's "void std::sort<...>")."""
    i = name.find("(")
    name = name[:i] if i > 0 else name
    name = re.sub(r"@.*$", "", name)
    m = re.match(r"^[\w:*& ]+? (?=[\w:~]+<)", name)
    return name[m.end():] if m else name


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


_loads = {}


def file_offset(path, vaddr):
    """perf names an unnamed frame by its offset in the file, we by its ELF
    address: they differ in executables not built as PIE (python3.11)."""
    if path not in _loads:
        _loads[path] = []
        try:
            out = subprocess.run(["readelf", "-lW", path], capture_output=True,
                                 text=True).stdout
        except OSError:
            out = ""
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == "LOAD":
                _loads[path].append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))
    for va, off, size in _loads[path]:
        if va <= vaddr < va + size:
            return vaddr - va + off
    return vaddr


def ours(path, comm, raw=False):
    syms, samples, pids = {}, [], set()
    for line in open(path, errors="replace"):
        kind = line.split(" ", 1)[0]
        if kind == "symbol":
            f = fields(line)
            name = unescape(f.get("name", ""))
            mod = unescape(f.get("module", ""))
            if name:
                syms[(f["pid"], f["addr"])] = name if raw else norm(name)
            else:
                off = int(f.get("offset", "0"), 16)
                if mod.startswith("/"):
                    off = file_offset(mod, off)
                syms[(f["pid"], f["addr"])] = "[unknown] %s+%#x" % (os.path.basename(mod), off)
        elif kind == "process":
            f = fields(line)
            if unescape(f.get("name", "")) == comm or "pid=" + f["pid"] == comm:
                pids.add(f["pid"])
        elif kind == "cpu_sample":
            samples.append(fields(line))
    stacks = []
    for f in samples:
        if f["pid"] not in pids:
            continue
        nk = int(f["n_kernel"])
        addrs = f["stack"].split(",")[nk:] if f.get("stack") else []
        stacks.append([syms.get((f["pid"], a), "?" + a) for a in addrs
                       if int(a, 16) < KERNEL])
    return stacks


def perf(path, comm):
    stacks, cur, keep = [], None, False
    frame = re.compile(r"^\s+([0-9a-f]+) (.*) \((.*)\)$")
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line.strip():
            if cur is not None and keep:
                stacks.append(cur)
            cur = None
            continue
        if not line[0].isspace():
            name, pid = line.rsplit(None, 1)
            cur, keep = [], name.strip() == comm or "pid=" + pid == comm
            continue
        m = frame.match(line)
        if not m or cur is None:
            continue
        ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
        if ip >= 0x800000000000 or dso == "[kernel.kallsyms]":
            continue
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        # perf names a caller by its return address - 1, we by the return
        # address (and look it up at - 1).
        if cur:
            ip += 1
        cur.append("[unknown] %s+%#x" % (os.path.basename(dso), ip) if sym == "[unknown]"
                   else norm(sym))
    if cur is not None and keep:
        stacks.append(cur)
    return stacks


def shares(stacks):
    inc = {}
    for s in stacks:
        for name in set(s):
            inc[name] = inc.get(name, 0) + 1
    n = max(len(stacks), 1)
    return {k: 100.0 * v / n for k, v in inc.items()}


def root_pct(stacks, roots=ROOTS):
    n = sum(1 for s in stacks if roots & set(s))
    return 100.0 * n / max(len(stacks), 1)


def folded(dump, comm):
    """Our stacks of COMM, root first, one "frame;...;frame count" a line."""
    counts = {}
    for st in ours(dump, comm, raw=True):
        key = ";".join(reversed(st))
        counts[key] = counts.get(key, 0) + 1
    for key, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print("%s %d" % (key, n))


def main():
    if sys.argv[1] == "--folded":  # --folded DUMP COMM
        folded(sys.argv[2], sys.argv[3])
        return
    dump, pscript, comm = sys.argv[1:4]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    roots = ROOTS | THREAD_ROOTS if len(sys.argv) > 5 and sys.argv[5] == "1" else ROOTS
    a, b = ours(dump, comm), perf(pscript, comm)
    if not b:  # no perf: our own top functions
        b = a
    sa, sb = shares(a), shares(b)
    worst = 0.0
    print("# %-60s %7s %7s" % ("function (inclusive %, top by perf)", "ours", "perf"))
    for name, pv in sorted(sb.items(), key=lambda kv: -kv[1])[:top]:
        ov = sa.get(name, 0.0)
        worst = max(worst, abs(ov - pv))
        print("# %-60s %7.1f %7.1f" % (name[:60], ov, pv))
    print("result %d %d %.1f %.1f %.1f" % (len(a), len(b), root_pct(a, roots),
                                           root_pct(b, roots), worst))


main()
