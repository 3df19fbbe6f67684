#!/bin/bash
# -t cpu on a stripped program (-O2 -g, then `strip --strip-all`) whose
# debug file no directory of the node or the target holds, only a
# debuginfod server (a local HTTP server in debuginfod's layout,
# /buildid/<build-id>/debuginfo): with DEBUGINFOD_URLS set the samples'
# stacks name the program's static functions and main, the debug file was
# asked once and lies in DEBUGINFOD_CACHE_PATH; without it (the default)
# they are module+offset and nothing is asked; a served file of another
# build (other build-id) is refused; a server that is gone costs nothing,
# and so does a client library that cannot be loaded.
# The same program built without .eh_frame for its own code (only
# .debug_frame, which strip removes): its stacks unwind from the debug
# file's CFI once fetched (in the background while the profile runs).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
LLMT=$BUILD/bin/llmtracker DUMP=$BUILD/tests/progs/evlog_dump
AWK="awk -f $(dirname "$0")/cpu_stacks.awk"
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events)"
for t in cc strip objcopy readelf python3; do
	command -v $t >/dev/null || skip "$t missing"
done
[ -e /usr/lib/x86_64-linux-gnu/libdebuginfod.so.1 ] || ldconfig -p | grep -q libdebuginfod.so.1 ||
	skip "libdebuginfod.so.1 missing (libdebuginfod1)"
need_built "$LLMT" "$DUMP"
tap_tmpdir tmp llmt-test
srv_pid=
tap_at_exit '[ -z "$srv_pid" ] || { kill "$srv_pid" 2>/dev/null; wait "$srv_pid" 2>/dev/null; }'

# The program: main -> dbgd_middle -> dbgd_leaf_spin, static and out of
# line (noipa: no clone with a suffixed name), for argv[1] CPU seconds.
cat >"$tmp/prog.c" <<'EOF'
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noipa)) static void dbgd_leaf_spin(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
}
__attribute__((noipa)) static void dbgd_middle(unsigned long n)
{
	dbgd_leaf_spin(n);
	sink++;
}
int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1;
	unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 0) : 1000000;
	while ((double)clock() < secs * CLOCKS_PER_SEC)
		dbgd_middle(n);
	return 0;
}
EOF
cc -O2 -g -Wl,--build-id -o "$tmp/prog.full" "$tmp/prog.c" &&
	objcopy --only-keep-debug "$tmp/prog.full" "$tmp/prog.debug" &&
	strip --strip-all -o "$tmp/prog" "$tmp/prog.full" &&
	sed 's/sink += i \* 7/sink += i * 9/' "$tmp/prog.c" >"$tmp/other.c" &&
	cc -O2 -g -Wl,--build-id -o "$tmp/other.full" "$tmp/other.c" &&
	objcopy --only-keep-debug "$tmp/other.full" "$tmp/other.debug" &&
	cc -O2 -g -fno-asynchronous-unwind-tables -fno-unwind-tables -fomit-frame-pointer -Wl,--build-id \
		-o "$tmp/nocfi.full" "$tmp/prog.c" &&
	objcopy --only-keep-debug "$tmp/nocfi.full" "$tmp/nocfi.debug" &&
	strip --strip-all -o "$tmp/nocfi" "$tmp/nocfi.full" ||
	bail "building the program"
id=$(readelf -n "$tmp/prog" | awk '/Build ID:/ {print $3}')
other=$(readelf -n "$tmp/other.full" | awk '/Build ID:/ {print $3}')
nocfi=$(readelf -n "$tmp/nocfi" | awk '/Build ID:/ {print $3}')
check "the stripped program has a build-id ($id), no .symtab, another build another one" \
	'[ -n "$id" ] && [ -n "$other" ] && [ "$id" != "$other" ] && ! readelf -S "$tmp/prog" | grep -q "\.symtab"'

