#!/usr/bin/env bats
load common
bats_require_minimum_version 1.5.0

# The golden tests' tiny Llama (2 layers, 4 heads in 2 groups, sequence 128) on the A100 preset.
TINY="$ROOT/tests/golden/tiny.yaml"
A100="$HARDWARE/a100-sxm-80gb.yaml"

setup() {
  # Each test starts with an empty result cache of its own.
  export SYSSIM_CACHE_DIR="$BATS_TEST_TMPDIR/cache"
}

sweep_tiny() {
  syssim sweep "$TINY" --hardware "$A100" "$@"
}

@test "syssim sweep usage errors exit 2 with one line" {
  run sweep_tiny --over parallelism.tpp=1,2
  assert_failure 2
  assert_output "syssim: error: --over parallelism.tpp: unknown config path (parallelism keys: cp, dp, dp_replicate, ep, etp, order, pp, sp, tp, vpp)"
  run sweep_tiny --over parallelism.tp
  assert_failure 2
  assert_output "syssim: error: --over parallelism.tp: expected PATH=V1,V2,..."
  run sweep_tiny --over parallelism.tp=1 --over parallelism.tp=2
  assert_failure 2
  assert_output "syssim: error: --over parallelism.tp is given twice"
  run sweep_tiny --over parallelism.tp=1,2,1
  assert_failure 2
  assert_output "syssim: error: parallelism.tp: value 1 is given twice (each point would run twice)"
  run sweep_tiny
  assert_failure 2
  assert_output "syssim: error: syssim sweep needs at least one --over PATH=V1,V2,... (or --search, or --merge)"
  run syssim sweep "$TINY" --over parallelism.tp=1
  assert_failure 2
  assert_output "syssim: error: syssim sweep needs --hardware (a preset or a hardware YAML): it compares layouts on the GPUs it names, with no default"
  run sweep_tiny --search
  assert_failure 2
  assert_output "syssim: error: --search needs --gpus N"
  run sweep_tiny --search --gpus 2147483648
  assert_failure 2
  assert_output "syssim: error: --gpus: expected 1 to 1048576, got 2147483648"
  run sweep_tiny --merge x.json
  assert_failure 2
  assert_output "syssim: error: --merge joins result files: give no model, --hardware or --over"
  run sweep_tiny --over parallelism.tp=1 --emit-jobs "$BATS_TEST_TMPDIR/jobs" --plot x.svg
  assert_failure 2
  assert_output "syssim: error: --plot draws results: plot the --merge of the jobs' files"
  run sweep_tiny --over parallelism.tp=1 --metric tflops
  assert_failure 2
  [ "${#lines[@]}" -eq 1 ]
  run sweep_tiny --over parallelism.tp=1 --gpus 8 --dp 2
  assert_failure 2
  [ "${#lines[@]}" -eq 1 ]
  run sweep_tiny --search --gpus 8 --metric step_time_ms
  assert_failure 2
  assert_output "syssim: error: --metric applies to sweeps, not to --search (whose Pareto front is step time against memory)"
}

@test "syssim sweep lists every point, dp from --gpus, and an invalid point with its reason" {
  run sweep_tiny --gpus 8 --global-batch 8 --over parallelism.tp=1,2,3 --over training.micro_batch=1 --format csv
  assert_success
  assert_equal "${lines[0]}" "parallelism.tp,training.micro_batch,parallelism.dp,status,step_time_ms,mfu,peak_memory_gb,step_time_band_low_ms,step_time_band_high_ms,reason"
  assert_equal "${#lines[@]}" 4  # the header and 3 x 1 points
  for tp in 1 2; do
    [[ "${lines[$tp]}" == "$tp,1,$((8 / tp)),ok,"* ]] || { echo "row $tp: ${lines[$tp]}"; false; }
  done
  assert_equal "${lines[3]}" "3,1,,invalid,,,,,,tp*cp*pp=3 does not divide --gpus 8"
}

