#!/usr/bin/env bats
# Activation recomputation and dropout (docs/memory.md): flags, errors, and what they change.
load common

# The default job's layout: Llama-3-8B on one H100 node, tp 2 with SP, dp 4.
LAYOUT=(--tp 2 --sp --dp 4 --global-batch 128 --distributed-optimizer)

# report MODEL FLAGS...: the JSON report of MODEL sharded with FLAGS.
report() {
  local model="$1"; shift
  syssim-report --format json -i "$(stage_of "$model" mem "$@")"
}

@test "syssim-shard --help lists the recompute flags" {
  run syssim-shard --help
  assert_success
  for flag in --recompute --recompute-modules --recompute-method --recompute-num-layers; do
    assert_output --partial -- "$flag"
  done
}

@test "recompute settings that need another granularity are bad usage (exit 2)" {
  local trace; trace=$(trace_of llama3-8b)
  run syssim-shard -i "$trace" --recompute selective --recompute-num-layers 2
  assert_failure 2
  assert_output "syssim-shard: error: recompute_num_layers=2 needs recompute=full"
  run syssim-shard -i "$trace" --recompute-method block
  assert_failure 2
  assert_output "syssim-shard: error: recompute_method=block needs recompute=full"
  run syssim-shard -i "$trace" --recompute full --recompute-modules mlp
  assert_failure 2
  assert_output "syssim-shard: error: recompute_modules=mlp needs recompute=selective"
  run syssim-shard -i "$trace" --recompute full --recompute-num-layers 0
  assert_failure 2
  assert_output "syssim-shard: error: recompute_num_layers=0 must be at least 1"
  run syssim-shard -i "$trace" --recompute selective --recompute-modules moe_act
  assert_failure 2
  assert_output "syssim-shard: error: recompute_modules=moe_act needs a model with experts; llama3-8b has none"
  run syssim-shard -i "$trace" --recompute selective --recompute-modules attention
  assert_failure 2
  assert_output --partial "--recompute-modules: attention not in {core_attn,mlp,layernorm,moe,moe_act,shared_experts,mla_up_proj,op}"
  run syssim-shard -i "$trace" --recompute selective --recompute-modules op,mlp
  assert_failure 2
  assert_output "syssim-shard: error: recompute_modules=op is a policy over all of a layer's ops; it takes no other module"
}

@test "more recomputed layers than the model has is bad data (exit 1)" {
  run syssim-shard -i "$(trace_of llama3-8b)" --recompute full --recompute-num-layers 33
  assert_failure 1
  assert_output "syssim-shard: error: recompute_num_layers=33 exceeds the layers of every virtual pipeline stage (at most 32)"
}

@test "the shard section records the recompute settings with Megatron's defaults resolved" {
  run jq -c '.shard.training | [.recompute, .recompute_method, .recompute_num_layers, .recompute_modules]' \
    "$(stage_of llama3-8b shard --recompute full)"
  assert_output '["full","uniform",1,[]]'
  run jq -c '.shard.training | [.recompute, .recompute_method, .recompute_num_layers, .recompute_modules]' \
    "$(stage_of llama3-8b shard --recompute selective --recompute-modules mlp,layernorm)"
  assert_output '["selective",null,null,["mlp","layernorm"]]'
  run jq -c '.shard.training.recompute_modules' "$(stage_of llama3-8b shard --recompute selective)"
  assert_output '["core_attn"]'
}

@test "full recompute reruns each layer's forward in the backward pass, TP collectives included" {
  local graph; graph=$(stage_of llama3-8b shard "${LAYOUT[@]}" --recompute full)
  # Llama-3-8B: 12 forward compute ops per layer plus 2 all-gathers and 2 reduce-scatters under SP.
  run jq -c '[.shard.ops[] | select(.recompute)] | [length, (map(.phase) | unique), (map(.pass) | unique),
             ([.[] | select(.kind == "collective")] | length)]' "$graph"
  assert_output '[512,["bwd"],["backward"],128]'
}

@test "Llama-3-8B: full recompute lowers peak memory, lengthens the step, and HFU counts it" {
  local none full
  none=$(report llama3-8b "${LAYOUT[@]}")
  full=$(report llama3-8b "${LAYOUT[@]}" --recompute full)
  jq -e --argjson full "$full" '$full.peak_memory_gb < .peak_memory_gb and $full.step_time_ms > .step_time_ms
    and .hfu == .mfu and $full.hfu > $full.mfu' <<< "$none" > /dev/null
  # Saved per token per layer, bytes, under tp 2 with SP (all of it split): norm outputs,
  # the residual and layer outputs 4 x 2h; q, attention output 2 x 2h; k, v 2 x 2gd; the
  # SwiGLU input 2 x 2f and output 2f; two fp32 rstd 8. Full recompute keeps the layer
  # input 2h. Both peaks are at the loss, after the last layer's forward.
  local h=4096 gd=1024 f=14336 tokens=8192 layers=32
  local per_token=$(( (12 * h + 4 * gd + 6 * f + 8) / 2 - 2 * h / 2 ))
  assert_close "$(jq -n --argjson a "$none" --argjson b "$full" '$a.activation_bytes - $b.activation_bytes')" \
    "$(( layers * tokens * per_token ))"
}

@test "GPT-3 configs train with dropout: masks of one byte, none on the flash attention path" {
  run jq -c '[.trace.ops[] | select(.name == "syssim::dropout")] | [length, (map(.outputs[1].dtype) | unique),
             ([.[] | select(.layer == 0) | .module])]' "$(trace_of gpt3-5b)"
  assert_output '[49,["bool"],["decoder.layers.0.self_attn_bda","decoder.layers.0.mlp_bda"]]'
}

@test "torchtitan's Llama 3.1 8B under its per-op checkpointing and FSDP2: the layers' saved ops and the fp32 loss make the peak" {
  run syssim run llama3.1-8b-torchtitan --hardware h100-sxm-96gb-500w --dp 8 --micro-batch 2 --global-batch 16 \
    --recompute selective --recompute-modules op --data-parallel-sharding-strategy optim_grads_params \
    --fsdp-implementation fsdp2 --format json
  assert_success
  # At the loss's backward: every layer keeps its output, q, v, the attention output, the gate
  # and the down projection's output, 2 (4h + gd + f) bytes per token; the loss holds the fp32
  # log-softmax, the NLL's gradient and the log-softmax's, 12 bytes per logit; FSDP2 keeps the
  # root unit's embedding and output weights, 2 x 2vh, and the last layer's, 2 (h (h + 2gd) + h h
  # + 3hf + 2h), whole from forward to backward (torchtitan's apply_fsdp). 99.5% of the
  # transient peak, the rest the final norm.
  local h=4096 gd=1024 f=14336 v=128256 tokens=16384 layers=32
  local layer_params=$(( h * (h + 2 * gd) + h * h + 3 * h * f + 2 * h ))
  assert_close "$(jq '.activation_bytes + .temporary_bytes' <<< "$output")" \
    "$(( layers * tokens * 2 * (4 * h + gd + f) + 12 * tokens * v + 4 * v * h + 2 * layer_params ))" 0.01
  # FSDP2 shards 16 bytes per parameter over the 8 ranks: the fp32 weight, which is Adam's master
  # weight, the fp32 gradient and Adam's two fp32 moments (docs/memory.md, "Model states").
  assert_close "$(jq '.param_bytes + .grad_bytes + .optimizer_state_bytes' <<< "$output")" "$(( 16 * 8030261248 / 8 ))" 1e-6
}
