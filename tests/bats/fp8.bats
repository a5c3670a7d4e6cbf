#!/usr/bin/env bats
# Low precision (docs/syssim-shard.md "Low precision", docs/memory.md "Low precision"): the
# flags, the errors, which GEMMs run in fp8, their roofline time and the memory they change.
load common

# The default job's layout: Llama-3-8B on one H100 node, tp 2 with SP, dp 4.
LAYOUT=(--tp 2 --sp --dp 4 --global-batch 128 --distributed-optimizer)

# mem_field FIELD FLAGS...: a field of the mem section of Llama-3-8B sharded with FLAGS (the
# memory stage needs no costs).
mem_field() {
  local field="$1"; shift
  syssim-mem -i "$(stage_of llama3-8b shard "$@")" | jq ".mem.$field"
}

@test "syssim-shard --help lists the precision flags" {
  run syssim-shard --help
  assert_success
  for flag in --dtype --fp8-recipe --fp8-param-gather; do
    assert_output --partial -- "$flag"
  done
  assert_output --partial "fp4"
}

@test "recipes that do not fit the dtype are bad usage (exit 2)" {
  local trace; trace=$(trace_of llama3-8b)
  run syssim-shard -i "$trace" --dtype fp8 --fp8-recipe nvfp4
  assert_failure 2
  assert_output "syssim-shard: error: fp8_recipe=nvfp4 is a 4-bit recipe: it needs --dtype fp4"
  run syssim-shard -i "$trace" --dtype fp4 --fp8-recipe mxfp8
  assert_failure 2
  assert_output "syssim-shard: error: dtype=fp4 needs fp8_recipe=nvfp4 (Transformer Engine's 4-bit recipe), got mxfp8"
  run syssim-shard -i "$trace" --fp8-recipe current
  assert_failure 2
  assert_output "syssim-shard: error: fp8_recipe=current needs --dtype fp8"
  run syssim-shard -i "$trace" --dtype fp8 --fp8-param-gather
  assert_failure 2
  assert_output "syssim-shard: error: fp8_param_gather needs --distributed-optimizer (as in Megatron-LM)"
  run syssim-shard -i "$trace" --dtype fp8 --fp8-recipe blockwise
  assert_failure 2
  assert_output --partial "--fp8-recipe: blockwise not in {delayed,current,mxfp8,nvfp4,rowwise}"
  # Megatron-LM's name for Transformer Engine's current scaling.
  run jq -r '.shard.training.fp8_recipe' < <(syssim-shard -i "$trace" --dtype fp8 --fp8-recipe tensorwise)
  assert_output "current"
}

@test "the shard section records the recipe simulated, Megatron's default resolved" {
  run jq -c '.shard.training | [.dtype, .fp8_recipe, .fp8_param_gather]' "$(stage_of llama3-8b shard --dtype fp8)"
  assert_output '["fp8","delayed",false]'
  run jq -c '.shard.training | [.dtype, .fp8_recipe]' "$(stage_of llama3-8b shard --dtype fp4)"
  assert_output '["fp4","nvfp4"]'
  run jq -c '.shard.training.fp8_recipe' "$(stage_of llama3-8b shard)"
  assert_output 'null'
}

@test "only the GEMMs of the layers' linears run in fp8; the rest stays bf16" {
  local shard; shard=$(stage_of llama3-8b shard "${LAYOUT[@]}" --dtype fp8)
  # 32 layers x 4 linears (QKV, projection, fc1, fc2) x 3 GEMMs (forward, dgrad, wgrad).
  run jq '[.shard.ops[] | select(.dtype == "fp8" and .kind == "gemm")] | length' "$shard"
  assert_output 384
  run jq -r '[.shard.ops[] | select(.dtype == "fp8") | .module | sub("decoder\\.layers\\.[0-9]+\\."; "")] | unique | .[]' "$shard"
  assert_output "$(printf '%s\n' mlp.linear_fc1 mlp.linear_fc2 self_attention.linear_proj self_attention.linear_qkv)"
  run jq -r '[.shard.ops[] | select(.kind == "attention" or .module == "output_layer") | .dtype] | unique | .[]' "$shard"
  assert_output "bf16"
}

@test "an fp8 GEMM takes half the bf16 time at B200's fp8 peak (roofline, compute-bound)" {
  # fc1 forward of layer 0, tp 1: 2 s h 2f = 1.92e12 FLOPs, compute-bound in both precisions;
  # B200's peaks are 2250 (bf16) and 4500 (fp8) TFLOP/s.
  local bf16 fp8
  fc1_time() {
    syssim-cost --roofline --hardware "$HARDWARE/b200.yaml" -i "$(stage_of llama3-8b shard "$@")" | jq '.shard.ops as $ops
      | [.cost.ops[] | select($ops[.id] | .module == "decoder.layers.0.mlp.linear_fc1" and .phase == "fwd"
          and .kind == "gemm") | .time_us][0]'
  }
  bf16=$(fc1_time --dtype bf16)
  fp8=$(fc1_time --dtype fp8)
  assert_close "$bf16" "$(awk 'BEGIN { printf "%.12g", 2 * 8192 * 4096 * 2 * 14336 / 2250e12 * 1e6 }')" 1e-9
  assert_close "$(awk -v a="$fp8" -v b="$bf16" 'BEGIN { print a / b }')" 0.5 1e-9
}

@test "fp8 keeps the linears' inputs for backward in fp8 and caches the fp8 weights" {
  # docs/memory.md "Low precision": per layer -s(h+f)/2 + 16 bytes of activations at
  # s = 8192, h = 4096, f = 14336 (32 layers); weights: 2 fp8 copies of the 3,489,660,928
  # linear parameters per rank plus 1,536 bytes of scales.
  local bf16_act fp8_act
  bf16_act=$(mem_field activation_bytes "${LAYOUT[@]}")
  fp8_act=$(mem_field activation_bytes "${LAYOUT[@]}" --dtype fp8)
  assert_equal "$(awk -v a="$bf16_act" -v b="$fp8_act" 'BEGIN { printf "%.0f", a - b }')" \
    "$(awk 'BEGIN { printf "%.0f", 32 * (8192 * (4096 + 14336) / 2 - 16) }')"
  assert_equal "$(mem_field param_bytes "${LAYOUT[@]}")" 8030527488
  assert_equal "$(mem_field param_bytes "${LAYOUT[@]}" --dtype fp8)" \
    "$(awk 'BEGIN { printf "%.0f", 8030527488 + 2 * 3489660928 + 1536 }')"
  # fp8 parameters replace the bf16 weights: 1 byte plus the transposed copy, and the scales.
  assert_equal "$(mem_field param_bytes "${LAYOUT[@]}" --dtype fp8 --fp8-param-gather)" \
    "$(awk 'BEGIN { printf "%.0f", 8030527488 + 1536 }')"
}