@test "without --global-batch every point runs at the base job's: one micro-batch per dp rank of --gpus" {
  # The base job (tp 1 on 8 GPUs, micro-batch 2) has dp 8: global batch 16 for every point,
  # 16 / (4 x 2) = 2 micro-batches at tp 2, as syssim run --tp 2 --global-batch 16 runs them.
  run sweep_tiny --gpus 8 --micro-batch 2 --over parallelism.tp=1,2 --format json
  assert_success
  assert_equal "$(jq -r '[.points[].status] | join(",")' <<< "$output")" "ok,ok"
  point=$(jq -c '.points[1]' <<< "$output")
  report=$(syssim run "$TINY" --hardware "$A100" --gpus 8 --tp 2 --micro-batch 2 --global-batch 16 --format json)
  assert_equal "$(jq '.step_time_ms' <<< "$point")" "$(jq '.step_time_ms' <<< "$report")"
  # The search takes it too: 8 GPUs, micro-batch 1, global batch 8 (its first front row,
  # tp 1, pp 2, dp 4, micro-batch 2, is syssim run's at global batch 8).
  run sweep_tiny --gpus 8 --search --format json
  assert_success
  assert_equal "$(jq -c '.front[0].inputs | [.["parallelism.tp"], .["parallelism.pp"], .["training.micro_batch"]]' <<< "$output")" "[1,2,2]"
  report=$(syssim run "$TINY" --hardware "$A100" --gpus 8 --pp 2 --micro-batch 2 --global-batch 8 --distributed-optimizer --format json)
  assert_equal "$(jq '.front[0].step_time_ms' <<< "$output")" "$(jq '.step_time_ms' <<< "$report")"
}

@test "a sweep row is what syssim run reports for that point" {
  run sweep_tiny --gpus 4 --global-batch 8 --over parallelism.tp=1,2 --sp --format json
  assert_success
  point=$(jq -c '.points[1]' <<< "$output")
  report=$(syssim run "$TINY" --hardware "$A100" --tp 2 --sp --dp 2 --global-batch 8 --format json)
  for metric in step_time_ms mfu peak_memory_gb 'step_time_band_ms[0]' 'step_time_band_ms[1]'; do
    assert_close "$(jq ".$metric" <<< "$point")" "$(jq ".$metric" <<< "$report")" 1e-12
  done
}

@test "best is chosen by meaning: highest mfu, lowest step time or memory" {
  # Full recomputation runs the forward pass twice and keeps less: slower, with less memory.
  for metric in mfu step_time_ms peak_memory_gb; do
    run sweep_tiny --global-batch 4 --over training.recompute=full,none --metric "$metric"
    assert_success
    case $metric in
      peak_memory_gb) expected=full ;;
      *) expected=none ;;
    esac
    assert_line --regexp "^best: training.recompute=$expected \($metric [0-9.]+\)$"
  done
  run sweep_tiny --global-batch 4 --over training.recompute=full,none --metric step_time_ms --top 1 --format csv
  assert_success
  assert_equal "${#lines[@]}" 2
  [[ "${lines[1]}" == none,ok,* ]]
}

@test "a point over the GPU's memory is listed as oom and never best" {
  # The A100 preset with 1 GB: Llama-3-8B at tp 8 still needs over 2 GB of weights alone (8e9 x 2 bytes / 8).
  sed 's/^gpu_memory_GB:.*/gpu_memory_GB: 1/' "$A100" > "$BATS_TEST_TMPDIR/small.yaml"
  run syssim sweep "$MODELS/llama3-8b.yaml" --hardware "$BATS_TEST_TMPDIR/small.yaml" --gpus 8 --global-batch 8 \
    --seq-length 1024 --over parallelism.tp=4,8
  assert_success
  assert_line --regexp "^4 +2 +oom .* needs [0-9.]+ GB of 1.0 GB$"
  assert_line --regexp "^8 +1 +oom .* needs [0-9.]+ GB of 1.0 GB$"
  assert_line "best: none (no point is ok)"
}

@test "emitted jobs run with the shell and merge into the in-process sweep" {
  args=(--gpus 4 --global-batch 8 --over parallelism.tp=1,2 --over training.recompute=none,selective,full)
  run sweep_tiny "${args[@]}" --emit-jobs "$BATS_TEST_TMPDIR/jobs"
  assert_success
  assert_equal "${#lines[@]}" 6  # 2 x 3 points
  assert_equal "${lines[5]}" "syssim sweep $TINY --hardware $A100 --gpus 4 --global-batch 8 --over parallelism.tp=2 --over training.recompute=full --format json -o $BATS_TEST_TMPDIR/jobs/point-0005.json"
  bash -e <<< "$output"
  for format in table csv json; do
    expected=$(sweep_tiny "${args[@]}" --format "$format" --metric step_time_ms)
    merged=$(syssim sweep --merge "$BATS_TEST_TMPDIR"/jobs/point-*.json --format "$format" --metric step_time_ms)
    assert_equal "$merged" "$expected"
  done
  # A sweep of another hardware is no point of this one.
  syssim sweep "$TINY" --hardware "$H100" --gpus 4 --global-batch 8 --over parallelism.tp=1 --format json \
    -o "$BATS_TEST_TMPDIR/h100.json"
  run syssim sweep --merge "$BATS_TEST_TMPDIR/jobs/point-0000.json" "$BATS_TEST_TMPDIR/h100.json"
  assert_failure 1
  assert_output "syssim: error: $BATS_TEST_TMPDIR/h100.json: a sweep of tiny on h100-sxm-80gb, where $BATS_TEST_TMPDIR/jobs/point-0000.json is of tiny on a100-sxm-80gb: merge the sweeps of one job"
}

