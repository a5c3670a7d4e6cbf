#!/usr/bin/env bats
# Golden tests: each stage of a small fixed pipeline, run on the previous stage's golden
# output, must print exactly the bytes of its golden file (tests/golden/README.md). They
# guard the output format against unintended changes, not the numbers' correctness.
load common

GOLDEN=tests/golden

setup() {
  # Relative paths, as in tests/golden/regenerate.sh: the provenance records them.
  cd "$ROOT"
}

# assert_golden FILE COMMAND...: COMMAND prints the bytes of $GOLDEN/FILE. On a difference,
# shows it line by line (JSON pretty-printed) and how to regenerate.
assert_golden() {
  local file="$1"; shift
  "$@" > "$BATS_TEST_TMPDIR/$file" || { echo "'$*' failed"; return 1; }
  if ! cmp -s "$GOLDEN/$file" "$BATS_TEST_TMPDIR/$file"; then
    echo "$file differs from the golden file (< golden, > now):"
    local lines
    case "$file" in
      *.txt) lines=$(diff "$GOLDEN/$file" "$BATS_TEST_TMPDIR/$file" || true) ;;
      *) lines=$(diff <(jq -S . "$GOLDEN/$file") <(jq -S . "$BATS_TEST_TMPDIR/$file") || true)
         [ -n "$lines" ] || lines="(the same JSON values: the bytes differ in number formatting, key order or spacing)
$(diff <(tr ',' '\n' < "$GOLDEN/$file") <(tr ',' '\n' < "$BATS_TEST_TMPDIR/$file") || true)" ;;
    esac
    head -40 <<< "$lines"
    echo "if the change is intended, run tests/golden/regenerate.sh and review the diff (tests/golden/README.md)"
    return 1
  fi
}

@test "golden: syssim-trace of tests/golden/tiny.yaml" {
  assert_golden tiny.trace.graph syssim-trace "$GOLDEN/tiny.yaml"
}

@test "golden: syssim-shard --tp 2 --sp --dp 2 --global-batch 4" {
  assert_golden tiny.shard.graph syssim-shard --tp 2 --sp --dp 2 --global-batch 4 < "$GOLDEN/tiny.trace.graph"
}

@test "golden: syssim-cost on the H100" {
  assert_golden tiny.cost.graph syssim-cost --hardware configs/hardware/h100-sxm-80gb.yaml < "$GOLDEN/tiny.shard.graph"
}

@test "golden: syssim-sim" {
  assert_golden tiny.sim.graph syssim-sim < "$GOLDEN/tiny.cost.graph"
}

@test "golden: syssim-mem" {
  assert_golden tiny.mem.graph syssim-mem --replay-allocator < "$GOLDEN/tiny.sim.graph"
}

@test "golden: syssim-report, text" {
  assert_golden tiny.report.txt syssim-report < "$GOLDEN/tiny.mem.graph"
}

@test "golden: syssim-report --format json" {
  assert_golden tiny.report.json syssim-report --format json < "$GOLDEN/tiny.mem.graph"
}

@test "golden: the whole pipe from the model prints the golden report" {
  pipe() {
    syssim-trace "$GOLDEN/tiny.yaml" | syssim-shard --tp 2 --sp --dp 2 --global-batch 4 \
      | syssim-cost --hardware configs/hardware/h100-sxm-80gb.yaml | syssim-sim | syssim-mem --replay-allocator | syssim-report "$@"
  }
  assert_golden tiny.report.txt pipe
  assert_golden tiny.report.json pipe --format json
}

@test "golden: regenerate.sh reproduces the committed files" {
  run "$GOLDEN/regenerate.sh" "$BATS_TEST_TMPDIR/regen"
  assert_success
  for file in "$GOLDEN"/tiny.*; do
    [ "$file" = "$GOLDEN/tiny.yaml" ] && continue
    cmp "$file" "$BATS_TEST_TMPDIR/regen/$(basename "$file")"
  done
  [ "$(ls "$BATS_TEST_TMPDIR/regen" | wc -l)" = 7 ]
}

@test "golden: the tiny model is the one README.md describes" {
  run jq -c '.model | [.num_layers, .hidden_size, .num_attention_heads, .num_query_groups, .ffn_hidden_size,
    .vocab_size, .seq_length]' "$GOLDEN/tiny.trace.graph"
  assert_output '[2,256,4,2,512,1000,128]'
}
