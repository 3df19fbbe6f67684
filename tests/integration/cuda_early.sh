#!/bin/bash
# No call lost at the start: a launched program that calls the real CUDA
# runtime (no driver: calls fail fast) from its first instructions, with no
# wait, is recorded call for call; so are the calls right after a dlopen
# half-way through (by soname, by path, through LD_LIBRARY_PATH to a copy),
# and those of a child that forks and execs. A stopped collector holds no
# load, a target's or anyone else's. And -t python on Debian's python3.11 (USDT) in launch mode
# records a short script's first calls exactly.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(realpath -m "$BUILD/bin/llmtracker")
PROG=$(realpath -m "$BUILD/tests/progs/cuda_early")
PROG_DL=$(realpath -m "$BUILD/tests/progs/cuda_early_dl")
COUNT=$(realpath -m "$BUILD/tests/progs/cuda_logcount")
DUMP=$(realpath -m "$BUILD/tests/progs/evlog_dump")
CUDA=${CUDA_HOME:-/usr/local/cuda}

[ "$(id -u)" = 0 ] || skip "needs root for BPF"
[ -e /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF"
[ -e "$CUDA/lib64/libcudart.so.13" ] || skip "no CUDA runtime at $CUDA/lib64"
need_built "$LT" "$PROG" "$PROG_DL" "$COUNT" "$DUMP"

tap_tmpdir T cuda_early

# The user's probe file: the four functions cuda_early calls.
cat >"$T/probes.json" <<'JSON'
{ "uprobes": [ { "library": "libcudart.so", "class": "cuda_runtime",
    "symbols": ["cudaGetDeviceCount", "cudaMalloc", "cudaMemset", "cudaDeviceSynchronize"] } ] }
JSON

want="cudaDeviceSynchronize=50 cudaGetDeviceCount=300 cudaMalloc=200 cudaMemset=100"
counts() { # calls file [pid]: "sym=N ..." sorted by name
	awk -v p="${2:-}" '$1=="call" && (p=="" || $2==p) {c[$9]++} END {for (s in c) print s "=" c[s]}' "$1" |
		sort | tr '\n' ' ' | sed 's/ $//'
}
# Return codes in call order, as the program printed them and as recorded.
same_rets() { # out calls
	grep '^ret ' "$1" | awk '{print $2, $3}' >"$T/ret.want"
	awk '$1=="call" {print $9, $6}' "$2" >"$T/ret.got"
	cmp -s "$T/ret.want" "$T/ret.got"
}
profile() { # name cmd...: profile it in launch mode, dump its calls
	local name=$1
	shift
	timeout 120 "$LT" profile -q -v 1 -t cuda --probe-file "$T/probes.json" -o "$T/$name.log" -- "$@" \
		>"$T/$name.out" 2>"$T/$name.err"
	echo $? >"$T/$name.rc"
	"$COUNT" "$T/$name.log" --dump >"$T/$name.calls" 2>&1
	echo "# $name: $(counts "$T/$name.calls")"
}

# ---- 1. launched, calling from main at once
profile launch "$PROG" calls
check "launch: exits 0, 650 calls made" "[ \$(cat $T/launch.rc) = 0 ] && [ \$(grep -c '^ret ' $T/launch.out) = 650 ]"
check "launch: per-function counts exact ($want)" "[ \"\$(counts $T/launch.calls)\" = '$want' ]"
check "launch: every return code as the program got it, in order" "same_rets $T/launch.out $T/launch.calls"
check "launch: libcudart armed before the program ran" \
	"grep -q 'libcudart.so.13: 4 functions probed (cuda_runtime)' $T/launch.err"

# A launched script that execs the program: armed through the search path.
printf '#!/bin/sh\nexec %s calls\n' "$PROG" >"$T/run.sh"
chmod +x "$T/run.sh"
profile script "$T/run.sh"
[ "$(counts "$T/script.calls")" = "$want" ] || { echo "# rc $(cat $T/script.rc)"; head -3 "$T/script.calls" "$T/script.out"; grep -v "^libbpf" "$T/script.err" | tail -5; } | sed "s/^/# /"
check "launched script exec'ing it: counts exact" "[ \"\$(counts $T/script.calls)\" = '$want' ]"

# ---- 2. dlopen half-way: by soname (ld.so.conf), by path, through LD_LIBRARY_PATH
profile dl_name "$PROG_DL" libcudart.so.13
check "dlopen by soname: counts after the load exact" \
	"grep -q '^loaded' $T/dl_name.out && [ \"\$(counts $T/dl_name.calls)\" = '$want' ]"
check "dlopen by soname: return codes in order" "same_rets $T/dl_name.out $T/dl_name.calls"
# A file found in the search path is armed before any process loads it.
check "dlopen by soname: armed before its load, nothing mapped unprobed" \
	"grep -q 'libcudart.so.13: 4 functions probed before it is loaded' $T/dl_name.err && ! grep -q 'mapped before' $T/dl_name.err"

profile dl_path "$PROG_DL" "$CUDA/lib64/libcudart.so.13"
check "dlopen by path: counts after the load exact" "[ \"\$(counts $T/dl_path.calls)\" = '$want' ]"

mkdir -p "$T/lib"
cp "$(readlink -f "$CUDA/lib64/libcudart.so.13")" "$T/lib/libcudart.so.13"
LD_LIBRARY_PATH="$T/lib" profile dl_env "$PROG_DL" libcudart.so.13
check "dlopen through LD_LIBRARY_PATH: the copy in it armed and recorded exactly" \
	"[ \"\$(counts $T/dl_env.calls)\" = '$want' ] && [ \"\$(awk '\$1==\"call\" {print \$10}' $T/dl_env.calls | sort -u)\" = '$T/lib/libcudart.so.13' ]"

# ---- 3. a child that forks and execs, calling at once
profile spawn "$PROG" spawn
child=$(awk '/^child/ {print $2}' "$T/spawn.out")
check "spawned child: exits 0" "[ \$(cat $T/spawn.rc) = 0 ] && [ -n '$child' ]"
# Nothing holds its load: a child that calls before its links are in (its
# fork and exec seen after its mmap) loses those calls, and is named.
late() { grep -qE "mapped before .* probes were in.* $child \(libcudart" "$T/spawn.err"; }
late && echo "# spawn: the child's load came before its links: $(grep 'mapped before' $T/spawn.err)"
check "spawned child: its counts exact under its own pid ($child), or it is named as armed late" \
	"late || { [ \"\$(counts $T/spawn.calls $child)\" = '$want' ] && [ \"\$(counts $T/spawn.calls)\" = '$want' ]; }"
check "spawned child: return codes in order (unless armed late)" "late || same_rets $T/spawn.out $T/spawn.calls"

# ---- 4. a stopped collector holds nobody's load, a target's included
# The target waits for a go file, then execs cuda_early (which loads the
# runtime at once); the collector is stopped meanwhile (Ctrl-Z, SIGSTOP, a
# frozen cgroup, a debugger), then killed. Loads are never held: neither an
# unrelated process opening the probed file nor the target waits for it.
bash -c "while [ ! -e $T/go ]; do sleep 0.02; done; exec $PROG calls" >"$T/die.out" 2>&1 &
tpid=$!
tap_bg "$tpid"
"$LT" profile -p "$tpid" -q -v 1 -t cuda --probe-file "$T/probes.json" -o "$T/die.log" >"$T/die.err" 2>&1 &
cpid=$!
tap_bg "$cpid"
wait_for "$T/die.err" "pid $tpid: .*libcudart.so.13: 4 functions probed"
probed=$(sed -n "s/.*pid $tpid: \(\/.*libcudart.so.13\): 4 functions probed.*/\1/p" "$T/die.err" | head -1)
kill -STOP "$cpid"
stopped() { ! awk '{print $3}' /proc/"$1"/task/*/stat 2>/dev/null | grep -qv T; }
wait_until 10 stopped "$cpid"
check "collector stopped (every thread)" "stopped $cpid"
t0=${EPOCHREALTIME/./}
timeout 10 dd if="$probed" of=/dev/null bs=4096 count=1 status=none
orc=$? open_us=$((${EPOCHREALTIME/./} - t0))
check "collector stopped: an unrelated process opens the probed $probed at once ($((open_us / 1000)) ms)" \
	"[ $orc = 0 ] && [ $open_us -lt 1000000 ]"
touch "$T/go"
ended=0
wait_until 20 '! kill -0 "$tpid" 2>/dev/null' && ended=1
check "collector stopped: the target loads libcudart and runs to its end meanwhile" \
	"[ $ended = 1 ] && stopped $cpid && [ \$(grep -c '^ret ' $T/die.out) = 650 ] && grep -q '^done' $T/die.out"
wait "$tpid"
trc=$?
kill -KILL "$cpid"
wait "$cpid" 2>/dev/null
check "collector killed: the target had ended as it would (exit $trc)" "[ $trc = 0 ]"

# ---- 5. Python USDT in launch mode: a short script's first calls, no sleep
PY=/usr/bin/python3.11
if [ -x $PY ] && readelf -n $PY 2>/dev/null | grep -q function__entry; then
	cat >"$T/early.py" <<'PYEOF'
def leaf(x):
    return x + 1

def mid(x):
    return leaf(x) * 2

def top(n):
    t = 0
    for i in range(n):
        t += mid(i)
    return t

print(top(300))
PYEOF
	timeout 120 "$LT" profile -q -t python --python-method usdt -o "$T/py.log" -- $PY "$T/early.py" >"$T/py.out" 2>"$T/py.err"
	prc=$?
	"$DUMP" "$T/py.log" | python3 tests/integration/python_check.py top=1 mid=300 leaf=300 >"$T/py.check" 2>&1
	crc=$?
	sed 's/^/# /' "$T/py.check"
	check "python3.11 launched, USDT probes: top/mid/leaf entered and left exactly 1/300/300 times" "[ $prc = 0 ] && [ $crc = 0 ]"
else
	ok "# SKIP $PY has no USDT probes"
fi

tap_done
