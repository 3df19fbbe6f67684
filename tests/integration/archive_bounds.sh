#!/bin/bash
# Archive bombs: a ~0.5 MB .tar.zst whose member is a real event log padded
# with 2 GiB of zeros (made by streaming; never on disk) is refused with one
# line naming the member and the bound, TMPDIR (a 300 MiB tmpfs, so an
# unbounded extraction would fill it) holds nothing afterwards; a bound on
# all members together catches many members each under the member bound;
# an archive under the bounds still converts.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$BUILD/bin/llmtracker-convert
gen=$BUILD/tests/progs/xplane_genlog
need_built "$conv" "$gen"
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs as TMPDIR"
command -v zstd >/dev/null || skip "zstd missing"
tap_tmpdir dir arch-bomb
tmp=$dir/tmpfs
tap_at_exit 'umount "$tmp" 2>/dev/null'
mkdir "$tmp" && mount -t tmpfs -o size=300m none "$tmp" || skip "cannot mount a tmpfs"
# bomb LOG SIZE NAME...: an uncompressed tar on stdout, one member per NAME,
# each LOG's bytes padded with zeros to SIZE, streamed.
bomb() {
	/usr/bin/python3 - "$@" <<'PY'
import sys, tarfile
log, size = open(sys.argv[1], "rb").read(), int(sys.argv[2])
class Src:
    pos = 0
    def read(self, n):
        n = min(n, size - self.pos)
        out = log[self.pos:self.pos + n]
        out += bytes(n - len(out))
        self.pos += n
        return out
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", bufsize=1 << 20) as t:
    t.copybufsize = 1 << 20
    for name in sys.argv[3:]:
        ti = tarfile.TarInfo(name); ti.size = size
        t.addfile(ti, Src())
PY
}
"$gen" "$dir/a.log" host-a 3 || exit 1
bomb "$dir/a.log" $((2 << 30)) big.evlog | zstd -1 -q -T2 >"$dir/bomb.tar.zst"
echo "# bomb: $(stat -c %s "$dir/bomb.tar.zst") bytes holding a 2 GiB member"

desc="a member past the bound: refused, one line naming the member and the bound"
t bash -c "TMPDIR='$tmp' LLMT_ARCHIVE_MEMBER_MB=256 '$conv' -i '$dir/bomb.tar.zst' -o '$dir/b.json' 2>'$dir/e1';
	[ \$? -eq 1 ] && grep -qx 'llmtracker-convert: $dir/bomb.tar.zst!big.evlog: expands past 256 MiB, the bound on one archive member (LLMT_ARCHIVE_MEMBER_MB raises it); nothing converted' '$dir/e1' || { cat '$dir/e1'; false; }"
desc="nothing published, nothing left in TMPDIR"
t bash -c "[ ! -e '$dir/b.json' ] && [ -z \"\$(ls -A '$tmp')\" ] || { ls -lA '$tmp'; false; }"
desc="a bound just under the size of TMPDIR (300 MiB tmpfs) still refuses cleanly, TMPDIR left empty"
t bash -c "TMPDIR='$tmp' LLMT_ARCHIVE_MEMBER_MB=290 '$conv' -i '$dir/bomb.tar.zst' -o '$dir/b.json' 2>'$dir/e2';
	[ \$? -eq 1 ] && grep -q 'expands past 290 MiB' '$dir/e2' && [ -z \"\$(ls -A '$tmp')\" ] || { cat '$dir/e2'; df -h '$tmp'; false; }"

bomb "$dir/a.log" $((100 << 20)) m1.evlog m2.evlog m3.evlog | zstd -1 -q >"$dir/many.tar.zst"
desc="members each under the member bound, past the total: refused naming the member that passed it"
t bash -c "TMPDIR='$tmp' LLMT_ARCHIVE_TOTAL_MB=250 '$conv' -i '$dir/many.tar.zst' -o '$dir/m.json' 2>'$dir/e3';
	[ \$? -eq 1 ] && grep -q 'many.tar.zst!m3.evlog: archive members expand past 250 MiB in all, the bound on extraction (LLMT_ARCHIVE_TOTAL_MB raises it)' '$dir/e3' &&
	[ ! -e '$dir/m.json' ] && [ -z \"\$(ls -A '$tmp')\" ] || { cat '$dir/e3'; ls -lA '$tmp'; false; }"
tar -C "$dir" -czf "$dir/ok.tar.gz" a.log
desc="an archive under the bounds converts, TMPDIR emptied after"
t bash -c "TMPDIR='$tmp' LLMT_ARCHIVE_MEMBER_MB=1 '$conv' -q -i '$dir/ok.tar.gz' -o '$dir/ok.json' && [ -s '$dir/ok.json' ] && [ -z \"\$(ls -A '$tmp')\" ]"
tap_done
