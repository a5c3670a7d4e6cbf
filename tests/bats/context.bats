#!/usr/bin/env bats
# Context parallelism (--cp, --cp-comm-type): Llama-3-8B at 32K-128K tokens. Expected numbers
# are worked out by hand in the comments: Llama-3-8B has 32 layers, 32 heads in 8 query groups,
# head dim 128; at tp 8 a rank holds 4 heads and 1 group.
load common

pipe_report() {
  syssim-shard -i "$(trace_of llama3-8b)" "$@" | syssim-cost --hardware "$H100" | syssim-sim | syssim-mem \
    | syssim-report
}

@test "--cp-comm-type takes p2p or all_gather" {
  run syssim-shard --help
  assert_output --partial "--cp-comm-type"
  run syssim-shard -i "$(trace_of llama3-8b)" --cp 2 --cp-comm-type a2a
  assert_failure 2
  assert_output "syssim-shard: error: cp_comm_type=a2a (Megatron-LM's all-to-all exchange) is not simulated yet: give p2p or all_gather"
  run syssim-shard -i "$(trace_of llama3-8b)" --cp 2 --cp-comm-type ring
  assert_failure 2
  assert_output "syssim-shard: error: cp_comm_type=ring: expected p2p or all_gather"
}

@test "cp must split the sequence into 2*cp equal chunks (bad data naming the values)" {
  run syssim-shard -i "$(trace_of llama3-8b)" --cp 3 --seq-length 32768
  assert_failure 1
  assert_output "syssim-shard: error: cp=3 does not divide seq_length=32768"
  run syssim-shard -i "$(trace_of llama3-8b)" --cp 4 --seq-length 8196
  assert_failure 1
  assert_output "syssim-shard: error: 2*cp=8 does not divide seq_length=8196 (the load-balanced causal split)"
  run syssim-shard -i "$(trace_of llama3-8b)" --tp 8 --sp --cp 4 --seq-length 8200
  assert_failure 1
  assert_output "syssim-shard: error: tp*cp=32 does not divide seq_length=8200 (sequence parallelism)"
}

@test "cp with the unfused attention is refused (Megatron-LM runs CP only in TE attention)" {
  sed 's/^attention_backend: flash/attention_backend: unfused/' "$MODELS/llama3-8b.yaml" > "$BATS_TEST_TMPDIR/unfused.yaml"
  syssim-trace "$BATS_TEST_TMPDIR/unfused.yaml" -o "$BATS_TEST_TMPDIR/unfused.graph"
  run syssim-shard -i "$BATS_TEST_TMPDIR/unfused.graph" --cp 2
  assert_failure 2
  assert_output --partial "syssim-shard: error: cp=2 needs attention_backend=flash"
}

@test "the pipe and syssim run print identical reports (cp 1-8, 32K-128K tokens, p2p and all_gather)" {
  for seq in 32768 65536 131072; do
    for cp in 1 2 4 8; do
      for comm in p2p all_gather; do
        [ "$cp" = 1 ] && [ "$comm" = all_gather ] && continue
        args=(--tp 8 --sp --cp "$cp" --cp-comm-type "$comm" --seq-length "$seq" --global-batch 1)
        expected=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${args[@]}")
        actual=$(pipe_report "${args[@]}")
        [ -n "$expected" ] && [ "$expected" = "$actual" ] ||
          { echo "differs: ${args[*]}"; diff <(echo "$expected") <(echo "$actual"); false; }
      done
    done
  done
}

@test "p2p ring: each rank does 1/cp of the causal attention in cp steps and passes K/V blocks" {
  graph=$(stage_of llama3-8b shard --tp 8 --sp --cp 4 --seq-length 32768)
  run jq '.shard.axes.s' "$graph"
  assert_output "8192"
  # Forward causal attention of the whole sequence, 4 heads: 2 * 32768^2 * 4 * 128 per layer,
  # a quarter per rank, 32 layers; backward 5/2 of it. Four steps per layer.
  run jq '[.shard.ops[] | select(.name == "syssim::flash_attn") | .flops] | [length, add]' -c "$graph"
  assert_output "[128,$(awk 'BEGIN { printf "%.0f", 32 * 2 * 32768^2 * 4 * 128 / 4 }')]"
  run jq '[.shard.ops[] | select(.name == "syssim::flash_attn_backward") | .flops] | add' "$graph"
  assert_close "$output" "$(awk 'BEGIN { printf "%.17g", 32 * 5 * 32768^2 * 4 * 128 / 4 }')"
  # One K/V block: K and V, 8192 tokens x 1 group x 128 x 2 bytes = 4194304 bytes. Forward:
  # cp-1 = 3 exchanges per layer; backward: 4 carrying 1, 2, 2, 1 blocks (K/V, then dK/dV too).
  run jq -c '[.shard.ops[] | select(.collective == "send_recv" and .phase == "fwd") | .message_bytes] | [length, unique]' "$graph"
  assert_output "[96,[4194304]]"
  run jq -c '[.shard.ops[] | select(.collective == "send_recv" and .phase == "bwd" and .layer == 0) | .message_bytes]' "$graph"
  assert_output "[4194304,8388608,8388608,4194304]"
  run jq -c '[.shard.ops[] | select(.group == "cp") | [.stream, .group_size]] | unique' "$graph"
  assert_output '[["cp",4]]'
}

