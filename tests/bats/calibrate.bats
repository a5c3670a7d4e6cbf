#!/usr/bin/env bats
# syssim calibrate: fitting the calibrated cost estimator (docs/calibration.md).
load common
bats_require_minimum_version 1.5.0

GH200_DATA="$ROOT/tests/data/calibration/gh200-fp16"
B200_DATA="$ROOT/tests/data/calibration/b200-xla"

# Every 40th row of the committed GH200 data (about 4,200 GEMMs, 330 attentions, 1,640 norms),
# made once per test file.
small_data() {
  local dir="$BATS_FILE_TMPDIR/small"
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    for f in gemm attention rmsnorm; do awk 'NR == 1 || NR % 40 == 0' "$GH200_DATA/$f.csv" >"$dir/$f.csv"; done
  fi
  echo "$dir"
}

@test "calibrate fits each family, prints one line per family and writes the bundle" {
  run --separate-stderr syssim calibrate --data "$(small_data)" --dtype fp16 --hardware "$H100" \
    -o "$BATS_TEST_TMPDIR/bundle"
  assert_success
  assert_equal "$stderr" ""
  assert_line --index 0 --regexp "^family +dtype +fitted +held_out +skipped +overhead_us +median_% +p95_%$"
  assert_line --index 1 --regexp "^gemm +fp16 +[0-9]+ +[0-9]+ +0 "
  assert_line --index 2 --regexp "^attention +fp16 +[0-9]+ +[0-9]+ +[0-9]+ "
  assert_line --index 3 --regexp "^norm +fp16 +[0-9]+ +[0-9]+ +0 "
  [ "${#lines[@]}" -eq 4 ]
  run ls "$BATS_TEST_TMPDIR/bundle"
  assert_output "$(printf 'attention.ubj\ngemm.ubj\nmanifest.json\nnorm.ubj')"

  local manifest="$BATS_TEST_TMPDIR/bundle/manifest.json"
  jq -e '.schema == "syssim-calibration" and .schema_version == "1"
    and .hardware == {"name": "h100-sxm-80gb", "peak_tflops_mm": 989, "peak_tflops_mm_fp8": 1979,
                      "peak_tflops_mm_fp4": null, "peak_tflops_math": 67, "peak_memory_bandwidth_GBps": 3350}
    and (.families | keys) == ["attention", "gemm", "norm"]' "$manifest" >/dev/null
  jq -e '.families[] | has("model_file", "source_file", "features", "dtype_measured", "dtypes_covered",
    "dtypes_transferred", "directions", "rows_fitted", "rows_held_out", "rows_skipped", "held_out_median_error_pct",
    "held_out_p95_error_pct", "measurement_overhead_us", "xgboost_params", "boosting_rounds")' "$manifest" >/dev/null
  jq -e '.families.gemm.dtypes_covered == ["bf16", "fp16", "fp8"] and .families.gemm.source_file == "gemm.csv"
    and .families.attention.directions == ["forward"]' "$manifest" >/dev/null
  # Rows: every 40th of 169,838 GEMMs, all measured; 13,098 attentions with 1,404 at -1.
  local gemm_rows attention_skipped
  gemm_rows=$(($(wc -l <"$(small_data)/gemm.csv") - 1))
  attention_skipped=$(awk -F, '$6 == -1' "$(small_data)/attention.csv" | wc -l)
  jq -e --argjson rows "$gemm_rows" --argjson skipped "$attention_skipped" '
    .families.gemm.rows_fitted + .families.gemm.rows_held_out == $rows
    and .families.attention.rows_skipped == $skipped and $skipped > 0' "$manifest" >/dev/null
  # The GEMM model is within 10% of the held-out measurements for half of them.
  jq -e '.families.gemm.held_out_median_error_pct < 10' "$manifest" >/dev/null
}

@test "repeated trials of a shape are fitted or held out together" {
  # Every GEMM row twice: each second trial takes its shape's first row's draw, so twice the
  # rows are fitted and twice held out of the file with each row once.
  mkdir -p "$BATS_TEST_TMPDIR/once" "$BATS_TEST_TMPDIR/twice"
  cp "$(small_data)/gemm.csv" "$BATS_TEST_TMPDIR/once/gemm.csv"
  { cat "$(small_data)/gemm.csv"; tail -n +2 "$(small_data)/gemm.csv"; } >"$BATS_TEST_TMPDIR/twice/gemm.csv"
  for data in once twice; do
    syssim calibrate --data "$BATS_TEST_TMPDIR/$data" --dtype fp16 --hardware "$H100" -o "$BATS_TEST_TMPDIR/$data.bundle" >/dev/null
  done
  local once="$BATS_TEST_TMPDIR/once.bundle/manifest.json" twice="$BATS_TEST_TMPDIR/twice.bundle/manifest.json"
  assert_equal "$(jq '.families.gemm.rows_fitted * 2' "$once")" "$(jq '.families.gemm.rows_fitted' "$twice")"
  assert_equal "$(jq '.families.gemm.rows_held_out * 2' "$once")" "$(jq '.families.gemm.rows_held_out' "$twice")"
}

