#!/bin/bash
# A hostile target and everything the collector hands it. The target runs
# in a mount namespace of its own (an empty tmpfs over its work folder: as a container would
# not see the collector's directories) and, while the injected library
# records it and after, looks at every fd it holds: openat(fd, ".."),
# /proc/self/fd/N/.., creating a file through the fd and beside the fd's
# path. While recorded it must find two new fds (its library's control
# socket, its own log file; no directory), no way out, and none of ours afterwards; the output
# directory must hold nothing but the published logs. CUDA side through the
# fake CUPTI (tests/progs/fake_cupti.c), Python side through the hook
# (llmtracker profile -t python). Then: stopped, traced and zombie targets
# are refused within seconds with one line, untouched, nothing mapped.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
P=$BUILD/tests/progs
LIB=$BUILD/lib/libllmtracker-inject.so
LT=$(realpath -m "$BUILD/bin/llmtracker")
need_built "$P/hostile_target" "$P/fake_cupti" "$P/inject_tool" "$P/inject_logdump" "$P/evlog_dump" "$LIB" "$LT"
[ "$(id -u)" = 0 ] || skip "needs root (ptrace, mount namespaces)"
[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"
unshare -m --propagation private true 2>/dev/null || skip "no mount namespaces here"
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)

tap_tmpdir W llmt-hostile
tap_at_exit 'exec 7>&- 8>&- 9>&- 2>/dev/null'
# In a mount namespace of its own, $W (the collector's output among it)
# covered by an empty tmpfs, out of its sight; the rest of the tree stays
# visible, wherever this checkout is (a tmpfs over all of /tmp would hide a
# checkout under /tmp, its programs with it).
isolated() { W="$W" unshare -m --propagation private sh -c 'mount -t tmpfs hostile "$W" && exec "$@"' -- "$@"; }
mapped() { cat "/proc/$1/maps" 2>/dev/null | grep -c "memfd:llmtracker-inject"; }
# fd lines of one probe, and what a probe found that it should not have
fds_of() { grep "^$2 fd " "$1" | sort; }
no_escape() { ! grep -h " escape " "$@" | sed 's/^/#   /' | grep .; }
# new fds while recorded: the library's end of its control socket and one
# regular file, the collector's partial log; no directory, nothing else
one_log_fd() { # out tag prefix [sockets: 1, the control socket]
	local new socks=${4:-1}
	new=$(comm -13 <(fds_of "$1" before | sed 's/^before //') <(fds_of "$1" "$2" | sed "s/^$2 //"))
	echo "$new" | sed 's/^/#   new: /'
	[ "$(echo "$new" | grep -c .)" = $((socks + 1)) ] &&
		[ "$(echo "$new" | grep -c "type=sock link=socket:")" = "$socks" ] &&
		echo "$new" | grep -qE "type=reg link=.*/\.$3\..*\.evlog\.partial$"
}
same_fds() { # out tag
	cmp -s <(fds_of "$1" before | sed 's/^before //') <(fds_of "$1" "$2" | sed "s/^$2 //")
}
only_logs() { # dir regex-of-allowed-names
	local bad
	bad=$(ls -A "$1" | grep -vE "$2")
	[ -n "$bad" ] && echo "$bad" | sed 's/^/#   unexpected: /'
	[ -z "$bad" ] && [ -z "$(find "$W" -name hostile-planted)" ]
}

# ---------------------------------------------------------------- CUDA side
mkdir "$W/out"
mkfifo "$W/in"
isolated "$P/hostile_target" "$(realpath "$P/fake_cupti")" <"$W/in" >"$W/t.out" 2>&1 &
IP=$! # the namespace's first process: it ends with the target's status
tap_bg $IP
exec 9>"$W/in"
wait_for "$W/t.out" '^ready'
TP=$(awk '/^ready/ {print $2}' "$W/t.out")
check "isolated target started (pid ${TP:-?})" '[ -n "$TP" ] && kill -0 "$TP" && [ ! -e /proc/$TP/root$W/out ]'
tap_bg $TP
echo "probe before" >&9
wait_for "$W/t.out" "^before probe done"
LLMT_SKIP_DRIVER_CHECK=1 "$P/inject_tool" attach "$TP" "$LIB" "$W/out" 3 >"$W/att.out" 2>&1 &
ap=$!
# "started" comes once the library answered: its start is over (it holds
# its own copy of the log fd only from then on).
wait_for "$W/att.out" "profiling of pid $TP started"
echo "probe during" >&9
wait_for "$W/t.out" "^during probe done"
wait $ap; arc=$?
sed 's/^/# /' "$W/att.out" | tail -3
echo "probe after" >&9
wait_for "$W/t.out" "^after probe done"
check "CUDA: recorded while probed (collector rc $arc, published, unloaded)" \
	'[ $arc = 0 ] && grep -q "finalized=1 unloaded=1" "$W/att.out" && grep -q "CUDA log $W/out/llmtracker-cupti" "$W/att.out"'
check "CUDA: while recorded, its new fds are its control socket and its own log file (no directory)" 'one_log_fd "$W/t.out" during llmtracker-cupti'
check "CUDA: no way out through any fd, during or after (no .., nothing created)" 'no_escape "$W/t.out"'
check "CUDA: after the session the target holds no fd of ours and nothing is mapped" \
	'same_fds "$W/t.out" after && [ "$(mapped $TP)" = 0 ]'
check "CUDA: the output directory holds the published log and nothing else" \
	'only_logs "$W/out" "^llmtracker-cupti\..*\.evlog$" && [ "$(ls "$W/out" | wc -l)" = 1 ]'
