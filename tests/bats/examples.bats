#!/usr/bin/env bats
load common

# The default sweep runs once per file (about 5 s); its tests read the CSV.
setup_file() {
  "$ROOT/examples/tp-sweep.sh" > "$BATS_FILE_TMPDIR/sweep.csv" 2> "$BATS_FILE_TMPDIR/sweep.err"
}

sweep() {
  mapfile -t lines < "$BATS_FILE_TMPDIR/sweep.csv"
  [ ! -s "$BATS_FILE_TMPDIR/sweep.err" ] || { cat "$BATS_FILE_TMPDIR/sweep.err"; false; }
}

@test "examples/tp-sweep.sh prints a header and one CSV row per tp in 1 2 4 8 (dp = 8 / tp)" {
  sweep
  assert_equal "${#lines[@]}" 5
  assert_equal "${lines[0]}" "tp,dp,step_time_ms,mfu,peak_memory_gb"
  for i in 1 2 3 4; do
    tp=$((1 << (i - 1)))
    [[ "${lines[$i]}" =~ ^$tp,$((8 / tp)),[0-9.e+-]+,[0-9.e+-]+,[0-9.e+-]+$ ]] || { echo "row $i: ${lines[$i]}"; false; }
    IFS=, read -r _ _ step mfu peak <<< "${lines[$i]}"
    awk -v s="$step" -v m="$mfu" -v p="$peak" 'BEGIN { exit !(s > 0 && m > 0 && p > 0) }'
  done
}

@test "a tp-sweep.sh row is what syssim run reports for that point" {
  sweep
  IFS=, read -r tp dp step mfu peak <<< "${lines[2]}"
  [ "$tp,$dp" = "2,4" ]
  json=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 2 --sp --dp 4 --micro-batch 1 --global-batch 128 \
    --distributed-optimizer --format json)
  assert_close "$step" "$(jq .step_time_ms <<< "$json")" 1e-12
  assert_close "$mfu" "$(jq .mfu <<< "$json")" 1e-12
  assert_close "$peak" "$(jq .peak_memory_gb <<< "$json")" 1e-12
}

@test "tp-sweep.sh fails, with the tool's message, when a stage fails" {
  run env MODEL="$BATS_TEST_TMPDIR/nope.yaml" "$ROOT/examples/tp-sweep.sh"
  assert_failure
  assert_output "syssim-trace: error: $BATS_TEST_TMPDIR/nope.yaml: cannot open file"
}
