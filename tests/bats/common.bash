# Shared setup for the Bats tests: the built tools are first on PATH (set by CTest), the
# repository root is SYSSIM_SOURCE_DIR, and each test gets its own scratch folder.
load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load

ROOT="${SYSSIM_SOURCE_DIR:-$(cd "$(dirname "$BATS_TEST_FILENAME")/../.." && pwd)}"
MODELS="$ROOT/configs/models"
HARDWARE="$ROOT/configs/hardware"
H100="$HARDWARE/h100-sxm-80gb.yaml"

# syssim's caches (traces, sweep points) live in the test file's scratch folder: shared by its
# tests, never by other files or runs.
export SYSSIM_CACHE_DIR="$BATS_FILE_TMPDIR/cache"

# The H100 preset with its calibrated model made an absolute path, so a test can copy and edit it.
h100_copy() {
  sed "s#^calibrated_model: \.\./#calibrated_model: $ROOT/configs/#" "$H100"
}

# The H100 preset without its bundle and efficiencies: the bare roofline.
bare_h100() {
  awk '/^(calibrated_model|calibrated_families):/ { next }
       /^efficiency:/ { skip = 1; next }
       skip && /^  / { next }
       { skip = 0; print }' "$H100"
}

# A trace of a model, made once per test file and shared by its tests.
trace_of() {
  local model="$1" file="$BATS_FILE_TMPDIR/$1.graph"
  [ -s "$file" ] || syssim-trace "$MODELS/$model.yaml" -o "$file"
  echo "$file"
}

# The graph of MODEL sharded with the syssim-shard flags that follow STAGE, then run through
# the stages up to STAGE (shard, cost on the H100, sim, mem: the order of the pipe). Made once
# per test file and set of arguments, each stage from the one before.
stage_of() {
  local model="$1" stage="$2"; shift 2
  local key; key=$(printf '%s_' "$model" "$stage" "$@" | tr -c 'A-Za-z0-9_.=-' '_')
  local file="$BATS_FILE_TMPDIR/$key.graph"
  if [ ! -s "$file" ]; then
    case "$stage" in
      shard) syssim-shard -i "$(trace_of "$model")" "$@" -o "$file" ;;
      cost) syssim-cost --hardware "$H100" -i "$(stage_of "$model" shard "$@")" -o "$file" ;;
      sim) syssim-sim -i "$(stage_of "$model" cost "$@")" -o "$file" ;;
      mem) syssim-mem -i "$(stage_of "$model" sim "$@")" -o "$file" ;;
      *) echo "stage_of: unknown stage '$stage'" >&2; return 1 ;;
    esac || return 1
  fi
  echo "$file"
}

# assert_close ACTUAL EXPECTED [REL]: the numbers agree within REL (default 1e-9) relative.
assert_close() {
  local actual="$1" expected="$2" rel="${3:-1e-9}"
  awk -v a="$actual" -v e="$expected" -v r="$rel" 'BEGIN {
    d = a - e; if (d < 0) d = -d; m = (a < 0 ? -a : a); n = (e < 0 ? -e : e); if (n > m) m = n
    if (a == "" || e == "" || d > r * m) { printf "expected %s, got %s (relative tolerance %s)\n", e, a, r; exit 1 }
  }' || return 1
}

# assert_passes_through STAGE_OUTPUT STAGE_INPUT SECTION TOOL: the stage added SECTION and
# one provenance entry for TOOL, and kept every other section (here a foreign `mine`) as is.
assert_passes_through() {
  local out="$1" in="$2" section="$3" tool="$4"
  jq -e --arg tool "$tool" --arg section "$section" --slurpfile in "$in" '
    (.provenance | length) == ($in[0].provenance | length) + 1
    and .provenance[-1].tool == $tool
    and .provenance[:-1] == $in[0].provenance
    and .mine == {"x": 1}
    and has($section)' "$out" >/dev/null ||
    { echo "provenance, section '$section' or 'mine' wrong in $out"; return 1; }
  diff <(jq -S "del(.provenance, .$section)" "$in") <(jq -S "del(.provenance, .$section)" "$out") ||
    { echo "the stage changed sections other than '$section'"; return 1; }
}
