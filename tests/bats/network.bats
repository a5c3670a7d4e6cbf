#!/usr/bin/env bats
# The cluster network through the whole pipeline (docs/network.md): which links a job's
# collectives use, and how its step time follows their bandwidth. Expected times are the
# closed forms of docs/network.md worked by hand over the shard section's message sizes.
load common

# Llama-3-8B with tp 8 (a node per TP group) and dp 2 over 2 nodes, distributed optimizer: the
# gradients' reduce-scatter and the weights' all-gather cross the network, one rank per node.
LAYOUT=(--tp 8 --sp --dp 2 --distributed-optimizer --global-batch 16)
dp_ms() { syssim run "$MODELS/llama3-8b.yaml" --hardware "$1" "${LAYOUT[@]}" --format json | jq '.collective_by_group_ms.dp.total_ms'; }

# The DP collectives over 2 ranks on links of B GB/s per GPU (4 us per step): a ring
# reduce-scatter or all-gather moves M/2 in one step, an all-reduce M in two.
expected_dp_ms() {
  syssim-trace "$MODELS/llama3-8b.yaml" | syssim-shard "${LAYOUT[@]}" |
    jq --argjson b "$1" '[.shard.ops[] | select(.kind == "collective" and .group == "dp") |
      if .collective == "all_reduce" then .message_bytes / ($b * 1e9) * 1e3 + 0.008
      else .message_bytes / 2 / ($b * 1e9) * 1e3 + 0.004 end] | add'
}

@test "DGX H100: the DP collectives run on each GPU's own 400 Gb/s NIC at 50 x 0.94 GB/s" {
  run dp_ms "$H100"
  assert_success
  assert_close "$output" "$(expected_dp_ms 47)" 1e-9
}

@test "one shared 100 GbE NIC per node: the same DP traffic at 12.5/8 x 0.94 GB/s, 32 times slower" {
  run dp_ms "$HARDWARE/h100-100gbe.yaml"
  assert_success
  assert_close "$output" "$(expected_dp_ms 1.46875)" 1e-9
  # The step grows by exactly the extra DP time: nothing overlaps it without --overlap-grad-reduce.
  fast=$(syssim run "$MODELS/llama3-8b.yaml" "${LAYOUT[@]}" --format json | jq '.step_time_ms - .collective_by_group_ms.dp.total_ms')
  slow=$(syssim run "$MODELS/llama3-8b.yaml" --hardware "$HARDWARE/h100-100gbe.yaml" "${LAYOUT[@]}" --format json |
         jq '.step_time_ms - .collective_by_group_ms.dp.total_ms')
  assert_close "$slow" "$fast" 1e-9
}

@test "oversubscribed uplinks: with each node under its own leaf the ring crosses them on every hop, 4:1 is 4 times slower" {
  sed -e "s#^calibrated_model: \.\./#calibrated_model: $ROOT/configs/#" \
      -e 's/^      size: 128 .*/      size: 8/' "$HARDWARE/h100-100gbe.yaml" > "$BATS_TEST_TMPDIR/leaf-per-node.yaml"
  run dp_ms "$BATS_TEST_TMPDIR/leaf-per-node.yaml"
  assert_success
  assert_close "$output" "$(expected_dp_ms 0.3671875)" 1e-9
  sed -i 's/^      oversubscription: 4 .*/      oversubscription: 1/' "$BATS_TEST_TMPDIR/leaf-per-node.yaml"
  run dp_ms "$BATS_TEST_TMPDIR/leaf-per-node.yaml"
  assert_close "$output" "$(expected_dp_ms 1.46875)" 1e-9
}

@test "--order tp-pp-dp moves the pipeline into the node and the DP pairs across nodes" {
  # tp 4, dp 2, pp 2 on 8-GPU nodes: by default the stages are 8 ranks apart (two nodes) and the
  # DP pair 4 apart (one node); tp-pp-dp swaps the strides. Link 0 is NVLink, 1 the NIC share.
  first_links() {
    syssim-trace "$MODELS/llama3-8b.yaml" | syssim-shard --tp 4 --dp 2 --pp 2 --global-batch 8 "$@" |
      syssim-cost --hardware "$H100" |
      jq -c '. as $g | [$g.shard.ops[] | select(.kind == "collective" and (.group == "pp" or .group == "dp")) |
        {group, link: $g.cost.ops[.id].phases[0].links[-1]}] | unique'
  }
  run first_links
  assert_success
  assert_output '[{"group":"dp","link":0},{"group":"pp","link":1}]'
  run first_links --order tp-pp-dp
  assert_output '[{"group":"dp","link":1},{"group":"pp","link":0}]'
  syssim-trace "$MODELS/llama3-8b.yaml" -o "$BATS_TEST_TMPDIR/t.graph"
  run syssim-shard -i "$BATS_TEST_TMPDIR/t.graph" --tp 4 --dp 2 --pp 2 --global-batch 8 --order tp-dp
  assert_failure 1
  assert_output 'syssim-shard: error: parallelism.order "tp-dp": leaves out pp=2'
}
