#!/bin/bash
# Per-syscall counts of real programs nobody here wrote (gzip, tar) agree
# with `strace -f -c` on the same input within 1%. strace -c leaves out
# exit_group (it never returns), so the comparison does too.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_names"
command -v strace >/dev/null || skip "strace not installed"

mkdir -p "$T/tree"
seq 1 300000 >"$T/in.txt"
for i in $(seq 1 40); do seq "$i" 1000 >"$T/tree/f$i"; done

# strace_counts FILE -> "name count" lines
strace_counts() {
	awk '/^-/ || /^%/ || / total$/ || NF < 5 { next } { print $NF, $4 }' "$1" | sort
}
# ours LOG -> "name count" lines
ours() {
	"$DUMP" "$1" | awk '$1 == "syscall" { for (i = 2; i <= NF; i++) if ($i ~ /^nr=/) c[substr($i, 4)]++ }
		END { for (k in c) print k, c[k] }' >"$T/nr.txt"
	"$PROGS/sys_names" >"$T/names.txt"
	awk 'NR == FNR { name[$1] = $2; next } { print (name[$1] ? name[$1] : "nr" $1), $2 }' \
		"$T/names.txt" "$T/nr.txt" | grep -v '^exit_group ' | sort
}
compare() { # what strace_file log
	local bad
	strace_counts "$2" >"$T/a.txt"; ours "$3" >"$T/b.txt"
	bad=$(join -a1 -a2 -e0 -o 0,1.2,2.2 "$T/a.txt" "$T/b.txt" |
		awk '{ d = $2 - $3; if (d < 0) d = -d; m = $2 > $3 ? $2 : $3; if (d > m / 100) print }')
	if [ -z "$bad" ] && [ -s "$T/a.txt" ]; then ok "$1: every syscall count within 1% of strace ($(wc -l <"$T/a.txt") syscalls)"
	else nok "$1: differs from strace: $(echo $bad)"; fi
}

strace -f -c -o "$T/gzip.strace" gzip -9 -c "$T/in.txt" >"$T/out1.gz"
"$LT" profile -t syscall -o "$T/gzip.evlog" -- gzip -9 -c "$T/in.txt" >"$T/out2.gz" 2>"$T/gzip.err"
check "gzip under the collector exits 0" test $? -eq 0
check "gzip output identical under the collector" cmp -s "$T/out1.gz" "$T/out2.gz"
compare gzip "$T/gzip.strace" "$T/gzip.evlog"

strace -f -c -o "$T/tar.strace" tar -C "$T/tree" -cf "$T/t1.tar" .
"$LT" profile -t syscall -o "$T/tar.evlog" -- tar -C "$T/tree" -cf "$T/t2.tar" . 2>"$T/tar.err"
check "tar under the collector exits 0" test $? -eq 0
compare tar "$T/tar.strace" "$T/tar.evlog"
tap_done
