#!/bin/bash
# One injected library per process for both of its features: the Python
# hook (-t python on a pyenv CPython, which has no USDT probes) and CUDA
# kernels (--enable-cuda-kernel, the stand-in CUPTI of tests/progs/
# fake_cupti.c copied as libcupti.so.13, loaded by the script with ctypes).
#   1. `-p PY`, a Python already running "CUDA": while attached, exactly one
#      copy of the library is mapped in it (one memfd inode); at the end
#      both its logs are published, the Python log with the script's calls
#      and the CUPTI log with every kernel the collector was told of.
#   2. `-p PARENT` (a shell): after the attach it starts a Python child that
#      first runs Python only (its hook goes in at Py_RunMain), then loads
#      CUDA: the same copy starts CUPTI once CUDA is there (one start, both
#      features), so the child's calls and kernels are both recorded, the
#      summary's gpu row counts its kernels and does not name it as not seen;
#      a fork of it (as a DataLoader worker is forked) gets no CUDA of its own.
#   3. `-p PY`, a Python that never loads CUDA: one start, the hook's log
#      only (no CUPTI log), and the gpu row names it with why.
#   4. The launch form (`-- PY`): the hook goes in at Py_RunMain by the
#      library's path, the one CUDA_INJECTION64_PATH names, so when the
#      script then "initializes CUDA" as cuInit does (dlopen of that path,
#      InitializeInjection) the dynamic loader gives it the same copy, and
#      CUPTI starts there under the hook's start, into the collector's log.
#   5. The launch form with --delay: CUDA loads the library first (launch
#      mode's own start, reporting on the launch socket); the hook goes into
#      that same copy afterwards. Both logs, one copy.
#   6. The launch form into a mount namespace of its own: the hook goes in
#      by a memfd (a path of ours names nothing we know there).
# No GPU driver here: the collector's check for one is met in a private
# mount namespace (a /proc/driver/nvidia/version of ours), as in ck_children.sh.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$(realpath -m "$BUILD/tests/progs")
COLL=$(realpath -m "$BUILD/bin/llmtracker")
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
need_built "$T/fake_cupti" "$T/inject_logdump" "$T/evlog_dump" "$COLL"
[ -x "$PY" ] || skip "no pyenv python3.11 (an interpreter without USDT probes) under $PYENV"
need_root "eBPF, ptrace, mount namespace"
need_standin_driver tests/gpu/
tap_tmpdir W llmt-inject-one
# the Python child of case 2 is the parent script's, not ours
tap_at_exit 'for f in "$W"/*.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; done'
# distinct copies of the library mapped in PID (memfd inodes)
copies() { awk '/memfd:llmtracker-inject/ { print $5 }' "/proc/$1/maps" 2>/dev/null | sort -u | wc -l; }
# distinct copies by any name (memfd or path), and those by its path
copies_any() { awk '/llmtracker-inject/ { print $5 }' "/proc/$1/maps" 2>/dev/null | sort -u | wc -l; }
by_path() { awk '$6 ~ /\/libllmtracker-inject\.so$/ { print $5 }' "/proc/$1/maps" 2>/dev/null | sort -u | wc -l; }
cupti_logs() { ls "$1"/llmtracker-cupti.*."$2".*.evlog 2>/dev/null | wc -l; }
kernels_told() { grep -oE "pid $1: [0-9]+ kernels" "$2" | grep -oE "[0-9]+ kernels" | grep -oE "^[0-9]+"; }
kernels_logged() { "$T/inject_logdump" "$1" 2>/dev/null | grep -c "^K"; }
py_calls() { "$T/evlog_dump" "$1" 2>/dev/null | grep "py_enter" | grep -c "func=$2 "; }
collector() { # ARGS...: the collector, seeing a GPU driver of ours
	unshare -m --propagation private sh -c 'mount -t tmpfs stand-in /proc/driver &&
		mkdir /proc/driver/nvidia && echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
		"$COLL" "$@"
}

