# Sourced by every tests/integration/*.sh (and the .inc files they share) and
# by tests/gpu/common.inc: TAP lines, skipping, a temporary directory and the
# processes to end at exit, and bounded waits. tests/run.sh counts the
# "ok"/"not ok" lines. Names of its own start with tap_: an expression it
# evaluates sees the caller's variables.
#   ok DESC / nok DESC       one passing / failing line, numbered
#   check DESC CMD [ARGS...] ok or nok by CMD's status; a lone CMD is a shell
#                            expression (eval), so '[ -s f ] && grep -q x f' works
#   check_rc RC DESC         ok when the status RC is 0
#   t CMD...                 ok or nok "$desc" by CMD's status; CMD's output goes
#                            to $tap_out and, on failure, is shown as "# " lines
#   skip REASON              "# skip: REASON", exit 77 (run.sh counts a skip)
#   bail DESC                a failing line, exit 1: the test cannot go on
#   need_built FILE...       bail unless each FILE exists (make tests-bin)
#   need_root WHY            skip unless root
#   need_standin_driver WHERE skip unless a stand-in GPU driver can be shown to
#                            the collector (x86-64, /proc/driver, unshare) and
#                            the node has no real one (WHERE, tests/gpu/..., covers it)
#   tap_done                 exit 0 when no line failed, else 1
#   tap_tmpdir VAR NAME      VAR = a new /tmp/NAME.XXXXXX, removed at exit
#                            (kept, and named, when KEEP is set)
#   tap_bg PID...            processes killed (SIGKILL) and reaped at exit
#   tap_at_exit CMD          a shell command run at exit, after the kills and
#                            before the directories go (in reverse order of calls)
#   wait_until SECONDS CMD [ARGS...]   poll CMD (a lone CMD: eval) every 50 ms
#                            until it succeeds; 1 when SECONDS (scaled) ran out
#   wait_for FILE REGEX [SECONDS]      wait_until FILE holds a line matching
#                            REGEX (grep -E); 10 s unless told
#   usr1_ready PID [SECONDS] a program waiting for SIGUSR1 by sigwait (the test
#                            programs' -w) blocks it: it has exec'd, set its mask
#   usr1 PID                 usr1_ready, send SIGUSR1, wait until it is taken (or
#                            the process gone): a second one is never merged in
#   usr1_caught PID          a program that handles SIGUSR1 (a Python script's
#                            signal.signal) has its handler in
#   wait_exec PID PROG       PID has exec'd PROG (its /proc/PID/exe)
# Timeouts scale by TAP_TIME_SCALE: by default 1 plus the whole part of the
# 1-minute load average per CPU when sourced (a busy machine), at most 4. A
# wait ends as soon as its condition holds: a longer bound only delays a
# failure.
[ -n "${TAP_SH_LOADED:-}" ] && return 0
TAP_SH_LOADED=1
tap_n=0 tap_failed=0
tap_pids=() tap_dirs=() tap_hooks=()
tap_out=/dev/null

ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $*"; }
nok() { tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1)); echo "not ok $tap_n - $*"; }
check() {
	local tap_rc=$? tap_what=$1; shift
	# an expression sees the caller's $? (check "ran" '[ $? = 0 ]')
	if if [ $# -eq 1 ]; then tap_status "$tap_rc"; eval "$1"; else "$@"; fi; then
		ok "$tap_what"
	else
		nok "$tap_what"
	fi
}
tap_status() { return "$1"; }
check_rc() { if [ "$1" -eq 0 ]; then ok "$2"; else nok "$2"; fi; }
t() {
	if "$@" >"$tap_out" 2>&1; then ok "$desc"; else nok "$desc"; sed 's/^/# /' "$tap_out" | head -20; fi
}
tap_done() { [ "$tap_failed" -eq 0 ]; exit $?; }

skip() { echo "# skip: $*"; exit 77; }
bail() { nok "$*"; exit 1; }
need_built() {
	local tap_f
	for tap_f; do [ -e "$tap_f" ] || bail "$tap_f not built (make tests-bin)"; done
}
need_root() { [ "$(id -u)" = 0 ] || skip "needs root ($*)"; }
need_standin_driver() {
	[ "$(uname -m)" = x86_64 ] || skip "the injector supports x86-64 only"
	[ -d /proc/driver ] && command -v unshare >/dev/null || skip "no /proc/driver or unshare"
	if [ -e /proc/driver/nvidia/version ] || [ -e /dev/nvidiactl ]; then
		skip "this node has a GPU driver; $1 covers it"
	fi
}

tap_tmpdir() { # VAR NAME
	local tap_d
	tap_d=$(mktemp -d "/tmp/$2.XXXXXX") || bail "mktemp -d /tmp/$2.XXXXXX"
	tap_dirs+=("$tap_d")
	# the first one holds t's output, where a test may read it back
	[ "$tap_out" = /dev/null ] && tap_out=$tap_d/out
	printf -v "$1" %s "$tap_d"
}
tap_bg() { tap_pids+=("$@"); }
tap_at_exit() { tap_hooks=("$1" "${tap_hooks[@]}"); }
tap_cleanup() {
	local tap_p tap_h tap_d
	for tap_p in "${tap_pids[@]}"; do
		[ -n "$tap_p" ] || continue
		kill -9 "$tap_p" 2>/dev/null; wait "$tap_p" 2>/dev/null
	done
	for tap_h in "${tap_hooks[@]}"; do eval "$tap_h"; done
	for tap_d in "${tap_dirs[@]}"; do
		if [ -n "${KEEP:-}" ]; then echo "# kept $tap_d"; else rm -rf "$tap_d"; fi
	done
	return 0
}
trap tap_cleanup EXIT

if [ -z "${TAP_TIME_SCALE:-}" ]; then
	TAP_TIME_SCALE=$(awk -v cpus="$(nproc)" '{ s = 1 + int($1 / cpus); print (s > 4 ? 4 : s); exit }' \
		/proc/loadavg 2>/dev/null)
	TAP_TIME_SCALE=${TAP_TIME_SCALE:-1}
fi
wait_until() { # SECONDS CMD [ARGS...]
	local tap_end # in microseconds (bash's arithmetic: awk may hold 32 bits only)
	tap_end=$(awk -v s="$1" -v k="$TAP_TIME_SCALE" 'BEGIN { printf "%.0f", s * k * 1000000 }')
	tap_end=$((${EPOCHREALTIME/./} + tap_end))
	shift
	while :; do
		if [ $# -eq 1 ]; then eval "$1"; else "$@"; fi && return 0
		[ "${EPOCHREALTIME/./}" -lt "$tap_end" ] || return 1
		sleep 0.05
	done
}
wait_for() { wait_until "${3:-10}" tap_grep_file "$1" "$2"; }
usr1_has() { # PID FIELD: SIGUSR1's bit in /proc/PID/status FIELD (SigBlk, ShdPnd)
	local v
	v=$(sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" 2>/dev/null)
	[ -n "$v" ] && (((16#$v >> 9) & 1))
}
usr1_ready() { # in sigwait (which lifts the block while it waits), or about to be
	wait_until "${2:-10}" "usr1_has $1 SigBlk || grep -q sigtimedwait /proc/$1/wchan 2>/dev/null"
}
usr1_caught() { wait_until "${2:-10}" usr1_has "$1" SigCgt; }
wait_exec() { # PID PROG [SECONDS]
	local tap_want
	tap_want=$(realpath -m "$2")
	wait_until "${3:-10}" "[ \"\$(readlink /proc/$1/exe 2>/dev/null)\" = '$tap_want' ]"
}
usr1() { # PID
	usr1_ready "$1" && kill -USR1 "$1" && wait_until 10 "! usr1_has $1 ShdPnd"
}
tap_grep_file() { grep -qE -- "$2" "$1" 2>/dev/null; }
