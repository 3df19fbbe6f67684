#!/bin/bash
# Bad input to the event log writer and reader gives a clear error and exit
# status 1: never a crash, never a half-written published file, never a
# clobbered or followed file.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
cli=$BUILD/tests/progs/evlog_cli
dump=$BUILD/tests/progs/evlog_dump
need_built "$cli" "$dump"
tap_tmpdir dir evlog-bad
mounts=()
tap_at_exit 'for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done'

# expect_fail WHAT PATTERN CMD...: exit status 1 and stderr matching PATTERN.
expect_fail() {
	local what=$1 pat=$2; shift 2
	"$@" >"$dir/out" 2>"$dir/err"; local rc=$?
	if [ "$rc" -eq 1 ] && grep -qiE "$pat" "$dir/err"; then
		ok "$what: exit 1, \"$(head -c 160 "$dir/err" | tr '\n' ' ')\""
	else
		nok "$what: exit $rc, stderr: $(head -c 300 "$dir/err")"
	fi
}

# ------------------------------------------------------------------ writer
expect_fail "writer, missing output directory" "no such file" \
	"$cli" write "$dir/missing/out.evlog" 10
[ ! -e "$dir/missing" ] && ok "no directory created" || nok "directory created"

mkdir "$dir/isdir"
expect_fail "writer, output is a directory" "is a directory" "$cli" write "$dir/isdir" 10
expect_fail "writer, output path ends in /" "directory" "$cli" write "$dir/isdir/" 10

echo x >"$dir/afile"
expect_fail "writer, parent is a file" "not a directory" "$cli" write "$dir/afile/out.evlog" 10

"$cli" write "$dir/exists.evlog" 100 && sum=$(md5sum <"$dir/exists.evlog")
expect_fail "writer, final file exists" "already exists" "$cli" write "$dir/exists.evlog" 500
[ "$(md5sum <"$dir/exists.evlog")" = "$sum" ] && ok "existing file untouched" || nok "existing file changed"
ls -a "$dir" | grep -q '^\.exists.evlog.*partial$' && nok "partial left behind" || ok "no partial left behind"
"$cli" write "$dir/exists.evlog" 500 mixed 0 overwrite && [ "$("$cli" count "$dir/exists.evlog")" = \
	"events=500 chunks_ok=1 chunks_bad=0 truncated=0" ] && ok "overwrite replaces when asked" ||
	nok "overwrite"

# A symlink planted at the partial path is neither followed nor replaced.
echo victim >"$dir/victim"
ln -s "$dir/victim" "$dir/.sym.evlog.partial"
if "$cli" write "$dir/sym.evlog" 200 2>"$dir/err" && [ "$(cat "$dir/victim")" = victim ] &&
	[ -L "$dir/.sym.evlog.partial" ] && "$cli" count "$dir/sym.evlog" | grep -q events=200; then
	ok "planted symlink at the partial path not followed; log published"
else
	nok "planted symlink: $(cat "$dir/err")"
fi

# A stale partial of a dead writer is kept; the new writer uses another name.
printf 'stale' >"$dir/.stale.evlog.partial"
if "$cli" write "$dir/stale.evlog" 50 && [ "$(cat "$dir/.stale.evlog.partial")" = stale ]; then
	ok "stale partial kept, new log published"
else
	nok "stale partial"
fi

# Read-only filesystem (root ignores permission bits, so mount one).
mkdir "$dir/ro"
if mount -t tmpfs -o ro,size=1m tmpfs "$dir/ro" 2>/dev/null; then
	mounts+=("$dir/ro")
	expect_fail "writer, read-only output directory" "read-only" "$cli" write "$dir/ro/out.evlog" 10
else
	echo "# cannot mount tmpfs: read-only case covered by the file-size case only"
fi

