#!/usr/bin/env bats
# syssim validate: measured runs against predictions (docs/validation.md).
load common

MEASURED="$ROOT/../shared/validation/measured.csv"

# Four runs of a small Llama-like model: two simulated, one that syssim refuses (tp 3 does not
# divide 4 heads) and one fp8 run; `colour` is not a known column, `notes` holds a comma.
small_csv() {
  local file="$BATS_TEST_TMPDIR/small.csv"
  cat >"$file" <<'CSV'
source_id,model,layers,hidden,ffn_hidden,heads,kv_heads,vocab,seq_length,gpu,num_gpus,tp,pp,micro_batch,global_batch,dtype,measured_step_s,colour,notes
A,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,0.5,red,"made up, for the test"
B,GPT-tiny,2,256,,4,,,128,A100-80GB,4,2,1,1,8,bf16,0.25,red,
A,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,3,3,1,1,8,bf16,0.5,red,
B,GPT-tiny,2,256,,4,,,128,A100-80GB,4,2,1,1,8,fp8,0.25,red,
CSV
  echo "$file"
}

@test "validate prints one line per simulated row and a summary with the skip reasons" {
  run --separate-stderr syssim validate "$(small_csv)"
  assert_success
  assert_equal "$stderr" "syssim: warning: $BATS_TEST_TMPDIR/small.csv: ignoring unknown columns: colour"
  assert_output --partial "rows: 4, expressed: 2, skipped: 2"
  assert_output --partial "1  tp=3 does not divide num_attention_heads=4"
  assert_output --partial "1  fp8 not simulated yet"
  assert_line --regexp "^A +Llama-tiny +2 tp2\+sp pp1 dp1 mbs1 gbs8 "
  assert_line --regexp "^B +GPT-tiny +4 tp2\+sp pp1 dp2 mbs1 gbs8 "
  assert_line --regexp "^    all +2 "
}

@test "validate --format csv gives the signed error of each row from its two step times" {
  run --separate-stderr syssim validate "$(small_csv)" --format csv
  assert_success
  [ "$(echo "$output" | wc -l)" -eq 5 ]
  echo "$output" | awk -F, 'NR > 1 && $6 != "" {
    expected = ($7 - $6) / $6 * 100; d = expected - $8; if (d < 0) d = -d
    if (d > 0.01) { print "line " $1 ": error " $8 ", expected " expected; exit 1 } }'
  assert_line "5,B,GPT-tiny,4,,,,,,,,,fp8 not simulated yet"
}

@test "validate --format json lists the assumptions taken for empty cells" {
  run --separate-stderr syssim validate "$(small_csv)" --format json
  assert_success
  echo "$output" | jq -e '.rows[1].assumptions | index("vocab=50257 (GPT-2 BPE, padded)") != null' >/dev/null
  echo "$output" | jq -e '[.skipped[].rows] | add == 2' >/dev/null
}

@test "validate rejects a bad format and a file that is not there" {
  run syssim validate "$(small_csv)" --format xml
  assert_failure 2
  run syssim validate nope.csv
  assert_failure 1
  assert_output "syssim: error: nope.csv: cannot open file"
}

@test "validate runs the shared measured runs and summarises every row" {
  [ -f "$MEASURED" ] || skip "no $MEASURED"
  run --separate-stderr syssim validate "$MEASURED"
  assert_success
  local total=$(($(wc -l <"$MEASURED") - 1))  # one line per run: no notes span lines
  assert_output --regexp "rows: $total, expressed: [1-9][0-9]*, skipped: [0-9]+"
  assert_output --partial "fp8 not simulated yet"
  assert_output --partial "mixture-of-experts not simulated yet"
  assert_line --regexp "^    all +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$"
}
