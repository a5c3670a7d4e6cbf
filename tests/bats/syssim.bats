#!/usr/bin/env bats
load common

pipe_report() {
  local model="$1"; shift
  syssim-shard -i "$(trace_of "$model")" "$@" | syssim-cost --hardware "$H100" | syssim-sim | syssim-mem \
    | syssim-report
}

@test "syssim run with no arguments reports the default job (its presets from the data folder)" {
  run syssim run
  assert_success
  assert_output --partial "SimulationReport("
  assert_output --partial "step_time_ms"
  assert_output --partial "mfu"
  assert_output --partial "peak_memory_gb"
}

@test "syssim --help lists run and memory" {
  run syssim --help
  assert_success
  assert_output --partial "run"
  assert_output --partial "memory"
}

@test "syssim without a subcommand is bad usage" {
  run syssim
  assert_failure 2
  assert_output --partial "syssim: error:"
}

@test "syssim run with a missing model file is bad data naming the file" {
  run syssim run nope.yaml --hardware "$H100"
  assert_failure 1
  assert_output "syssim: error: nope.yaml: cannot open file"
}

@test "syssim memory prints the memory fields only" {
  run syssim memory "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 2 --sp --format json
  assert_success
  run jq -e '.peak_memory_gb > 0 and .param_bytes > 0' <<< "$output"
  assert_success
}

@test "the pipe and syssim run print identical reports (llama3-8b, llama3-70b; tp 1-8, sp, dp 1-64)" {
  for model in llama3-8b llama3-70b; do
    for tp in 1 2 4 8; do
      for sp in "" "--sp"; do
        [ "$tp" = 1 ] && [ -n "$sp" ] && continue
        for dp in 1 8 64; do
          args=(--tp "$tp" $sp --dp "$dp" --micro-batch 1 --global-batch $((dp * 4)) --seq-length 4096)
          expected=$(syssim run "$MODELS/$model.yaml" --hardware "$H100" "${args[@]}")
          actual=$(pipe_report "$model" "${args[@]}")
          [ "$expected" = "$actual" ] || { echo "differs: $model ${args[*]}"; diff <(echo "$expected") <(echo "$actual"); false; }
        done
      done
    done
  done
}

@test "syssim run --roofline and --every-microbatch print the pipe's report with syssim-cost --roofline and syssim-sim --every-microbatch (plumbing)" {
  args=(--tp 8 --sp --pp 4 --dp 2 --micro-batch 1 --global-batch 64 --seq-length 4096)
  expected=$(syssim-shard -i "$(trace_of llama3-70b)" "${args[@]}" | syssim-cost --hardware "$H100" --roofline \
    | syssim-sim --every-microbatch | syssim-mem | syssim-report)
  run syssim run "$MODELS/llama3-70b.yaml" --hardware "$H100" "${args[@]}" --roofline --every-microbatch
  assert_success
  assert_output "$expected"
  assert_output --partial "the roofline at the bare peaks"
  run syssim run "$MODELS/llama3-70b.yaml" --hardware "$H100" --roofline --calibrated "$BATS_TEST_TMPDIR"
  assert_failure 2
}

@test "syssim run: one trace on disk per architecture, whatever the seq_length" {
  export SYSSIM_CACHE_DIR="$BATS_TEST_TMPDIR/cache"
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 8 --seq-length 4096
  assert_success
  local first="$output"
  [ "$(ls "$SYSSIM_CACHE_DIR/trace" | wc -l)" -eq 1 ]
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 8 --seq-length 2048
  assert_success
  [ "$(ls "$SYSSIM_CACHE_DIR/trace" | wc -l)" -eq 1 ]
  run syssim run "$MODELS/llama3-70b.yaml" --hardware "$H100" --tp 8 --pp 4 --global-batch 8
  assert_success
  [ "$(ls "$SYSSIM_CACHE_DIR/trace" | wc -l)" -eq 2 ]
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 8 --seq-length 4096
  assert_output "$first"
}

