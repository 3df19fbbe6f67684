#!/bin/bash
# Format versions meet: the 1.0 library (built from this repository's history)
# and this one read each other's logs as schemas/eventlog.md section 6 says.
#   - 1.0 logs (old writer) read here, every event the same;
#   - 1.1 column chunks are skipped by a 1.0 reader cleanly (counted as
#     chunks of a newer minor version, nothing misread, no crash);
#   - the row_chunks option writes logs a 1.0 reader reads whole (a 1.2
#     header tag, the session id, skipped);
#   - both layouts hold the same events.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
cli=$BUILD/tests/progs/evlog_cli
dump=$BUILD/tests/progs/evlog_dump
need_built "$cli" "$dump"
# The last commit whose library wrote format 1.0.
ref=4735b582ae978de2f7f352180e23e0ff7aeff533
if ! git cat-file -e "$ref^{commit}" 2>/dev/null; then
	echo "# skip: the 1.0 library (commit $ref) is not in this checkout's history"
	exit 77
fi
tap_tmpdir dir evlog-compat

# Build the 1.0 tools from history (same generator header as today's).
mkdir -p "$dir/old/eventlog" "$dir/old/tests/progs"
for f in dump.c eventlog.h evlog_format.h evlog_table.h names.c reader.c writer.c; do
	git show "$ref:eventlog/$f" >"$dir/old/eventlog/$f"
done
for f in evlog_cli.c evlog_dump.c; do
	git show "$ref:tests/progs/$f" >"$dir/old/tests/progs/$f"
done
cp tests/progs/evlog_gen.h "$dir/old/tests/progs/"
for t in evlog_cli evlog_dump; do
	if ! cc -O1 -D_GNU_SOURCE -I"$dir/old" -o "$dir/old-$t" "$dir/old/tests/progs/$t.c" \
		"$dir"/old/eventlog/*.c -lzstd -ldeflate 2>"$dir/cc.err"; then
		nok "building the 1.0 $t: $(head -c 300 "$dir/cc.err")"
		exit 1
	fi
done

events() { grep -v '^#' "$1"; }
N=60000

# 1.0 log written by the 1.0 library, read by this one.
"$dir/old-evlog_cli" write "$dir/v10.evlog" $N all 65536 2>"$dir/err" || nok "1.0 write: $(cat "$dir/err")"
"$dir/old-evlog_dump" "$dir/v10.evlog" >"$dir/v10.old" 2>&1
"$dump" "$dir/v10.evlog" >"$dir/v10.new" 2>&1
if [ "$(events "$dir/v10.old" | wc -l)" -eq $N ] && cmp -s <(events "$dir/v10.old") <(events "$dir/v10.new"); then
	ok "a 1.0 log ($N events of every type) reads the same here as with 1.0"
else
	nok "a 1.0 log reads differently: $(diff <(events "$dir/v10.old") <(events "$dir/v10.new") | head -3)"
fi

# 1.1 column log and a row_chunks log of the same events.
# (all12: the types 1.0 has, the same stream as its "all")
"$cli" write "$dir/cols.evlog" $N all12 65536 2>"$dir/err" || nok "1.1 write: $(cat "$dir/err")"
"$cli" write "$dir/rows.evlog" $N all12 65536 rows 2>"$dir/err" || nok "rows write: $(cat "$dir/err")"
"$dump" "$dir/cols.evlog" >"$dir/cols.new" 2>&1
"$dump" "$dir/rows.evlog" >"$dir/rows.new" 2>&1
if cmp -s <(events "$dir/cols.new") <(events "$dir/v10.new") &&
   cmp -s <(events "$dir/rows.new") <(events "$dir/v10.new"); then
	ok "column and row_chunks logs hold the same $N events as the 1.0 log"
else
	nok "layouts differ: $(diff <(events "$dir/cols.new") <(events "$dir/v10.new") | head -3)"
fi

# A 1.0 reader on a 1.1 log: no event misread, a clean end.
"$dir/old-evlog_dump" "$dir/cols.evlog" >"$dir/cols.old" 2>"$dir/err"; rc=$?
last=$(tail -1 "$dir/cols.old")
if [ $rc -eq 0 ] && [ "$(events "$dir/cols.old" | wc -l)" -eq 0 ] && [[ $last =~ chunks_bad=0 ]]; then
	ok "a 1.0 reader skips 1.1 column chunks cleanly ($last)"
else
	nok "a 1.0 reader on a 1.1 log: exit $rc, $last $(head -c 200 "$dir/err")"
fi

# A 1.0 reader on a row_chunks log: every event.
"$dir/old-evlog_dump" "$dir/rows.evlog" >"$dir/rows.old" 2>&1
if cmp -s <(events "$dir/rows.old") <(events "$dir/v10.new") && grep -q '^# version=1.0' "$dir/rows.old"; then
	ok "a 1.0 reader reads a row_chunks log whole (header says 1.0)"
else
	nok "a 1.0 reader on a row_chunks log: $(tail -1 "$dir/rows.old"); $(grep version "$dir/rows.old")"
fi

# A 1.0 reader on rows holding 1.3 types (gpu_sync, cupti_overhead): it
# reads each chunk up to the first, skips the rest of it, misreads nothing.
"$cli" write "$dir/rows13.evlog" $N all 65536 rows 2>"$dir/err" || nok "1.3 rows write: $(cat "$dir/err")"
"$dir/old-evlog_dump" "$dir/rows13.evlog" >"$dir/rows13.old" 2>"$dir/err"; rc=$?
last=$(tail -1 "$dir/rows13.old")
bad=$(events "$dir/rows13.old" | grep -c '^type2[12] ')
if [ $rc -eq 0 ] && [[ $last =~ chunks_bad=0 ]] && [ "$bad" = 0 ] &&
   [ "$(events "$dir/rows13.old" | wc -l)" -gt 0 ]; then
	ok "a 1.0 reader on 1.3 rows reads up to the new types, skips the rest cleanly ($last)"
else
	nok "a 1.0 reader on 1.3 rows: exit $rc, $last, $bad new-type lines $(head -c 200 "$dir/err")"
fi

c=$(stat -c %s "$dir/cols.evlog") r=$(stat -c %s "$dir/rows.evlog")
echo "# every-type stream: $r bytes as 1.0 rows, $c as 1.1 columns"
tap_done
