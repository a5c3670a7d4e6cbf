#!/usr/bin/env bats
load common

# llama3-8b on one H100 node: TP 2 without SP (all-reduces over TP), DP 4 in the same node.
TP2DP4=(--tp 2 --dp 4 --seq-length 1024 --global-batch 4)

# The shard and cost ops side by side: [[shard op, cost op], ...].
pairs='[.shard.ops, .cost.ops] | transpose'

# The graph of the TP2DP4 job priced with the bare roofline (no bundle, no efficiencies).
roofline_graph() {
  local file="$BATS_FILE_TMPDIR/roofline.graph"
  [ -s "$file" ] || syssim-cost --roofline --hardware "$H100" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")" -o "$file"
  echo "$file"
}

@test "syssim-cost --help lists --hardware, -i and -o" {
  run syssim-cost --help
  assert_success
  assert_output --partial "--hardware"
  assert_output --partial "-i,--input"
  assert_output --partial "-o,--output"
}

@test "syssim-cost --version prints the graph format version" {
  run syssim-cost --version
  assert_success
  assert_output --regexp "^syssim-cost [0-9.]+ \(graph format 1\.23\)$"
}

@test "an unknown flag is bad usage (exit 2, one line)" {
  run syssim-cost --hardware "$H100" --foo
  assert_failure 2
  assert_output "syssim-cost: error: unknown argument '--foo' (see --help)"
}

@test "a missing --hardware is bad usage" {
  run syssim-cost -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 2
  assert_output "syssim-cost: error: --hardware is required"
}

@test "empty input is bad data" {
  run syssim-cost --hardware "$H100" < /dev/null
  assert_failure 1
  assert_output "syssim-cost: error: <stdin>: empty input, expected a syssim graph (did the stage before it in the pipe fail?)"
}

@test "a graph without a shard section names the stage to run" {
  run syssim-cost --hardware "$H100" -i "$(trace_of llama3-8b)"
  assert_failure 1
  assert_output "syssim-cost: error: $(trace_of llama3-8b): graph has no 'shard' section: run syssim-shard first"
}

@test "a missing hardware file is bad data naming the file" {
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/nope.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $BATS_TEST_TMPDIR/nope.yaml: cannot open file"
}

@test "an unknown hardware key names the nearest valid key, also inside the topology" {
  h100_copy | sed 's/^peak_tflops_mm:/peak_tflop_mm:/' > "$BATS_TEST_TMPDIR/hw.yaml"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $BATS_TEST_TMPDIR/hw.yaml: unknown key 'peak_tflop_mm' (did you mean 'peak_tflops_mm'?)"
  h100_copy | sed 's/^      bandwidth_GBps:/      bandwith_GBps:/' > "$BATS_TEST_TMPDIR/hw.yaml"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $BATS_TEST_TMPDIR/hw.yaml: topology.levels[0]: unknown key 'bandwith_GBps' (did you mean 'bandwidth_GBps'?)"
}

@test "a job that spans nodes needs a scale-out network" {
  # The H100 preset with only its NVLink level (the rail and spine levels cut off).
  h100_copy | awk '/- kind: rail/ { skip = 1 } skip && /^      / { next } /- kind: (rail|spine)/ { next } { skip = 0; print }' \
    > "$BATS_TEST_TMPDIR/hw.yaml"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" \
    -i "$(stage_of llama3-8b shard --dp 16 --seq-length 1024 --global-batch 16)"
  assert_failure 1
  assert_output "syssim-cost: error: hardware h100-sxm-80gb ($BATS_TEST_TMPDIR/hw.yaml): a scale-out network (topology.levels[1] or inter_node_bandwidth_GBps) is required: a group of 16 ranks over 2 nodes crosses nodes (gpus_per_node=8), needed by the dp all_reduce at /shard/ops/907"
}

