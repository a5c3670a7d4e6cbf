#!/usr/bin/env bats
# The hardware presets through syssim run: each loads, and the figures the report takes from it
# are the datasheet's. Expected numbers are worked out by hand from the sources each preset cites.
load common

# syssim run of Llama-3-8B on one GPU of PRESET (the default job: no parallelism), as JSON.
run_8b() {
  syssim run "$MODELS/llama3-8b.yaml" --hardware "$HARDWARE/$1.yaml" --format json
}

# The report's peak: MFU = model FLOPs / (step time x peak) and achieved TFLOP/s = model FLOPs /
# step time, so achieved / MFU is the dense BF16 peak the MFU was taken against.
peak_of() { jq '.achieved_tflops / .mfu' <<< "$1"; }

# Llama-3-8B on one GPU cannot fit any of these GPUs: its 8.030e9 parameters (published 8.03B)
# need 2 bytes (bf16 weights) + 4 (fp32 gradients) + 12 (fp32 master weights, Adam's m and v)
# = 18 bytes each, 144.5 GB before any activation, above the largest capacity below (103.1 GB).
assert_oom_on() {
  local report="$1" capacity="$2"
  run jq -e '.bottlenecks.oom != null and .bottlenecks.oom.required_gb >= 144.5' <<< "$report"
  assert_success
  assert_close "$(jq '.bottlenecks.oom.capacity_gb' <<< "$report")" "$capacity" 1e-9
}

@test "every hardware preset runs Llama-3-8B" {
  for preset in "$HARDWARE"/*.yaml; do
    report=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$preset" --format json) ||
      { echo "failed: $preset"; false; }
    jq -e '.step_time_ms > 0 and .mfu > 0' <<< "$report" >/dev/null || { echo "no step: $preset"; false; }
  done
}

@test "a100-sxm-40gb: 312 TFLOP/s and 40 GiB" {
  report=$(run_8b a100-sxm-40gb)
  # A100 datasheet, 40GB SXM: BF16 624 TFLOPS with sparsity / 2 = 312.
  assert_close "$(peak_of "$report")" 312 1e-6
  # 40 GB of HBM2 = 40 GiB = 40 x 1.073741824 = 42.95 GB, 42.9 in the preset.
  assert_oom_on "$report" 42.9
}

@test "h100-sxm-96gb-500w: the H100 SXM peak (an upper bound at 500 W) and 96 GiB" {
  report=$(run_8b h100-sxm-96gb-500w)
  # H100 datasheet, SXM: BF16 1,979 TFLOPS with sparsity / 2 = 989 (as torchtitan's MFU takes it).
  assert_close "$(peak_of "$report")" 989 1e-6
  # torchtitan: 96 GB of HBM2e = 96 x 1.073741824 = 103.08 GB, 103.1 in the preset.
  assert_oom_on "$report" 103.1
}

@test "h100-nvl: 835.5 TFLOP/s and 94 GiB" {
  report=$(run_8b h100-nvl)
  # H100 datasheet, NVL: BF16 1,671 TFLOPS with sparsity / 2 = 835.5.
  assert_close "$(peak_of "$report")" 835.5 1e-6
  # 94 GB of HBM3 = 94 x 1.073741824 = 100.93 GB, 100.9 in the preset.
  assert_oom_on "$report" 100.9
}

@test "h800-sxm: the H100 SXM's compute: on one GPU (no NVLink traffic) the step of h100-sxm-80gb" {
  report=$(run_8b h800-sxm)
  # H800 = H100 SXM with NVLink cut: BF16 1,979 with sparsity / 2 = 989; 80 GiB = 85.9 GB.
  assert_close "$(peak_of "$report")" 989 1e-6
  assert_oom_on "$report" 85.9
  # Same peaks, HBM and GEMM bundle: a job without communication takes the same time.
  assert_close "$(jq .step_time_ms <<< "$report")" "$(jq .step_time_ms <<< "$(run_8b h100-sxm-80gb)")" 1e-12
}

# Plumbing: a preset by name is the file of that name in the data folder (docs/configs.md).
@test "a model and a hardware preset by name give the report of their files" {
  by_file=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$HARDWARE/b200.yaml" --tp 2 --dp 4 --global-batch 64 --format json)
  by_name=$(syssim run llama3-8b --hardware b200 --tp 2 --dp 4 --global-batch 64 --format json)
  [ "$by_file" = "$by_name" ]
}

# Plumbing: every preset loads by its name, dots included (llama3.1-405b is not a file with the
# extension ".1-405b").
@test "every model preset traces by its name" {
  for file in "$MODELS"/*.yaml; do
    name=$(basename "$file" .yaml)
    syssim-trace "$name" > /dev/null || { echo "failed: $name"; false; }
  done
  run syssim run no-such-model.yaml
  assert_failure 1
  assert_output "syssim: error: no-such-model.yaml: cannot open file"
}

@test "syssim presets lists every preset file; an unknown name says where it looked" {
  run syssim presets
  assert_success
  assert_line "data folder: $SYSSIM_BINARY_DIR/share/syssim"
  for file in "$HARDWARE"/*.yaml "$MODELS"/*.yaml; do
    name=$(basename "$file" .yaml)
    assert_line --regexp "^  ${name//./\\.} +[^ ]"
  done
  run syssim run no-such-model
  assert_failure 1
  assert_output "syssim: error: no-such-model: no such file, and no model preset $SYSSIM_BINARY_DIR/share/syssim/models/no-such-model.yaml (\`syssim presets\` lists them)"
}
