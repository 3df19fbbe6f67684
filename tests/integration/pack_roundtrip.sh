#!/bin/bash
# pack: a run as one .tar.zst; the archive lists exactly the run's files under
# plugins/profile/<run>/, extracting it gives identical files; it is never
# published half-written nor over an existing file.
set -u
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
conv=$BUILD/bin/llmtracker-convert
gen=$BUILD/tests/progs/xplane_genlog
need_built "$conv" "$gen"
tap_tmpdir dir pack-rt

"$gen" "$dir/a.log" host-a 3 && "$gen" "$dir/b.log" host-b 2
"$conv" -i "$dir/a.log" -i "$dir/b.log" --logdir "$dir/logs" --run r1 >/dev/null 2>&1
run=$dir/logs/plugins/profile/r1
# Things that must not be packed: a hidden temporary and a planted symlink.
echo junk >"$run/.host-c.xplane.pb.1.tmp"; ln -s /etc/passwd "$run/passwd.xplane.pb"
desc="pack writes the archive"
t "$conv" pack --logdir "$dir/logs" --run r1 -o "$dir/r1.tar.zst"
desc="the archive lists exactly the run's published files"
(cd "$dir/logs" && find plugins/profile/r1 -maxdepth 1 -type f ! -name '.*' | sort) >"$dir/want"
t bash -c "tar --zstd -tf '$dir/r1.tar.zst' | sort | diff '$dir/want' - && [ \$(wc -l <'$dir/want') -ge 2 ]"
desc="extracted files are identical"
mkdir "$dir/x"
t bash -c "tar --zstd -xf '$dir/r1.tar.zst' -C '$dir/x' && for f in \$(cat '$dir/want'); do cmp \"$dir/logs/\$f\" \"$dir/x/\$f\" || exit 1; done"
desc="an existing archive is not replaced"
before=$(md5sum <"$dir/r1.tar.zst")
t bash -c "! '$conv' pack --logdir '$dir/logs' --run r1 -o '$dir/r1.tar.zst' && [ \"\$(md5sum <'$dir/r1.tar.zst')\" = '$before' ]"
desc="--overwrite replaces it"
t "$conv" pack --logdir "$dir/logs" --run r1 -o "$dir/r1.tar.zst" --overwrite
desc="a missing run is a clear error and writes nothing"
t bash -c "! '$conv' pack --logdir '$dir/logs' --run nope -o '$dir/nope.tar.zst' 2>'$dir/err' && grep -q nope '$dir/err' && [ ! -e '$dir/nope.tar.zst' ]"
desc="no temporary file is left beside the archive"
t test -z "$(ls -A "$dir" | grep '^\.')"
tap_done
