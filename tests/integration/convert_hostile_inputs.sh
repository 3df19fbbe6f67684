#!/bin/bash
# llmtracker-convert on inputs that change under it or are not files:
#  - a log inside an input directory swapped for a symlink to a log outside
#    it between the converter looking at it and opening it (the race made
#    to happen every time by tests/lib/stat_swap.c, an LD_PRELOAD shim),
#    and a final-component symlink named as the input: never followed;
#  - a FIFO named as the input, swapped in for a named log, or inside an
#    input directory (static and swapped in), and a socket there: a one-line
#    reason naming it, skipped (in a directory) or refused (named), and never
#    a hang (each run is bounded with timeout);
#  - archives unpacked into a TMPDIR that is a small tmpfs: content past its
#    free space, or members past its free inodes, refused with the reason
#    before either runs out, what that archive had unpacked removed and the
#    file system left as it was; an archive that fits converts.
set -u
scratch=convert-hostile
. "$(dirname "$0")/convert_common.inc"
xgen=$BUILD/tests/progs/xplane_genlog
need_built "$xgen"
command -v cc >/dev/null || skip "no C compiler for the stat_swap shim"
cc -shared -fPIC -o "$dir/stat_swap.so" "$LLMT_ROOT/tests/lib/stat_swap.c" -ldl ||
	bail "cannot build the stat_swap shim"
BOUND=$((30 * TAP_TIME_SCALE))
# conv ARGS...: the converter under timeout; status in $rc, stderr in $dir/err
conv_t() { timeout -k 5 "$BOUND" "$conv" "$@" 2>"$dir/err" >/dev/null; rc=$?; }
# swap NAME FROM ARGS...: conv_t with FROM renamed over NAME right after the
# converter first looks at NAME
# (under a sanitizer build its runtime goes first, as it must be, and
# forwards the calls it intercepts to the shim)
asan_rt=$(ldd "$conv" 2>/dev/null | awk '/libasan/ {print $3}')
swap() {
	local name=$1 from=$2; shift 2
	SWAP_NAME=$name SWAP_FROM=$from LD_PRELOAD="${asan_rt:+$asan_rt }$dir/stat_swap.so" conv_t "$@"
}
said() { grep -qxF -- "$1" "$dir/err" || { echo "# wanted: $1"; sed 's/^/# stderr: /' "$dir/err"; false; }; }
onlyline() { [ "$(wc -l <"$dir/err")" = 1 ] && said "$1"; }

"$xgen" "$dir/good.log" goodhost 3 >/dev/null || bail "generator failed"
"$xgen" "$dir/secret.log" secrethost 3 >/dev/null || bail "generator failed"
mkdir "$dir/prep" "$dir/in"

cp "$dir/good.log" "$dir/in/a.log"
cp "$dir/good.log" "$dir/in/victim.log"
ln -s "$dir/secret.log" "$dir/prep/victim.log"
desc="a log in an input directory swapped for a symlink after being looked at: not followed, said, the rest converted"
t bash -c "$(declare -f conv_t swap said); conv='$conv' dir='$dir' BOUND=$BOUND asan_rt='$asan_rt'
	swap victim.log '$dir/prep/victim.log' -i '$dir/in' -o '$dir/s.json'
	[ -L '$dir/in/victim.log' ] || { echo '# the shim did not swap'; exit 1; }
	[ \$rc = 0 ] && ! grep -q secrethost '$dir/s.json' &&
	said 'skipped $dir/in/victim.log: is a symbolic link (not followed; name the file it points to)'"
rm -f "$dir/in/victim.log"

ln -s "$dir/secret.log" "$dir/in/link.log"
desc="a symlink named as the input (its last component): refused with one line, nothing written"
t bash -c "$(declare -f conv_t said onlyline); conv='$conv' dir='$dir' BOUND=$BOUND
	conv_t -i '$dir/in/link.log' -o '$dir/l.json'
	[ \$rc = 1 ] && [ ! -e '$dir/l.json' ] &&
	onlyline 'llmtracker-convert: input $dir/in/link.log: is a symbolic link (not followed; name the file it points to)'"
