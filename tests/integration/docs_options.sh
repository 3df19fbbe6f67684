#!/bin/bash
# The docs and the tools agree: every option a --help lists is explained in
# the README (or deploy/README.md for kubectl-prof), and every option the
# READMEs use is one some --help lists (none removed or misspelt).
. "$(dirname "$0")/../lib/tap.sh"
BUILD=${BUILD:-build}
B=$BUILD/bin
need_built "$B/llmtracker" "$B/llmtracker-convert" "$B/kubectl-prof"
tap_tmpdir T docs-options

{
	"$B/llmtracker" --help
	"$B/llmtracker" generateCommand --help
	"$B/llmtracker" generateProbe --help
	"$B/llmtracker-convert" --help
	for c in batch pack summary dump; do "$B/llmtracker-convert" $c --help; done
} > "$T/help.lt" 2>&1
{
	"$B/kubectl-prof" --help
	"$B/kubectl-prof" deploy --help
	"$B/kubectl-prof" delete --help
} > "$T/help.kp" 2>&1
# long options (--name) as written; short ones are checked through their long form
opts() { grep -oE -- '(^|[^a-zA-Z0-9-])--[a-z][a-z0-9-]+' "$1" | sed 's/^[^-]*//' | sort -u; }
opts "$T/help.lt" > "$T/o.lt"
opts "$T/help.kp" > "$T/o.kp"
opts README.md > "$T/o.readme"
opts deploy/README.md > "$T/o.deploy"
check "the --help texts list options ($(wc -l < "$T/o.lt") + $(wc -l < "$T/o.kp"))" \
	'[ "$(wc -l < "$T/o.lt")" -gt 20 ] && [ "$(wc -l < "$T/o.kp")" -gt 10 ]'
missing=$(comm -23 "$T/o.lt" "$T/o.readme" | tr '\n' ' ')
check "every llmtracker/llmtracker-convert option is in the README (missing: ${missing:-none})" \
	'[ -z "$missing" ]'
missing=$(comm -23 "$T/o.kp" <(sort -u "$T/o.readme" "$T/o.deploy") | tr '\n' ' ')
check "every kubectl-prof option is in the READMEs (missing: ${missing:-none})" '[ -z "$missing" ]'
# Options of other tools the READMEs name (perf, py-spy, CPython's configure,
# the example script's) are not ours: the list below names them.
cat > "$T/others" <<'EOF'
--call-graph
--native
--with-dtrace
--steps
--data
EOF
unknown=$(comm -23 <(sort -u "$T/o.readme" "$T/o.deploy") <(sort -u "$T/o.lt" "$T/o.kp" "$T/others") | tr '\n' ' ')
check "every option the READMEs use exists (unknown: ${unknown:-none})" '[ -z "$unknown" ]'
tap_done