k=$("$P/inject_logdump" "$W/out"/llmtracker-cupti.*.evlog 2>/dev/null | grep -c '^K')
check "CUDA: the log is readable and holds kernels ($k)" '[ "$k" -gt 0 ] && grep -q "kernels=$k " "$W/att.out"'

# ------------------------------------------------- stopped, traced, zombie
refused() { # tag pid regex: one line within 5 s, nothing mapped, fds as they were
	local before after t0 t1
	before=$(ls /proc/$2/fd 2>/dev/null | sort)
	t0=$(date +%s%N)
	LLMT_SKIP_DRIVER_CHECK=1 timeout 20 "$P/inject_tool" attach "$2" "$LIB" "$W/out" 1 >"$W/$1.out" 2>&1
	t1=$(date +%s%N)
	after=$(ls /proc/$2/fd 2>/dev/null | sort)
	grep "$3" "$W/$1.out" | sed 's/^/# /'
	[ $(( (t1 - t0) / 1000000 )) -lt 5000 ] && [ "$(grep -c "$3" "$W/$1.out")" = 1 ] &&
		[ "$(mapped "$2")" = 0 ] && [ "$before" = "$after" ]
}
kill -STOP "$TP"
wait_for /proc/$TP/status '^State:.*T' 5
check "a stopped target is refused at once with one line, nothing mapped or left open" \
	'refused stopped $TP "is stopped (state T"'
check "... and left as it was: still stopped" 'grep -q "^State:.*T (stopped)" /proc/$TP/status'
kill -CONT "$TP"
if command -v strace >/dev/null; then
	strace -p "$TP" -o /dev/null 2>/dev/null & sp=$!; tap_bg $sp
	wait_until 10 'grep -q "TracerPid:[[:space:]]*[1-9]" /proc/$TP/status'
	check "a traced target (strace -p) is refused with one line naming its tracer" \
		'refused traced $TP "is traced by pid $sp"'
	kill "$sp"; wait "$sp" 2>/dev/null
else
	ok "# SKIP no strace here"
fi
# A zombie: a child its parent (held by a fifo) does not reap.
mkfifo "$W/zin"
python3 -c 'import os, sys
pid = os.fork()
if pid == 0:
    os._exit(0)
open(sys.argv[1], "w").write(str(pid))
sys.stdin.read()' "$W/zpid" <"$W/zin" & zp=$!; tap_bg $zp
exec 8>"$W/zin"
zombie_shows() { z=$(cat "$W/zpid" 2>/dev/null); [ -n "$z" ] && grep -q '^State:.*Z' /proc/$z/status 2>/dev/null; }
wait_until 10 zombie_shows
check "a zombie is refused with one line" 'refused zombie "$z" "is a zombie"'
exec 8>&-; wait "$zp" 2>/dev/null
check "nothing was written into the output directory by the refused attempts" \
	'[ "$(ls -A "$W/out" | wc -l)" = 1 ]'
exec 9>&-
wait "$IP"
check "the target ran on and exited 0" '[ $? = 0 ]'

# -------------------------------------------------------------- Python side
if [ ! -x "$PY" ] || [ "$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("WITH_DTRACE"))')" != 0 ]; then
	ok "# SKIP no pyenv python3.11 without USDT probes"; tap_done
fi
mkdir "$W/pout"
mkfifo "$W/pin"
isolated "$PY" "$PWD/tests/workloads/hostile_probe.py" <"$W/pin" >"$W/p.out" 2>&1 &
tap_bg $!
exec 7>"$W/pin"
wait_for "$W/p.out" '^ready'
PP=$(awk '/^ready/ {print $2}' "$W/p.out"); tap_bg $PP
echo "probe before" >&7
wait_for "$W/p.out" "^before probe done"
"$LT" profile -p "$PP" -t python -o "$W/pout/c.log" -v 1 >/dev/null 2>"$W/pc.err" & cp=$!; tap_bg $cp
wait_for "$W/pc.err" "tracing functions|cannot trace" 30
echo "probe during" >&7
wait_for "$W/p.out" "^during probe done"
kill -INT "$cp"; wait "$cp"; crc=$?
grep "python: pid" "$W/pc.err" | cut -c1-220 | sed 's/^/# /'
echo "probe after" >&7
wait_for "$W/p.out" "^after probe done"
check "Python: hooked while probed (collector rc $crc)" '[ $crc = 0 ] && grep -q "tracing functions" "$W/pc.err"'
check "Python: while hooked, its new fds are its control socket, the fork channel and its own log file (no directory)" \
	'one_log_fd "$W/p.out" during llmtracker-python 2'
check "Python: no way out through any fd, during or after" 'no_escape "$W/p.out"'
check "Python: after the session the target holds no fd of ours and nothing is mapped" \
	'same_fds "$W/p.out" after && [ "$(mapped $PP)" = 0 ]'
check "Python: the output directory holds the collector's log and the published Python log only" \
	'only_logs "$W/pout" "^(c\.log|llmtracker-python\..*\.evlog)$" && [ "$(ls "$W/pout" | grep -c "^llmtracker-python")" = 1 ]'
w=$("$P/evlog_dump" "$W/pout"/llmtracker-python.*.evlog 2>/dev/null | grep -c " func=work ")
check "Python: the log is readable and holds the target's calls ($w)" '[ "$w" -gt 0 ]'
exec 7>&-
wait "$PP" 2>/dev/null
tap_done
