#!/bin/bash
# The launch form `-- CMD` catches a program's very first system calls
# (execve, then the loader's brk/mmap), records the exec, and reports a
# command that cannot run.
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
tap_done
