#!/usr/bin/env bats
# Pipeline parallelism (docs/parallelism.md): stage layout, point-to-point ops, schedules,
# per-stage memory and the errors of impossible combinations. Expected numbers are worked out
# by hand in the comments.
load common

A100="$HARDWARE/a100-sxm-80gb.yaml"

# llama3-8b at sequence 4096 sharded with the given flags.
llama() { stage_of llama3-8b "$1" --seq-length 4096 "${@:2}"; }

@test "--pp 4 cuts llama3-8b's 32 layers into 4 stages of 8, embedding first, output layer last" {
  shard=$(llama shard --pp 4 --global-batch 8)
  run jq -c '.shard.pp_layout' "$shard"
  assert_output "[8,8,8,8]"
  # Decoder layer l runs on stage l / 8; the embedding on stage 0, final norm, output and loss on 3.
  run jq -e '[.shard.ops[] | select(.scope == "microbatch" and .layer != null) | .stage == (.layer / 8 | floor)]
             | all' "$shard"
  assert_success
  run jq -c '[.shard.ops[] | select(.layer == null and .scope == "microbatch" and .kind != "collective")
              | "\(.module | split(".")[0]):\(.stage)"] | unique' "$shard"
  assert_output '["decoder:3","embedding:0","loss:3","output_layer:3"]'
  # Parameters per stage: a layer has 4096*(4096+1024+1024+4096) attention + 3*4096*14336 MLP +
  # 2*4096 norm = 218112000; the embedding and the output layer 128256*4096 = 525336576 each,
  # the final norm 4096.
  run jq -c '.shard.stage_params_local' "$shard"
  assert_output "[2270232576,1744896000,1744896000,2270236672]"
}

@test "neighbouring stages exchange [s, b, h] activations and gradients by pp send_recv" {
  shard=$(llama shard --pp 4 --global-batch 8)
  # 3 boundaries, one activation forward and one gradient backward each: 4096 * 4096 * 2 bytes.
  run jq -c '[.shard.ops[] | select(.group == "pp" and .scope == "microbatch") | [.stage, .phase, .message_bytes]]' \
    "$shard"
  assert_output '[[1,"fwd",33554432],[2,"fwd",33554432],[3,"fwd",33554432],[2,"bwd",33554432],[1,"bwd",33554432],[0,"bwd",33554432]]'
  # Under sequence parallelism with tp 2 the message holds s/tp tokens.
  run jq -c '[.shard.ops[] | select(.group == "pp" and .scope == "microbatch") | .message_bytes] | unique' \
    "$(llama shard --tp 2 --sp --pp 4 --global-batch 8)"
  assert_output "[16777216]"
}

@test "a send_recv between nodes costs the inter-node link: GPT-3 175B, tp 8, sp, on A100" {
  # tp 8 fills a node, so stage s + 1 is on the next node: 2048/8 * 12288 * 2 = 6291456 bytes
  # at 25 GB/s x 0.94 (the HDR NIC's share NCCL reaches, docs/network.md) plus 4 us = 271.72153 us.
  syssim-shard -i "$(trace_of gpt3-175b)" --tp 8 --sp --pp 8 --global-batch 8 \
    | syssim-cost --hardware "$A100" -o "$BATS_TEST_TMPDIR/c.graph"
  time_us=$(jq '[.shard.ops[] | select(.group == "pp" and .scope == "microbatch") | .id] as $ids
                | [.cost.ops[$ids[]].time_us] | unique | .[0]' "$BATS_TEST_TMPDIR/c.graph")
  assert_close "$time_us" "$(awk 'BEGIN { printf "%.17g", 6291456 / 23.5e3 + 4 }')"
}

@test "uneven splits: --pp-layout and Megatron's first/last pipeline stage layer counts" {
  run jq -c '.shard.pp_layout' "$(llama shard --pp 4 --pp-layout 7,8,8,9 --global-batch 8)"
  assert_output "[7,8,8,9]"
  # First rank 5, last 3: the two others share 24 layers.
  run jq -c '.shard.pp_layout' \
    "$(llama shard --pp 4 --decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 3 --global-batch 8)"
  assert_output "[5,12,12,3]"
  # With 2 chunks each rank's layers are halved: ranks hold 4, 12, 12, 4; chunk c of rank r is
  # virtual stage 4c + r.
  run jq -c '.shard.pp_layout' "$(llama shard --pp 4 --vpp 2 --decoder-first-pipeline-num-layers 4 \
    --decoder-last-pipeline-num-layers 4 --global-batch 8)"
  assert_output "[2,6,6,2,2,6,6,2]"
}

@test "the schedule is in the shard section: 1F1B's slots of rank 0 (Narayanan et al. 2021, Fig. 4)" {
  shard=$(llama shard --pp 4 --global-batch 8)
  run jq -r '.shard.pipeline_schedule, (.shard.schedule | length),
             ([.shard.schedule[0][] | "\(.pass[0:1])\(.microbatch)"] | join(" "))' "$shard"
  assert_output "1f1b
4
f0 f1 f2 f3 b0 f4 b1 f5 b2 f6 b3 f7 b4 b5 b6 b7"
  run jq -r '.shard.pipeline_schedule' "$(llama shard --pp 4 --vpp 2 --global-batch 8)"
  assert_output "interleaved"
}

@test "micro-batches in flight per stage: 1F1B pp - i, GPipe all, ZB-H1 pp" {
  run jq -c '.mem.pp_stage_microbatches_in_flight' "$(llama mem --pp 4 --global-batch 8)"
  assert_output "[4,3,2,1]"
  run jq -c '.mem.pp_stage_microbatches_in_flight' "$(llama mem --pp 4 --global-batch 8 --pipeline-schedule gpipe)"
  assert_output "[8,8,8,8]"
  run jq -c '.mem.pp_stage_microbatches_in_flight' "$(llama mem --pp 4 --global-batch 8 --pipeline-schedule zb-h1)"
  assert_output "[4,4,4,4]"
  # One entry per stage; the peak is the heaviest.
  run jq -e '(.mem.pp_stage_memory_gb | length) == 4 and .mem.peak_memory_gb == (.mem.pp_stage_memory_gb | max)' \
    "$(llama mem --pp 4 --global-batch 8)"
  assert_success
}

@test "schedules compared: GPipe's step equals 1F1B's, interleaving and ZB-H1 shrink the bubble" {
  step() { jq '.sim.step_time_ms' "$(llama sim --pp 4 --global-batch 8 "$@")"; }
  bubble() { jq '.sim.bubble_fraction' "$(llama sim --pp 4 --global-batch 8 "$@")"; }
  less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }' || { echo "expected $1 < $2"; return 1; }; }
  assert_close "$(step --pipeline-schedule gpipe)" "$(step)" 1e-12
  less "$(bubble --vpp 2)" "$(bubble)"
  less "$(bubble --pipeline-schedule zb-h1)" "$(bubble)"
  less "$(step --pipeline-schedule zb-h1)" "$(step)"
  run jq -c '(.sim.per_pp_rank_step_time_ms | length), (.sim.collective_by_group_ms | keys)' "$(llama sim --pp 4 --global-batch 8)"
  assert_output '4
["pp"]'
}