cp "$T/fake_cupti" "$W/libcupti.so.13"
export FAKE_CUPTI_RATE=20000
# The workload: Python calls (step) until it is told to load "CUDA", then
# Python calls and CUDA calls until $W/stop-NAME appears.
cat > "$W/work.py" <<'PY'
import ctypes, os, sys, time
w, name, cuda_now = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def step(i):
    return i * 2
def load_cuda():
    lib = ctypes.CDLL(os.path.join(w, "libcupti.so.13"), mode=ctypes.RTLD_GLOBAL)
    inj = os.environ.get("CUDA_INJECTION64_PATH")
    if inj: # what cuInit does with it
        print("init", ctypes.CDLL(inj).InitializeInjection(), flush=True)
    print("cuda", flush=True)
    return lib.fake_cupti_api_call
call = load_cuda() if cuda_now else None
print("ready", os.getpid(), flush=True)
i = forked = 0
while not os.path.exists(os.path.join(w, "stop-" + name)):
    step(i)
    i += 1
    if call is None and not forked and os.path.exists(os.path.join(w, "forkfirst-" + name)):
        forked = os.fork()
        if forked == 0: # a worker forked before its parent's CUDA, that starts CUDA itself
            c = load_cuda()
            while not os.path.exists(os.path.join(w, "stop-" + name)):
                step(0)
                c()
                time.sleep(0.001)
            os._exit(0)
        print("forkedfirst", forked, flush=True)
    if call is None and os.path.exists(os.path.join(w, "load-" + name)):
        call = load_cuda()
    if call is not None:
        call()
    if call is not None and not forked and os.path.exists(os.path.join(w, "fork-" + name)):
        forked = os.fork()
        if forked == 0: # a DataLoader-like worker: Python only, CUDA is its parent's
            while not os.path.exists(os.path.join(w, "stop-" + name)):
                step(0)
                time.sleep(0.001)
            os._exit(0)
        print("forked", forked, flush=True)
    time.sleep(0.001)
print("done", i, flush=True)
PY

# ---- 1. -p a Python that runs CUDA: one copy, both logs
mkdir "$W/one"
"$PY" "$W/work.py" "$W" one 1 > "$W/one.out" 2>&1 & P1=$!; tap_bg $P1
wait_for "$W/one.out" "^ready" 30
collector profile -p "$P1" -t python --enable-cuda-kernel true -d 8 -v 1 -o "$W/one/main.evlog" \
	> /dev/null 2> "$W/one.err" & CP=$!; tap_bg $CP
wait_for "$W/one.err" "tracing functions through the injected profile hook" 30
wait_for "$W/one.err" "CUDA kernel profiling (of|cannot start in) pid $P1" 30
copies_1=$(copies "$P1")
echo "# pid $P1 while attached: $copies_1 copy(ies) of the library mapped"
check "a Python with CUDA traced for both gets one copy of the library ($copies_1)" '[ "$copies_1" = 1 ]'
check "... started for both: the hook and CUDA kernels" \
	'grep -q "tracing functions through the injected profile hook" "$W/one.err" &&
	 grep -q "CUDA kernel profiling of pid $P1 started" "$W/one.err"'
wait "$CP"; crc=$?
touch "$W/stop-one"
wait "$P1"
cl=$(ls "$W"/one/llmtracker-cupti.*."$P1".*.evlog 2>/dev/null | head -1)
pl=$(ls "$W"/one/llmtracker-python.*."$P1".*.evlog 2>/dev/null | head -1)
told=$(kernels_told "$P1" "$W/one.err")
logged=$([ -n "$cl" ] && kernels_logged "$cl")
calls=$([ -n "$pl" ] && py_calls "$pl" step)
echo "# CUPTI log ${cl##*/}: ${logged:-none} kernels (told ${told:-none}); Python log ${pl##*/}: ${calls:-none} calls of step"
check "the collector ended after -d, status 0" '[ "$crc" = 0 ] && grep -q "stopped: duration reached" "$W/one.err"'
check "its CUPTI log holds every kernel the collector was told of" \
	'[ -n "$cl" ] && [ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "its Python log holds the script's calls" '[ -n "$pl" ] && [ "${calls:-0}" -gt 100 ]'
