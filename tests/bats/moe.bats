#!/usr/bin/env bats
# Mixtures of experts end to end (docs/parallelism.md "Expert parallelism"): the presets through
# the pipe of tools and through `syssim run`, which must print the same report; the flags'
# errors. Numbers worked out by hand are in the comments.
load common

B200="$HARDWARE/b200.yaml"

# The report of MODEL on HARDWARE with the given flags, through the pipe and through syssim run.
pipe_report() {
  local model="$1" hardware="$2"; shift 2
  syssim-trace "$MODELS/$model.yaml" | syssim-shard "$@" | syssim-cost --hardware "$hardware" \
    | syssim-sim | syssim-mem | syssim-report
}

same_report() {
  local model="$1" hardware="$2"; shift 2
  run syssim run "$MODELS/$model.yaml" --hardware "$hardware" "$@"
  assert_success
  local direct="$output"
  run pipe_report "$model" "$hardware" "$@"
  assert_success
  assert_equal "$output" "$direct"
}

@test "DeepSeek-V3 on 1,024 H100 (tp 2, pp 16, ep 64): the pipe and syssim run agree" {
  # 61 layers on 16 stages as Megatron-Bridge's DeepSeek-V3 layout: 15 x 4 and 1.
  same_report deepseek-v3 "$H100" --tp 2 --sp --pp 16 --dp 32 --ep 64 --etp 1 --global-batch 8192 \
    --pp-layout 4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1 --distributed-optimizer --overlap-grad-reduce --overlap-param-gather
  assert_line --regexp "^  params_total_b += 671\.026$"
  assert_line --regexp "^  params_active_b += 37\.552$"
  assert_line --regexp "^    ep_dispatch_comm_ms = [0-9.]+ \(exposed [0-9.]+\)$"
}

@test "Mixtral 8x7B on 64 H100 (tp 2, ep 8), Qwen3-30B-A3B on 16 H100 (ep 16): the pipe and syssim run agree" {
  same_report mixtral-8x7b "$H100" --tp 2 --sp --dp 32 --ep 8 --etp 1 --global-batch 256 --distributed-optimizer
  assert_line --regexp "^  params_total_b += 46\.703$"
  same_report qwen3-30b-a3b "$H100" --dp 16 --ep 16 --global-batch 256 --distributed-optimizer
}

@test "GPT-OSS-120B on 64 B200 (ep 8): the pipe and syssim run agree" {
  same_report gpt-oss-120b "$B200" --dp 64 --ep 8 --global-batch 512 --micro-batch 4 --distributed-optimizer
  assert_line --regexp "^  params_active_b += 5\.712$"
}

@test "the combined 1F1B schedule (--overlap-moe-expert-parallel-comm): the pipe and syssim run agree" {
  same_report mixtral-8x7b "$H100" --tp 2 --sp --pp 4 --vpp 2 --dp 8 --ep 8 --etp 1 --global-batch 256 \
    --overlap-moe-expert-parallel-comm
  run syssim run "$MODELS/mixtral-8x7b.yaml" --tp 2 --sp --pp 4 --dp 8 --ep 8 --global-batch 256 \
    --overlap-moe-expert-parallel-comm
  assert_failure 2
  assert_output "syssim: error: overlap_moe_expert_parallel_comm with pp > 1 needs virtual pipeline stages (--vpp), as Megatron-Core"
}

@test "the job's experts line names how tokens are routed, padding for quantization included" {
  run syssim run "$MODELS/mixtral-8x7b.yaml" --dp 8 --ep 8 --global-batch 8 --moe-expert-capacity-factor 1.5 \
    --moe-pad-expert-input-to-capacity
  assert_success
  assert_line "  experts       = alltoall dispatcher, capacity 1.5x the mean, padded, balanced routing"
  run syssim run "$MODELS/mixtral-8x7b.yaml" --dp 8 --ep 8 --global-batch 8 --dtype fp8 --moe-router-padding-for-quantization
  assert_success
  assert_line "  experts       = alltoall dispatcher, dropless, balanced routing, routing map padded for quantization"
}