# The server: debuginfod's layout from a directory, on a port the kernel
# picks, printed once it listens.
mkdir -p "$tmp/srv/buildid/$id" "$tmp/srv/buildid/$nocfi"
cp "$tmp/prog.debug" "$tmp/srv/buildid/$id/debuginfo"
cp "$tmp/nocfi.debug" "$tmp/srv/buildid/$nocfi/debuginfo"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$tmp/srv" >"$tmp/srv.log" 2>&1 &
srv_pid=$!
server_port() { port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$tmp/srv.log" 2>/dev/null | head -1); [ -n "$port" ]; }
port=
wait_until 20 'server_port || ! kill -0 "$srv_pid" 2>/dev/null'
url=http://127.0.0.1:$port
answer() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5).read()' \
	"$url/buildid/$id/debuginfo" 2>/dev/null; }
wait_until 5 answer
check "the server answers GET /buildid/ID/debuginfo (port ${port:-none})" 'answer'
asked() { grep -c "GET /buildid/$id/debuginfo" "$tmp/srv.log"; }
asked0=$(asked)

# run NAME [ENV...]: profile the stripped program ($PROG, default prog)
# for 1.5 CPU seconds.
run() {
	local name=$1; shift
	env -u DEBUGINFOD_URLS "$@" "$LLMT" profile -t cpu -v 1 -o "$tmp/$name.evlog" -- "$tmp/${PROG:-prog}" 1.5 \
		>"$tmp/$name.out" 2>"$tmp/$name.err"
	echo $? >"$tmp/$name.rc"
	"$DUMP" "$tmp/$name.evlog" >"$tmp/$name.txt" 2>&1
	$AWK -v mode=leaf "$tmp/$name.txt" | sort -rn >"$tmp/$name.leaf"
	$AWK -v mode=any "$tmp/$name.txt" | sort -rn >"$tmp/$name.any"
}
samples() { grep -c '^cpu_sample ' "$tmp/$1.txt"; }
named() { grep -q "^symbol .* name=$2 " "$tmp/$1.txt"; }
in_stacks() { awk -v f="$2" '$2 == f {c = $1} END {print c + 0}' "$tmp/$1.any"; }

# 1. The default: DEBUGINFOD_URLS unset.
run plain DEBUGINFOD_CACHE_PATH="$tmp/cache0"
check "DEBUGINFOD_URLS unset: profile exits 0 with samples ($(samples plain))" \
	'[ "$(cat "$tmp/plain.rc")" = 0 ] && [ "$(samples plain)" -ge 50 ]'
head -2 "$tmp/plain.leaf" | sed 's/^/# unset, leaf: /'
check "DEBUGINFOD_URLS unset: no static function or main is named (stripped)" \
	'! named plain dbgd_leaf_spin && ! named plain dbgd_middle && ! named plain main'
check "DEBUGINFOD_URLS unset: the top leaf is the program + an offset" \
	'head -1 "$tmp/plain.leaf" | grep -q " $tmp/prog+"'
check "DEBUGINFOD_URLS unset: nothing asked of the server, no cache made, no debuginfod line" \
	'[ "$(asked)" = "$asked0" ] && [ ! -e "$tmp/cache0" ] && ! grep -q debuginfod "$tmp/plain.err"'

# 2. DEBUGINFOD_URLS naming the server.
run dbgd DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$tmp/cache"
s=$(samples dbgd) leaf=$(in_stacks dbgd dbgd_leaf_spin) mid=$(in_stacks dbgd dbgd_middle)
main=$(in_stacks dbgd main)
head -2 "$tmp/dbgd.leaf" | sed 's/^/# set, leaf: /'
grep debuginfod "$tmp/dbgd.err" | sed 's/^/# /'
check "DEBUGINFOD_URLS set: profile exits 0 with samples ($s)" \
	'[ "$(cat "$tmp/dbgd.rc")" = 0 ] && [ "$s" -ge 50 ]'
check "DEBUGINFOD_URLS set: the top leaf is dbgd_leaf_spin" \
	'[ "$(head -1 "$tmp/dbgd.leaf" | awk "{print \$2}")" = dbgd_leaf_spin ]'
check "DEBUGINFOD_URLS set: >= 90% of samples hold dbgd_leaf_spin, dbgd_middle and main (of $s: $leaf, $mid, $main)" \
	'[ $((leaf * 10)) -ge $((s * 9)) ] && [ $((mid * 10)) -ge $((s * 9)) ] && [ $((main * 10)) -ge $((s * 9)) ]'
