#!/bin/bash
# The launch form `-- CMD` when the collector is killed by SIGKILL, alone or
# with its whole process group, at any moment of the launch: nothing is left
# stopped (state T) or waiting, the keeper (the command's parent, ours) does
# not outlive the collector, and the command either never started (ended
# before its execve, collector/session/launch.h) or runs to its end (a lone kill
# after its execve: it is the user's job). Then the keeper SIGKILLed alone
# before the release: the collector still lets the command run; and the
# collector SIGKILLed after it: the command ends, never started.
. "$(dirname "$0")/collector_common.inc"
need_bpf
set -m # each background job its own process group: `kill -KILL -PGID` hits only it

# The processes of run $1: the collector, its keeper and the command all
# carry the run's marker on their command line (the command before its
# execve is a copy of the collector; after it, the marker is its argument).
run_procs() { pgrep -f -- "lt-kill-run-$1\\." || true; }
run_gone() { [ -z "$(run_procs "$1")" ]; }
# "PID STATE" of each live process of run $1 (zombies are dead)
run_states() {
	local p s
	for p in $(run_procs "$1"); do
		s=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) && [ "$s" != Z ] && echo "$p $s"
	done
}
none_stopped() { ! run_states "$1" | grep -q ' [Tt]$'; }

# the command of $coll, waiting before its execve (still our executable,
# in its read of the release socket: system call 0)
cmd_of() { local k; k=$(pgrep -P "$1" | head -1) && [ -n "$k" ] && pgrep -P "$k" | head -1; }
waiting_before_exec() {
	local c
	c=$(cmd_of "$1") && [ -n "$c" ] &&
		[ "$(cut -d' ' -f1 "/proc/$c/syscall" 2>/dev/null)" = 0 ] &&
		[ "$(readlink "/proc/$c/exe")" = "$(realpath "$LT")" ]
}
all_stopped() { ! grep -qv '^[^(]*([^)]*) T ' /proc/"$1"/task/*/stat 2>/dev/null; }
# Catch the moment the command waits before its execve: stop the collector
# (it can release nothing then) in short steps until that moment is seen.
freeze_before_release() { # COLL MARK
	local end=$((${EPOCHREALTIME/./} + 20000000))
	while [ "${EPOCHREALTIME/./}" -lt "$end" ] && [ ! -e "$2.start" ]; do
		kill -STOP "$1" 2>/dev/null || return 1
		wait_until 2 all_stopped "$1"
		waiting_before_exec "$1" && return 0
		kill -CONT "$1"
		sleep 0.01
	done
	return 1
}
random_delay() { sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", r % 250 / 1000 }')"; }

# Each run in a process group of its own, led by a holder that outlives the
# collector, as the job's shell would: the group is not orphaned by a lone
# kill (the kernel would send an orphaned group's stopped processes SIGHUP
# and SIGCONT, and hide what the keeper does).
start_run() { # MARK: the holder's pid in $holder, the collector's in $coll
	( "$LT" profile -q -t syscall -o "$1.evlog" -- \
		sh -c 'echo started > "$1start"; sleep 1; echo done > "$1done"' sh "$1." \
		2>"$1.err" &
	  echo $! >"$1.pid"
	  exec sleep 120 ) &
	holder=$!
	tap_bg "$holder"
	wait_until 10 "[ -s '$1.pid' ]" || bail "no collector started"
	coll=$(cat "$1.pid")
}
dead() { ! ps -o stat= -p "$1" | grep -qv Z; } # gone, or a zombie

for i in $(seq 0 9); do
	mark=$T/lt-kill-run-$i
	how=lone; [ $((i % 2)) = 1 ] && how=group
	when=(before-exec after-exec random)
	when=${when[$((i % 3))]}
	case $when in
	before-exec) # a run that went past the moment is started again (a busy machine)
		caught=no
		for try in 1 2 3 4 5; do
			start_run "$mark"
			freeze_before_release "$coll" "$mark" && { caught=yes; break; }
			kill -KILL -- "-$holder"
			wait "$holder" 2>/dev/null
			wait_until 15 run_gone "$i"
			rm -f "$mark".*
		done
		[ $caught = yes ] || nok "run $i: the command caught before its release (5 tries)" ;;
	after-exec) start_run "$mark"; wait_for "$mark.start" started 20 || nok "run $i: the command started" ;;
	random) start_run "$mark"; random_delay ;;
	esac
	keeper=$(pgrep -P "$coll" | head -1)
	if [ $how = group ]; then kill -KILL -- "-$holder"; else kill -KILL "$coll"; fi
	wait_until 10 dead "$coll"
	# the command runs at most a second once started: then nothing of the run is left
	wait_until 15 run_gone "$i"
	check "run $i ($how SIGKILL, $when): nothing of the launch left (left: $(run_states "$i" | tr '\n' ' '))" \
		run_gone "$i"
	check "run $i: no process left stopped" none_stopped "$i"
	check "run $i: the keeper (${keeper:-none yet}) did not outlive the collector" \
		"[ -z '$keeper' ] || dead '$keeper'"
	if [ $how = lone ]; then
		# a command that started its work was left to finish it
		started=no; [ -e "$mark.start" ] && started=yes
		check "run $i: the command never started, or ran to its end (started: $started)" \
			"[ ! -e '$mark.start' ] || wait_for '$mark.done' done 10"
	fi
	case $how/$when in
	lone/before-exec) check "run $i: the command, killed before its execve, never ran" test ! -e "$mark.start" ;;
	lone/after-exec) check "run $i: the command ran to its end" test -e "$mark.done" ;;
	esac
	kill -KILL "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	for p in $(run_procs "$i"); do kill -KILL "$p"; done # what a failed run left: the next starts clean
done

# catch_waiting MARK: a run whose collector is frozen while its command
# waits before its execve (tried again on a busy machine)
catch_waiting() {
	local try
	for try in 1 2 3 4 5; do
		start_run "$1"
		freeze_before_release "$coll" "$1" && return 0
		kill -KILL -- "-$holder"
		wait "$holder" 2>/dev/null
		wait_until 15 run_gone "${1##*lt-kill-run-}"
		rm -f "$1".*
	done
	return 1
}

# The keeper SIGKILLed alone while the command waits: the collector still
# lets it run, and it runs to its end (its status unknown to the collector).
i=10 mark=$T/lt-kill-run-10
catch_waiting "$mark" || nok "run $i: the command caught before its release (5 tries)"
keeper=$(pgrep -P "$coll" | head -1) cmd=$(cmd_of "$coll")
kill -KILL "$keeper"
wait_until 10 dead "$keeper"
kill -CONT "$coll"
check "run $i (keeper SIGKILLed alone before the release): the command runs to its end" \
	"wait_for '$mark.done' done 20"
wait_until 20 dead "$coll"
check "run $i: the collector ends (the command's status: unknown)" \
	"dead '$coll' && grep -q 'command status unknown (its keeper process was killed)' '$mark.err'"
wait_until 15 run_gone "$i"
check "run $i: nothing of the launch left (left: $(run_states "$i" | tr '\n' ' '))" run_gone "$i"
kill -KILL "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# The keeper SIGKILLed alone, then the collector: nobody is left to release
# the command, which ends by itself before its execve.
i=11 mark=$T/lt-kill-run-11
catch_waiting "$mark" || nok "run $i: the command caught before its release (5 tries)"
keeper=$(pgrep -P "$coll" | head -1) cmd=$(cmd_of "$coll")
kill -KILL "$keeper"
wait_until 10 dead "$keeper"
kill -KILL "$coll"
wait_until 10 dead "$coll"
wait_until 15 run_gone "$i"
check "run $i (keeper, then collector SIGKILLed before the release): nothing of the launch left (left: $(run_states "$i" | tr '\n' ' '))" \
	run_gone "$i"
check "run $i: the command ($cmd) never started" test ! -e "$mark.start"
kill -KILL "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
for p in $(run_procs "$i"); do kill -KILL "$p"; done
tap_done
