#!/bin/bash
# Launch form of --enable-cuda-kernel, to the launched program's exit, with
# the stand-in CUPTI (tests/progs/fake_cuda_launch: loads it, then the
# injection library as cuInit does) made faithful to the CUDA driver's exit:
# FAKE_CUPTI_TEARDOWN=1 registers an exit handler at its load, after which
# any CUPTI call kills the process, as CUPTI's flush from our library's
# destructor killed every launched torch job on the H200. The program must
# keep its output and exit status (7), the CUDA log must be published with
# every record the collector was told of, and the collector must say it was
# flushed at the exit. No GPU driver here: the collector's check for one is
# met in a private mount namespace (a /proc/driver/nvidia/version of ours).
# The summary's "gpu" row counts what the library recorded, or says why
# nothing (a launched command that never initialized CUDA).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$(realpath -m "$BUILD/tests/progs")
COLL=$(realpath -m "$BUILD/bin/llmtracker")
need_built "$T/fake_cuda_launch" "$T/fake_cupti" "$T/inject_logdump" "$COLL"
[ "$(id -u)" = 0 ] || skip "needs root (eBPF, mount namespace)"
[ -d /proc/driver ] && command -v unshare >/dev/null || skip "no /proc/driver or unshare"
if [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidiactl ]; then
	skip "this node has a GPU driver; tests/gpu/launch_kernels.sh covers it"
fi
tap_tmpdir W llmt-launch-exit

FAKE_CUPTI_TEARDOWN=1 FAKE_CUPTI_RATE=50000 unshare -m sh -c '
	mount -t tmpfs none /proc/driver && mkdir /proc/driver/nvidia && echo fake >/proc/driver/nvidia/version &&
	exec "$0" profile -v 1 -t cpu --enable-cuda-kernel true -o "$1/p.log" --cupti-dir "$1" -- "$2" "$3" 300' \
	"$COLL" "$W" "$T/fake_cuda_launch" "$T/fake_cupti" >"$W/out" 2>"$W/err"
grep -E "inject_mgr|command|fake CUPTI" "$W/err" "$W/out" | cut -c1-220 | sed 's/^/# /'
check "the program kept its output" 'grep -q "^InitializeInjection 1$" "$W/out" && grep -q "^done$" "$W/out"'
check "... and its exit status (7), no CUPTI call after CUDA's teardown" \
	'grep -q "command exited with status 7" "$W/err" && ! grep -q "fake CUPTI: called after" "$W/out" "$W/err"'
told=$(grep -oE "pid [0-9]+: [0-9]+ kernels" "$W/err" | grep -oE "[0-9]+ kernels" | grep -oE "^[0-9]+")
logged=$("$T/inject_logdump" "$W"/llmtracker-cupti.*.evlog 2>/dev/null | grep -c "^K")
echo "# kernels: the library told the collector ${told:-none}, its published log holds $logged"
check "the CUDA log was published at the exit with every kernel told of" \
	'[ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "the collector says it was flushed at the process's exit" \
	'grep -q "CUPTI flushed at the process.s exit" "$W/err"'
row=$(awk '$1 == "gpu" { print $2 }' "$W/err")
check "the summary's gpu row counts the kernels recorded ($row)" '[ -n "$told" ] && [ "$row" = "$told" ]'
unshare -m sh -c '
	mount -t tmpfs none /proc/driver && mkdir /proc/driver/nvidia && echo fake >/proc/driver/nvidia/version &&
	exec "$0" profile -t cpu --enable-cuda-kernel true -o "$1/q.log" --cupti-dir "$1" -- /bin/true' \
	"$COLL" "$W" >/dev/null 2>"$W/err2"
sed -n '/^  gpu /,/^  wrote/p' "$W/err2" | sed 's/^/# /'
check "a command that never initialized CUDA: the gpu row says so" \
	'grep -A1 -E "^  gpu +0 +0$" "$W/err2" | grep -q "not seen in 1 process: no process of the launched command initialized CUDA"'

# A command that initializes CUDA only after the profile ended (-d) runs on
# unrecorded: the library finds the collector's end of its socket closed.
mkdir "$W/late"
FAKE_CUPTI_RATE=50000 unshare -m sh -c '
	mount -t tmpfs none /proc/driver && mkdir /proc/driver/nvidia && echo fake >/proc/driver/nvidia/version &&
	exec "$0" profile -t cpu -d 1 --enable-cuda-kernel true -o "$1/late/p.log" -- sh -c "
		echo \$\$ >$1/late.pid; until [ -e $1/late/GO ]; do sleep 0.05; done; exec $2 $3 100"' \
	"$COLL" "$W" "$T/fake_cuda_launch" "$T/fake_cupti" >"$W/late.out" 2>"$W/late.err"
crc=$?
touch "$W/late/GO"
for _ in $(seq 600); do kill -0 "$(cat "$W/late.pid")" 2>/dev/null || break; sleep 0.05; done
grep -E "stopping|command" "$W/late.err" | sed 's/^/# /'
check "CUDA after the profile: the collector ended at -d ($crc), the command ran on to its end" \
	'[ $crc = 0 ] && grep -q "^InitializeInjection 1$" "$W/late.out" && grep -q "^done$" "$W/late.out"'
check "... and nothing was recorded after the profile: no CUDA log" \
	'[ -z "$(ls -A "$W/late" | grep -v -e "^p.log$" -e "^GO$")" ]'
tap_done
