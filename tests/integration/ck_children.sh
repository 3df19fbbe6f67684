#!/bin/bash
# --enable-cuda-kernel in attach mode reaches the processes the collector
# follows after it attached: a parent (a shell script) is profiled with
# `-p PARENT -t cpu --enable-cuda-kernel true -d N`; once the collector says
# it is profiling, the parent starts a CUDA program (tests/progs/fake_cuda_app
# with the stand-in CUPTI of tests/progs/fake_cupti.c, copied as
# libcupti.so.13 as a real one is named: the gpu hook waits for the driver or
# CUPTI to be mapped) and a process that never loads CUDA (sleep).
#   - the CUDA child gets the library, its kernels are in a published CUPTI
#     log of the profile's session in --cupti-dir, as many as the collector
#     was told of, and the summary's gpu row counts them;
#   - the child exits normally afterwards with its own output and status;
#   - the child that loads no CUDA is left untouched (no library mapped in
#     it while it runs), and neither child is named in the gpu row as not
#     seen; the parent (no CUDA) is, with why.
# No GPU driver here: the collector's check for one is met in a private
# mount namespace (a /proc/driver/nvidia/version of ours).
set -u
BUILD=${BUILD:-build}
T=$(realpath -m "$BUILD/tests/progs")
COLL=$(realpath -m "$BUILD/bin/llmtracker")
for f in "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_logdump" "$T/evlog_dump" "$COLL"; do
	[ -e "$f" ] || { echo "not ok 1 - missing $f (make tests-bin)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "skip: needs root (eBPF, ptrace, mount namespace)"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "skip: the injector supports x86-64 only"; exit 77; }
[ -d /proc/driver ] && command -v unshare >/dev/null || { echo "skip: no /proc/driver or unshare"; exit 77; }
if [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidiactl ]; then
	echo "skip: this node has a GPU driver; tests/gpu/ covers it"; exit 77
fi
W=$(mktemp -d /tmp/llmt-ck-children.XXXXXX)
PARENT= CP=
cleanup() {
	exec 9>&- 2>/dev/null
	[ -n "$CP" ] && kill -INT "$CP" 2>/dev/null && wait "$CP" 2>/dev/null
	for f in "$W"/app.pid "$W"/plain.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	[ -n "$PARENT" ] && kill "$PARENT" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
n=0
check() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi; }
wait_for() { # file regex [tenths]: up to 30 s
	for _ in $(seq "${3:-300}"); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1
}
injected() { grep -qE "libllmtracker-inject|memfd:llmtracker" "/proc/$1/maps" 2>/dev/null; }

cp "$T/fake_cupti" "$W/libcupti.so.13"
mkfifo "$W/go" "$W/appin"
# The parent: waits for the go, then starts both children and waits for them.
cat > "$W/parent.sh" <<'EOF'
#!/bin/bash
W=$1 APP=$2
read -r _ < "$W/go"
FAKE_CUPTI_RATE=50000 "$APP" "$W/libcupti.so.13" < "$W/appin" > "$W/app.out" 2>&1 &
echo $! > "$W/app.pid"
sleep 120 & echo $! > "$W/plain.pid"
wait "$(cat "$W/app.pid")"
echo "status $?" > "$W/app.status"
wait
EOF
bash "$W/parent.sh" "$W" "$T/fake_cuda_app" & PARENT=$!

unshare -m --propagation private sh -c 'mount -t tmpfs stand-in /proc/driver &&
	mkdir /proc/driver/nvidia && echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
	"$COLL" profile -p "$PARENT" -t cpu --enable-cuda-kernel true -d 6 -v 1 -o "$W/main.evlog" \
	--cupti-dir "$W" > "$W/out" 2> "$W/err" & CP=$!
wait_for "$W/err" "profiling 1 process"
check "the collector profiles the parent" 'grep -q "profiling 1 process" "$W/err"'
echo go > "$W/go"
exec 9> "$W/appin" # the app's stdin: it runs until this closes
wait_for "$W/app.out" "^ready"
APP=$(cat "$W/app.pid" 2>/dev/null) PLAIN=$(cat "$W/plain.pid" 2>/dev/null)
echo "# parent $PARENT, CUDA child ${APP:-?}, plain child ${PLAIN:-?}"
wait_for "$W/err" "CUDA kernel profiling (of|cannot start in) pid $APP"
grep -E "cuda_kernel.c" "$W/err" | cut -c1-240 | sed 's/^/# /'
check "the CUDA child, started after attach, gets the library" \
	'[ -n "$APP" ] && grep -q "CUDA kernel profiling of pid $APP started" "$W/err" && injected "$APP"'
check "... and is left running (not stopped)" \
	'[ "$(sed "s/.*) \(.\).*/\1/" "/proc/$APP/stat" 2>/dev/null)" != T ] && kill -0 "$APP"'
check "the child that loads no CUDA has no library mapped while it runs" \
	'[ -n "$PLAIN" ] && kill -0 "$PLAIN" && ! injected "$PLAIN"'
wait "$CP"; crc=$? CP=
check "the collector ended after -d, status 0" '[ "$crc" = 0 ] && grep -q "stopped: duration reached" "$W/err"'
check "the plain child was never injected, to the end" 'kill -0 "$PLAIN" && ! injected "$PLAIN"'
check "the library was unloaded from the CUDA child" '! injected "$APP"'
exec 9>&-
kill "$PLAIN" 2>/dev/null
wait_for "$W/app.status" "status"
check "the CUDA child exited normally, with its own output" \
	'grep -q "status 0" "$W/app.status" && grep -q "^generated=[1-9]" "$W/app.out"'
wait "$PARENT"; PARENT=

cl=$(ls "$W"/llmtracker-cupti.*."$APP".*.evlog 2>/dev/null | head -1)
told=$(grep -oE "pid $APP: [0-9]+ kernels" "$W/err" | grep -oE "[0-9]+ kernels" | grep -oE "^[0-9]+")
logged=$("$T/inject_logdump" "$cl" 2>/dev/null | grep -c "^K")
sess() { "$T/evlog_dump" "$1" 2>/dev/null | sed -n 's/^# session=//p' | head -1; }
echo "# the child's CUDA log ${cl##*/}: ${logged} kernels; the collector was told ${told:-none}"
check "the child's CUPTI log is published with every kernel the collector was told of" \
	'[ -n "$cl" ] && [ -n "$told" ] && [ "$told" -gt 0 ] && [ "$logged" = "$told" ]'
check "... and carries the profile's session" '[ -n "$cl" ] && [ -n "$(sess "$cl")" ] && [ "$(sess "$cl")" = "$(sess "$W/main.evlog")" ]'
sed -n '/^  gpu /,/^  wrote/p' "$W/err" | sed 's/^/# /'
row=$(awk '$1 == "gpu" { print $2 }' "$W/err")
check "the summary's gpu row counts the child's kernels ($row)" '[ -n "$told" ] && [ "$row" = "$told" ]'
check "the gpu row names the parent (no CUDA) as not seen, with why, and neither child" \
	'sed -n "/^  gpu /,/^  wrote/p" "$W/err" | grep -A1 "not seen in" | grep -q "$PARENT" &&
	 sed -n "/^  gpu /,/^  wrote/p" "$W/err" | grep -q "has not loaded the CUDA driver" &&
	 ! sed -n "/^  gpu /,/^  wrote/p" "$W/err" | grep -qwE "$APP|$PLAIN"'