@test "-o writes the graph to the file; a failed run leaves no file behind" {
  run syssim-cost --hardware "$H100" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")" -o "$BATS_TEST_TMPDIR/c.graph"
  assert_success
  assert_output ""
  run jq -r '.cost.estimator' "$BATS_TEST_TMPDIR/c.graph"
  assert_output "calibrated"
  rm "$BATS_TEST_TMPDIR/c.graph"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/nope.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")" \
    -o "$BATS_TEST_TMPDIR/c.graph"
  assert_failure 1
  [ -z "$(ls "$BATS_TEST_TMPDIR")" ]
}

@test "the cost section has the estimator, the resolved hardware and one entry per shard op" {
  run jq -c '[.cost.estimator, .cost.hardware.name, .cost.hardware.peak_tflops_mm, .cost.hardware.sfu_peak,
              (.cost.ops | length) == (.shard.ops | length), ([.cost.ops[].id] == [.shard.ops[].id]),
              ([.cost.ops[].bound] | unique)]' "$(roofline_graph)"
  assert_output '["roofline","h100-sxm-80gb",989,3.86,true,true,["compute","launch","memory","network"]]'
}

@test "a GEMM takes max(flops / 989 TFLOP/s, bytes / 3350 GB/s, 4 us)" {
  graph=$(roofline_graph)
  # The layer-0 QKV GEMM, by hand.
  read -r flops bytes time bound < <(jq -r "$pairs"' | map(select(.[0].name == "syssim::qkv_linear" and .[0].layer == 0))[0]
    | "\(.[0].flops) \(.[0].bytes) \(.[1].time_us) \(.[1].bound)"' "$graph")
  assert_close "$time" "$(awk -v f="$flops" -v b="$bytes" 'BEGIN {
    t = f / 989e6; m = b / 3350e3; if (m > t) t = m; if (4.0 > t) t = 4.0; printf "%.17g", t }')"
  awk -v t="$time" -v f="$flops" 'BEGIN { exit !(t >= f / 989e6) }'
  [ "$bound" = compute ]
}

@test "every compute op follows the roofline: tensor-core peak for gemm and attention, vector peak otherwise" {
  run jq -r "$pairs"' | map(select(.[0].kind != "collective")) | map(
      .[0] as $op | .[1] as $c
      | (if ($op.kind == "gemm" or $op.kind == "attention") then 989e6 else 67e6 end) as $peak
      | ([$op.flops / $peak, $op.bytes / 3350e3, 4.0] | max) as $want
      | ([$op.flops / $peak, $op.bytes / 3350e3, 4.0] | index($want)) as $which
      | select((($c.time_us - $want) | if . < 0 then -. else . end) > 1e-9 * $want
               or $c.bound != ["compute", "memory", "launch"][$which])
      | "\($op.id) \($op.name): \($c.time_us) us \($c.bound), expected \($want) us") | length, .[:5][]' \
    "$(roofline_graph)"
  assert_output "0"
  run jq '[.cost.ops[] | select(.bound == "launch")] | length > 0' "$(roofline_graph)"
  assert_output "true"
}

@test "a TP all-reduce over 2 ranks in one node takes 2*(1/2)*M/(450 GB/s * 0.822) + 2*1.9 us" {
  graph=$(stage_of llama3-8b cost "${TP2DP4[@]}")
  # One by hand: the forward all-reduce after the layer-0 attention projection, M = [s, b, h] bf16.
  read -r m time bound < <(jq -r "$pairs"' | map(select(.[0].collective == "all_reduce" and .[0].group == "tp"
    and .[0].module == "decoder.layers.0.self_attention.linear_proj" and .[0].phase == "fwd"))[0]
    | "\(.[0].message_bytes) \(.[1].time_us) \(.[1].bound)"' "$graph")
  [ "$m" = $((1024 * 1 * 4096 * 2)) ]
  assert_close "$time" "$(awk -v m="$m" 'BEGIN { printf "%.17g", 2 * (1 / 2) * m / (450e3 * 0.822) + 2 * 1 * 1.9 }')"
  [ "$bound" = network ]
  # All of them (the embedding's, the layers', the loss's small ones).
  run jq -r "$pairs"' | map(select(.[0].collective == "all_reduce" and .[0].group == "tp")) | length, map(
      (2 * (1 / 2) * .[0].message_bytes / (450e3 * 0.822) + 2 * 1 * 1.9) as $want
      | select(.[0].group_size != 2 or .[1].bound != "network"
               or ((.[1].time_us - $want) | if . < 0 then -. else . end) > 1e-9 * $want)
      | "\(.[0].id): \(.[1].time_us) us, expected \($want) us") | length' "$graph"
  [ "${lines[0]}" -gt 32 ]
  [ "${lines[1]}" = 0 ]
}

