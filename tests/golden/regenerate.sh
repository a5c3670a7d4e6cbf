#!/usr/bin/env bash
# Rewrites the golden files of tests/golden/ with the built tools. Review the diff before
# committing it (README.md). Usage, from anywhere:
#
#   tests/golden/regenerate.sh [OUT_DIR]
#
# OUT_DIR defaults to tests/golden itself; tests/bats/golden.bats runs the script into a
# scratch folder to check that the script and the committed files agree. The tools come from
# PATH, or from build/bin when they are not on it.
#
# The provenance of each graph records the command line, so the commands below must not
# change without regenerating: the model is named by its path relative to the repository
# root, and every later stage reads standard input (no file names in the provenance).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "${1:-$root/tests/golden}"
out=$(cd "${1:-$root/tests/golden}" && pwd)
command -v syssim-trace > /dev/null || PATH="$root/build/bin:$PATH"
cd "$root"

# stage OUTPUT INPUT COMMAND...: COMMAND < INPUT > OUTPUT in $out, through a temporary file so
# that a failing stage stops the script and leaves the previous golden in place.
stage() {
  local output="$out/$1" input="$2"; shift 2
  "$@" < "$input" > "$output.tmp" || { rm -f "$output.tmp"; echo "regenerate.sh: '$*' failed" >&2; exit 1; }
  mv "$output.tmp" "$output"
}

stage tiny.trace.graph /dev/null syssim-trace tests/golden/tiny.yaml
stage tiny.shard.graph "$out/tiny.trace.graph" syssim-shard --tp 2 --sp --dp 2 --global-batch 4
stage tiny.cost.graph "$out/tiny.shard.graph" syssim-cost --hardware configs/hardware/h100-sxm-80gb.yaml
stage tiny.sim.graph "$out/tiny.cost.graph" syssim-sim
stage tiny.mem.graph "$out/tiny.sim.graph" syssim-mem --replay-allocator
stage tiny.report.txt "$out/tiny.mem.graph" syssim-report
stage tiny.report.json "$out/tiny.mem.graph" syssim-report --format json
