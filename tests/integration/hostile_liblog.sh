#!/bin/bash
# The injected library's log against a root target that attacks the file it
# was handed, and forged library logs against the converter.
#   1. a target in a mount namespace of its own (as a container) runs the
#      stand-in CUPTI under `profile --enable-cuda-kernel`; while recorded it
#      keeps a copy of its log fd, fchmods it 04755 and fchowns it to
#      65534; after the profile ended it writes 8 MiB more through it and
#      changes both again (mode 0755). The published log must be 0644, owned
#      by the collector's uid, and keep its size and bytes; the collector's
#      own log records its name, size and SHA-256;
#   2. the converter joins the genuine log (its kernels counted), and leaves
#      out, naming each in one line, a forged library log carrying the
#      profile's session id and a copy of the genuine one that grew.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
P=$(realpath -m "$BUILD/tests/progs")
LT=$(realpath -m "$BUILD/bin/llmtracker")
CONV=$(realpath -m "$BUILD/bin/llmtracker-convert")
need_built "$P/hostile_target" "$P/fake_cupti" "$P/evlog_dump" "$P/conv_genlog" "$LT" "$CONV" \
	"$BUILD/lib/libllmtracker-inject.so"
[ "$(id -u)" = 0 ] || skip "needs root (ptrace, mount namespaces)"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"
[ ! -e /proc/driver/nvidia/version ] && [ ! -e /dev/nvidiactl ] || skip "a GPU driver here (tests/gpu/ covers it)"
unshare -m --propagation private true 2>/dev/null || skip "no mount namespaces here"

tap_tmpdir W llmt-hostile-liblog
tap_at_exit 'exec 9>&- 2>/dev/null'
isolated() { W="$W" unshare -m --propagation private sh -c 'mount -t tmpfs hostile "$W" && exec "$@"' -- "$@"; }
session_of() { "$P/evlog_dump" "$1" 2>/dev/null | sed -n 's/^# session=//p' | head -1; }
staged() { ls -A "$W/out" | grep -qE '^\.llmtracker-cupti\..*\.evlog\.partial$'; }

mkdir "$W/out"
mkfifo "$W/in"
isolated "$P/hostile_target" "$P/fake_cupti" <"$W/in" >"$W/t.out" 2>&1 &
tap_bg $!
exec 9>"$W/in"
wait_for "$W/t.out" '^ready'
TP=$(awk '/^ready/ {print $2}' "$W/t.out"); tap_bg "$TP"
echo "probe before" >&9
wait_for "$W/t.out" "^before probe done"
# Only this collector sees a driver file (the node has none): the library goes in.
unshare -m --propagation private sh -c 'mount -t tmpfs stand-in /proc/driver &&
	mkdir /proc/driver/nvidia && echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
	"$LT" profile -p "$TP" -t syscall --enable-cuda-kernel true -o "$W/out/main.evlog" -v 1 \
	>/dev/null 2>"$W/c.err" & cp=$!; tap_bg $cp
wait_until 30 staged
held() { ls -l /proc/$TP/fd 2>/dev/null | grep -q '/\.llmtracker-cupti\..*\.evlog\.partial$'; }
wait_until 30 held # the library has its fd
echo "seize 4755 65534" >&9
wait_for "$W/t.out" "^seized" 10
# kernels recorded (the library flushed a chunk past the header) before the stop
recorded() { [ "$(stat -c %s "$W"/out/.llmtracker-cupti.*.partial 2>/dev/null || echo 0)" -gt 4096 ]; }
wait_until 60 recorded
kill -INT $cp; wait $cp; crc=$?
sed -n '/seized/p;/fch/p' "$W/t.out" | sed 's/^/# target: /'
grep -E "CUDA log|pid $TP:" "$W/c.err" | cut -c1-200 | sed 's/^/# /'
L=$(ls "$W"/out/llmtracker-cupti.*.$TP.*.evlog 2>/dev/null)
check "the target kept its log fd and changed its mode and owner while recorded (collector rc $crc)" \
	'[ $crc = 0 ] && grep -q "^seized 1$" "$W/t.out" && ! grep -q "^fch" "$W/t.out" && [ -n "$L" ]'
st0=$(stat -c '%a %u' "$L" 2>/dev/null) sz0=$(stat -c %s "$L" 2>/dev/null) sum0=$(sha256sum <"$L" | cut -d' ' -f1)
echo "# published: mode/uid $st0, $sz0 bytes"
check "the published log is 0644 (not executable, not set-uid), owned by the collector ($(id -u))" \
	'[ "$st0" = "644 $(id -u)" ] && [ ! -u "$L" ] && [ ! -x "$L" ]'