@test "the DP all-reduce of the fp32 gradients over 4 ranks in the node: 2*(3/4)*M/(450 GB/s * 0.822) + 6*1.9 us" {
  run jq -r "$pairs"' | map(select(.[0].group == "dp"))[] | "\(.[0].collective) \(.[0].group_size) \(.[0].message_bytes) \(.[1].time_us)"' \
    "$(stage_of llama3-8b cost "${TP2DP4[@]}")"
  assert_equal "${#lines[@]}" 1
  read -r coll n m time <<< "${lines[0]}"
  [ "$coll $n" = "all_reduce 4" ]
  # The fp32 gradients of the rank's parameters.
  [ "$m" = "$(jq '.shard.params_local * 4' "$(stage_of llama3-8b cost "${TP2DP4[@]}")")" ]
  assert_close "$time" "$(awk -v m="$m" 'BEGIN { printf "%.17g", 2 * 3 / 4 * m / (450e3 * 0.822) + 2 * 3 * 1.9 }')"
}

@test "a DP group of 16 ranks spans two nodes: a ring with 1/8 of it on each GPU's 47 GB/s NIC (docs/network.md)" {
  run jq -r "$pairs"' | map(select(.[0].group == "dp"))[] | "\(.[0].group_size) \(.[0].message_bytes) \(.[1].time_us)"' \
    "$(stage_of llama3-8b cost --dp 16 --seq-length 1024 --global-batch 16)"
  read -r n m time <<< "$output"
  [ "$n" = 16 ]
  # A ring over 16 ranks crosses each node once per step, so each GPU's NIC (50 GB/s x 0.94)
  # carries 1/8 of the ring's 2 * 15/16 * M and its NVLink 7 times that (329 < 369.9 GB/s: the
  # NIC binds); 30 steps: the 2 between the nodes at 4 us, 28 at NVLink's 1.9 us (NCCL's tuning
  # model). This beats the hierarchical all-reduce and the tree.
  assert_close "$time" "$(awk -v m="$m" 'BEGIN { printf "%.17g", 2 * 15 / 16 * m / 8 / 47e3 + 2 * 4.0 + 28 * 1.9 }')"
}

@test "docs/syssim-cost.md: an all-reduce of 1 GiB over the 8 GPUs of a node takes 3918.48 us (NVLS)" {
  jq -c '.shard.ops |= map(if .collective == "all_reduce" and .group == "tp" then .message_bytes = 1073741824 else . end)' \
    "$(stage_of llama3-8b shard --tp 8 --seq-length 1024)" > "$BATS_TEST_TMPDIR/s.graph"
  run jq -r '[.shard.ops, .cost.ops] | transpose | map(select(.[0].collective == "all_reduce"))[0][1].time_us * 100 | round / 100' \
    <(syssim-cost --hardware "$H100" -i "$BATS_TEST_TMPDIR/s.graph")
  assert_output "3918.48"
}

@test "syssim-cost adds the cost section, one provenance entry, and passes a foreign section through" {
  jq -c '.mine = {"x": 1}' "$(stage_of llama3-8b shard "${TP2DP4[@]}")" > "$BATS_TEST_TMPDIR/in.graph"
  syssim-cost --hardware "$H100" -i "$BATS_TEST_TMPDIR/in.graph" > "$BATS_TEST_TMPDIR/out.graph"
  assert_passes_through "$BATS_TEST_TMPDIR/out.graph" "$BATS_TEST_TMPDIR/in.graph" cost syssim-cost
  run jq -c '.provenance[-1].args' "$BATS_TEST_TMPDIR/out.graph"
  assert_output "[\"--hardware\",\"$H100\",\"-i\",\"$BATS_TEST_TMPDIR/in.graph\"]"
}

