#!/usr/bin/env bats
# Sharded data parallelism through the command line (--data-parallel-sharding-strategy,
# docs/parallelism.md "Sharded data parallelism"): Llama-3-8B on 8 GPUs, dp 8, tp 1.
# Expected numbers are worked out by hand in the comments. Llama-3-8B: h = 4096, 32 heads of
# 128 in 8 query groups, SwiGLU f = 14336, V = 128256 (a multiple of 128: no padding), untied.
#   a layer: norms 2 x 4096 + QKV (4096 + 2 x 1024) x 4096 + projection 4096 x 4096
#            + fc1 2 x 14336 x 4096 + fc2 4096 x 14336
#          = 8,192 + 25,165,824 + 16,777,216 + 117,440,512 + 58,720,256 = 218,112,000
#   P = 2 x 128256 x 4096 (embedding, output layer) + 32 x 218,112,000 + 4096 (final norm)
#     = 1,050,673,152 + 6,979,584,000 + 4,096 = 8,030,261,248
load common
bats_require_minimum_version 1.5.0

P=8030261248
LAYER=218112000
EMBEDDING=525336576  # 128256 x 4096

JOB=(--tp 1 --dp 8 --micro-batch 1 --global-batch 16)

pipe_report() {
  syssim-trace "$MODELS/llama3-8b.yaml" | syssim-shard "$@" | syssim-cost --hardware "$H100" | syssim-sim \
    | syssim-mem | syssim-report
}

# The fields of syssim run's JSON report of Llama-3-8B with the flags given.
run_json() {
  syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" --format json "$@"
}

@test "syssim-shard --help lists the strategy and its aliases" {
  run syssim-shard --help
  assert_success
  assert_output --partial -- "--data-parallel-sharding-strategy"
  assert_output --partial "optim_grads_params"
  assert_output --partial "zero3"
}

@test "zero3 reports a lower peak memory than optim in syssim run, with the training state sharded 8 ways" {
  local optim zero2 zero3
  optim=$(run_json "${JOB[@]}" --data-parallel-sharding-strategy optim)
  zero2=$(run_json "${JOB[@]}" --data-parallel-sharding-strategy zero2)
  zero3=$(run_json "${JOB[@]}" --data-parallel-sharding-strategy zero3)
  # optim: 16-bit weights 2P and fp32 gradients 4P whole, Adam's 12 bytes per parameter / 8.
  assert_equal "$(jq -c '[.param_bytes, .grad_bytes, .optimizer_state_bytes]' <<< "$optim")" \
    "$(awk -v p="$P" 'BEGIN { printf "[%.0f,%.0f,%.0f]", 2 * p, 4 * p, 12 * p / 8 }')"
  # zero2: the gradients sharded too, 4P / 8.
  assert_equal "$(jq -c '[.param_bytes, .grad_bytes, .optimizer_state_bytes]' <<< "$zero2")" \
    "$(awk -v p="$P" 'BEGIN { printf "[%.0f,%.0f,%.0f]", 2 * p, 4 * p / 8, 12 * p / 8 }')"
  # zero3: and the weights, 2P / 8 = 2,007,565,312 bytes.
  assert_equal "$(jq -c '[.param_bytes, .grad_bytes, .optimizer_state_bytes]' <<< "$zero3")" \
    "[2007565312,4015130624,12045391872]"
  # The training state falls from 7.5P to 6P to 2.25P; the gathered weights and the unreduced
  # gradients of a layer or two (a few GB) do not make up for it.
  jq -e --argjson z3 "$(jq .peak_memory_gb <<< "$zero3")" --argjson z2 "$(jq .peak_memory_gb <<< "$zero2")" \
    '$z3 < $z2 and $z2 < .peak_memory_gb' <<< "$optim"
  # The peak is the training state plus what is live then.
  assert_close "$(jq .peak_memory_gb <<< "$zero3")" \
    "$(jq '(.param_bytes + .grad_bytes + .optimizer_state_bytes + .activation_bytes + .temporary_bytes) / 1e9' <<< "$zero3")"
}

@test "hybrid sharding: dp 8 as 2 replicas shards the state 4 ways and all-reduces across the replicas" {
  local hsdp
  hsdp=$(run_json "${JOB[@]}" --data-parallel-sharding-strategy zero3 --dp-replicate 2)
  # 18 bytes per parameter over the 4 ranks of a replica: 2P/4, 4P/4 and 12P/4.
  assert_equal "$(jq -c '[.param_bytes, .grad_bytes, .optimizer_state_bytes]' <<< "$hsdp")" \
    "$(awk -v p="$P" 'BEGIN { printf "[%.0f,%.0f,%.0f]", 2 * p / 4, 4 * p / 4, 12 * p / 4 }')"
  assert_equal "$(jq -r .parallelism.dp_replicate <<< "$hsdp")" 2
  # The replicas' all-reduces run on their own stream and group.
  jq -e '.collective_by_group_ms.dpr.total_ms > 0' <<< "$hsdp"
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${JOB[@]}" --data-parallel-sharding-strategy zero3 --dp-replicate 3
  assert_failure 2
  assert_output "syssim: error: dp_replicate=3 does not divide dp=8"
}