@test "calibrate writes the same bytes twice and replaces its own bundle" {
  syssim calibrate --data "$(small_data)" --dtype fp16 --hardware "$H100" -o "$BATS_TEST_TMPDIR/a" >/dev/null
  syssim calibrate --data "$(small_data)" --dtype fp16 --hardware "$H100" -o "$BATS_TEST_TMPDIR/b" >/dev/null
  diff -r "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  syssim calibrate --data "$(small_data)" --dtype fp16 --hardware "$H100" -o "$BATS_TEST_TMPDIR/a" >/dev/null
  diff -r "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  [ "$(ls "$BATS_TEST_TMPDIR")" = "$(printf 'a\nb')" ]
  # A calibration that fails leaves the old bundle as it was, and nothing beside it.
  mkdir "$BATS_FILE_TMPDIR/bad-rows"
  printf 'M,N,K,t_measured_ms\n64,64,abc,0.02\n' >"$BATS_FILE_TMPDIR/bad-rows/gemm.csv"
  run syssim calibrate --data "$BATS_FILE_TMPDIR/bad-rows" --dtype fp16 --hardware "$H100" -o "$BATS_TEST_TMPDIR/a"
  assert_failure 1
  diff -r "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
  [ "$(ls "$BATS_TEST_TMPDIR")" = "$(printf 'a\nb')" ]
}

@test "calibrate names the file, line and column of a bad row, and a missing folder" {
  run syssim calibrate --data "$BATS_TEST_TMPDIR/nope" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out"
  assert_failure 1
  assert_output "syssim: error: $BATS_TEST_TMPDIR/nope: no such folder"

  mkdir "$BATS_TEST_TMPDIR/bad"
  printf 'M,N,K,t_measured_ms\n64,64,64,0.02\n64,64,abc,0.02\n' >"$BATS_TEST_TMPDIR/bad/gemm.csv"
  run syssim calibrate --data "$BATS_TEST_TMPDIR/bad" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out"
  assert_failure 1
  assert_output "syssim: error: $BATS_TEST_TMPDIR/bad/gemm.csv:3: column K: expected a positive whole number, got \"abc\""
  [ ! -e "$BATS_TEST_TMPDIR/out" ]

  rm "$BATS_TEST_TMPDIR/bad/gemm.csv"
  touch "$BATS_TEST_TMPDIR/bad/silu.csv"
  run syssim calibrate --data "$BATS_TEST_TMPDIR/bad" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out"
  assert_failure 1
  assert_output "syssim: error: $BATS_TEST_TMPDIR/bad: none of the calibration files gemm.csv,attention.csv,rmsnorm.csv"
}

@test "calibrate refuses a bad family data or overhead assignment" {
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" --family-data attention
  assert_failure 2
  assert_output "syssim: error: --family-data=attention: expected FAMILY=DIR"
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" --family-data softmax=/tmp
  assert_failure 2
  assert_output 'syssim: error: --family-data family "softmax": expected gemm, attention or norm'
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" \
    --family-overhead-us attention=x
  assert_failure 2
  assert_output "syssim: error: --family-overhead-us=attention=x: expected a number of us >= 0"
  # A family's folder without its file would leave the family out of the bundle unsaid.
  mkdir -p "$BATS_TEST_TMPDIR/no-attention"
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" \
    --family-data attention="$BATS_TEST_TMPDIR/no-attention"
  assert_failure 1
  assert_output "syssim: error: $BATS_TEST_TMPDIR/no-attention: --family-data attention names a folder holding none of attention.csv"
  [ ! -e "$BATS_TEST_TMPDIR/out" ]
}

@test "a bundle of GEMMs alone given to syssim run prices the GEMMs, is named in the report, and leaves attention to the efficiencies" {
  mkdir -p "$BATS_TEST_TMPDIR/gemm-only"
  cp "$(small_data)/gemm.csv" "$BATS_TEST_TMPDIR/gemm-only/"
  syssim calibrate --data "$BATS_TEST_TMPDIR/gemm-only" --dtype fp16 --hardware "$H100" -o "$BATS_TEST_TMPDIR/bundle" >/dev/null
  run syssim run llama3-8b --hardware "$H100" --calibrated "$BATS_TEST_TMPDIR/bundle" --format json
  assert_success
  jq -e --arg bundle "$BATS_TEST_TMPDIR/bundle" '.estimator == "calibrated gemm from \($bundle), the rest the roofline over the hardware'"'"'s efficiencies"
    and .hardware.calibrated_model == $bundle' <<< "$output"
}

@test "calibrate refuses a bad dtype and holdout, and will not replace a folder that is not a bundle" {
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" --dtype int8
  assert_failure 2
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" --holdout 0
  assert_failure 2
  assert_output "syssim: error: --holdout: expected a share between 0 and 1, both excluded, got '0'"
  # A negative seed is bad usage (it wrapped round to 2^64 - 1 and failed inside XGBoost).
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$BATS_TEST_TMPDIR/out" --seed -1
  assert_failure 2
  assert_output "syssim: error: --seed: must be 0 or more, got '-1'"
  run syssim calibrate --data "$(small_data)" --hardware "$H100" -o "$ROOT/docs"
  assert_failure 1
  assert_output "syssim: error: $ROOT/docs: exists and is not a calibration bundle; not replacing it"
}