check "DEBUGINFOD_URLS set: the names' module is the program" \
	'grep "^symbol .* name=dbgd_middle " "$tmp/dbgd.txt" | grep -q "module=$tmp/prog "'
check "DEBUGINFOD_URLS set: the debug file was asked once ($(($(asked) - asked0)))" \
	'[ $(($(asked) - asked0)) = 1 ]'
check "DEBUGINFOD_URLS set: it lies in DEBUGINFOD_CACHE_PATH" \
	'cmp -s "$tmp/cache/$id/debuginfo" "$tmp/prog.debug"'
check "DEBUGINFOD_URLS set: the log says 1 debug file fetched" \
	'grep -q "debuginfod: 1 debug files fetched" "$tmp/dbgd.err"'

# 3. The server hands out another build's debug file for this build-id:
# its build-id differs, its symbols are not used.
cp "$tmp/other.debug" "$tmp/srv/buildid/$id/debuginfo"
run wrong DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$tmp/cache2"
check "another build's debug file: fetched ($(($(asked) - asked0)) asked in all) but not used" \
	'[ "$(cat "$tmp/wrong.rc")" = 0 ] && [ -e "$tmp/cache2/$id/debuginfo" ] &&
	 ! named wrong dbgd_leaf_spin && ! named wrong main'

# 4. No CFI for the program's own code in the stripped file: without
# debuginfod the unwinding stops at the leaf; with it, the session is
# built again once the debug file is there and reaches _start.
outermost() { sed -n 's/.*frames each, \([0-9.]*\)% to the outermost.*/\1/p' "$tmp/$1.err" | cut -d. -f1; }
PROG=nocfi run nocfi_plain DEBUGINFOD_CACHE_PATH="$tmp/cache4"
PROG=nocfi run nocfi DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$tmp/cache4"
s=$(samples nocfi) main=$(in_stacks nocfi main) start=$(in_stacks nocfi _start)
grep -E "unwound|debuginfod" "$tmp/nocfi.err" | sed 's/^/# no CFI: /'
check "no CFI, DEBUGINFOD_URLS unset: < 20% of samples unwound to the outermost frame ($(outermost nocfi_plain)%)" \
	'[ "$(cat "$tmp/nocfi_plain.rc")" = 0 ] && [ -n "$(outermost nocfi_plain)" ] && [ "$(outermost nocfi_plain)" -lt 20 ]'
check "no CFI, DEBUGINFOD_URLS set: >= 80% of samples hold main and _start (of $s: $main, $start)" \
	'[ "$(cat "$tmp/nocfi.rc")" = 0 ] && [ "$s" -ge 50 ] && [ $((main * 10)) -ge $((s * 8)) ] && [ $((start * 10)) -ge $((s * 8)) ]'

# 5. The server is gone: nothing found, the profile ends as usual.
kill "$srv_pid"; wait "$srv_pid" 2>/dev/null; srv_pid=
run gone DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$tmp/cache3"
grep debuginfod "$tmp/gone.err" | sed 's/^/# gone: /'
check "server gone: profile exits 0, the log says 0 fetched, some not found" \
	'[ "$(cat "$tmp/gone.rc")" = 0 ] && grep -q "debuginfod: 0 debug files fetched, [1-9][0-9]* not found" "$tmp/gone.err"'

# 6. The client library cannot be loaded (a file of that name that is no
# library first on the search path): one warning, the profile as usual.
mkdir -p "$tmp/nolib" && : >"$tmp/nolib/libdebuginfod.so.1"
run nolib DEBUGINFOD_URLS="$url" DEBUGINFOD_CACHE_PATH="$tmp/cache5" LD_LIBRARY_PATH="$tmp/nolib"
grep debuginfod "$tmp/nolib.err" | sed 's/^/# no library: /'
check "no client library: profile exits 0, one warning naming it, addresses kept" \
	'[ "$(cat "$tmp/nolib.rc")" = 0 ] && [ "$(grep -c "^W.*DEBUGINFOD_URLS is set but debuginfod cannot be used.*libdebuginfod.so.1" "$tmp/nolib.err")" = 1 ] &&
	 [ "$(samples nolib)" -ge 50 ] && ! named nolib dbgd_leaf_spin'
tap_done