rm -f "$dir/in/link.log"

mkfifo "$dir/named.fifo"
desc="a FIFO named as the input: refused at once with one line naming it"
t bash -c "$(declare -f conv_t said onlyline); conv='$conv' dir='$dir' BOUND=$BOUND
	conv_t -i '$dir/named.fifo' -o '$dir/f.json'
	[ \$rc = 1 ] && onlyline 'llmtracker-convert: input $dir/named.fifo: is a FIFO, not an event log file'"

mkdir "$dir/top" && cp "$dir/good.log" "$dir/top/x.log" && mkfifo "$dir/prep/x.log"
desc="a named log swapped for a FIFO after being looked at: no hang, refused naming it"
t bash -c "$(declare -f conv_t swap said onlyline); conv='$conv' dir='$dir' BOUND=$BOUND asan_rt='$asan_rt'
	swap x.log '$dir/prep/x.log' -i '$dir/top/x.log' -o '$dir/x.json'
	[ -p '$dir/top/x.log' ] || { echo '# the shim did not swap'; exit 1; }
	[ \$rc != 124 ] && [ \$rc != 137 ] || { echo '# hung'; exit 1; }
	[ \$rc = 1 ] && onlyline 'llmtracker-convert: input $dir/top/x.log: is a FIFO, not an event log file'"

mkfifo "$dir/in/pipe.log"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$dir/in/sock.log" ||
	bail "cannot make a socket"
desc="a FIFO and a socket in an input directory: skipped, one line each naming it, the log converted"
t bash -c "$(declare -f conv_t said); conv='$conv' dir='$dir' BOUND=$BOUND
	conv_t -i '$dir/in' -o '$dir/p.json'
	[ \$rc = 0 ] && said 'skipped $dir/in/pipe.log: is a FIFO, not an event log file' &&
	said 'skipped $dir/in/sock.log: is a socket, not an event log file' && $json_check '$dir/p.json'"

cp "$dir/good.log" "$dir/in/victim.log" && mkfifo "$dir/prep/victim.log"
desc="a log in an input directory swapped for a FIFO after being looked at: no hang, skipped naming it"
t bash -c "$(declare -f conv_t swap said); conv='$conv' dir='$dir' BOUND=$BOUND asan_rt='$asan_rt'
	swap victim.log '$dir/prep/victim.log' -i '$dir/in' -o '$dir/v.json'
	[ -p '$dir/in/victim.log' ] || { echo '# the shim did not swap'; exit 1; }
	[ \$rc != 124 ] && [ \$rc != 137 ] || { echo '# hung'; exit 1; }
	[ \$rc = 0 ] && said 'skipped $dir/in/victim.log: is a FIFO, not an event log file'"

# ------------------------------------------------ unpacking into a small TMPDIR
[ "$(id -u)" = 0 ] || { echo "# not root: no tmpfs, unpack cases not run"; tap_done; }
command -v zstd >/dev/null || { echo "# zstd missing: unpack cases not run"; tap_done; }
# pad LOG SIZE NAME...: an uncompressed tar on stdout, one member per NAME,
# each LOG's bytes padded with zeros to SIZE (0: LOG as it is)
pad() {
	/usr/bin/python3 - "$@" <<'PY'
import io, sys, tarfile
log, size = open(sys.argv[1], "rb").read(), int(sys.argv[2])
data = log + bytes(max(size - len(log), 0))
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as t:
    for name in sys.argv[3:]:
        ti = tarfile.TarInfo(name); ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
PY
}
tmp=$dir/tmpfs
mkdir "$tmp"
tap_at_exit 'umount "$tmp" 2>/dev/null'
# fs_state: free blocks and free inodes of the tmpfs
fs_state() { stat -f -c '%a %d' "$tmp"; }
mount_tmpfs() { umount "$tmp" 2>/dev/null; mount -t tmpfs -o "$1" tmpfs "$tmp"; }