check "the library was unloaded at the end" '! grep -q "memfd:llmtracker-inject" "/proc/$P1/maps" 2>/dev/null'
check "the script ran to its end" 'grep -q "^done [1-9]" "$W/one.out"'

# ---- 2. a child started after -p attach runs Python, then CUDA
mkdir "$W/two"
mkfifo "$W/go"
printf '%s\n' '#!/bin/bash' 'W=$1 PY=$2' 'read -r _ < "$W/go"' \
	'"$PY" "$W/work.py" "$W" two 0 > "$W/two.out" 2>&1 & echo $! > "$W/two.pid"' 'wait' > "$W/parent.sh"
bash "$W/parent.sh" "$W" "$PY" & PARENT=$!; tap_bg $PARENT
collector profile -p "$PARENT" -t python --enable-cuda-kernel true -d 10 -v 1 -o "$W/two/main.evlog" \
	> /dev/null 2> "$W/two.err" & CP=$!; tap_bg $CP
wait_for "$W/two.err" "profiling 1 process" 30
echo go > "$W/go"
wait_for "$W/two.out" "^ready" 30
C=$(cat "$W/two.pid" 2>/dev/null)
wait_for "$W/two.err" "pid $C: (tracing functions|cannot trace)" 30
check "the child started after attach gets the hook (pid ${C:-?})" \
	'[ -n "$C" ] && grep -q "python: pid $C: tracing functions through the injected profile hook" "$W/two.err"'
touch "$W/load-two" # now it loads CUDA
wait_for "$W/two.out" "^cuda" 30
wait_until 10 'grep -q "libcupti.so.13" "/proc/$C/maps" 2>/dev/null'
wait_for "$W/two.err" "CUDA kernel profiling of pid $C started" 30 # the library found it
copies_2=$(copies "$C")
echo "# child $C after it loaded CUDA: $copies_2 copy(ies) of the library mapped"
check "... and still one copy of the library once it runs CUDA ($copies_2)" '[ "$copies_2" = 1 ]'
touch "$W/fork-two" # it forks a worker
wait_for "$W/two.out" "^forked" 30
F=$(sed -n 's/^forked //p' "$W/two.out")
wait "$CP"; crc=$?
touch "$W/stop-two"
wait "$PARENT"
cl=$(ls "$W"/two/llmtracker-cupti.*."$C".*.evlog 2>/dev/null | head -1)
pl=$(ls "$W"/two/llmtracker-python.*."$C".*.evlog 2>/dev/null | head -1)
told=$(kernels_told "$C" "$W/two.err")
logged=$([ -n "$cl" ] && kernels_logged "$cl")
calls=$([ -n "$pl" ] && py_calls "$pl" step)
row=$(awk '$1 == "gpu" { print $2 }' "$W/two.err")
sed -n '/^  source /,/^  wrote/p' "$W/two.err" | sed 's/^/# /'
echo "# child's CUPTI log ${cl##*/}: ${logged:-none} kernels (told ${told:-none}); Python log: ${calls:-none} calls of step"
check "the collector ended after -d, status 0" '[ "$crc" = 0 ] && grep -q "stopped: duration reached" "$W/two.err"'
check "CUPTI started in the hooked child once it loaded CUDA" \
	'grep -q "CUDA kernel profiling of pid $C started once it loaded CUDA" "$W/two.err"'
check "the child's kernels are recorded: its CUPTI log holds every kernel told of" \
	'[ -n "$cl" ] && [ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "... and its Python calls: its Python log holds the script's calls" '[ -n "$pl" ] && [ "${calls:-0}" -gt 100 ]'
check "the gpu row counts the child's kernels ($row)" '[ -n "$told" ] && [ "$row" = "$told" ]'
check "the gpu row does not name the child as not seen" \
	'! sed -n "/^  gpu /,/^  wrote/p" "$W/two.err" | grep "not seen" | grep -qw "$C"'