@test "syssim-cost run again drops the sim and mem sections made from the old costs; the report asks for them" {
  syssim-cost --hardware b200 -i "$(stage_of llama3-8b mem "${TP2DP4[@]}")" > "$BATS_TEST_TMPDIR/out.graph"
  run jq -c '[has("cost"), has("sim"), has("mem"), .cost.hardware.name]' "$BATS_TEST_TMPDIR/out.graph"
  assert_output '[true,false,false,"b200"]'
  run syssim-report -i "$BATS_TEST_TMPDIR/out.graph"
  assert_failure 1
  assert_output "syssim-report: error: $BATS_TEST_TMPDIR/out.graph: graph has no 'sim' section: run syssim-sim first"
}

@test "the same input gives the same bytes" {
  a=$(syssim-cost --hardware "$H100" < "$(stage_of llama3-8b shard "${TP2DP4[@]}")" | sha256sum)
  b=$(syssim-cost --hardware "$H100" < "$(stage_of llama3-8b shard "${TP2DP4[@]}")" | sha256sum)
  [ "$a" = "$b" ]
}

@test "efficiency: divides each family's roofline by its share; a family not listed keeps the roofline" {
  bare_h100 > "$BATS_TEST_TMPDIR/hw.yaml"
  printf 'efficiency:\n  gemm: 0.5\n  elementwise: 0.8\n' >> "$BATS_TEST_TMPDIR/hw.yaml"
  syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")" > "$BATS_TEST_TMPDIR/e.graph"
  # Per op: the time over the bare roofline time, when neither is the 4 us launch floor.
  run jq -r --slurpfile bare "$(roofline_graph)" '[.shard.ops, .cost.ops, $bare[0].cost.ops] | transpose
    | map(select(.[0].kind != "collective" and .[2].bound != "launch" and .[1].bound != "launch"))
    | map({name: .[0].name, kind: .[0].kind, ratio: (.[1].time_us / .[2].time_us * 1000 | round / 1000)})
    | [(map(select(.kind == "gemm")) | map(.ratio) | unique), (map(select(.name == "syssim::swiglu")) | map(.ratio) | unique),
       (map(select(.name == "syssim::rms_norm")) | map(.ratio) | unique)] | map(tostring) | .[]' "$BATS_TEST_TMPDIR/e.graph"
  assert_output $'[2]\n[1.25]\n[1]'
  run jq -r '.cost.estimator, .cost.hardware.efficiency.gemm' "$BATS_TEST_TMPDIR/e.graph"
  assert_output $'roofline\n0.5'
}

@test "efficiency: a share outside (0, 1] or an unknown family is bad data naming it" {
  bare_h100 > "$BATS_TEST_TMPDIR/hw.yaml"
  printf 'efficiency:\n  gemm: 1.5\n' >> "$BATS_TEST_TMPDIR/hw.yaml"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $BATS_TEST_TMPDIR/hw.yaml: efficiency.gemm: expected a share in (0, 1], got 1.5"
  bare_h100 > "$BATS_TEST_TMPDIR/hw.yaml"
  printf 'efficiency:\n  gemms: 0.5\n' >> "$BATS_TEST_TMPDIR/hw.yaml"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $BATS_TEST_TMPDIR/hw.yaml: efficiency: unknown key 'gemms' (did you mean 'gemm'?)"
}

@test "--roofline and --calibrated exclude each other" {
  run syssim-cost --hardware "$H100" --roofline --calibrated "$BATS_TEST_TMPDIR" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 2
}