@test "all_gather: one K/V all-gather per attention, and a dK/dV reduce-scatter in backward" {
  graph=$(stage_of llama3-8b shard --tp 8 --sp --cp 4 --cp-comm-type all_gather --seq-length 32768)
  # The whole sequence's K and V: 2 x 32768 x 128 x 2 bytes = 16777216.
  run jq -c '[.shard.ops[] | select(.group == "cp") | [.phase, .collective, .message_bytes]] | group_by(.) | map([.[0], length])' "$graph"
  assert_output '[[["bwd","all_gather",16777216],32],[["bwd","reduce_scatter",16777216],32],[["fwd","all_gather",16777216],32]]'
  run jq '[.shard.ops[] | select(.name == "syssim::flash_attn") | .flops] | add' "$graph"
  assert_close "$output" "$(awk 'BEGIN { printf "%.17g", 32 * 2 * 32768^2 * 4 * 128 / 4 }')"
}

@test "gradients are reduced over dp x cp ranks" {
  graph=$(stage_of llama3-8b shard --tp 2 --sp --cp 2 --dp 4 --global-batch 4 --seq-length 16384)
  run jq -c '[.shard.ops[] | select(.group == "dp") | .group_size] | unique' "$graph"
  assert_output "[8]"
}

@test "128K tokens, tp 8, cp 8: the K/V ring is hidden behind the attention" {
  graph=$(stage_of llama3-8b sim --tp 8 --sp --cp 8 --seq-length 131072 --global-batch 1)
  # The cp group spans 64 ranks (tp fastest), so every ring neighbour is on another node:
  # 50 GB/s x 0.94 and 4 us per exchange. A block is 2 x 16384 x 128 x 2 = 8388608 bytes:
  # 182.48 us; two blocks 360.96 us. Per layer 7 forward exchanges of one block, backward 2 of one and
  # 6 of two.
  expected=$(awk 'BEGIN { one = 8388608 / 47e3 + 4; two = 2 * 8388608 / 47e3 + 4; printf "%.17g", 32 * (9 * one + 6 * two) / 1e3 }')
  assert_close "$(jq '.sim.collective_by_group_ms.cp.total_ms' "$graph")" "$expected"
  # Each step's attention (4 heads, 16384 x 16384 block: 2 * 16384^2 * 4 * 128 FLOPs = 278 us at
  # 989 TFLOP/s forward, 2.5x that backward) outlasts its exchange.
  run jq -e '.sim.collective_by_group_ms.cp.exposed_ms <= 0.1 * .sim.collective_by_group_ms.cp.total_ms' "$graph"
  assert_success
  run syssim-report -i "$(stage_of llama3-8b mem --tp 8 --sp --cp 8 --seq-length 131072 --global-batch 1)"
  assert_output --regexp "    cp_attention_comm_ms = 121\.8592 \(exposed [0-9.]+\)"
  # The all-gather variant waits for K/V before the attention: most of it is exposed.
  graph=$(stage_of llama3-8b sim --tp 8 --sp --cp 8 --cp-comm-type all_gather --seq-length 131072 --global-batch 1)
  run jq -e '.sim.collective_by_group_ms.cp.exposed_ms >= 0.5 * .sim.collective_by_group_ms.cp.total_ms' "$graph"
  assert_success
}

@test "on one NVLink node (tp 1, cp 8) the ring is hidden too" {
  graph=$(stage_of llama3-8b sim --cp 8 --seq-length 131072 --global-batch 1)
  run jq -e '.sim.collective_by_group_ms.cp.exposed_ms <= 0.1 * .sim.collective_by_group_ms.cp.total_ms' "$graph"
  assert_success
}