@test "syssim run: a cached trace gives the report of a fresh one; a damaged entry is traced again" {
  export SYSSIM_CACHE_DIR="$BATS_TEST_TMPDIR/cache"
  SYSSIM_CACHE_DIR=off run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 4 --dp 2 --global-batch 8
  assert_success
  local fresh="$output"
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 4 --dp 2 --global-batch 8
  assert_output "$fresh"
  local entry
  entry="$(ls "$SYSSIM_CACHE_DIR"/trace/*)"
  # The right header and key over another value: its size and checksum disagree.
  local header magic version key_size rest
  header="$(head -1 "$entry")"
  read -r magic version key_size rest <<< "$header"
  head -c $(( ${#header} + 1 + key_size )) "$entry" > "$entry.damaged"
  printf '{"axes": 1}' >> "$entry.damaged"
  mv "$entry.damaged" "$entry"
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 4 --dp 2 --global-batch 8
  assert_output "$fresh"
  [ "$(stat -c %s "$entry")" -gt 100000 ]
  # Another key under its name.
  printf '12\nnot the key and not JSON' > "$entry"
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 4 --dp 2 --global-batch 8
  assert_output "$fresh"
  [ "$(stat -c %s "$entry")" -gt 100000 ]
}

@test "--fail-on-oom: exit status 3 after the report, with the excess and the stage" {
  # Llama-3-8B on one H100: 8.030e9 parameters x 18 bytes (bf16 weights, fp32 gradients, fp32
  # master weights and Adam's two moments) = 144.5 GB before any activation, over 85.9 GB.
  run --separate-stderr syssim run llama3-8b --hardware h100-sxm-80gb --fail-on-oom --format json
  [ "$status" -eq 3 ]
  jq -e '.bottlenecks.oom.required_gb > 144.5' <<< "$output"
  required=$(printf %.1f "$(jq -r '.bottlenecks.oom.required_gb' <<< "$output")")
  excess=$(printf %.1f "$(jq -r '.bottlenecks.oom.excess_gb' <<< "$output")")
  [ "$stderr" = "syssim: out of memory: needs $required GB per GPU of 85.9 GB ($excess GB over) on pipeline stage 0" ]
  run --separate-stderr syssim memory llama3-8b --hardware h100-sxm-80gb --fail-on-oom
  [ "$status" -eq 3 ]
  # A job that fits exits 0 with the flag.
  run syssim run llama3-8b --hardware h100-sxm-80gb --tp 8 --sp --global-batch 8 --seq-length 2048 --fail-on-oom
  assert_success
}

@test "--mfu-convention causal counts half of attention's score FLOPs; --train-tokens gives days and GPU-hours" {
  # The default job: Llama-3-8B, 128 sequences of 8,192 tokens. Attention's score and context
  # GEMMs in Megatron-LM's count: 12 x 32 heads x 128 x 8192^2 x 32 layers x 128 sequences =
  # 13,510,798,882,111,488 FLOPs per step; the causal convention drops half of them.
  run syssim run --format json --mfu-convention causal --train-tokens 15e12
  assert_success
  jq -e '.mfu_convention == "causal"' <<< "$output"
  jq -e '.mfu_model_flops_per_step == .model_flops_per_step - 6755399441055744' <<< "$output"
  # 15e12 tokens at 128 x 8,192 tokens per step: 14,305,114.7 steps of step_time_ms each, on 8 GPUs.
  jq -e '(.train_days - 15e12 / (128 * 8192) * .step_time_ms / 1000 / 86400 | fabs) < 1e-9' <<< "$output"
  jq -e '(.train_gpu_hours - .train_days * 24 * 8 | fabs) < 1e-6' <<< "$output"
  run syssim run --train-tokens 15e12
  assert_line --regexp '^  train_tokens         = 1\.5000e\+13$'
  assert_line --regexp '^    train_days         = [0-9]+\.[0-9]{4}$'
  run syssim run --mfu-convention full
  assert_failure 2
}

@test "sizes not given are derived as Megatron-LM derives them: dp from --gpus, the global batch one micro-batch per dp rank" {
  # 16 GPUs over tp 2 and pp 2: dp 4; global batch 2 x 4 = 8.
  run syssim memory "$MODELS/llama3-8b.yaml" --hardware "$H100" --gpus 16 --tp 2 --pp 2 --micro-batch 2
  assert_success
  assert_line "  layout        = tp2 pp2 dp4 mbs2 gbs8"
  run syssim-shard --gpus 8 --tp 2 < "$ROOT/tests/golden/tiny.trace.graph"
  assert_success
  jq -e '.shard.parallelism.dp == 4 and .shard.training.global_batch == 4' <<< "$output"
  # Given sizes stay as given: a mismatch is still named.
  run syssim memory "$MODELS/llama3-8b.yaml" --hardware "$H100" --gpus 16 --tp 2 --dp 4
  assert_failure 1
  assert_output "syssim: error: tp*cp*pp*dp=8 does not match gpus=16"
  # The default job keeps its global batch of 128 on the GPUs given.
  run syssim memory --gpus 16
  assert_line "  layout        = tp2+sp pp1 dp8 mbs1 gbs128"
}

@test "Megatron-LM's flag names are taken beside syssim's: the same job, the same report" {
  run syssim memory "$MODELS/llama3-8b.yaml" --hardware "$H100" --tp 2 --sp --pp 2 --dp 2 --micro-batch 1 \
    --global-batch 64 --distributed-optimizer --order tp-cp-ep-pp-dp --dtype fp8 --fp8-recipe current --recompute full
  assert_success
  expected="$output"
  run syssim memory "$MODELS/llama3-8b.yaml" --hardware "$H100" --tensor-model-parallel-size 2 --sequence-parallel \
    --pipeline-model-parallel-size 2 --dp 2 --micro-batch-size 1 --global-batch-size 64 --use-distributed-optimizer \
    --use-tp-pp-dp-mapping --dtype fp8 --fp8-recipe tensorwise --recompute-granularity full
  assert_success
  assert_output "$expected"
  run syssim memory "$MODELS/llama3-8b.yaml" --use-tp-pp-dp-mapping --order tp-cp-ep-dp-pp
  assert_failure 2
}
