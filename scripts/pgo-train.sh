#!/bin/sh
# pgo-train.sh CONVERTER GENLOG DIR: the training run of the converter's
# profile-guided build (Makefile, PGO). CONVERTER is instrumented for
# profiling; it converts logs that GENLOG (tests/progs/conv_genlog) writes,
# mixed like a training job's, to every output: a TensorBoard run
# directory, trace JSON plain and gzip'd, two logs merged (one with the
# uprobe/CUPTI duplicates that are paired), with small sort runs so that
# spilling and merging are exercised as on long logs. DIR is scratch space,
# removed at the end.
set -eu
conv=$1 gen=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir/gz"
"$gen" "$dir/a.log" -n 1000000 >/dev/null
"$gen" "$dir/b.log" -n 100000 --uprobe-cuda --host node-b --pid 5000 >/dev/null
"$conv" -q -i "$dir/a.log" --logdir "$dir/tb" --run a
"$conv" -q -i "$dir/a.log" -o "$dir/a.json"
"$conv" -q -i "$dir/a.log" -o "$dir/gz/a.json.gz"
LLMT_CONV_RUN_MB=1 "$conv" -q -i "$dir/a.log" -i "$dir/b.log" --logdir "$dir/tb" --run ab
rm -rf "$dir"
