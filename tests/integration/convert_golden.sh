#!/bin/bash
# The converter's outputs on a fixed corpus, byte for byte: three logs the
# real writer makes deterministically (tests/progs/conv_genlog: mixed host
# and GPU events with odd names and CUDA uprobes; the same without step
# markers, overlapping, six threads; tests/progs/gpu_steps_genlog: a CUDA
# graph loop), converted to trace JSON, to a TensorBoard run (XPlane, trace
# JSON, folded stacks) and to the summary. A refactoring must leave every
# hash as tests/golden/convert.sha256 has it; a change that means to alter
# an output regenerates the file:
#   GOLDEN_UPDATE=1 TEST_FILTER='^convert_golden$' ./tests/run.sh
# and says why in its commit.
set -u
. "$(dirname "$0")/../lib/tap.sh"
unset COLUMNS # the summary fits the terminal it is given: none here
BUILD=${BUILD:-build}
B=$(realpath -m "$BUILD")
SHA=$PWD/tests/golden/convert.sha256
need_built "$B/bin/llmtracker-convert" "$B/tests/progs/conv_genlog" "$B/tests/progs/gpu_steps_genlog"
tap_tmpdir W conv-golden
cd "$W" || exit 1
"$B/tests/progs/conv_genlog" a.evlog -n 200000 --odd-names --uprobe-cuda >/dev/null &&
	"$B/tests/progs/conv_genlog" b.evlog -n 50000 --no-markers --overlap --threads 6 >/dev/null &&
	"$B/tests/progs/gpu_steps_genlog" c.evlog c.truth graph >/dev/null ||
	bail "the corpus could not be generated"
mkdir out
for f in a b c; do
	"$B/bin/llmtracker-convert" -q -i $f.evlog -o out/$f.json &&
		"$B/bin/llmtracker-convert" -q -i $f.evlog --logdir out/tb$f --run r &&
		"$B/bin/llmtracker-convert" summary $f.evlog >out/$f.summary 2>&1 ||
		bail "converting $f.evlog failed"
done
# gzip's own bytes are not ours: a .gz is hashed by its content
(cd out && find . -type f | LC_ALL=C sort | while read -r x; do
	case $x in
	*.gz) echo "$(zcat "$x" | sha256sum | cut -d' ' -f1)  $x";;
	*) echo "$(sha256sum <"$x" | cut -d' ' -f1)  $x";;
	esac
done) >got.sha256
if [ "${GOLDEN_UPDATE:-0}" = 1 ]; then
	cp got.sha256 "$SHA"
	ok "$SHA written ($(wc -l <got.sha256) outputs)"
	tap_done
fi
diff "$SHA" got.sha256 | sed 's/^/# /'
check "$(wc -l <"$SHA") outputs on the fixed corpus byte-identical to tests/golden/convert.sha256" cmp -s "$SHA" got.sha256
tap_done