# Disk full: a 256 KiB tmpfs.
mkdir "$dir/small"
if mount -t tmpfs -o size=256k tmpfs "$dir/small" 2>/dev/null; then
	mounts+=("$dir/small")
	expect_fail "writer, disk full" "no space left" "$cli" write "$dir/small/full.evlog" 3000000 all 65536
	[ ! -e "$dir/small/full.evlog" ] && ok "disk full: nothing published" || nok "disk full: published"
	part=$(ls -d "$dir"/small/.full.evlog*.partial 2>/dev/null | head -1)
	if [ -n "$part" ] && res=$("$cli" count "$part") && [[ $res =~ chunks_bad=0\ truncated=0 ]] &&
		[[ ! $res =~ events=0\  ]]; then
		ok "disk full: partial log readable up to its last chunk ($res)"
	else
		nok "disk full: partial log unreadable (${res:-none})"
	fi
else
	echo "# cannot mount tmpfs: disk-full case covered by the file-size case only"
fi

# File size limit (RLIMIT_FSIZE, SIGXFSZ ignored by the program): EFBIG.
expect_fail "writer, file size limit" "file too large" \
	bash -c "ulimit -f 200; exec '$cli' write '$dir/big.evlog' 3000000 all 65536"
[ ! -e "$dir/big.evlog" ] && ok "size limit: nothing published" || nok "size limit: published"
part=$(ls -d "$dir"/.big.evlog*.partial 2>/dev/null | head -1)
if [ -n "$part" ] && res=$("$cli" count "$part") && [[ $res =~ chunks_bad=0\ truncated=0 ]]; then
	ok "size limit: partial log is valid up to its last complete chunk ($res)"
else
	nok "size limit: partial log (${res:-none})"
fi

# ------------------------------------------------------------------ reader
for tool in "$cli count" "$dump"; do
	t=${tool##*/}
	expect_fail "$t, missing file" "no such file" $tool "$dir/nope.evlog"
	expect_fail "$t, directory" "is a directory" $tool "$dir/isdir"
	: >"$dir/empty"
	expect_fail "$t, empty file" "empty file" $tool "$dir/empty"
	[ -p "$dir/fifo" ] || mkfifo "$dir/fifo"
	expect_fail "$t, a FIFO (no hang)" "not a regular file" timeout 10 $tool "$dir/fifo"
	head -c 5000 /dev/urandom >"$dir/garbage"
	expect_fail "$t, garbage" "not an llmtracker event log" $tool "$dir/garbage"
	head -c 14 "$dir/exists.evlog" >"$dir/cut"
	expect_fail "$t, header cut short" "cut short|truncated" $tool "$dir/cut"
	cp "$dir/exists.evlog" "$dir/v2"; printf '\x02' | dd of="$dir/v2" bs=1 seek=8 conv=notrunc 2>/dev/null
	expect_fail "$t, newer major version" "version 2\.[0-9]+" $tool "$dir/v2"
	cp "$dir/exists.evlog" "$dir/hcrc"; printf 'Z' | dd of="$dir/hcrc" bs=1 seek=25 conv=notrunc 2>/dev/null
	expect_fail "$t, corrupt header" "checksum" $tool "$dir/hcrc"
done
# A log cut anywhere after its header reads cleanly (prefix, marked truncated).
size=$(stat -c %s "$dir/exists.evlog")
hlen=$((20 + $(od -An -tu4 -j12 -N4 "$dir/exists.evlog")))
bad=0
for cut in $hlen $((hlen + 1)) $((hlen + 47)) $((hlen + 48)) $((hlen + 100)) 1000 3000 $((size - 1)); do
	[ "$cut" -lt "$size" ] || continue
	head -c "$cut" "$dir/exists.evlog" >"$dir/cut2"
	"$dump" "$dir/cut2" >/dev/null 2>&1 || bad=$((bad + 1))
done
[ "$bad" -eq 0 ] && ok "logs cut at any offset read without error" || nok "$bad cut logs failed"
tap_done