@test "the calibrated estimator prices GEMMs and attention from the bundle, never below the roofline; the rest by efficiency" {
  graph=$(stage_of llama3-8b cost "${TP2DP4[@]}")
  run jq -r '.cost.estimator' "$graph"
  assert_output "calibrated"
  # Per compute op, the calibrated time over the bare roofline time (both above the launch floor).
  run jq -r --slurpfile bare "$(roofline_graph)" '[.shard.ops, .cost.ops, $bare[0].cost.ops] | transpose
    | map(select(.[0].kind != "collective" and .[2].bound != "launch" and .[1].bound != "launch"))
    | [(map(select(.[0].kind == "gemm") | .[1].time_us / .[2].time_us) | (min >= 1), (max > 1.05)),
       (map(select(.[0].kind == "attention") | .[1].time_us / .[2].time_us) | (min >= 1), (max > 1.05)),
       (map(select(.[0].name == "syssim::swiglu") | .[1].time_us / .[2].time_us * 1000 | round / 1000) | unique)]
    | map(tostring) | .[]' "$graph"
  # GEMMs and attention (the preset's calibrated_families): never faster than the roofline,
  # and slower for some; element-wise ops at 0.8 of the roofline
  # (configs/hardware/h100-sxm-80gb.yaml).
  assert_output $'true\ntrue\ntrue\ntrue\n[1.25]'
}

@test "a bundle fitted against other peaks is refused, naming the key and both values" {
  run syssim-cost --hardware "$HARDWARE/a100-sxm-80gb.yaml" --calibrated "$ROOT/configs/calibration/h100-sxm-80gb" \
    -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $ROOT/configs/calibration/h100-sxm-80gb/manifest.json: hardware/peak_memory_bandwidth_GBps: the bundle was fitted against 3350.0, hardware a100-sxm-80gb has 2039.0"
}

@test "a topology level's efficiency outside (0, 1] is bad data naming the level" {
  h100_copy | sed 's/^      efficiency: 0.822 .*/      efficiency: 1.5/' > "$BATS_TEST_TMPDIR/hw.yaml"
  run syssim-cost --hardware "$BATS_TEST_TMPDIR/hw.yaml" -i "$(stage_of llama3-8b shard "${TP2DP4[@]}")"
  assert_failure 1
  assert_output "syssim-cost: error: $BATS_TEST_TMPDIR/hw.yaml: topology level 'nvlink': efficiency: expected a share in (0, 1], got 1.5"
}

@test "a model's triton attention takes the hardware's triton times, by direction; a hardware without them refuses it" {
  sed 's/^attention_backend: flash$/attention_backend: triton/' "$MODELS/llama3-8b.yaml" > "$BATS_TEST_TMPDIR/triton.yaml"
  syssim-trace "$BATS_TEST_TMPDIR/triton.yaml" | syssim-shard "${TP2DP4[@]}" > "$BATS_TEST_TMPDIR/triton.shard"
  syssim-cost --hardware "$H100" -i "$BATS_TEST_TMPDIR/triton.shard" -o "$BATS_TEST_TMPDIR/triton.graph"
  # Each attention op's time over the same op's under flash, forward then backward: the
  # preset's 2.70 and 3.54 (configs/hardware/h100-sxm-80gb.yaml); GEMMs unchanged.
  run jq -r --slurpfile flash "$(stage_of llama3-8b cost "${TP2DP4[@]}")" '[.shard.ops, .cost.ops, $flash[0].cost.ops] | transpose
    | [(map(select(.[0].kind == "attention")) | group_by(.[0].phase)[] | map(.[1].time_us / .[2].time_us * 100 | round / 100) | unique),
       (map(select(.[0].kind == "gemm")) | map(.[1].time_us == .[2].time_us) | all)]
    | map(tostring) | .[]' "$BATS_TEST_TMPDIR/triton.graph"
  assert_output $'[3.54]\n[2.7]\ntrue'
  run syssim-cost --hardware "$HARDWARE/b200.yaml" -i "$BATS_TEST_TMPDIR/triton.shard"
  assert_failure 1
  assert_output "syssim-cost: error: hardware b200: no attention_kernels.triton (its time over the flash attention), needed by the model's attention_backend triton"
}