@test "the all-to-all moves each routed token once: Mixtral on 8 GPUs, ep 8" {
  # s 4096 tokens x top-2 x h 4096 x 2 bytes = 67108864 bytes per rank, each way.
  shard=$(stage_of mixtral-8x7b shard --dp 8 --ep 8 --global-batch 8)
  run jq -c '[.shard.ops[] | select(.group == "ep" and .layer == 0 and .phase == "fwd") | [.collective, .message_bytes]]' "$shard"
  assert_output '[["all_to_all",67108864],["all_to_all",32768],["all_to_all",67108864]]'
}

@test "the flex dispatcher sends each token once to each GPU of its experts" {
  # Mixtral on 8 GPUs, ep 8: one expert per GPU, a GPU gets a token with chance
  # 1 - C(7,2)/C(8,2) = 1/4, 8 x 1/4 = 2 GPUs per token, its 2 experts' (no copy saved). The
  # message is one copy of the rank's tokens, 4096 x 4096 x 2 bytes; the routing map (bool) and
  # probabilities (fp32) of 4096 tokens x 8 experts travel with them, a GPU's 1/8 each.
  shard=$(stage_of mixtral-8x7b shard --dp 8 --ep 8 --global-batch 8 --moe-token-dispatcher-type flex)
  run jq -c '[.shard.ops[] | select(.group == "ep" and .layer == 0 and .phase == "fwd") | [.collective, .message_bytes]]' "$shard"
  assert_output '[["flex_all_to_all",33554432],["flex_all_to_all",4096],["flex_all_to_all",16384],["flex_all_to_all",33554432]]'
  same_report qwen3-30b-a3b "$H100" --dp 16 --ep 16 --global-batch 16 --moe-token-dispatcher-type flex
  run syssim run "$MODELS/mixtral-8x7b.yaml" --tp 2 --sp --dp 4 --ep 4 --etp 2 --global-batch 8 --moe-token-dispatcher-type flex
  assert_failure 2
  assert_output "syssim: error: moe_token_dispatcher_type=flex with expert tensor parallelism (etp=2) is not simulated: give --etp 1"
}

@test "expert-parallel settings Megatron refuses are errors with one line" {
  model="$MODELS/mixtral-8x7b.yaml"
  run syssim run "$model" --dp 8 --ep 3 --global-batch 8
  assert_failure 1
  assert_output "syssim: error: ep=3 does not divide num_moe_experts=8"
  run syssim run "$model" --tp 2 --dp 4 --ep 8 --etp 1 --global-batch 8
  assert_failure 2
  assert_output "syssim: error: tp=2 with experts needs --sp (Megatron-Core's MoE layer requires sequence parallelism with tensor parallelism)"
  run syssim run "$model" --dp 8 --ep 8 --global-batch 8 --moe-imbalance 5
  assert_failure 2
  assert_output "syssim: error: moe_imbalance=5: expected the busiest expert's tokens over the mean, from 1 (balanced) to num_moe_experts/moe_router_topk=4"
  run syssim run "$MODELS/llama3-8b.yaml" --dp 8 --ep 8 --global-batch 8
  assert_failure 2
  assert_output "syssim: error: ep and etp need a model with experts (num_moe_experts); llama3-8b has none"
}

@test "a Hugging Face id of a mixture of experts runs from configs/hf" {
  printf 'huggingface: Qwen/Qwen3-30B-A3B\noverrides:\n  seq_length: 4096\n' > "$BATS_TEST_TMPDIR/qwen.yaml"
  run syssim run "$BATS_TEST_TMPDIR/qwen.yaml" --hardware "$H100" --dp 8 --ep 8 --global-batch 8
  assert_success
  assert_line --regexp "^  params_total_b += 30\.532$"
}
