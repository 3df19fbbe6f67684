#!/bin/bash
# llmtracker-convert on bad inputs: random bytes, a PNG, an empty file, a
# truncated log, a log with a damaged chunk, a directory of junk, missing
# paths, bad output names, a symlink at the output path. It converts what
# is valid, says what it skipped and why, never crashes, and leaves no
# partial output behind.
set -u
scratch=convert-bad
. "$(dirname "$0")/convert_common.inc"
# run CONV-ARGS...: exit status in $rc (never a signal), stderr in $dir/err
run() { "$conv" "$@" 2>"$dir/err" >/dev/null; rc=$?; [ $rc -lt 128 ] || { echo "crashed with $rc"; return 1; }; }

"$gen" "$dir/good.log" -n 200000 >/dev/null || bail "generator failed"
size=$(stat -c %s "$dir/good.log")
head -c 5000 /dev/urandom >"$dir/random.bin"
printf '\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\1\0\0\0\1\10\6\0\0\0\x1f\x15\xc4\x89' >"$dir/image.png"
: >"$dir/empty.log"
head -c $((size * 6 / 10)) "$dir/good.log" >"$dir/cut.log"
cp "$dir/good.log" "$dir/damaged.log"
printf 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX' | dd of="$dir/damaged.log" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
head -c 300 "$dir/good.log" >"$dir/header-only.log"
mkdir -p "$dir/junk/sub"
cp "$dir/random.bin" "$dir/image.png" "$dir/empty.log" "$dir/junk/"
cp "$dir/good.log" "$dir/junk/sub/real.log"
ln -s /etc/passwd "$dir/junk/passwd-link"

desc="random bytes: exit 1, says it is not an event log, writes nothing"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/random.bin' -o '$dir/r.json'; [ \$rc = 1 ] && \
	grep -q 'random.bin: not an event log' '$dir/err' && grep -q 'no event logs found' '$dir/err' && [ ! -e '$dir/r.json' ] && \
	[ -z \"\$(ls -A '$dir' | grep '^\\.')\" ]"
desc="a PNG and an empty file: skipped with the reason"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/image.png' -i '$dir/empty.log' -i '$dir/good.log' -o '$dir/p.json'; [ \$rc = 0 ] && \
	grep -q 'image.png: not an event log' '$dir/err' && grep -q 'empty.log: empty file' '$dir/err' && $json_check '$dir/p.json'"
desc="truncated log: converts every complete chunk, says it was truncated"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/cut.log' -o '$dir/c.json'; [ \$rc = 0 ] && grep -q 'truncated' '$dir/err' && \
	$json_check '$dir/c.json' --min-events 50000"
desc="damaged chunk: skipped and counted, the rest converted"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/damaged.log' -o '$dir/d.json'; [ \$rc = 0 ] && grep -q 'corrupt chunk' '$dir/err' && \
	$json_check '$dir/d.json' --min-events 100000"
desc="header-only log: valid, empty trace"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/header-only.log' -o '$dir/h.json'; [ \$rc = 0 ] && python3 -c 'import json; json.load(open(\"$dir/h.json\"))'"
desc="directory of junk with one real log in a subdirectory: converts it, lists the rest"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/junk' -o '$dir/j.json'; [ \$rc = 0 ] && grep -q 'random.bin: not an event log' '$dir/err' && \
	! grep -q passwd '$dir/j.json' && $json_check '$dir/j.json' --min-events 200000"
desc="missing input: exit 1 with the path and the reason"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/nope.log' -o '$dir/x.json'; [ \$rc = 1 ] && grep -q 'nope.log: No such file' '$dir/err'"
desc="output in a missing directory: exit 1, clear message"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/good.log' -o '$dir/missing/x.json'; [ \$rc = 1 ] && grep -q 'missing' '$dir/err'"
desc="output not named .json/.json.gz: refused"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run -i '$dir/good.log' -o '$dir/x.txt'; [ \$rc = 1 ] && grep -q '.json or .json.gz' '$dir/err' && [ ! -e '$dir/x.txt' ]"
desc="a symlink at the output path is refused without --force, replaced with it, its target never written"
t bash -c "echo keep >'$dir/target'; ln -s '$dir/target' '$dir/link.json'; ! '$conv' -q -i '$dir/good.log' -o '$dir/link.json' 2>'$dir/l.err' && \
	grep -q 'already exists; pass --force' '$dir/l.err' && [ -L '$dir/link.json' ] && \
	'$conv' -q --force -i '$dir/good.log' -o '$dir/link.json' && \
	[ ! -L '$dir/link.json' ] && [ \"\$(cat '$dir/target')\" = keep ] && $json_check '$dir/link.json'"
desc="-o never clobbers an existing file (nor its folded stacks) without --force; nothing partial is left"
t bash -c "echo mine >'$dir/own.json'; ! '$conv' -q -i '$dir/good.log' -o '$dir/own.json' 2>'$dir/o.err' && \
	grep -q 'own.json already exists; pass --force' '$dir/o.err' && [ \"\$(cat '$dir/own.json')\" = mine ] && \
	[ -z \"\$(ls -A '$dir' | grep -E '^\\.|tmp' )\" ] && \
	'$conv' -q --force -i '$dir/good.log' -o '$dir/own.json' && $json_check '$dir/own.json'"
# Disk full (a 2 MiB tmpfs; the 200k-event log makes ~35 MiB of JSON), with
# O_DIRECT from the first MiB: a clear error, nothing published, no
# temporary file left.
mkdir -p "$dir/small"
if mount -t tmpfs -o size=2m tmpfs "$dir/small" 2>/dev/null; then
	tap_at_exit 'umount "$dir/small" 2>/dev/null'
	desc="disk full while writing .json, .pftrace and --logdir: exit 1, 'No space left', nothing left behind"
	t bash -c "$(declare -f run); conv='$conv' dir='$dir'; export LLMT_DIRECT_AFTER_MB=1; \
		run -i '$dir/good.log' -o '$dir/small/full.json'; [ \$rc = 1 ] && grep -q 'No space left' '$dir/err' && \
		run -i '$dir/good.log' -o '$dir/small/full.pftrace'; [ \$rc = 1 ] && grep -q 'No space left' '$dir/err' && \
		run -i '$dir/good.log' --logdir '$dir/small/tb' --run r; [ \$rc = 1 ] && grep -q 'No space left' '$dir/err' && \
		[ -z \"\$(find '$dir/small' -type f)\" ]"
	umount "$dir/small"
else
	echo "# cannot mount tmpfs: disk-full case not run"
fi
desc="unknown option and no input: usage, exit 2"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run --bogus; [ \$rc = 2 ] && run -o '$dir/y.json'; [ \$rc = 2 ] && grep -q 'no input' '$dir/err'"
desc="summary and dump on junk: clear errors, no crash"
t bash -c "$(declare -f run); conv='$conv' dir='$dir'; run summary '$dir/random.bin'; [ \$rc = 1 ] && run dump '$dir/image.png'; [ \$rc = 1 ]"
tap_done
