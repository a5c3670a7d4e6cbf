#!/usr/bin/env bats
load common
bats_require_minimum_version 1.5.0

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

@test "examples/README.md shows what tp-sweep.sh prints" {
  sweep
  for line in "${lines[@]}"; do
    grep -qxF "    $line" "$ROOT/examples/README.md" || { echo "examples/README.md lacks: $line"; false; }
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

@test "examples/layout-study.mk: make -j2 reports every layout in a CSV, a sweep table and a plot" {
  out="$BATS_TEST_TMPDIR/study"
  run make -s -f "$ROOT/examples/layout-study.mk" -j2 OUT="$out"
  assert_success
  mapfile -t rows < "$out/study.csv"
  assert_equal "${rows[0]}" "layout,tp,pp,dp,step_time_ms,mfu,peak_memory_gb,oom"
  assert_equal "${#rows[@]}" 7  # the header and the 6 default layouts
  # Each row's tp, pp and dp are the ones its name gives.
  declare -A sizes=([tp1_dp8]=1,1,8 [tp2_dp4]=2,1,4 [tp4_dp2]=4,1,2 [tp8_dp1]=8,1,1 [tp2_pp2_dp2]=2,2,2 [tp4_pp2_dp1]=4,2,1)
  for row in "${rows[@]:1}"; do
    IFS=, read -r layout tp pp dp _ <<< "$row"
    assert_equal "$tp,$pp,$dp" "${sizes[$layout]}"
  done
  # The tp2_dp4 row is what syssim run reports for that layout.
  IFS=, read -r _ _ _ _ step mfu peak oom <<< "$(grep '^tp2_dp4,' "$out/study.csv")"
  json=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 2 --sp --dp 4 --micro-batch 1 --global-batch 32 \
    --seq-length 4096 --distributed-optimizer --format json)
  assert_close "$step" "$(jq .step_time_ms <<< "$json")" 1e-12
  assert_close "$mfu" "$(jq .mfu <<< "$json")" 1e-12
  assert_close "$peak" "$(jq .peak_memory_gb <<< "$json")" 1e-12
  # The sweep table's best is the CSV's row of highest MFU; the plot is well-formed SVG.
  best=$(tail -n +2 "$out/study.csv" | sort -t, -k6,6gr | head -1 | cut -d, -f2-4)
  IFS=, read -r tp pp dp <<< "$best"
  assert_equal "$(tail -1 "$out/study.txt" | cut -d' ' -f1-4)" \
    "best: parallelism.tp=$tp parallelism.pp=$pp parallelism.dp=$dp"
  xmllint --noout "$out/study.svg"
  # The sweep table keeps each report's step-time band, LOW-HIGH ms, on all 6 rows.
  run grep -cE ' [0-9.]+-[0-9.]+ *$' "$out/study.txt"
  assert_output 6
  # Everything is up to date: a rerun has nothing to make.
  run make -q -f "$ROOT/examples/layout-study.mk" OUT="$out"
  assert_success
}

@test "examples/parallel-sweep.sh: GNU parallel runs the emitted jobs; the merge is the sweep in one process" {
  out="$BATS_TEST_TMPDIR/parallel"
  run --separate-stderr "$ROOT/examples/parallel-sweep.sh" "$out"
  assert_success
  assert_equal "$stderr" ""
  assert_equal "$(wc -l < "$out/jobs.txt")" 8  # tp 1 2 4 8 by micro-batch 1 2
  assert_equal "$(ls "$out"/jobs/point-*.json | wc -l)" 8
  expected=$(syssim sweep "$MODELS/llama3-8b.yaml" --hardware "$H100" --gpus 8 --sp --distributed-optimizer \
    --global-batch 32 --seq-length 4096 --over parallelism.tp=1,2,4,8 --over training.micro_batch=1,2 --no-cache)
  assert_equal "$output" "$expected"
  xmllint --noout "$out/sweep.svg"
}
