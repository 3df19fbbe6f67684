#!/bin/bash
# Bad requests get one clear line and a non-zero exit, leave nothing
# attached and never touch an existing file; -t all records what it can.
. "$(dirname "$0")/collector_common.inc"
need_bpf "$PROGS/sys_counts" "$PROGS/sys_names"

# expect_err "what" "regex" args...: non-zero exit, stderr matches, one line
expect_err() {
	local what=$1 re=$2 rc; shift 2
	"$LT" "$@" >"$T/out" 2>"$T/err"; rc=$?
	if [ "$rc" -ne 0 ] && grep -qE "$re" "$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ]; then
		ok "$what (rc $rc): $(cat "$T/err")"
	else
		nok "$what (rc $rc): $(cat "$T/err")"
	fi
}
# Our programs that no live process holds an fd of (other tests may run
# collectors at the same time: theirs are held by them).
our_progs() {
	bpftool -j prog show 2>/dev/null | python3 -c 'import glob, json, re, sys
held = set()
for f in glob.glob("/proc/[0-9]*/fdinfo/*"):
	try:
		held.update(int(m) for m in re.findall(r"^prog_id:\s*(\d+)", open(f).read(), re.M))
	except OSError:
		pass
print(sum(1 for p in json.load(sys.stdin) if p.get("name", "").startswith(("lt_sys_", "lt_proc_"))
	and p["id"] not in held))'
}
before=$(our_progs)

sleep 20 & idle=$!
tap_bg "$idle"
expect_err "unknown -t" "unknown profiling type 'bogus'" profile -p "$idle" -t syscall,bogus -o "$T/a.evlog"
expect_err "missing -t" "missing -t" profile -p "$idle" -o "$T/a.evlog"
expect_err "PID that does not exist" "PID 99999999 does not exist" profile -p 99999999 -t syscall -o "$T/a.evlog"
expect_err "bad -d" "^llmtracker profile: -d abc: expected" profile -p "$idle" -t syscall -d abc -o "$T/a.evlog"
expect_err "nothing to profile" "nothing to profile" profile -t syscall -o "$T/a.evlog"
expect_err "stray argument" "put the command to launch after --" profile -t syscall -o "$T/a.evlog" true
expect_err "unknown command" "unknown command 'frobnicate'" frobnicate
expect_err "output directory missing" "cannot create the event log $T/no/such/dir" \
	profile -p "$idle" -t syscall -o "$T/no/such/dir/x.evlog"
echo precious >"$T/exists.evlog"
expect_err "existing output never clobbered" "already exists" profile -p "$idle" -t syscall -o "$T/exists.evlog"
check "... and left as it was" grep -qx precious "$T/exists.evlog"
if command -v setpriv >/dev/null; then
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$LT" profile -p "$idle" -t syscall -o /tmp/lt-nonroot.evlog >"$T/out" 2>"$T/err" || rc=$?
	if [ "$rc" -ne 0 ] && grep -q "needs root or CAP_BPF" "$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ]; then
		ok "not root (rc $rc): $(cat "$T/err")"
	else
		nok "not root (rc $rc): $(cat "$T/err")"
	fi
fi
# Programs are freed by the kernel after a grace period, and other tests'
# collectors that end meanwhile leave theirs unheld until then: on a busy
# machine (two CPU hogs) 5 s was not enough. Up to 30 s. The wait's own
# verdict counts: a later look may catch another test's collector between
# closing its programs and the kernel freeing them.
wait_until 30 '[ "$(our_progs)" -le "$before" ]'
check_rc $? "no program left attached after the errors"
check "no partial file left" test -z "$(ls -A "$T" | grep partial)"

# -t all records what it can (and says which sources it could not enable).
"$LT" profile -t all -o "$T/all.evlog" -- "$PROGS/sys_counts" -n 1 2>"$T/all.err"
rc=$?
check "-t all succeeds (rc $rc)" test "$rc" -eq 0
c=$(count_sys "$T/all.evlog" 0 "$(sys_nr getppid)")
check "-t all records syscalls (getppid x$c)" test "$c" -eq 1000
# sys_counts loads no CUDA library: nothing is probed, so the cuda row shows no events
# (records that only steer the source, such as library loads, are not events).
check "... nothing probed is said" grep -q "cuda: nothing was probed" "$T/all.err"
check "... and the cuda row shows 0 events, with the reason" grep -qE '^  cuda +0 +0  not recorded: no library the probe file names was loaded$' "$T/all.err"

# Status while recording: plain lines when stderr is not a terminal, none with -q.
LLMT_PROGRESS_SECONDS=0.2 "$LT" profile -t syscall -d 1 -o "$T/st.evlog" -- sleep 5 2>"$T/st.err"
check "status lines while recording (elapsed / duration, events per source, MB, lost, Ctrl-C)" \
	grep -qE '^llmtracker: [0-9]+ s / 1 s: [0-9]+ events \(proc [0-9]+, syscall [0-9]+\), [0-9.]+ MB written, [0-9]+ lost; Ctrl-C to stop$' "$T/st.err"
LLMT_PROGRESS_SECONDS=0.2 "$LT" profile -q -t syscall -d 1 -o "$T/q.evlog" -- sleep 5 2>"$T/q.err"
check "... none with -q" test "$(grep -c 'Ctrl-C to stop' "$T/q.err")" -eq 0
if command -v script >/dev/null; then
	script -qec "'$LT' profile -t syscall -d 2 -o '$T/tty.evlog' -- sleep 5" /dev/null >"$T/tty.out" 2>&1
	check "on a terminal: one line redrawn in place (carriage return, erase to the end)" \
		grep -qaP '\rllmtracker: [0-9]+ s / 2 s: .*Ctrl-C to stop\e\[K' "$T/tty.out"
fi
tap_done