@test "syssim-shard in the pipe: each layer's gradients reduce-scattered, its weights gathered, in every micro-batch" {
  local graph="$BATS_TEST_TMPDIR/zero3.graph"
  syssim-trace "$MODELS/llama3-8b.yaml" | syssim-shard "${JOB[@]}" --data-parallel-sharding-strategy zero3 > "$graph"
  # Layer 0: fp32 gradients 4 x 218,112,000 = 872,448,000 bytes over the 8 dp ranks; its
  # bf16 weights 2 x 218,112,000 = 436,224,000 bytes gathered before the forward and again
  # before the backward.
  run jq -c '[.shard.ops[] | select(.module == "decoder.layers.0.fsdp_grads")
    | [.collective, .group, .group_size, .message_bytes, .scope]]' "$graph"
  assert_output "[[\"reduce_scatter\",\"dp\",8,$((4 * LAYER)),\"microbatch\"]]"
  run jq -c '[.shard.ops[] | select(.module == "decoder.layers.0.fsdp_params")
    | [.collective, .group_size, .message_bytes, .pass]]' "$graph"
  assert_output "[[\"all_gather\",8,$((2 * LAYER)),\"forward\"],[\"all_gather\",8,$((2 * LAYER)),\"backward\"]]"
  # 34 units (32 layers, the embedding, the final norm with the output layer): 4P bytes
  # reduced per micro-batch. Forward gathers: 2P bytes; backward: the same but the embedding
  # table (its backward reads no weight), 2 x (P - 525,336,576) in 33 gathers.
  run jq -c '[.shard.ops[] | select(.collective == "reduce_scatter" and (.module | endswith(".fsdp_grads")))]
    | [length, (map(.message_bytes) | add)]' "$graph"
  assert_output "[34,$((4 * P))]"
  run jq -c '[.shard.ops[] | select(.collective == "all_gather" and (.module | endswith(".fsdp_params")))]
    | group_by(.pass) | map([.[0].pass, length, (map(.message_bytes) | add)])' "$graph"
  assert_output "[[\"backward\",33,$((2 * (P - EMBEDDING)))],[\"forward\",34,$((2 * P))]]"
  # No bucketed reduction and no gather after Adam; Adam updates P / 8 parameters, 30 bytes each.
  run jq '[.shard.ops[] | select(.module | startswith("data_parallel_grads") or startswith("distributed_optimizer_params"))] | length' "$graph"
  assert_output 0
  run jq '.shard.ops[] | select(.name == "optimizer::adam") | .bytes' "$graph"
  assert_output "$((P / 8 * 30))"
  run jq -c '.shard.training | [.data_parallel_sharding_strategy, .distributed_optimizer]' "$graph"
  assert_output '["optim_grads_params",true]'
}

@test "zero2 in the pipe: per-layer reduce-scatters, the weights gathered once after Adam" {
  local graph; graph=$(stage_of llama3-8b shard "${JOB[@]}" --data-parallel-sharding-strategy zero2)
  run jq '[.shard.ops[] | select(.module | endswith(".fsdp_params"))] | length' "$graph"
  assert_output 0
  run jq -c '[.shard.ops[] | select(.module | endswith(".fsdp_grads")) | .message_bytes] | [length, add]' "$graph"
  assert_output "[34,$((4 * P))]"
  # One bucket without --overlap-grad-reduce: 2P bytes of bf16 weights, once per step.
  run jq -c '[.shard.ops[] | select(.module | startswith("distributed_optimizer_params"))
    | [.collective, .scope, .message_bytes]]' "$graph"
  assert_output "[[\"all_gather\",\"step\",$((2 * P))]]"
  run jq -c '.shard.training | [.data_parallel_sharding_strategy, .distributed_optimizer]' "$graph"
  assert_output '["optim_grads",true]'
}