@test "with many micro-batches ZB-H1 is faster than 1F1B at tp 1, and under TP its B runs the dgrad all-reduce exposed" {
  sim() { llama sim --pp 4 --global-batch 256 "$@"; }
  less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }' || { echo "expected $1 < $2"; return 1; }; }
  # 256 micro-batches: the bubble is ~1% of the step, and ZB-H1's is still smaller.
  less "$(jq '.sim.step_time_ms' "$(sim --pipeline-schedule zb-h1)")" "$(jq '.sim.step_time_ms' "$(sim)")"
  # Megatron overlaps a column-parallel linear's dgrad all-reduce with its wgrad GEMM; with the
  # wgrad deferred to W nothing runs beside it, so every tp collective is exposed.
  zb=$(sim --tp 2 --pipeline-schedule zb-h1) one=$(sim --tp 2)
  assert_close "$(jq '.sim.collective_by_group_ms.tp.exposed_ms' "$zb")" "$(jq '.sim.collective_by_group_ms.tp.total_ms' "$zb")" 1e-9
  less "$(jq '.sim.collective_by_group_ms.tp.exposed_ms' "$one")" "$(jq '.sim.collective_by_group_ms.tp.total_ms' "$one")"
}

@test "ZB-H1 defers the weight pass: the wgrad GEMMs and, under SP, the all-gathers only they read" {
  shard=$(llama shard --tp 2 --sp --pp 4 --global-batch 8 --pipeline-schedule zb-h1)
  # Layer 0's backward all-gathers: fc2's output gradient (read by its dgrad and wgrad) stays in
  # B; the inputs of fc1 and QKV (read by their wgrads only) move to W; proj's gradient in B.
  run jq -c '[.shard.ops[] | select(.layer == 0 and .phase == "bwd" and .collective == "all_gather")
              | "\(.module | split(".")[-1]):\(.pass)"]' "$shard"
  assert_output '["linear_fc2:backward","linear_fc1:weight","linear_proj:backward","linear_qkv:weight"]'
  # Recomputation runs in B, before the W it used to follow: the step still completes.
  run syssim-sim -i "$(llama cost --pp 4 --global-batch 8 --pipeline-schedule zb-h1 --recompute selective)"
  assert_success
}

@test "tied embeddings: the last stage holds a copy, all-reduced with the first once per step" {
  shard=$(stage_of gpt3-5b shard --pp 2 --global-batch 4)
  # The copy: the padded vocabulary 50304 x hidden 4096 = 206045184 parameters.
  run jq '(.shard.stage_params_local | add) - .shard.params_local' "$shard"
  assert_output "206045184"
  # One step all-reduce of its fp32 gradient on each of the two stages.
  run jq -c '[.shard.ops[] | select(.group == "embedding") | [.stage, .scope, .collective, .group_size, .message_bytes]]' \
    "$shard"
  assert_output '[[0,"step","all_reduce",2,824180736],[1,"step","all_reduce",2,824180736]]'
}

