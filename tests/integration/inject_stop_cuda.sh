#!/bin/bash
# -d bounds the profile with CUDA targets too: the collector exits within
# -d + 2 s whatever CUPTI does at the stop (tests/integration/
# inject_stop_bound.sh has the Python targets). The stand-in CUPTI
# (tests/progs/fake_cupti.c) in tests/progs/fake_cuda_app, attached with
# --enable-cuda-kernel:
#   1. a final flush that does not end (FAKE_CUPTI_HOLD_AT=flush: CUPTI's
#      cuptiActivityFlushAll waits, as for a busy device): the collector
#      exits within -d + 2 s; the log is published with what came before
#      (readable, as many kernels as the collector was told), the process is
#      named as keeping the library (its flush given up, what CUPTI still
#      held lost), runs on untouched, and once CUPTI lets go a later profile
#      records it again and it ends as it would;
#   2. no CUDA call at the stop (the app pauses its calls), so CUPTI's
#      finalize has no API exit to run at: the collector exits within
#      -d + 2 s, the log published, CUPTI detaching at the process's next
#      call (said), the app ending well;
#   3. both at once, with a target that answers at once: the answering one
#      unloaded, the others named, the collector within -d + 2 s.
# No GPU driver here: the collector's check for one is met in a private
# mount namespace (a /proc/driver/nvidia/version of ours).
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
T=$(realpath -m "$BUILD/tests/progs")
COLL=$(realpath -m "$BUILD/bin/llmtracker")
need_built "$T/fake_cuda_app" "$T/fake_cupti" "$T/inject_logdump" "$COLL"
need_root "eBPF, ptrace, mount namespace"
need_standin_driver tests/gpu/
tap_tmpdir W llmt-stop-cuda
tap_at_exit 'for f in "$W"/*.fd; do [ -e "$f" ] && eval "exec $(cat "$f")>&-"; done'
cp "$T/fake_cupti" "$W/libcupti.so.13"
export FAKE_CUPTI_RATE=100000 # a full buffer (handed over) every ~0.4 s

collector() { # ARGS...: the collector, seeing a GPU driver of ours
	unshare -m --propagation private sh -c 'mount -t tmpfs stand-in /proc/driver &&
		mkdir /proc/driver/nvidia && echo stand-in > /proc/driver/nvidia/version && exec "$@"' sh \
		"$COLL" "$@"
}
# seconds of the day of the first glog line of FILE matching REGEX
glog_secs() {
	grep -m1 -E "$2" "$1" | awk '{ split($2, t, ":"); printf "%.6f", t[1] * 3600 + t[2] * 60 + t[3] }'
}
now_secs() { date +%H:%M:%S.%N | awk '{ split($1, t, ":"); printf "%.6f", t[1] * 3600 + t[2] * 60 + t[3] }'; }
untouched() { # PID: not stopped, no tracer on any thread
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	case "$st" in R|S|D) ;; *) echo "# pid $1: state '$st'"; return 1 ;; esac
	! grep -h "^TracerPid:" /proc/$1/task/*/status | grep -qv "TracerPid:[[:space:]]0$"
}
kernels_told() { sed -n "s/.*pid $1: \([0-9]*\) kernels,.*/\1/p" "$2" | head -1; }
cupti_log() { ls "$1"/llmtracker-cupti.*."$2".*.evlog 2>/dev/null | head -1; }