check "the child ran to its end" 'grep -q "^done [1-9]" "$W/two.out"'
check "its fork (pid ${F:-?}) got no CUDA of its own: no CUPTI log, no CUDA line" \
	'[ -n "$F" ] && ! ls "$W"/two/llmtracker-cupti.*."$F".*.evlog > /dev/null 2>&1 &&
	 ! grep -q "CUDA kernel profiling of pid $F " "$W/two.err"'

# ---- 3. -p a Python that never loads CUDA
mkdir "$W/three"
"$PY" "$W/work.py" "$W" three 0 > "$W/three.out" 2>&1 & P3=$!; tap_bg $P3
wait_for "$W/three.out" "^ready" 30
collector profile -p "$P3" -t python --enable-cuda-kernel true -d 3 -v 1 -o "$W/three/main.evlog" \
	> /dev/null 2> "$W/three.err" & CP=$!; tap_bg $CP
wait_for "$W/three.err" "tracing functions through the injected profile hook" 30
copies_3=$(copies "$P3")
wait "$CP"; crc=$?
touch "$W/stop-three"
wait "$P3"
pl=$(ls "$W"/three/llmtracker-python.*."$P3".*.evlog 2>/dev/null | head -1)
sed -n '/^  gpu /,/^  wrote/p' "$W/three.err" | sed 's/^/# /'
check "a Python without CUDA: one copy ($copies_3), its Python log, no CUPTI log" \
	'[ "$copies_3" = 1 ] && [ "$crc" = 0 ] && [ -n "$pl" ] &&
	 ! ls "$W"/three/llmtracker-cupti.*."$P3".*.evlog > /dev/null 2>&1'
check "the gpu row names it as not seen: it has not loaded the CUDA driver" \
	'sed -n "/^  gpu /,/^  wrote/p" "$W/three.err" | grep "not seen" | grep "has not loaded the CUDA driver" | grep -qw "$P3"'
# ---- 4. the launch form: the hook first, by the library's path; CUDA's init gets that copy
launched() { # TAG DELAY SECONDS CUDA_NOW: the collector launching [$WRAP] work.py TAG; sets CP and PID
	mkdir "$W/$1"
	collector profile --delay "$2" -t python --enable-cuda-kernel true -d "$3" -v 1 -o "$W/$1/main.evlog" \
		-- ${WRAP:-} "$PY" "$W/work.py" "$W" "$1" "$4" > "$W/$1.out" 2> "$W/$1.err" & CP=$!; tap_bg $CP
	wait_for "$W/$1.out" "^ready" 30
	PID=$(sed -n 's/^ready //p' "$W/$1.out")
	echo "$PID" > "$W/$1.pid"
	wait_for "$W/$1.err" "pid $PID: (tracing functions|cannot trace)" 30
}
ended() { # TAG: the profile over, the script told to stop and gone
	wait "$CP"; crc=$?
	touch "$W/stop-$1"
	wait_until 30 "! kill -0 $PID 2>/dev/null"
	cl=$(ls "$W/$1"/llmtracker-cupti.*."$PID".*.evlog 2>/dev/null | head -1)
	pl=$(ls "$W/$1"/llmtracker-python.*."$PID".*.evlog 2>/dev/null | head -1)
	told=$(kernels_told "$PID" "$W/$1.err")
	logged=$([ -n "$cl" ] && kernels_logged "$cl")
	calls=$([ -n "$pl" ] && py_calls "$pl" step)
	echo "# $1: CUPTI log(s) $(cupti_logs "$W/$1" "$PID"), ${logged:-none} kernels (told ${told:-none}); Python log: ${calls:-none} calls of step"
}
launched four 0 10 0
P4=$PID
touch "$W/forkfirst-four" # a worker forked before CUDA, which then initializes CUDA itself
wait_for "$W/four.out" "^forkedfirst" 30
F4=$(sed -n 's/^forkedfirst //p' "$W/four.out")
echo "$F4" > "$W/four-worker.pid"
wait_until 10 "[ \$(grep -c '^init 1' '$W/four.out') -ge 1 ]"
touch "$W/load-four" # now it initializes CUDA
wait_for "$W/four.out" "^cuda" 30
n4=$(copies_any "$P4") p4=$(by_path "$P4")
echo "# pid $P4 after CUDA's init: $n4 copy(ies) of the library mapped, $p4 by its path"
check "launch form: the hook went in at Py_RunMain (pid $P4)" \
	'grep -q "python: pid $P4: tracing functions through the injected profile hook.*installed at Py_RunMain" "$W/four.err"'
