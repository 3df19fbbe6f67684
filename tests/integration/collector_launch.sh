#!/bin/bash
# The launch form `-- CMD` catches a program's very first system calls
# (execve, then the loader's brk/mmap), records the exec, and reports a
# command that cannot run; `--user` runs it as another user, without
# capabilities, and an unknown user is refused before anything starts.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_names"
execve=$(sys_nr execve) brk=$(sys_nr brk) mmap=$(sys_nr mmap)

"$LT" profile -t syscall -o "$T/true.evlog" -- true 2>"$T/true.err"
check "profile -- true exits 0" test $? -eq 0
first=$(events "$T/true.evlog" syscall | head -4)
nr1=$(field "$(echo "$first" | head -1)" nr)
check "first recorded syscall is execve (got nr $nr1)" test "$nr1" = "$execve"
ret1=$(field "$(echo "$first" | head -1)" ret)
check "execve returned 0" test "$ret1" = 0
check "brk among the next calls" grep -q "nr=$brk " <<<"$first"
check "mmap recorded" test "$(count_sys "$T/true.evlog" 0 "$mmap")" -ge 1
check "exec recorded with the new name" grep -q 'name=true .*is_exec=1' <(events "$T/true.evlog" process)
check "summary reports the command's status" grep -q "command exited with status 0" "$T/true.err"

"$LT" profile -t syscall -o "$T/false.evlog" -- false 2>"$T/false.err"
check "collector exit status is its own, not the command's" test $? -eq 0
check "summary reports status 1" grep -q "command exited with status 1" "$T/false.err"

"$LT" profile -t syscall -o "$T/none.evlog" -- /nonexistent/cmd 2>"$T/none.err"
rc=$?
check "a command that does not exist fails (rc $rc)" test "$rc" -ne 0
check "... with one clear line" grep -q "cannot run '/nonexistent/cmd'" "$T/none.err"
check "... and no log left" test ! -e "$T/none.evlog" -a -z "$(ls -A "$T" | grep none.evlog)"

# Arguments after -- belong to the command, flags included.
"$LT" profile -t syscall -o "$T/args.evlog" -- sh -c 'exit 3' -v 2>"$T/args.err"
check "command flags pass through (-c, -v)" grep -q "command exited with status 3" "$T/args.err"
# --user: the command reads its own credentials (/proc/self/status of the
# grep it runs) into a directory anyone may write ($T is root's own).
tap_tmpdir U lt-user
chmod 1777 "$U"
creds='grep -E "^(Uid|Gid|Groups|Cap[A-Za-z]+):" /proc/self/status > "$1"'
nobody=$(id -u nobody 2>/dev/null) || skip "no user nobody"
nogroup=$(id -g nobody)
"$LT" profile -q -t syscall -o "$T/user.evlog" --user nobody -- sh -c "$creds" sh "$U/nobody" \
	2>"$T/user.err"
check "--user nobody: the profile ran (rc $?)" '[ $? = 0 ] && grep -q "command exited with status 0" "$T/user.err"'
check "--user nobody: the command ran as uid $nobody" \
	grep -qP "^Uid:\t$nobody\t$nobody\t$nobody\t$nobody\$" "$U/nobody"
check "--user nobody: ... with its group $nogroup" grep -qP "^Gid:\t$nogroup\t" "$U/nobody"
check "--user nobody: ... and no root group among its groups" \
	"! grep -qP '^Groups:.*\\b0\\b' '$U/nobody'"
for c in CapEff CapPrm CapInh CapAmb CapBnd; do
	check "--user nobody: $c is empty" grep -qP "^$c:\t0+\$" "$U/nobody"
done
check "the profile follows the command as that user (its exec recorded)" \
	grep -q 'name=sh .*is_exec=1' <(events "$T/user.evlog" process)

# A uid with no account, with the group given.
"$LT" profile -q -t syscall -o "$T/uid.evlog" --user 4242:4343 -- sh -c "$creds" sh "$U/uid" 2>/dev/null
check "--user 4242:4343: uid 4242" grep -qP "^Uid:\t4242\t4242\t4242\t4242\$" "$U/uid"
check "--user 4242:4343: gid 4343, its only group" \
	'grep -qP "^Gid:\t4343\t4343" "$U/uid" && grep -qP "^Groups:\t4343 ?\$" "$U/uid"'
check "--user 4242:4343: CapEff empty" grep -qP "^CapEff:\t0+\$" "$U/uid"

# Refused before anything starts: one line naming the user, nothing run, no log.
refused() { # DESC WANT ARGS...: rc 1, one line matching WANT, no log, nothing ran
	local desc=$1 want=$2 rc
	shift 2
	"$LT" profile -q -t syscall -o "$T/refused.evlog" "$@" -- touch "$U/ran" 2>"$T/refused.err"
	rc=$?
	check "$desc: refused (rc $rc)" test "$rc" -ne 0
	check "$desc: in one line ($(head -c 200 "$T/refused.err"))" \
		'[ "$(wc -l < "$T/refused.err")" = 1 ] && grep -q -- "$want" "$T/refused.err"'
	check "$desc: nothing ran, no log" '[ ! -e "$U/ran" ] && [ -z "$(ls -A "$T" | grep refused.evlog)" ]'
}
refused "--user of an unknown user" "no such user 'no-such-user-lt'" --user no-such-user-lt
refused "--user of an unknown group" "no such group 'no-such-group-lt'" --user nobody:no-such-group-lt
refused "--user of a uid with no account, no group" "no account has uid 4242" --user 4242
# A command the user may not run: said in one line, before it is released.
mkdir -m 700 "$T/private"
cp "$(type -P true)" "$T/private/prog"
"$LT" profile -q -t syscall -o "$T/priv.evlog" --user nobody -- "$T/private/prog" 2>"$T/priv.err"
check "--user nobody: a program nobody may not run is refused (rc $?)" '[ $? -ne 0 ]'
check "... in one line naming the user and the program" \
	'[ "$(wc -l < "$T/priv.err")" = 1 ] && grep -q "user nobody cannot run $T/private/prog: Permission denied" "$T/priv.err"'
check "--help tells --user" grep -q -- "--user USER\[:GROUP\]" <("$LT" profile --help)
tap_done