@test "aliases give the same graph as Megatron-FSDP's names" {
  for pair in zero2:optim_grads shard_grad_op:optim_grads zero3:optim_grads_params full_shard:optim_grads_params \
      zero1:optim; do
    diff <(jq -S '.shard' "$(stage_of llama3-8b shard "${JOB[@]}" --data-parallel-sharding-strategy "${pair%%:*}")") \
      <(jq -S '.shard' "$(stage_of llama3-8b shard "${JOB[@]}" --data-parallel-sharding-strategy "${pair#*:}")") ||
      { echo "differs: $pair"; return 1; }
  done
  # optim is the distributed optimizer.
  diff <(jq -S '.shard' "$(stage_of llama3-8b shard "${JOB[@]}" --data-parallel-sharding-strategy optim)") \
    <(jq -S '.shard' "$(stage_of llama3-8b shard "${JOB[@]}" --distributed-optimizer)")
}

@test "an unknown strategy is bad usage (exit 2) with one line on stderr naming it" {
  run --separate-stderr syssim-shard -i "$(trace_of llama3-8b)" --dp 8 --data-parallel-sharding-strategy zero4
  assert_failure 2
  assert_output ""
  [ "${#stderr_lines[@]}" -eq 1 ] || { echo "stderr: $stderr"; return 1; }
  assert_equal "$stderr" "syssim-shard: error: --data-parallel-sharding-strategy: unknown sharding strategy 'zero4'"
  run --separate-stderr syssim run "$MODELS/llama3-8b.yaml" --dp 8 --data-parallel-sharding-strategy hybrid_shard
  assert_failure 2
  assert_output ""
  [ "${#stderr_lines[@]}" -eq 1 ] || { echo "stderr: $stderr"; return 1; }
  assert_equal "$stderr" "syssim: error: --data-parallel-sharding-strategy: unknown sharding strategy 'hybrid_shard'"
}

@test "combinations not simulated yet are bad usage (exit 2)" {
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 2 --dp 4 --global-batch 16 --pipeline-schedule zb-h1 \
    --data-parallel-sharding-strategy optim_grads
  assert_failure 2
  assert_output "syssim-shard: error: data_parallel_sharding_strategy=optim_grads with the zb-h1 schedule is not simulated yet (its weight pass splits a unit's backward)"
}

@test "the pipe and syssim run print identical reports (optim, zero2, zero3; tp 1 and 2, dp 4 and 8)" {
  for strategy in optim optim_grads optim_grads_params; do
    for layout in "--tp 1 --dp 8" "--tp 2 --sp --dp 4"; do
      # shellcheck disable=SC2206
      args=($layout --micro-batch 1 --global-batch 16 --data-parallel-sharding-strategy "$strategy")
      expected=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${args[@]}")
      actual=$(pipe_report "${args[@]}")
      [ -n "$expected" ] && [ "$expected" = "$actual" ] ||
        { echo "differs: ${args[*]}"; diff <(echo "$expected") <(echo "$actual"); return 1; }
      [[ "$expected" == *"SimulationReport("* ]]
    done
  done
}

@test "Llama-3-70B in pure ZeRO-3 on 64 H100 fits, within 10% of the hand calculation of docs/memory.md" {
  # 70,553,706,496 parameters x 18 / 64 = 19.84 GB of states; 80 checkpointed layer inputs of
  # 8192 x 8192 x 2 bytes = 10.74 GB; at the end of the forward the gathered output layer
  # (128,256 x 8192 x 2 = 2.10 GB), its bf16 logits (2.10 GB) and the fp32 logits (4.20 GB):
  # 38.98 GB.
  run syssim run "$MODELS/llama3-70b.yaml" --hardware "$H100" --dp 64 --micro-batch 1 --global-batch 64 \
    --data-parallel-sharding-strategy optim_grads_params --recompute full --format json
  assert_success
  peak=$(jq -r .peak_memory_gb <<< "$output")
  awk -v p="$peak" 'BEGIN { hand = 38.98; exit !(p > 0.9 * hand && p < 1.1 * hand) }' || { echo "peak $peak GB"; return 1; }
}

# Activation offloading (docs/memory.md "Activation offloading"): Megatron-Bridge's recipe of
# Llama-3-70B on 64 GB200 (v0.2.0, scripts/performance/configs/llama3/workload_base_configs.py,
# LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG: Megatron-FSDP, micro-batch 2, cpu_offloading_num_layers
# 40) ran at 4,312 tokens/s per GPU (its 25.11 performance table): it fits the GPU.
@test "Megatron-Bridge's GB200 recipe of Llama-3-70B fits only with its 40 offloaded layers" {
  local job=(llama3-70b --hardware gb200-nvl72 --dp 64 --micro-batch 2 --global-batch 256
             --data-parallel-sharding-strategy optim_grads_params --dtype fp8 --fp8-recipe current --format json)
  run syssim run "${job[@]}"
  assert_success
  jq -e '.bottlenecks.oom != null' <<< "$output"
  run syssim run "${job[@]}" --cpu-offloading-num-layers 40
  assert_success
  jq -e '.bottlenecks.oom == null' <<< "$output"
}

@test "offloading is refused where Megatron-Core refuses it, and without a host link" {
  run syssim run llama3-8b --hardware "$H100" --pp 2 --cpu-offloading-num-layers 4
  assert_failure 2
  assert_output "syssim: error: cpu_offloading_num_layers=4 needs pp=1: Megatron-Core has no pipeline parallelism with CPU offloading"
  run syssim run llama3-8b --hardware "$H100" --cpu-offloading-num-layers 32
  assert_failure 2
  assert_output "syssim: error: cpu_offloading_num_layers=32: CPU offloading can be done only for 1 to 31 layers (num_layers - 1)"
  run syssim run llama3-8b --hardware mi300x --cpu-offloading-num-layers 4
  assert_failure 1
  assert_output --regexp "^syssim: error: hardware mi300x: no host_link_GBps, needed by the copy to or from host memory at /shard/ops/[0-9]+$"
}

@test "the report names the offloaded layers" {
  run syssim run llama3-8b --hardware "$H100" --dp 8 --global-batch 16 --cpu-offloading-num-layers 8
  assert_success
  assert_line "  cpu_offloading = the activations of the first 8 decoder layers, to host memory and back"
}