check "... by the library's path, and CUDA's init got that copy: one copy mapped ($n4, $p4 by path)" \
	'[ "$n4" = 1 ] && [ "$p4" = 1 ] && grep -q "^init 1" "$W/four.out"'
ended four
check "CUPTI started in it at CUDA's init, under the hook's start" \
	'grep -q "CUDA kernel profiling of pid $P4 started once it loaded CUDA" "$W/four.err"'
check "one CUPTI log for it, the collector's, holding every kernel told of" \
	'[ "$(cupti_logs "$W/four" "$P4")" = 1 ] && [ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "... and its Python log the script's calls" '[ -n "$pl" ] && [ "${calls:-0}" -gt 100 ]'
fl=$(ls "$W"/four/llmtracker-cupti.*."$F4".*.evlog 2>/dev/null | head -1)
ftold=$(kernels_told "$F4" "$W/four.err")
flogged=$([ -n "$fl" ] && kernels_logged "$fl")
echo "# four's worker $F4: CUPTI log(s) $(cupti_logs "$W/four" "$F4"), ${flogged:-none} kernels (told ${ftold:-none})"
check "its worker forked before CUDA got CUPTI of its own at its CUDA init (launch mode), not its parent's" \
	'[ "$(cupti_logs "$W/four" "$F4")" = 1 ] && [ -n "$ftold" ] && [ "$ftold" -gt 0 ] && [ "$flogged" = "$ftold" ]'
check "the collector exits 0 and does not say no process started CUDA kernel profiling" \
	'[ "$crc" = 0 ] && ! grep -q "no process of it started CUDA" "$W/four.err"'
row=$(awk '$1 == "gpu" { print $2 }' "$W/four.err")
check "the gpu row counts its kernels and its worker's ($row)" \
	'[ -n "$told" ] && [ -n "$ftold" ] && [ "$row" = "$((told + ftold))" ]'

# ---- 5. the launch form with --delay: CUDA's copy first, the hook into it
launched five 2 5 1
P5=$PID
n5=$(copies_any "$P5") p5=$(by_path "$P5")
echo "# pid $P5 with CUDA and the hook: $n5 copy(ies) of the library mapped, $p5 by its path"
check "launch form, CUDA first: the hook went into CUDA's copy: one copy mapped ($n5, $p5 by path)" \
	'[ "$n5" = 1 ] && [ "$p5" = 1 ] && grep -q "python: pid $P5: tracing functions" "$W/five.err"'
ended five
check "... said: its kernels come by CUDA's own start (launch mode)" \
	'grep -q "CUDA kernel profiling of pid $P5: by the library copy CUDA loaded" "$W/five.err"'
check "one CUPTI log for it, holding every kernel told of" \
	'[ "$(cupti_logs "$W/five" "$P5")" = 1 ] && [ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "... and its Python log the script's calls" '[ -n "$pl" ] && [ "${calls:-0}" -gt 100 ]'
row=$(awk '$1 == "gpu" { print $2 }' "$W/five.err")
check "the collector exits 0, the gpu row counts its kernels ($row)" '[ "$crc" = 0 ] && [ -n "$told" ] && [ "$row" = "$told" ]'

# ---- 6. the launch form into a mount namespace of its own: no path of ours is used there
WRAP="unshare -m --propagation private" launched six 0 4 0
P6=$PID
m6=$(copies "$P6") p6=$(by_path "$P6")
check "launched into a mount namespace of its own: the hook by a memfd, not by our path ($m6 memfd, $p6 by path)" \
	'[ "$m6" = 1 ] && [ "$p6" = 0 ]'
ended six
check "... and it traced the script's calls" '[ "$crc" = 0 ] && [ -n "$pl" ] && [ "${calls:-0}" -gt 100 ]'
tap_done