# app NAME [ENV...]: a fake_cuda_app on a fifo (fd in $W/NAME.fd); pid in $app
fd_next=20
app() {
	local name=$1
	shift
	mkfifo "$W/$name.in"
	# (without the other apps' stdin: each ends when its own closes)
	(for f in "$W"/*.fd; do [ -e "$f" ] && eval "exec $(cat "$f")>&-"; done
	 exec env "$@" "$T/fake_cuda_app" "$W/libcupti.so.13" < "$W/$name.in" > "$W/$name.out" 2>&1) &
	app=$!
	tap_bg $app
	eval "exec $fd_next> \"$W/$name.in\""
	echo $fd_next > "$W/$name.fd"
	fd_next=$((fd_next + 1))
	wait_for "$W/$name.out" "^ready" 20
}
say() { echo "$2" >&"$(cat "$W/$1.fd")"; } # NAME LINE: to the app's stdin
app_end() { # NAME PID: stdin closed; it must end 0 with its figures
	eval "exec $(cat "$W/$1.fd")>&-"
	rm -f "$W/$1.fd"
	wait_until 20 "! kill -0 $2 2>/dev/null"
	wait "$2"
}

# run TAG D PID...: profile the pids with -d D, each app told "quiet" (its
# name listed in $quiet) once its CUDA profiling started; sets $crc, $over
# (seconds from -d's start to the collector's exit, past D) and $stop (from
# -d's end to the libraries' stop's, by the collector's own clock)
run() {
	local tag=$1 d=$2 p args=() end start stopped
	shift 2
	mkdir -p "$W/$tag"
	for p; do args+=(-p "$p"); done
	collector profile -t cuda --enable-cuda-kernel true -d "$d" -v 1 "${args[@]}" \
		-o "$W/$tag/main.evlog" > /dev/null 2> "$W/$tag/err" & cp=$!
	tap_bg $cp
	for p; do wait_for "$W/$tag/err" "CUDA kernel profiling of pid $p started" 60; done
	for n in $quiet; do say "$n" quiet; done
	wait $cp; crc=$?
	end=$(now_secs)
	start=$(glog_secs "$W/$tag/err" "profiling [0-9]+ process")
	stopped=$(glog_secs "$W/$tag/err" "injected libraries of [0-9]+ process")
	over=$(awk -v a="$start" -v b="$end" -v d="$d" 'BEGIN { x = b - a; if (x < 0) x += 86400; printf "%.2f", x - d }')
	stop=$(awk -v a="$start" -v b="$stopped" -v d="$d" 'BEGIN { x = b - a; if (x < 0) x += 86400; printf "%.2f", x - d }')
	echo "# $tag: -d $d: the libraries stopped $stop s past -d, the collector exited $over s past it (status $crc); its log:"
	sed -n '/stopping:/,$p' "$W/$tag/err" | cut -c1-200 | sed 's/^/#   /'
}
# The libraries' stop, the part the targets can hold up, ends within 1.8 s
# of -d (1.5 s for the replies, then the unloads); the collector's own teardown after it is
# held to -d + 2 s in all where the machine is not busy (TAP_TIME_SCALE 1),
# and to twice its scale where it is.
in_bound() {
	[ "$crc" = 0 ] && awk -v s="$stop" -v o="$over" -v k="$TAP_TIME_SCALE" 'BEGIN { exit !(s <= 1.8 && o <= 2.0 * k) }'
}
# the log of PID published, readable, with as many kernels as the collector was told (> 0)
published() { # TAG PID
	local f k n
	f=$(cupti_log "$W/$1" "$2")
	k=$(kernels_told "$2" "$W/$1/err")
	n=$([ -n "$f" ] && "$T/inject_logdump" "$f" 2>/dev/null | grep -c '^K')
	echo "# $1: pid $2: log ${f##*/}, $n kernels in it, $k told"
	[ -n "$f" ] && [ -n "$k" ] && [ "$k" -gt 0 ] && [ "$n" = "$k" ]
}
cut_named() { # TAG PID
	grep -qE "^    pid $2 \(fake_cuda_app\): gave up CUPTI's final flush after [0-9]+ ms" "$W/$1/err"
}

# 1. a final flush that never ends while profiled
quiet=
app slow FAKE_CUPTI_HOLD_AT=flush; slow=$app
run flush 2 $slow
in_bound
check_rc $? "a final flush that does not end: the libraries' stop ends $stop s past -d, the collector exits $over s past it (within 2 s)"
published flush $slow
check_rc $? "... its log is published with what came before (as many kernels as told)"
cut_named flush $slow && grep -q "the injected library stays loaded in 1 process" "$W/flush/err"
check_rc $? "... the summary names the process as keeping the library: its flush given up, the rest lost"
untouched $slow && grep -q "memfd:llmtracker-inject" /proc/$slow/maps
check_rc $? "... it runs on with the library loaded, not stopped, untraced"
say slow release
# once CUPTI let go, a later profile records it again in the same copy
run again 1 $slow
published again $slow && grep -q "CUDA kernel profiling of pid $slow started" "$W/again/err"
check_rc $? "... and once CUPTI let go, a later profile records it again (the library it kept)"
app_end slow $slow; arc=$?
sed 's/^/# app: /' "$W/slow.out" | tail -1
check "... once CUPTI lets go, it ends as it would (status $arc)" '[ $arc = 0 ] && grep -q "^generated=" "$W/slow.out"'

# 2. no CUDA call at the stop: CUPTI's finalize has no API exit to run at
app idle; idle=$app
quiet=idle
run idle 2 $idle
quiet=
in_bound
check_rc $? "no CUDA call at the stop: the libraries' stop ends $stop s past -d, the collector exits $over s past it (within 2 s)"
published idle $idle && grep -q "pid $idle: .*CUPTI still attached (no CUDA call to detach at)" "$W/idle/err"
check_rc $? "... its log is published, CUPTI detaching at the process's next call (said)"
say idle calls
app_end idle $idle; arc=$?
check "... it ends as it would (status $arc), CUPTI finalized at its next call" \
	'[ $arc = 0 ] && grep -q "finalized=1" "$W/idle.out"'

# 3. all at once: a slow flush, an idle one and one that answers at once
app slow3 FAKE_CUPTI_HOLD_AT=flush; slow3=$app
app idle3; idle3=$app
app free3; free3=$app
quiet=idle3
run mixed 2 $slow3 $idle3 $free3
quiet=
in_bound
check_rc $? "a slow flush, an idle target and a free one at once: the libraries' stop ends $stop s past -d, the collector exits $over s past it (within 2 s)"
cut_named mixed $slow3 && published mixed $slow3 && published mixed $idle3 && published mixed $free3 &&
	! grep -q "memfd:llmtracker-inject" /proc/$free3/maps
check_rc $? "... every log published, the free one unloaded, the slow one named"
say slow3 release; say idle3 calls
ok=0
for n in slow3:$slow3 idle3:$idle3 free3:$free3; do app_end ${n%%:*} ${n#*:} || ok=1; done
check_rc $ok "... each ends as it would"
tap_done