@test "the report shows the pipeline stages with pp > 1 only" {
  run syssim-report -i "$(llama mem --pp 4 --global-batch 8)"
  assert_success
  assert_output --partial "Pipeline("
  assert_output --regexp "per_pp_rank_step_time_ms = \[[0-9.]+, [0-9.]+, [0-9.]+, [0-9.]+\]"
  assert_output --partial "microbatches_in_flight   = [4, 3, 2, 1]"
  run syssim-report --format json -i "$(llama mem --pp 4 --global-batch 8)"
  run jq -e '.bubble_fraction > 0 and (.pp_stage_memory_gb | length) == 4 and .pipeline_schedule == "1f1b"' <<< "$output"
  assert_success
  run syssim-report -i "$(llama mem --global-batch 8)"
  refute_output --partial "Pipeline("
}

@test "a pipeline layout with a negative or, in the middle, empty stage is bad usage (exit 2)" {
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --pp-layout -1,17,8,8
  assert_failure 2
  assert_output "syssim-shard: error: pp_layout: virtual pipeline stage 0 has -1 layers; a count cannot be negative"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --pp-layout 16,0,8,8
  assert_failure 2
  assert_output "syssim-shard: error: pp_layout: virtual pipeline stage 1 has 0 layers; every stage but the first and last needs at least one"
}

@test "impossible pipeline layouts are bad data (exit 1) naming the values" {
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 3
  assert_failure 1
  assert_output "syssim-shard: error: pp*vpp=3 does not divide num_layers=32 (give --pp-layout for an uneven split)"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --pp-layout 8,8,8,9
  assert_failure 1
  assert_output "syssim-shard: error: pp_layout sums to 33 layers; num_layers=32"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --decoder-first-pipeline-num-layers 6
  assert_failure 1
  assert_output "syssim-shard: error: decoder_first_pipeline_num_layers=6: the 3 pipeline ranks besides the first do not split the remaining 26 of num_layers=32 evenly"
}

@test "impossible pipeline settings are bad usage (exit 2)" {
  run syssim-shard -i "$(trace_of llama3-8b)" --vpp 2
  assert_failure 2
  assert_output "syssim-shard: error: vpp=2 needs pp > 1"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --pp-layout 8,8,16
  assert_failure 2
  assert_output "syssim-shard: error: pp_layout has 3 entries; pp*vpp=4 virtual stages need one each"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --vpp 2 --global-batch 6
  assert_failure 2
  assert_output "syssim-shard: error: pipeline_schedule=interleaved needs num_microbatches a multiple of pp, as Megatron-LM does: num_microbatches=6, pp=4"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --vpp 2 --pipeline-schedule zb-h1 --global-batch 8
  assert_failure 2
  assert_output "syssim-shard: error: pipeline_schedule=zb-h1 runs one model chunk per rank: vpp=2 needs pipeline_schedule=interleaved"
  run syssim-shard -i "$(trace_of llama3-8b)" --pipeline-schedule gpipe
  assert_failure 2
  assert_output "syssim-shard: error: pipeline_schedule=gpipe needs pp > 1"
  run syssim-shard -i "$(trace_of llama3-8b)" --pp 4 --pipeline-schedule dualpipe
  assert_failure 2
  assert_output --partial "syssim-shard: error: --pipeline-schedule: dualpipe not in {1f1b,interleaved,gpipe,zb-h1}"
}

@test "GPT-3 175B on A100, tp 8, sp, pp 8 and 16, vpp 1-4: the pipe and syssim run print identical reports" {
  for layout in "8 1" "8 2" "8 3" "8 4" "16 1" "16 2" "16 3"; do
    read -r pp vpp <<< "$layout"
    args=(--tp 8 --sp --pp "$pp" --vpp "$vpp" --global-batch 16)
    expected=$(syssim run "$MODELS/gpt3-175b.yaml" --hardware "$A100" "${args[@]}")
    actual=$(syssim-shard -i "$(trace_of gpt3-175b)" "${args[@]}" | syssim-cost --hardware "$A100" | syssim-sim \
             | syssim-mem | syssim-report)
    [ "$expected" = "$actual" ] || { echo "differs: ${args[*]}"; diff <(echo "$expected") <(echo "$actual"); false; }
    [[ "$actual" == *"Pipeline("* ]]
  done
  # 96 layers do not split into 16 x 4 virtual stages.
  run syssim run "$MODELS/gpt3-175b.yaml" --hardware "$A100" --tp 8 --sp --pp 16 --vpp 4 --global-batch 16
  assert_failure 1
  assert_output "syssim: error: pp*vpp=64 does not divide num_layers=96 (give --pp-layout for an uneven split)"
}

@test "without a pipeline the bubble is 0: the host's start of the step waits for no rank" {
  run syssim run llama3-8b --hardware "$H100" --global-batch 8 --format json
  assert_success
  [ "$(jq .bubble_fraction <<< "$output")" = 0 ]
}
