#!/bin/bash
# Hostile targets (issue #13): a target's files are opened inside its own
# root, regular files only, never the node's. Each target runs chrooted in a
# tmpfs of its own mount namespace (a container without a runtime), with:
#  - its executable's directory covered, after it started, by a directory
#    whose entry is an absolute symlink to a FIFO of the node (read through
#    /proc/PID/root it would block the collector for ever);
#  - /etc/ld.so.conf a FIFO, then including a node FIFO and /dev/zero;
#  - a DT_NEEDED library that is an absolute symlink to a node file;
#  - EBPF_USDT_PYTHON_PATH naming a FIFO;
#  - a mapped library whose directory name holds a newline.
# Every run must end within its bound with a clear line, and the target must
# be left running, not stopped; SIGTERM ends a collector at once.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LT=$(readlink -f "$BUILD/bin/llmtracker")
PROG=$(readlink -f "$BUILD/tests/progs/cuda_calls")
COUNT=$BUILD/tests/progs/cuda_logcount
CUDA=${CUDA_HOME:-/usr/local/cuda}

[ "$(id -u)" = 0 ] || skip "needs root (BPF, mount namespaces)"
[ -e /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF"
unshare -m true 2>/dev/null || skip "cannot create a mount namespace here"
[ -e "$CUDA/lib64/libcublas.so.13" ] || skip "no CUDA libraries at $CUDA/lib64"
need_built "$LT" "$PROG" "$COUNT"

tap_tmpdir T lt-hostile
# the tmpfs roots go with their namespaces
mkfifo "$T/node.fifo"
mkdir "$T/nodeonly" && ln -s "$CUDA/lib64/libcublasLt.so.13" "$T/nodeonly/libcublasLt.so.13"
LIBS=$(ldd "$PROG" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')

# start_ct NAME SETUP POST ARGS...: cuda_calls ARGS in a container: a tmpfs
# in a new mount namespace holding the program and its libraries, made the
# namespace's root with pivot_root (so /proc/PID/maps read from the node
# shows paths inside it, as for a real container: maps paths are relative
# to the reader's root, or to the namespace's root mount when that is out of
# the reader's reach). SETUP runs with $R set
# before the start, POST once the program has mapped libcudart. Sets $ct.
start_ct() {
	local name=$1 setup=$2 post=$3 i; shift 3
	mkdir -p "$T/$name"
	unshare -m --propagation private sh -c '
		R=$1 PROG=$2 LIBS=$3 SETUP=$4 POST=$5;  shift 6
		mount -t tmpfs none "$R" || exit 1
		for f in $LIBS; do mkdir -p "$R${f%/*}" && cp -L "$f" "$R$f" || exit 1; done
		mkdir -p "$R/bin" "$R/dev" "$R/etc" "$R/.old" && cp "$PROG" "$R/bin/cuda_calls" || exit 1
		eval "$SETUP" || exit 1
		chroot "$R" /bin/cuda_calls "$@" &
		ct=$!
		for i in $(seq 200); do grep -q libcudart /proc/$ct/maps 2>/dev/null && break; sleep 0.05; done
		eval "$POST" || { kill $ct; exit 1; }
		# The node root stays below /.old (no umount binary inside to drop it).
		cd "$R" && pivot_root . .old || { kill $ct; exit 1; }
		wait $ct' sh "$T/$name" "$PROG" "$LIBS" "$setup" "$post" - "$@" \
		>"$T/$name.out" 2>&1 &
	tap_bg "$!"
	ct=
	wait_until 15 ct_in "$!" "$T/$name" || return 1
	tap_bg "$ct"
}
# ct_in PID ROOT: ct = the program PID started, once ROOT (the node's root)
# is gone from its namespace
ct_in() {
	ct=$(pgrep -P "$1" -x cuda_calls)
	[ -n "$ct" ] && ! grep -q "$2" "/proc/$ct/maps" 2>/dev/null && grep -q libcudart "/proc/$ct/maps" 2>/dev/null
}
# wait_map PID REGEX: until the target maps a file matching REGEX
wait_map() { wait_until 10 grep -q "$2" "/proc/$1/maps" 2>/dev/null; }
# running PID: alive and neither stopped nor traced (left as found)
running() { local s; s=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null); [ -n "$s" ] && [ "$s" != T ] && [ "$s" != t ] && [ "$s" != Z ]; }

cat >"$T/p.json" <<EOF
{ "uprobes": [ { "library": "cuda_calls", "symbols": ["cp_outer"] } ] }
EOF

# ---- 1. the executable's path now leads to a node FIFO; python path a FIFO
# Once mapped, /bin is covered by a directory whose cuda_calls is a link to
# the node FIFO.
start_ct a 'mkfifo "$R/pyfifo"; mkdir "$R/evil" && ln -s '"$T/node.fifo"' "$R/evil/cuda_calls"' \
	'mount --bind "$R/evil" "$R/bin"' watch
A=$ct
[ -n "$A" ] || sed "s/^/# a: /" "$T/a.out"
check "container A runs cuda_calls watch" "[ -n '$A' ] && running $A"
check "in A, /bin/cuda_calls is now an absolute symlink to a node FIFO" \
	"[ \"\$(readlink /proc/$A/root/bin/cuda_calls)\" = $T/node.fifo ]"

EBPF_USDT_PYTHON_PATH=/pyfifo timeout 20 "$LT" profile -t python -p "$A" -d 1 -o "$T/py.log" \
	>"$T/py.out" 2>"$T/py.err"
rc=$?
sed 's/^/# /' "$T/py.err" | grep -i fifo
check "-t python, EBPF_USDT_PYTHON_PATH a FIFO in the target: ends in time, exit 0" "[ $rc = 0 ]"
check "one line says the interpreter path is a FIFO" "grep -q 'EBPF_USDT_PYTHON_PATH=/pyfifo.*a FIFO' $T/py.err"
check "target A still running, not stopped" "running $A"

# Without CAP_SYS_ADMIN map_files is closed: the path is resolved inside A's
# root, where the link leads nowhere (the node FIFO is not opened).
timeout 20 setpriv --bounding-set=-sys_admin,-checkpoint_restore "$LT" profile -t cuda --probe-file "$T/p.json" -p "$A" -d 1 -o "$T/c1.log" \
	>"$T/c1.out" 2>"$T/c1.err"
rc=$?
sed 's/^/# /' "$T/c1.err" | grep 'cuda:\|llmtracker:'
check "-t cuda without map_files: ends in time, exit 0" "[ $rc = 0 ]"
check "one line: /bin/cuda_calls not found inside the target's root" \
	"grep -q 'cannot read /bin/cuda_calls: /bin/cuda_calls (in the target.s root): No such file' $T/c1.err"
check "nothing probed (the node file was not used)" "[ \"\$($COUNT $T/c1.log --dump 2>/dev/null | awk '\$1==\"total\" {print \$2}')\" = 0 ]"
check "target A still running, not stopped" "running $A"

# With map_files: the mapped file itself is probed, whatever its path says now.
timeout 20 "$LT" profile -t cuda --probe-file "$T/p.json" -p "$A" -d 2 -o "$T/c2.log" \
	>"$T/c2.out" 2>"$T/c2.err"
rc=$?
check "-t cuda through map_files: exit 0" "[ $rc = 0 ]"
check "cp_outer calls of the mapped file recorded" \
	"$COUNT $T/c2.log --dump 2>/dev/null | awk '\$1==\"count\" && \$2==\"cp_outer\" && \$4>0 {f=1} END {exit !f}'"
wait_until 10 'grep -q unprobed "$T/a.out"'
check "target A saw its probe come and go (probed, unprobed)" "grep -q '^probed' $T/a.out && grep -q '^unprobed' $T/a.out"

# ---- 2. generateProbe: ld.so.conf a FIFO, then includes of a node FIFO and
# /dev/zero; libcublasLt (needed by the mapped libcublas) a link to a node file.
B_SETUP='mkfifo "$R/etc/ld.so.conf"; L='"$CUDA"'/lib64; mkdir -p "$R$L" &&
	cp "$L/libcublas.so.13" "$R$L/" && ln -s '"$T"'/nodeonly/libcublasLt.so.13 "$R$L/libcublasLt.so.13"'
start_ct b "$B_SETUP" : mapfile "$CUDA/lib64/libcublas.so.13"
B=$ct
wait_map "$B" libcublas.so
timeout 20 "$LT" generateProbe -p "$B" >"$T/g1.json" 2>"$T/g1.err"
rc=$?
grep -E 'ld.so.conf|libcublasLt' "$T/g1.err" | sed 's/^/# /'
check "generateProbe, /etc/ld.so.conf a FIFO: ends in time, exit 0" "[ $rc = 0 ]"
check "one line: /etc/ld.so.conf is a FIFO, not read" "grep -q '/etc/ld.so.conf: a FIFO, not a regular file' $T/g1.err"
check "libcublas.so.13 listed (mapped)" "grep -q '\"library\": *\"$CUDA/lib64/libcublas.so.13\"' $T/g1.json"
check "libcublasLt (a link out of the root) is not found, not read from the node" \
	"grep -q 'needs libcublasLt.so.13: not found in the target' $T/g1.err && ! grep -q libcublasLt $T/g1.json"
sh -c "R=/proc/$B/root; rm -f \$R/etc/ld.so.conf && mkdir \$R/etc/ld.so.conf.d &&
	echo 'include /etc/ld.so.conf.d/*.conf' >\$R/etc/ld.so.conf && mknod \$R/dev/zero c 1 5 &&
	ln -s $T/node.fifo \$R/etc/ld.so.conf.d/a.conf && ln -s /dev/zero \$R/etc/ld.so.conf.d/b.conf"
timeout 20 "$LT" generateProbe -p "$B" >"$T/g2.json" 2>"$T/g2.err"
rc=$?
grep -E 'ld.so.conf' "$T/g2.err" | sed 's/^/# /'
check "generateProbe, includes of a node FIFO and /dev/zero: ends in time, exit 0" "[ $rc = 0 ]"
check "one line: b.conf (/dev/zero) is a character device, not read" \
	"grep -q 'b.conf: a character device, not a regular file' $T/g2.err"
check "target B still running, not stopped" "running $B"

# ---- 3. a mapped library in a directory whose name holds a newline: maps
# shows it as \\012; without map_files it is opened by that path (unescaped)
# and checked to be the file mapped.
NL=$'/opt/a\nb'
export NL
start_ct c 'mkdir -p "$R/$NL" && cp '"$CUDA"'/lib64/libcudart.so.13 "$R/$NL/" && mkfifo "$R/pyfifo"' : \
	mapfile "$NL/libcudart.so.13"
C=$ct
wait_map "$C" 'a\\012b'
check "maps shows the newline as \\\\012" "grep -q '/opt/a\\\\012b/libcudart.so.13' /proc/$C/maps"
timeout 20 setpriv --bounding-set=-sys_admin,-checkpoint_restore "$LT" profile -t cuda -v 1 -p "$C" -d 1 -o "$T/n.log" >"$T/n.out" 2>"$T/n.err"
rc=$?
check "-t cuda without map_files: exit 0" "[ $rc = 0 ]"
check "the library under /opt/a<newline>b is probed (path unescaped, inode checked)" \
	"grep -A1 '/opt/a\$' $T/n.err | grep -qE '^b/libcudart.so.13: [1-9][0-9]* functions probed'"

# ---- 4. a node FIFO as --probe-file, and SIGTERM
timeout 20 "$LT" profile -t cuda --probe-file "$T/node.fifo" -p "$C" -d 1 -o "$T/f.log" \
	>"$T/f.out" 2>"$T/f.err"
rc=$?
sed 's/^/# /' "$T/f.err"
check "--probe-file a FIFO: refused at once (exit $rc) with one clear line" \
	"[ $rc != 0 ] && [ $rc != 124 ] && grep -q 'node.fifo: a FIFO, not a regular file' $T/f.err"
EBPF_USDT_PYTHON_PATH=/pyfifo "$LT" profile -t cuda,python -p "$C" -d 60 -o "$T/t.log" \
	>"$T/t.out" 2>"$T/t.err" &
lt=$!
tap_bg "$lt"
wait_until 10 '[ -e "$T/.t.log.partial" ]'
kill -TERM "$lt"
wait_until 10 '! kill -0 "$lt" 2>/dev/null'
check "SIGTERM: the collector is gone within 10 s" "! kill -0 $lt 2>/dev/null"
wait "$lt"
rc=$?
check "SIGTERM: exit 0 and the log is published" "[ $rc = 0 ] && [ -s $T/t.log ]"
check "target C still running, not stopped" "running $C"
tap_done