# About 15 s on two cores per bundle.
@test "the shipped bundles are reproduced byte for byte from the committed GH200 data, H200 attention and H200 FP8 speed-ups" {
  for hardware in h100-sxm-80gb gh200; do
    syssim calibrate --data "$GH200_DATA" --family-data attention="$ROOT/tests/data/calibration/h200" \
      --family-overhead-us attention=0 --dtype fp16 --fp8-speedup-data "$ROOT/tests/data/calibration/h200" \
      --hardware "$HARDWARE/$hardware.yaml" -o "$BATS_TEST_TMPDIR/$hardware" >/dev/null
    diff -r "$ROOT/configs/calibration/$hardware" "$BATS_TEST_TMPDIR/$hardware"
  done
}

@test "the Blackwell bundles are reproduced byte for byte from the committed B200 data" {
  for hardware in b200 b300 gb200-nvl72 gb300-nvl72; do
    syssim calibrate --data "$B200_DATA" --dtype bf16 --overhead-us 0 --hardware "$HARDWARE/$hardware.yaml" \
      -o "$BATS_TEST_TMPDIR/$hardware" >/dev/null
    diff -r "$ROOT/configs/calibration/$hardware" "$BATS_TEST_TMPDIR/$hardware"
  done
}

@test "the H200 bundle is reproduced byte for byte from the committed H200 data" {
  syssim calibrate --data "$ROOT/tests/data/calibration/h200" --dtype bf16 --overhead-us 0 \
    --hardware "$HARDWARE/h200-sxm.yaml" -o "$BATS_TEST_TMPDIR/h200-sxm" >/dev/null
  diff -r "$ROOT/configs/calibration/h200-sxm" "$BATS_TEST_TMPDIR/h200-sxm"
}

@test "the MI300X bundle is reproduced byte for byte from the committed MI300X data" {
  syssim calibrate --data "$ROOT/tests/data/calibration/mi300x-xla" --dtype bf16 --overhead-us 0 \
    --hardware "$HARDWARE/mi300x.yaml" -o "$BATS_TEST_TMPDIR/mi300x" >/dev/null
  diff -r "$ROOT/configs/calibration/mi300x" "$BATS_TEST_TMPDIR/mi300x"
}

@test "calibrate fits FP8 measurements beside the 16-bit ones into one GEMM model" {
  # No FP8 file: FP8 GEMMs are read at the 16-bit residual (transferred).
  local bf16_only="$BATS_TEST_TMPDIR/bf16"
  mkdir -p "$bf16_only" && cp "$B200_DATA/gemm.csv" "$bf16_only/"
  syssim calibrate --data "$bf16_only" --hardware "$HARDWARE/b200.yaml" -o "$BATS_TEST_TMPDIR/a" >/dev/null
  jq -e '.families.gemm.dtypes_transferred == {"fp8": "bf16"}' "$BATS_TEST_TMPDIR/a/manifest.json" >/dev/null
  # With gemm_fp8.csv: FP8 measured, nothing transferred, both files' rows fitted, no overhead taken off.
  run --separate-stderr syssim calibrate --data "$B200_DATA" --overhead-us 0 --hardware "$HARDWARE/b200.yaml" \
    -o "$BATS_TEST_TMPDIR/b"
  assert_success
  assert_line --regexp "^gemm +bf16\+fp8 +[0-9]+ +[0-9]+ +0 +0\.00 "
  jq -e '.families.gemm | .dtypes_covered == ["bf16", "fp16", "fp8"] and .dtypes_transferred == {}
         and .fp8_source_file == "gemm_fp8.csv" and .rows_fitted + .rows_held_out == 250' \
    "$BATS_TEST_TMPDIR/b/manifest.json" >/dev/null
  # Hardware without an FP8 peak cannot take FP8 measurements.
  run syssim calibrate --data "$B200_DATA" --hardware "$HARDWARE/a100-sxm-80gb.yaml" -o "$BATS_TEST_TMPDIR/c"
  assert_failure 1
  assert_output "syssim: error: $B200_DATA/gemm_fp8.csv: FP8 measurements, but hardware a100-sxm-80gb has no peak_tflops_mm_fp8 to take them against"
}

@test "a damaged bundle file is one line naming it (XGBoost's message and stack trace were 13 lines)" {
  # tests/data/truncated-bundle: the H200 bundle's model files cut to their first 1000 bytes.
  # XGBoost's own words differ between runs (a failed check, or a failed allocation).
  run --separate-stderr syssim run --hardware "$ROOT/tests/data/truncated-bundle/hardware.yaml"
  assert_failure 1
  [ "$(wc -l <<< "$stderr")" -eq 1 ]
  [[ "$stderr" == "syssim: error: XGBoost: loading $ROOT/tests/data/truncated-bundle/bundle/"*".ubj: "* ]]
}