mount_tmpfs size=2m,nr_inodes=1000 || skip "cannot mount a tmpfs"
/usr/bin/python3 - "$dir/good.log" "$dir/space.tar" <<'PY'
import io, sys, tarfile
log = open(sys.argv[1], "rb").read()
with tarfile.open(sys.argv[2], "w") as t:
    for name, size in (("first.evlog", 512 << 10), ("big.evlog", 4 << 20)):
        data = log + bytes(size - len(log))
        ti = tarfile.TarInfo(name); ti.size = size
        t.addfile(ti, io.BytesIO(data))
PY
zstd -q --rm "$dir/space.tar" -o "$dir/space.tar.zst" || bail "zstd failed"
before=$(fs_state)
desc="an archive whose content would overflow TMPDIR (a 2 MiB tmpfs): refused before, what it unpacked removed, the fs as it was"
t bash -c "$(declare -f conv_t said onlyline); conv='$conv' dir='$dir' BOUND=$BOUND
	TMPDIR='$tmp' conv_t -i '$dir/space.tar.zst' -o '$dir/sp.json'
	[ \$rc = 1 ] && [ ! -e '$dir/sp.json' ] && [ -z \"\$(ls -A '$tmp')\" ] &&
	[ \"\$(stat -f -c '%a %d' '$tmp')\" = '$before' ] &&
	[ \$(wc -l <'$dir/err') = 1 ] &&
	grep -qE '^llmtracker-convert: $dir/space.tar.zst!big.evlog: needs 4096 KiB in TMPDIR \\($tmp/llmt-convert\\.[^)]*\\), whose file system has [0-9]+ KiB free and keeps 64 KiB of it free; nothing converted \\(set TMPDIR to a larger file system\\)\$' '$dir/err' ||
	{ sed 's/^/# stderr: /' '$dir/err'; ls -lA '$tmp'; false; }"

tar -C "$dir" -czf "$dir/ok.tar.gz" good.log
desc="an archive that fits the same small TMPDIR converts, TMPDIR emptied after"
t bash -c "$(declare -f conv_t); conv='$conv' dir='$dir' BOUND=$BOUND
	TMPDIR='$tmp' conv_t -q -i '$dir/ok.tar.gz' -o '$dir/ok.json'
	[ \$rc = 0 ] && $json_check '$dir/ok.json' && [ -z \"\$(ls -A '$tmp')\" ] || sed 's/^/# stderr: /' '$dir/err'"

mount_tmpfs size=64m,nr_inodes=32 || bail "cannot mount a tmpfs"
pad "$dir/good.log" 0 $(seq -f 'm%g.evlog' 60) | zstd -q >"$dir/inodes.tar.zst"
before=$(fs_state)
desc="an archive of more members than TMPDIR has free inodes (32): refused before, what it unpacked removed, the fs as it was"
t bash -c "$(declare -f conv_t said onlyline); conv='$conv' dir='$dir' BOUND=$BOUND
	TMPDIR='$tmp' conv_t -i '$dir/inodes.tar.zst' -o '$dir/in.json'
	[ \$rc = 1 ] && [ ! -e '$dir/in.json' ] && [ -z \"\$(ls -A '$tmp')\" ] &&
	[ \"\$(stat -f -c '%a %d' '$tmp')\" = '$before' ] &&
	[ \$(wc -l <'$dir/err') = 1 ] &&
	grep -qE '^llmtracker-convert: $dir/inodes.tar.zst!m[0-9]+.evlog: needs 1 more inode\\(s\\) in TMPDIR \\($tmp/llmt-convert\\.[^)]*\\), whose file system has [0-9]+ free inodes and keeps 2 of them free; nothing converted' '$dir/err' ||
	{ sed 's/^/# stderr: /' '$dir/err'; ls -lA '$tmp' | head; false; }"
tap_done