@test "a rerun reads every point from the cache; --no-cache simulates again" {
  args=(--global-batch 4 --over parallelism.tp=1,2 --over training.micro_batch=1,2 --format csv)
  first=$(sweep_tiny "${args[@]}")
  [ "$(ls "$SYSSIM_CACHE_DIR/point" | wc -l)" -eq 4 ]
  # A cached point is not simulated again: a simulated point is stored anew (a new file renamed
  # into place), so the entries keep their inodes when every point was read from the cache.
  inodes=$(stat -c %i "$SYSSIM_CACHE_DIR"/point/*)
  assert_equal "$(sweep_tiny "${args[@]}")" "$first"
  assert_equal "$(stat -c %i "$SYSSIM_CACHE_DIR"/point/*)" "$inodes"
  # A result planted in an entry breaks its checksum: the point is simulated and stored again.
  for entry in "$SYSSIM_CACHE_DIR"/point/*; do sed -i 's/"mfu":[0-9.e+-]*/"mfu":0.125/' "$entry"; done
  assert_equal "$(sweep_tiny "${args[@]}")" "$first"
  refute grep -q '"mfu":0.125' "$SYSSIM_CACHE_DIR"/point/*
  assert_equal "$(sweep_tiny "${args[@]}" --no-cache)" "$first"
}

@test "a copy of a preset whose calibrated bundle is not beside it stops the sweep, cached or not" {
  # The preset fills the cache first; the copy names the same relative folder, which is not there.
  sweep_tiny --global-batch 4 --over parallelism.tp=1,2 --format csv > /dev/null
  mkdir -p "$BATS_TEST_TMPDIR/copy"
  cp "$HARDWARE/h100-sxm-80gb.yaml" "$BATS_TEST_TMPDIR/copy/hw.yaml"
  sed -i 's/^calibrated_model: .*/calibrated_model: ..\/calibration\/h100-sxm-80gb/' "$BATS_TEST_TMPDIR/copy/hw.yaml"
  for extra in "" --no-cache; do
    run syssim sweep "$TINY" --hardware "$BATS_TEST_TMPDIR/copy/hw.yaml" --global-batch 4 --over parallelism.tp=1,2 $extra
    assert_failure 1
    assert_output --partial "there is no folder $BATS_TEST_TMPDIR/calibration/h100-sxm-80gb"
  done
  run syssim sweep "$TINY" --hardware "$BATS_TEST_TMPDIR/copy/hw.yaml" --search --gpus 4 --global-batch 4
  assert_failure 1
}

@test "--emit-jobs refuses a folder holding another sweep's files" {
  mkdir -p "$BATS_TEST_TMPDIR/jobs"
  touch "$BATS_TEST_TMPDIR/jobs/point-0009.json"
  run sweep_tiny --gpus 4 --global-batch 8 --over parallelism.tp=1,2 --emit-jobs "$BATS_TEST_TMPDIR/jobs"
  assert_failure 2
  assert_output "syssim: error: --emit-jobs $BATS_TEST_TMPDIR/jobs: the folder exists and is not empty (give a new or an empty one)"
}

@test "a rerun of --search reads the memory estimates and simulations from the cache" {
  first=$(sweep_tiny --search --gpus 4 --global-batch 4 --format json)
  # 114 layouts, nothing out of memory: one estimate each, but for the recomputing layouts
  # that the bound of their sibling without recompute prunes unestimated.
  estimates=$(ls "$SYSSIM_CACHE_DIR/estimate" | wc -l)
  [ "$estimates" -lt 114 ]
  [ "$estimates" -ge $((114 - $(jq .counts.pruned_by_bound <<< "$first"))) ]
  [ "$(ls "$SYSSIM_CACHE_DIR/point" | wc -l)" -eq "$(jq .counts.simulated <<< "$first")" ]
  assert_equal "$(sweep_tiny --search --gpus 4 --global-batch 4 --format json)" "$first"
}

@test "progress goes to stderr only when it is a terminal" {
  run --separate-stderr sweep_tiny --global-batch 4 --over training.micro_batch=1,2,4
  assert_success
  assert_equal "$stderr" ""
  run script -qec "syssim sweep $TINY --hardware $A100 --global-batch 4 --over training.micro_batch=1,2,4 -o /dev/null" /dev/null
  assert_success
  assert_output --partial "syssim sweep: 3/3 points"
  assert_output --partial "points/s, ETA"
}

@test "syssim sweep --search prints the Pareto front and the layout counts" {
  # Tiny on 4 GPUs with global batch 4 has 114 layouts (counted in tests/unit/test_sweep.cpp).
  run sweep_tiny --search --gpus 4 --global-batch 4 --format json
  assert_success
  jq -e '.counts.enumerated == 114 and .counts.invalid + .counts.pruned_by_memory + .counts.pruned_by_bound
         + .counts.simulated == 114 and (.front | length) == .counts.front and .counts.front >= 1' <<< "$output"
  # Along the front, time rises as memory falls.
  jq -e '[.front[].step_time_ms] == ([.front[].step_time_ms] | sort)
         and [.front[].peak_memory_gb] == ([.front[].peak_memory_gb] | sort | reverse)' <<< "$output"
  run sweep_tiny --search --gpus 4 --global-batch 4
  assert_success
  assert_line --index 0 "Pareto front of step time against peak memory (fastest first)"
  assert_line --regexp "^layouts: enumerated 114, invalid 0, pruned_by_memory 0, pruned_by_bound [0-9]+, simulated [0-9]+, front [0-9]+$"
}

@test "a swept value a key cannot take is an invalid point naming what the key takes" {
  run sweep_tiny --gpus 4 --global-batch 4 --over parallelism.tp=x,2,-1 --format csv
  assert_success
  assert_line --partial "parallelism.tp=x: expected a whole number, as the job's 1"
  # A whole number out of range gets the reader's word (it was told "expected a whole number").
  assert_line --partial "parallelism.tp=-1: parallelism/tp: expected a size from 1 to 1048576, got -1"
}

@test "a search where no layout fits says so" {
  # Llama-3-70B's model states with Adam (about 16 bytes a parameter: 1.1 TB) outgrow four 80 GB
  # GPUs however they are sharded.
  run syssim sweep llama3-70b --hardware "$H100" --search --gpus 4 --global-batch 8
  assert_success
  assert_line --regexp "^layouts: enumerated [0-9]+, invalid 0, pruned_by_memory [0-9]+, pruned_by_bound 0, simulated 0, front 0$"
  assert_line "front: none (no valid layout fits in the GPUs' memory)"
}

@test "a search names the shard stage's reason for the first layout it refused" {
  run syssim sweep llama3-8b --hardware "$H100" --search --gpus 8 --global-batch 16 --seq-length 4096 --clip-grad -1
  assert_success
  assert_line "front: none (no valid layout fits in the GPUs' memory; the first layout refused: clip_grad=-1 must be 0 or more and finite (0 disables clipping))"
}

@test "a search keeps the layouts the base job's pipeline schedule and parameter gather leave valid" {
  # Megatron-LM takes the distributed optimizer over one data-parallel rank: with
  # --fp8-param-gather (which needs it) tp 8 on 8 GPUs is a layout, sharded as optim.
  run syssim sweep llama3-8b --hardware "$H100" --search --gpus 8 --global-batch 16 --seq-length 4096 \
    --dtype fp8 --fp8-param-gather --format json
  assert_success
  jq -e '[.front[].inputs] | any(.["parallelism.dp"] == 1 and .["training.data_parallel_sharding_strategy"] == "optim")
         and all(.["training.data_parallel_sharding_strategy"] != "no_shard")' <<< "$output"
  # A schedule is of pipeline ranks: with zb-h1 the layouts without a pipeline stay.
  run syssim sweep llama3-8b --hardware "$H100" --search --gpus 8 --global-batch 16 --seq-length 4096 \
    --pipeline-schedule zb-h1 --format json
  assert_success
  jq -e '[.front[].inputs] | any(.["parallelism.pp"] == 1) and any(.["parallelism.pp"] > 1)' <<< "$output"
}

@test "syssim sweep --plot draws one bar per simulated point as well-formed SVG" {
  run sweep_tiny --gpus 4 --global-batch 4 --over parallelism.tp=1,2,3 --plot "$BATS_TEST_TMPDIR/sweep.svg"
  assert_success
  xmllint --noout "$BATS_TEST_TMPDIR/sweep.svg"
  # tp 1 and 2 are simulated (bars); tp 3 does not divide 4 GPUs (a labelled gap).
  [ "$(grep -c '<rect ' "$BATS_TEST_TMPDIR/sweep.svg")" -eq 3 ]  # the background and 2 bars
  grep -q 'invalid: tp\*cp\*pp=3 does not divide --gpus 4' "$BATS_TEST_TMPDIR/sweep.svg"
  run sweep_tiny --search --gpus 4 --global-batch 4 --format json --plot "$BATS_TEST_TMPDIR/front.svg"
  assert_success
  front=$(jq '.counts.front' <<< "$output")
  xmllint --noout "$BATS_TEST_TMPDIR/front.svg"
  [ "$(grep -c '<circle ' "$BATS_TEST_TMPDIR/front.svg")" -eq "$front" ]
  # The legend's layouts, at 7 pixels a character (sans-serif at 11 pixels takes about 6), end
  # inside the picture.
  width=$(sed -n 's/.*<svg [^>]*width="\([0-9.]*\)".*/\1/p' "$BATS_TEST_TMPDIR/front.svg")
  column=$(grep -o '<text x="[0-9.]*"[^>]*>layout<' "$BATS_TEST_TMPDIR/front.svg" | sed 's/<text x="\([0-9.]*\)".*/\1/')
  longest=$(grep -o "<text x=\"$column\"[^>]*>[^<]*<" "$BATS_TEST_TMPDIR/front.svg" | sed 's/.*>\([^<]*\)</\1/' |
    awk '{ if (length > n) n = length } END { print n }')
  [ "$longest" -gt 20 ]
  awk -v w="$width" -v x="$column" -v n="$longest" 'BEGIN { exit !(x + 7 * n <= w) }'
}

# Sweeps a training key written only when set over its default and another value; the peak
# drops by `share` of the default run's `field` bytes.
assert_peak_drop() {
  local key=$1 default=$2 other=$3 field=$4 share=$5
  run sweep_tiny --global-batch 4 --over "training.$key=$default,$other" --format csv
  assert_success
  local bytes=$(syssim run "$TINY" --hardware "$A100" --global-batch 4 --format json | jq ".$field")
  local a=$(echo "$output" | awk -F, -v v="$default" '$1 == v && $2 == "ok" { print $5 }')
  local b=$(echo "$output" | awk -F, -v v="$other" '$1 == v && $2 == "ok" { print $5 }')
  awk -v a="$a" -v b="$b" -v g="$bytes" -v s="$share" 'BEGIN { d = (a - b) * 1e9 - g * s; exit !(d < 1 && d > -1) }' ||
    { echo "$default $a GB, $other $b GB, $field of $default: $bytes bytes"; false; }
}

@test "sweep --over takes a training key written only when set (grad_reduce_in_bf16) at both values" {
  # Each row is the run of its value: bf16 main gradients hold 2 bytes per parameter where fp32
  # ones hold 4, and the optimizer step reads their 4-byte copy (docs/memory.md).
  run sweep_tiny --global-batch 4 --over training.grad_reduce_in_bf16=false,true --format csv
  assert_success
  for value in false true; do
    local flag=$([ "$value" = true ] && echo --grad-reduce-in-bf16)
    local single=$(syssim run "$TINY" --hardware "$A100" --global-batch 4 $flag --format json | jq .peak_memory_gb)
    local row=$(echo "$output" | awk -F, -v v="$value" '$1 == v && $2 == "ok" { print $5 }')
    awk -v a="$row" -v b="$single" 'BEGIN { exit !(a - b < 1e-6 && b - a < 1e-6) }' || { echo "$value: $row GB, run $single GB"; false; }
  done
  [ "$(syssim run "$TINY" --hardware "$A100" --global-batch 4 --grad-reduce-in-bf16 --format json | jq .grad_bytes)" = \
    "$(syssim run "$TINY" --hardware "$A100" --global-batch 4 --format json | jq '.grad_bytes / 2')" ]
}

@test "sweep --over takes optimizer_state_dtype at its default and a 16-bit type" {
  # Adam's 12 bytes per parameter become 4 (bf16 moments, no master copy).
  assert_peak_drop optimizer_state_dtype fp32 bf16 optimizer_state_bytes 0.6666666666666666
}

