#!/bin/bash
# Publishing on an object-store mount, as two nodes would mount one bucket
# (s3fs over a local S3 server: store.inc). Through mount A a profile with
# the Python hook is published under its final names (the collector's log
# and the library's); through mount B it converts to a TensorBoard run and a
# trace published there; nothing is left under a temporary name, nothing
# replaces a file already there, and a log that could not be published is
# never reported as written (a full disk).
. "$(dirname "$0")/collector_common.inc"
. "$(dirname "$0")/store.inc"
need_bpf
need_store
CONV=$BUILD/bin/llmtracker-convert
PYENV=${PYENV_ROOT:-/root/.pyenv}/versions
PY=$(ls "$PYENV"/3.11*/bin/python3.11 2>/dev/null | head -1)
[ -x "$PY" ] || PY=python3
st_server_start
st_mount A
st_mount B
mkdir -p "$A/run"

# A busy Python target that counts its own work: "N" lines of iterations.
cat > "$T/busy.py" <<'EOF'
import sys, time
def work():
    return sum(range(200))
n = 0
end = time.time() + float(sys.argv[1])
while time.time() < end:
    work()
    n += 1
print("iterations", n)
EOF
"$PY" "$T/busy.py" 300 > "$T/busy.out" & tp=$!
tap_bg $tp
wait_until 10 "grep -q python /proc/$tp/comm 2>/dev/null || [ -n \"\$(ls /proc/$tp/map_files 2>/dev/null)\" ]"

"$LT" profile -p "$tp" -t cpu,syscall,python -d 3 -o "$A/run/node.evlog" 2> "$T/p.err"
rc=$?
sed 's/^/# /' "$T/p.err" | tail -8
check "profile to mount A exits 0 (rc $rc)" test "$rc" -eq 0
check "it says it wrote the log" grep -q "wrote $A/run/node.evlog" "$T/p.err"
check "no 'cannot publish' line" '! grep -q "cannot publish" "$T/p.err"'
wait_until 20 "[ -s '$B/run/node.evlog' ]"
check "mount B sees the log under its final name, same size" \
	'[ "$(stat -c %s "$B/run/node.evlog")" = "$(stat -c %s "$A/run/node.evlog")" ]'
check "mount B sees the library's Python log under its final name" \
	'ls "$B/run" | grep -q "^llmtracker-python\..*\.evlog$"'
check "no partial or temporary name is left in the bucket" \
	'! st_objects | grep -E "partial|\.tmp|XXXXXX|/\.[^/]*$"'

# Convert through mount B: a TensorBoard run and a trace, published there.
mkdir -p "$B/out"
"$CONV" "$B/run/node.evlog" --logdir "$B/tb" -o "$B/out/node.json.gz" > "$T/c.out" 2> "$T/c.err"
rc=$?
sed 's/^/# /' "$T/c.err" | tail -4
check "convert through mount B exits 0 (rc $rc)" test "$rc" -eq 0
run=$(ls "$B/tb/plugins/profile" 2>/dev/null | head -1)
check "the run is published: xplane and trace under their names" \
	'[ -s "$B/tb/plugins/profile/$run/$(hostname).xplane.pb" ] && [ -s "$B/tb/plugins/profile/$run/$(hostname).trace.json.gz" ]'
check "mount A sees the run" '[ -s "$A/tb/plugins/profile/$run/$(hostname).xplane.pb" ]'
check "the trace read back through mount A parses, with Python calls" \
	'zcat "$A/tb/plugins/profile/$run/$(hostname).trace.json.gz" | python3 -c "
import json, sys
d = json.load(sys.stdin)
ev = d[\"traceEvents\"] if isinstance(d, dict) else d
sys.exit(0 if any(\"work\" in str(e.get(\"name\", \"\")) for e in ev) else 1)"'
check "no temporary name is left after the conversion" \
	'! st_objects | grep -E "partial|\.tmp|XXXXXX|/\.[^/]*$"'

# Never over another writer's file: a profile to a name that exists (made
# through the other mount) is refused, and the file stays as it was.
echo "someone else's" > "$B/run/taken.evlog"
wait_until 20 "[ -e '$A/run/taken.evlog' ]"
"$LT" profile -p "$tp" -t syscall -d 1 -o "$A/run/taken.evlog" 2> "$T/t.err"
rc=$?
check "a profile to an existing name fails (rc $rc)" test "$rc" -ne 0
check "...and says so before profiling or at publishing" grep -qi "exist" "$T/t.err"
check "...leaving the other writer's file as it was" \
	'[ "$(cat "$B/run/taken.evlog")" = "someone else'"'"'s" ]'
check "...and no 'wrote' line" '! grep -q "^  wrote" "$T/t.err"'
"$CONV" "$B/run/node.evlog" --logdir "$B/tb" --run "$run" > /dev/null 2> "$T/c2.err"
check "a conversion into an existing run is refused before converting" '[ $? -ne 0 ] && grep -q "already holds.*nothing converted" "$T/c2.err"'

# A full file system: the log cannot be published; that is said once, and
# nothing claims it was written.
mkdir -p "$T/small"
if mount -t tmpfs -o size=64k tmpfs "$T/small" 2>/dev/null; then
	tap_at_exit "umount '$T/small'"
	# full but for two pages: the log's first chunks fit, the rest do not
	dd if=/dev/zero of="$T/small/page" bs=4k count=2 2>/dev/null
	dd if=/dev/zero of="$T/small/fill" bs=4k 2>/dev/null
	rm -f "$T/small/page"
	"$LT" profile -p "$tp" -t cpu,syscall,python -d 2 -o "$T/small/full.evlog" 2> "$T/f.err"
	rc=$?
	sed 's/^/# /' "$T/f.err" | grep -iE "publish|wrote|space|partial" | head -4
	check "a full disk: the profile fails (rc $rc)" test "$rc" -ne 0
	check "...says why" grep -qiE "space|cannot (publish|write)" "$T/f.err"
	check "...and never 'wrote'" '! grep -q "^  wrote" "$T/f.err"'
else
	nok "cannot mount a small tmpfs for the full-disk case"
fi
kill "$tp" 2>/dev/null
tap_done
