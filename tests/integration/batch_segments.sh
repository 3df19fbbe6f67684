#!/bin/bash
# batch and logs written in segments (NAME.1, NAME.2, ..., the last one
# published as NAME itself): NAME.<digits> is never a profile of its own,
# only part of NAME; segments whose NAME is not there (still being written,
# or a crashed writer's) are left alone like a partial log, hold their
# session's library logs back as a partial main log does, and keep a
# profile directory from being complete. A directory named like a segment
# is still a profile.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$(readlink -f "$BUILD/bin/llmtracker-convert")
gen=$(readlink -f "$BUILD/tests/progs/conv_genlog")
need_built "$conv" "$gen"
tap_tmpdir dir batch-g
in=$dir/in
mkdir -p "$in/dirdone" "$in/dirbusy" "$in/run.1"
S1=11111111111111111111111111111111
g() { "$gen" "$@" >/dev/null || bail "conv_genlog $*"; }
# a log complete in three segments
g "$in/seg.evlog.1" -n 500 --host seg && g "$in/seg.evlog.2" -n 500 --host seg && g "$in/seg.evlog" -n 500 --host seg
# a crashed writer's segments: no NAME
g "$in/crashed.evlog.1" -n 500 --host crashed && g "$in/crashed.evlog.2" -n 500 --host crashed
# a lone log named like a segment
g "$in/node.7" -n 500 --host node7
# a session whose main log's segments are there without it, and its library log
lib=llmtracker-cupti.node-a.4001.1.evlog
mkdir "$dir/lib" && g "$dir/lib/$lib" -n 500 --part gpu --pid 4001 --session $S1 && cp "$dir/lib/$lib" "$in/"
g "$in/train.evlog.1" -n 500 --part host --pid 4001 --session $S1
# directories: complete with segments, still in segments, and one named like a segment
g "$in/dirdone/a.evlog.1" -n 500 --host dirdone && g "$in/dirdone/a.evlog" -n 500 --host dirdone
g "$in/dirbusy/a.evlog.1" -n 500 --host dirbusy
g "$in/run.1/x.evlog" -n 500 --host run1

runs() { ls "$dir/tb/plugins/profile" 2>/dev/null | tr '\n' ' '; }
"$conv" batch --in "$in" --logdir "$dir/tb" >"$dir/b1.out" 2>&1
rc=$?
sed 's/^/# /' "$dir/b1.out" | grep -v '^# converted'
check "complete profiles only: seg, the complete directory, the directory named run.1 (got: $(runs))" \
	'[ $rc = 0 ] && [ "$(runs)" = "dirdone run.1 seg " ]'
check "no segment was a profile of its own, and the run of seg holds seg's host only" \
	'! grep -q "^batch: converted [^ ]*\.evlog\.[0-9]" "$dir/b1.out" &&
	 [ "$(ls "$dir/tb/plugins/profile/seg" | sed "s/\..*//" | sort -u)" = seg ]'
check "a library log waits while its session's main log is in segments without its NAME" \
	'! grep -q "converted llmtracker-cupti" "$dir/b1.out"'
# The writers finish: the last segments are published under their NAMEs.
g "$in/train.evlog" -n 500 --part host --pid 4001 --session $S1 --lib-log "$dir/lib/$lib"
g "$in/dirbusy/a.evlog" -n 500 --host dirbusy
"$conv" batch --in "$in" --logdir "$dir/tb" >"$dir/b2.out" 2>&1
rc=$?
sed 's/^/# /' "$dir/b2.out" | grep -v '^# converted'
check "once NAMEs are there, their profiles are converted, the library log with its main log (got: $(runs))" \
	'[ $rc = 0 ] && [ "$(runs)" = "dirbusy dirdone run.1 seg train " ] &&
	 [ "$(grep -c "^batch: converted" "$dir/b2.out")" = 2 ] && ! grep -q "left out .*$lib" "$dir/b2.out"'
check "the crashed writer's segments and the lone node.7 were left alone" \
	'! grep -q "^batch: converted \(crashed\|node\)" "$dir"/b?.out && [ -e "$in/crashed.evlog.1" ] && [ -e "$in/node.7" ]'
tap_done
