#!/bin/bash
# The static collector symbolizing C++ names at stop (-t cpu). It once
# dlopen()ed libstdc++ for the demangler, which brings the host's shared
# libc into a static program: on a host whose glibc differs from the build's
# it died with SIGFPE right after the CUDA kernel detach, at the end of every
# `-t cpu` run. Here: it exits 0, names the mangled hot function demangled,
# and never opens libstdc++ or a libc (strace).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
STATIC=$BUILD/bin/llmtracker-static DUMP=$BUILD/tests/progs/evlog_dump PROG=$BUILD/tests/progs/cpu_mangled
[ "$(id -u)" = 0 ] || skip "needs root (BPF, perf events)"
command -v strace >/dev/null || skip "strace missing (scripts/packages.txt)"
if [ ! -x "$STATIC" ]; then # not part of tests-bin: built apart, never into $BUILD's objects
	make -s BUILD="$BUILD/static-build" static >/dev/null 2>&1
	STATIC=$BUILD/static-build/bin/llmtracker-static
fi
need_built "$STATIC" "$DUMP" "$PROG"
tap_tmpdir tmp llmt-test

strace -f -qq -e trace=openat,open,execve -o "$tmp/st.txt" \
	"$STATIC" profile -t cpu -o "$tmp/a.evlog" -- "$PROG" 1500 >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
check "static profile -t cpu -- PROG exits 0 (got $rc)" '[ $rc = 0 ]'
[ $rc = 0 ] || tail -3 "$tmp/a.err" | sed 's/^/# /'
"$DUMP" "$tmp/a.evlog" >"$tmp/a.txt" 2>&1
check "the mangled hot function is named demangled: llmt::spin_loop(unsigned long)" \
	'grep -q "^symbol .*name=llmt::spin_loop(unsigned\\\\x20long) " "$tmp/a.txt"'
coll=$(awk '/execve\(.*llmtracker-static/ {print $1; exit}' "$tmp/st.txt")
opened=$(awk -v p="$coll" '$1 == p' "$tmp/st.txt" | grep -E 'open(at)?\(.*(libstdc\+\+|/libc\.so)' | head -2)
[ -z "$opened" ] || echo "$opened" | sed 's/^/# /'
check "the static collector opens no libstdc++ or libc (pid ${coll:-?})" '[ -n "$coll" ] && [ -z "$opened" ]'
tap_done
