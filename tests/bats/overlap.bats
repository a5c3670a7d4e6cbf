#!/usr/bin/env bats
# Communication overlap and the step's optimizer ops (docs/syssim-shard.md, "Communication
# overlap"): flags, the settings Megatron-LM refuses, the gradient buckets of Llama-3-8B, and
# the step time the overlap saves.
load common

# The JSON report of llama3-8b, dp 8 on one H100 node, through the pipe or the driver.
DP8=(--dp 8 --micro-batch 1 --global-batch 64 --seq-length 4096)

pipe_report() {
  syssim-shard -i "$(trace_of llama3-8b)" "$@" | syssim-cost --hardware "$H100" | syssim-sim | syssim-mem \
    | syssim-report --format json
}

run_report() {
  syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "$@" --format json
}

@test "syssim-shard --help lists the overlap and clipping flags" {
  run syssim-shard --help
  assert_success
  for flag in --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size --tp-comm-overlap --clip-grad; do
    assert_output --partial "$flag"
  done
}

@test "settings Megatron-LM refuses are bad usage (exit 2, one line)" {
  trace=$(trace_of llama3-8b)
  run syssim-shard -i "$trace" --dp 8 --global-batch 8 --overlap-grad-reduce --overlap-param-gather
  assert_failure 2
  assert_output "syssim-shard: error: overlap_param_gather needs --distributed-optimizer (as in Megatron-LM)"
  run syssim-shard -i "$trace" --dp 8 --global-batch 8 --distributed-optimizer --overlap-param-gather
  assert_failure 2
  assert_output "syssim-shard: error: overlap_param_gather needs --overlap-grad-reduce (as in Megatron-LM)"
  run syssim-shard -i "$trace" --dp 8 --global-batch 8 --ddp-bucket-size 1000000
  assert_failure 2
  assert_output "syssim-shard: error: ddp_bucket_size=1000000 needs --overlap-grad-reduce (without it Megatron-LM reduces all gradients in one bucket)"
  run syssim-shard -i "$trace" --clip-grad -1
  assert_failure 2
  assert_output "syssim-shard: error: clip_grad=-1 must be 0 or more and finite (0 disables clipping)"
  run syssim-shard -i "$trace" --tp 2 --tp-comm-overlap
  assert_failure 2
  assert_output "syssim-shard: error: tp_comm_overlap needs --sp with tp > 1 (Megatron-LM overlaps TP communication only under sequence parallelism)"
  run syssim-shard -i "$trace" --ddp-bucket-size 0
  assert_failure 2
  assert_output --partial "syssim-shard: error: --ddp-bucket-size"
}

@test "llama3-8b dp 8: Megatron's default buckets of 40e6 parameters, in backward order" {
  graph=$(stage_of llama3-8b shard "${DP8[@]}" --overlap-grad-reduce)
  # max(40,000,000, 1,000,000 x 8) parameters per bucket.
  run jq '.shard.training.ddp_bucket_size' "$graph"
  assert_output "40000000"
  # The output layer's gradient (128256 x 4096 parameters) is finished first and exceeds a
  # bucket alone; the fp32 messages of all buckets add up to 4 bytes per parameter.
  run jq '[.shard.ops[] | select(.module | startswith("data_parallel_grads"))] as $b
          | [$b[0].message_bytes == 128256 * 4096 * 4,
             ($b | map(.message_bytes) | add) == .shard.params_local * 4,
             ($b[:-1] | all(.message_bytes >= 40000000 * 4)),
             ($b | all(.collective == "all_reduce" and .group == "dp" and .group_size == 8))]' -c "$graph"
  assert_output "[true,true,true,true]"
  # Without --overlap-grad-reduce: one bucket.
  run jq '[.shard.ops[] | select(.module | startswith("data_parallel_grads"))] | length' \
    "$(stage_of llama3-8b shard "${DP8[@]}")"
  assert_output "1"
}

@test "the distributed optimizer gathers every bucket's bf16 weights, before the forward with --overlap-param-gather" {
  graph=$(stage_of llama3-8b shard "${DP8[@]}" --distributed-optimizer --overlap-grad-reduce --overlap-param-gather)
  run jq '[.shard.ops[] | select(.module | startswith("distributed_optimizer_params"))] as $g
          | [($g | all(.scope == "step_start" and .collective == "all_gather")),
             ($g | map(.message_bytes) | add) == .shard.params_local * 2,
             ($g | map(.id)) == [range(0; $g | length)]]' -c "$graph"
  assert_output "[true,true,true]"
}

@test "--clip-grad 0 drops the gradient norm and clipping, 12 bytes per parameter of optimizer traffic" {
  with=$(stage_of llama3-8b shard "${DP8[@]}")
  without=$(stage_of llama3-8b shard "${DP8[@]}" --clip-grad 0)
  run jq '[.shard.ops[] | select(.module == "optimizer.clip_grad") | .bytes] | add' "$without"
  assert_output "null"
  # Norm: 4 bytes read per parameter (+ 4 written); clipping: 8 per parameter (+ 4 read).
  run jq '([.shard.ops[] | select(.module == "optimizer.clip_grad") | .bytes] | add) - .shard.params_local * 12' "$with"
  assert_output "8"
}

@test "--overlap-grad-reduce lowers the exposed DP communication of llama3-8b dp 8; pipe and syssim run agree" {
  serial=$(pipe_report "${DP8[@]}")
  overlapped=$(pipe_report "${DP8[@]}" --overlap-grad-reduce)
  [ "$overlapped" = "$(run_report "${DP8[@]}" --overlap-grad-reduce)" ]
  [ "$serial" = "$(run_report "${DP8[@]}")" ]
  run jq -n --argjson s "$serial" --argjson o "$overlapped" \
    '[$o.collective_exposed_ms < $s.collective_exposed_ms, $o.step_time_ms < $s.step_time_ms,
      $s.step_time_ms - $o.step_time_ms <= $s.collective_exposed_ms]' -c
  assert_output "[true,true,true]"
}

@test "--tp-comm-overlap: ring exchange and pipelined chunks in the layers of llama3-8b tp 8" {
  plain=$(stage_of llama3-8b shard --tp 8 --sp --seq-length 4096)
  chunked=$(stage_of llama3-8b shard --tp 8 --sp --seq-length 4096 --tp-comm-overlap)
  # The GEMM FLOPs and reduce-scatter messages are kept, per phase.
  sums='[.shard.ops[] | select(.scope == "microbatch" and (.kind == "gemm" or .collective == "reduce_scatter"))]
        | group_by(.phase + .kind) | map([.[0].phase, .[0].kind, (map(.message_bytes // .flops) | add)])'
  [ "$(jq -c "$sums" "$plain")" = "$(jq -c "$sums" "$chunked")" ]
  # Forward of layer 0: QKV's and fc1's all-gathers become 7 ring steps of 1/8 of the
  # [s, b, h] bf16 buffer (4096 * 4096 * 2 / 8 bytes); proj's and fc2's reduce-scatters 4
  # chunks of 1/4.
  run jq -c '[.shard.ops[] | select(.layer == 0 and .phase == "fwd" and .kind == "collective")]
             | group_by(.collective) | map([.[0].collective, length, (map(.message_bytes) | unique)])' "$chunked"
  assert_output '[["reduce_scatter",8,[8388608]],["send_recv",14,[4194304]]]'
}
