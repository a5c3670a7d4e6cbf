# Shared setup for the Bats tests: the built tools are first on PATH (set by CTest), the
# repository root is SYSSIM_SOURCE_DIR, and each test gets its own scratch folder.
load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load

ROOT="${SYSSIM_SOURCE_DIR:-$(cd "$(dirname "$BATS_TEST_FILENAME")/../.." && pwd)}"
MODELS="$ROOT/configs/models"
HARDWARE="$ROOT/configs/hardware"
H100="$HARDWARE/h100-sxm-80gb.yaml"

# A trace of a model, made once per test file and shared by its tests.
trace_of() {
  local model="$1" file="$BATS_FILE_TMPDIR/$1.graph"
  [ -s "$file" ] || syssim-trace "$MODELS/$model.yaml" -o "$file"
  echo "$file"
}
