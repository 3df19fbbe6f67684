#!/bin/bash
# -t python on every process of a job (tests/workloads/py_workers.py, launched
# with `profile --`): workers of a multiprocessing pool, forked (pyenv 3.12:
# sys.monitoring; pyenv 3.11: the profile function) and spawned (pyenv
# 3.12: new interpreters, held at Py_RunMain from their exec), and a torch
# DataLoader with 2 workers (Debian's python3.11, torch from Debian). Every
# function of the script is recorded as often as sys.setprofile counts it in
# a reference run, each process into a log of its own (a fork's never in its
# parent's), the workers' calls in the workers' logs; workers end with
# os._exit, so their last calls reach their logs only if flushed then.
# Also: the hook's own thread is named llmtracker in the trace and is not in
# the summary's syscall table, and the summary counts the processes whose
# calls were recorded.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
LIB=$(realpath -m "$BUILD/lib/libllmtracker-inject.so")
S=$PWD/tests/workloads/py_workers.py
CHECK=$PWD/tests/integration/workers_check.py
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
need_built "$LT" "$CONV" "$DUMP" "$LIB"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, ptrace)"
PY12=$(ls "$PYENV"/3.12*/bin/python3.12 2>/dev/null | head -1)
PY11=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
[ -x "$PY12" ] || skip "no pyenv python3.12 under $PYENV"

tap_tmpdir T pyw-test
# run TAG PY KIND N WORKER_FN MIN_WORKERS: the reference, then the profile,
# then the check of every log against it.
run() {
	local d=$T/$1 py=$2 kind=$3 n=$4
	mkdir -p "$d"
	"$py" "$S" ref "$kind" "$n" > "$d/ref" 2> "$d/ref.err"
	"$LT" profile -t python -o "$d/p.log" -v 1 -- "$py" "$S" measure "$kind" "$n" > "$d/out" 2> "$d/err"
	echo $? > "$d/rc"
	"$DUMP" "$d"/llmtracker-python.*.evlog > "$d/dump" 2> /dev/null
	python3 "$CHECK" "$S" "$(tail -1 "$d/ref")" "$5" "$6" < "$d/dump" > "$d/check"
	local rc=$?
	sed 's/^/# /' "$d/check"
	grep -E "^    (calls recorded|not seen)|not held at its start" "$d/err" | cut -c1-240 | sed 's/^/# /'
	[ $rc = 0 ] && [ "$(cat "$d/rc")" = 0 ] && [ "$(head -1 "$d/ref")" = "$(cat "$d/out")" ]
}

run fork12 "$PY12" fork 2000 work 2
check_rc $? "fork pool, python3.12: every call of every process recorded, workers in logs of their own"
grep -q "^    calls recorded in [4-9] processes" "$T/fork12/err"
check_rc $? "... and the summary counts the parent and its workers as recorded"

if [ -x "$PY11" ]; then
	run fork11 "$PY11" fork 2000 work 2
	check_rc $? "fork pool, python3.11 (profile function): every call recorded, workers in logs of their own"
else
	ok "# SKIP no pyenv python3.11"
fi

run spawn12 "$PY12" spawn 2000 work 2
check_rc $? "spawn pool, python3.12: every worker's calls recorded from its start (held at Py_RunMain)"
grep -c "installed at Py_RunMain" "$T/spawn12/err" | sed 's/^/# workers and parent hooked at Py_RunMain: /'

if /usr/bin/python3.11 -c "import torch.utils.data" 2> /dev/null; then
	run loader /usr/bin/python3.11 loader 500 __getitem__ 2
	check_rc $? "torch DataLoader, 2 workers (Debian python3.11): every call recorded, in the workers' logs"
else
	ok "# SKIP no torch for /usr/bin/python3.11"
fi

# A forged announcement: the hooked program sends, on every SEQPACKET socket
# it holds (the fork channel among them), "forked" with a file of the node
# it can read in place of a memfd, with one fd, with none. Nothing of that
# file reaches the output directory; the collector ends normally.
d=$T/forged
mkdir -p "$d"
"$LT" profile -t python -o "$d/p.log" -v 1 -- "$PY12" -c '
import os, socket
f = open("/etc/passwd", "rb")
for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        continue
    if s.type == socket.SOCK_SEQPACKET:
        for fds in ([f.fileno(), s.fileno()], [f.fileno()], []):
            try:
                socket.send_fds(s, [b"forked pid=1 ppid=1"], fds)
            except OSError:
                pass
    s.close()' > "$d/out" 2> "$d/err"
rc=$?
grep -c "not a fork" "$d/err" | sed 's/^/# announcements refused: /'
[ $rc = 0 ] && ! grep -rqs "root:x:0:0" "$d" --include='*.evlog' && ! grep -qs "root:x:0:0" "$d/p.log" &&
	grep -q "not a fork's announcement" "$d/err" && [ "$(ls "$d"/llmtracker-python.*.evlog | wc -l)" = 1 ]
check_rc $? "a forged fork announcement (a node file for a memfd) is refused; nothing of the file published"

# The hook's own thread: named, and left out of the target's tables.
d=$T/own
mkdir -p "$d"
"$LT" profile -t python,syscall -o "$d/p.log" -- "$PY12" -c '
import time
def nap():
    time.sleep(0.02)
for _ in range(25):
    nap()' > /dev/null 2> "$d/err"
"$CONV" summary "$d/p.log" > "$d/sum" 2> /dev/null && "$CONV" -i "$d/p.log" -o "$d/t.json" > /dev/null 2>&1
python3 - "$d/t.json" "$d/sum" <<'PY' | sed 's/^/# /'
import json, re, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
own = [k for k, n in names.items() if "llmtracker" in n]
busy = [e for e in ev if e.get("cat") == "syscall" and (e["pid"], e["tid"]) in own]
rows = [l.split()[-1] for l in open(sys.argv[2]) if re.match(r"\s+[\d.]+\s+[\d.]+\s+\d+\s", l)]
print("threads named llmtracker:", own, "its syscalls in the trace:", len(busy),
      "summary syscall rows:", rows[:6])
ok = len(own) == 1 and busy and "poll" not in rows and "clock_nanosleep" in rows
sys.exit(0 if ok else 1)
PY
check_rc ${PIPESTATUS[0]} "the hook's thread: named llmtracker in the trace, its calls there, none in the summary's tables"
tap_done