echo "seize 755 65534" >&9 # no new fd: mode 0755 for the one it kept, from now on
echo "grow 8388608" >&9
wait_for "$W/t.out" "^grew" 30
sed -n 's/^grew/# target: grew/p' "$W/t.out"
# what its kept fd holds now: the staging file, removed from the directory
kept=$(for f in /proc/$TP/fd/*; do case $(readlink "$f") in *.partial*deleted*) echo "$f";; esac; done | head -1)
kst=$(stat -L -c '%a %u %s' "$kept" 2>/dev/null)
echo "# the target's kept file: mode uid size $kst"
check "the target wrote 8 MiB more and made its file 0755, uid 65534 after the profile" \
	'grep -q "^grew 8388608$" "$W/t.out" && [ "${kst% *}" = "755 65534" ] && [ "${kst##* }" -ge 8388608 ]'
check "... none of it reached the published log: same mode, owner, size ($sz0) and bytes" \
	'[ "$(stat -c "%a %u %s" "$L")" = "$st0 $sz0" ] && [ "$(sha256sum <"$L" | cut -d" " -f1)" = "$sum0" ]'
check "no staging file or copy is left in the output directory" \
	'[ -z "$(ls -A "$W/out" | grep -vE "^(main\.evlog|llmtracker-cupti\..*\.evlog)$")" ]'
rec=$("$P/evlog_dump" "$W/out/main.evlog" 2>/dev/null | grep "^lib_log ")
echo "# ${rec:0:200}"
check "the collector's log records the published log's name, size and SHA-256" \
	'[ "$(echo "$rec" | grep -c .)" = 1 ] &&
	 echo "$rec" | grep -qF " name=${L##*/} size=$sz0 digest=sha256:$sum0"'

# 2. the converter: the genuine log joins, forged and grown ones do not
k=$("$P/evlog_dump" "$L" 2>/dev/null | grep -c "^gpu_kernel ")
"$CONV" summary "$W/out/main.evlog" >"$W/sum1" 2>"$W/sum1.err"
check "the genuine log joins: summary of the main log alone counts its $k kernels, nothing left out" \
	'[ "$k" -gt 0 ] && grep -qE "^ .* $k +[0-9.]+ +[0-9.]+  fake_kernel$" "$W/sum1" && ! grep -q "left out" "$W/sum1.err"'
s=$(session_of "$W/out/main.evlog")
F=$W/out/llmtracker-cupti.$(hostname).31337.20260101T000000.000000001.evlog
"$P/conv_genlog" "$F" -n 3000 --part gpu --pid 31337 --session "$s" >/dev/null
"$CONV" summary "$W/out/main.evlog" >"$W/sum2" 2>"$W/sum2.err"
grep "left out" "$W/sum2.err" | cut -c1-300 | sed 's/^/# /'
check "a forged library log with the profile's session id is left out, named in one line with why" \
	'[ "$(session_of "$F")" = "$s" ] && [ "$(grep -c "left out" "$W/sum2.err")" = 1 ] &&
	 grep "left out 1 injected-library log" "$W/sum2.err" | grep -qF "$F (no collector log of its session records it)"'
check "... and nothing of it is in the profile (summary byte-identical)" 'cmp -s "$W/sum1" "$W/sum2"'
"$CONV" summary "$W/out" >"$W/sum3" 2>"$W/sum3.err"
check "the directory given whole: the same (main log decides, forged log named)" \
	'cmp -s "$W/sum1" "$W/sum3" && grep "left out 1 injected-library log" "$W/sum3.err" | grep -qF "$F"'
mkdir "$W/grown"
cp "$W/out/main.evlog" "$L" "$W/grown/"
head -c 4096 "$L" >>"$W/grown/${L##*/}"
"$CONV" summary "$W/grown/main.evlog" >"$W/sum4" 2>"$W/sum4.err"
grep "left out" "$W/sum4.err" | cut -c1-300 | sed 's/^/# /'
check "a copy of the genuine log that grew after publishing is left out (larger than recorded)" \
	'grep "left out 1 injected-library log" "$W/sum4.err" | grep -qF "${L##*/} (larger than its collector log records)" &&
	 ! grep -q "fake_kernel" "$W/sum4"'
exec 9>&-
tap_done
