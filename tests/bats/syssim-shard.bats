#!/usr/bin/env bats
load common

@test "syssim-shard --help lists the layout flags" {
  run syssim-shard --help
  assert_success
  assert_output --partial "--tp"
  assert_output --partial "--distributed-optimizer"
}

@test "syssim-shard --version prints the graph format version" {
  run syssim-shard --version
  assert_success
  assert_output --regexp "^syssim-shard [0-9.]+ \(graph format 1\.23\)$"
}

@test "an unknown flag is bad usage (exit 2, one line)" {
  run syssim-shard --tensor-parallel 2
  assert_failure 2
  assert_output "syssim-shard: error: unknown argument '--tensor-parallel' (see --help)"
}

@test "a value flag given twice is bad usage (exit 2), named as such" {
  run syssim-shard --ep 8 --ep=8
  assert_failure 2
  assert_output "syssim-shard: error: --ep is given 2 times; give it once"
}

@test "number flags: one short line for a non-positive size, decimal integers, no empty or overflowing value" {
  run syssim-shard --tp 0
  assert_failure 2
  assert_output "syssim-shard: error: --tp: must be positive, got '0'"
  run syssim-shard --micro-batch 0x10
  assert_failure 2
  assert_output "syssim-shard: error: --micro-batch: expected a whole number, got '0x10'"
  run syssim-shard --global-batch 99999999999999999999
  assert_failure 2
  assert_output "syssim-shard: error: --global-batch: expected a whole number under 10^18, got '99999999999999999999'"
  run syssim-shard --clip-grad ''
  assert_failure 2
  assert_output "syssim-shard: error: --clip-grad: expected a number, got ''"
  run syssim-shard --moe-imbalance 1.5x
  assert_failure 2
  assert_output "syssim-shard: error: --moe-imbalance: expected a number, got '1.5x'"
  # A leading zero is decimal: 064 micro-batches of 1 on dp 2 is a global batch of 64, not octal 52.
  run syssim run "$ROOT/tests/golden/tiny.yaml" --dp 2 --global-batch 064 --format json
  assert_success
  assert_line --regexp '^ +"global_batch": 64,$'
  run syssim run "$ROOT/tests/golden/tiny.yaml" --seq-length 010 --format json
  assert_success
  assert_line --regexp '^ +"seq_length": 10,$'
  run syssim run "$ROOT/tests/golden/tiny.yaml" --clip-grad nan
  assert_failure 2
  assert_output "syssim: error: --clip-grad: expected a number, got 'nan'"
}

@test "an order that leaves out a dimension of size 1 places the groups as the full order does" {
  # pp = cp = ep = 1: tp-dp puts tp fastest and dp next, as the default tp-cp-ep-dp-pp does.
  run syssim run "$ROOT/tests/golden/tiny.yaml" --tp 2 --sp --dp 2 --global-batch 4 --order tp-dp
  assert_success
  local reordered="$output"
  run syssim run "$ROOT/tests/golden/tiny.yaml" --tp 2 --sp --dp 2 --global-batch 4
  assert_equal "$reordered" "$output"
}

@test "a bad --dtype value is bad usage" {
  run syssim-shard --dtype fp64
  assert_failure 2
  assert_output --partial "syssim-shard: error: --dtype: fp64 not in {bf16,fp16,fp8,fp4}"
}

@test "tp that does not divide the heads is bad data (exit 1) naming both values" {
  run syssim-shard -i "$(trace_of llama3-8b)" --tp 3
  assert_failure 1
  assert_output "syssim-shard: error: tp=3 does not divide num_attention_heads=32"
}

@test "a world size that does not match --gpus is bad data" {
  run syssim-shard -i "$(trace_of llama3-8b)" --tp 2 --dp 4 --gpus 16
  assert_failure 1
  assert_output "syssim-shard: error: tp*cp*pp*dp=8 does not match gpus=16"
}

@test "pipeline parallelism splits the layers into stages (more in pipeline.bats)" {
  run jq -c '.shard.pp_layout' "$(stage_of llama3-8b shard --pp 2)"
  assert_output "[16,16]"
}

@test "context parallelism splits the sequence (more in context.bats)" {
  syssim-shard -i "$(trace_of llama3-8b)" --cp 2 --global-batch 4 -o "$BATS_TEST_TMPDIR/cp.graph"
  run jq '.shard.axes.s' "$BATS_TEST_TMPDIR/cp.graph"
  assert_output "4096"
}

@test "syssim-shard run again drops the cost, sim and mem sections of the old layout" {
  syssim-shard --tp 2 --dp 2 --pp 2 --global-batch 8 --seq-length 1024 \
    -i "$(stage_of llama3-8b mem --tp 2 --dp 4 --seq-length 1024 --global-batch 4)" > "$BATS_TEST_TMPDIR/out.graph"
  run jq -c '[has("shard"), has("cost"), has("sim"), has("mem"), .shard.parallelism.pp]' "$BATS_TEST_TMPDIR/out.graph"
  assert_output '[true,false,false,false,2]'
}

@test "docs/graph-format.md's title names the version the tools write" {
  grep -q "^# The syssim graph format, version $(syssim-shard --version | sed 's/.*graph format \([0-9.]*\))/\1/') (normative)$" \
    "$ROOT/docs/graph-format.md"
}

@test "empty and truncated input are errors, not crashes" {
  run syssim-shard < /dev/null
  assert_failure 1
  assert_output "syssim-shard: error: <stdin>: empty input, expected a syssim graph (did the stage before it in the pipe fail?)"
  head -c 100 "$(trace_of llama3-8b)" > "$BATS_TEST_TMPDIR/cut.graph"
  run syssim-shard -i "$BATS_TEST_TMPDIR/cut.graph"
  assert_failure 1
  assert_output "syssim-shard: error: $BATS_TEST_TMPDIR/cut.graph: truncated JSON: input ends after 100 bytes"
}

@test "a traced GEMM with too few inputs, or an operand without dims, is bad data naming the path, not a crash" {
  trace=$(trace_of llama3-8b)
  id=$(jq '[.trace.ops[] | select(.name == "syssim::linear")][0].id' "$trace")
  run syssim-shard --tp 2 --sp < <(jq -c ".trace.ops[$id].inputs |= .[:1]" "$trace")
  assert_failure 1
  assert_output "syssim-shard: error: <stdin>: graph: /trace/ops/$id/inputs: syssim::linear needs 2 inputs, got 1"
  run syssim-shard --tp 2 --sp < <(jq -c ".trace.ops[$id].inputs[1].dims = []" "$trace")
  assert_failure 1
  assert_output "syssim-shard: error: <stdin>: graph: /trace/ops/$id/inputs/1/dims: syssim::linear needs at least 2 dims, got 0"
  id=$(jq '[.trace.ops[] | select(.name == "syssim::flash_attn")][0].id' "$trace")
  run syssim-shard --tp 2 --sp < <(jq -c ".trace.ops[$id].inputs[1].dims = [\"s\"]" "$trace")
  assert_failure 1
  assert_output "syssim-shard: error: <stdin>: graph: /trace/ops/$id/inputs/1/dims: syssim::flash_attn needs at least 4 dims, got 1"
}

@test "a window op counts the keys each query sees: over 256 queries a window of 128 keys sees 24640 of a causal 32768" {
  # sum over i < 256 of min(i + 1, 128) = 128*129/2 + 128*128 = 24640 scores; full causal attention
  # is counted as 256*256/2 = 32768. Forward window and full ops of GPT-OSS's alternating layers.
  run bash -c "syssim-trace gpt-oss-120b --seq-length 256 | syssim-shard --seq-length 256 --ep 8 --dp 8 --global-batch 8 |
    jq '[.shard.ops[] | select(.name == \"syssim::flash_attn_window\" or .name == \"syssim::flash_attn\") | .flops] | .[0] / .[1]'"
  assert_success
  assert_output "0.751953125"
}

@test "a window that holds the whole sequence is full attention; a trace from the other side of it is refused" {
  sed '/^window_size:/d; /^window_attn_skip_freq:/d' "$MODELS/gpt-oss-120b.yaml" > "$BATS_TEST_TMPDIR/full.yaml"
  job=(--seq-length 128 --ep 8 --dp 8 --global-batch 8 --format json)
  windowed=$(syssim run gpt-oss-120b "${job[@]}" | jq .step_time_ms)
  assert_equal "$windowed" "$(syssim run "$BATS_TEST_TMPDIR/full.yaml" "${job[@]}" | jq .step_time_ms)"
  run bash -c "syssim-trace gpt-oss-120b | syssim-shard --seq-length 128 --ep 8 --dp 8 --global-batch 8"
  assert_failure 1
  assert_output "syssim-shard: error: seq_length=128 is not longer than the sliding window of 128 keys, but the trace slides: trace the model at this length (syssim-trace --seq-length 128)"
}

@test "a sliding-window attention op in a model without a window names the missing axis" {
  trace="$ROOT/tests/golden/tiny.trace.graph"
  id=$(jq '[.trace.ops[] | select(.name == "syssim::flash_attn")][0].id' "$trace")
  run syssim-shard < <(jq -c ".trace.ops[$id].name = \"syssim::flash_attn_window\"" "$trace")
  assert_failure 1
  assert_output "syssim-shard: error: <stdin>: graph: /trace/ops/$id: axis 'x' has no value"
}

@test "a graph of another major version is refused" {
  jq -c '.version = "2.0"' "$(trace_of llama3-8b)" > "$BATS_TEST_TMPDIR/v2.graph"
  run syssim-shard -i "$BATS_TEST_TMPDIR/v2.graph"
  assert_failure 1
  assert_output "syssim-shard: error: $BATS_TEST_TMPDIR/v2.graph: /version: graph format 2.0 is not supported (this syssim reads 1.x)"
}

@test "a failed run leaves no output file behind" {
  run syssim-shard -i "$(trace_of llama3-8b)" --tp 3 -o "$BATS_TEST_TMPDIR/out.graph"
  assert_failure 1
  [ ! -e "$BATS_TEST_TMPDIR/out.graph" ]
  [ -z "$(ls "$BATS_TEST_TMPDIR")" ]
}

@test "TP 2 with SP halves the heads and ffn and inserts Megatron's collectives" {
  syssim-shard -i "$(trace_of llama3-8b)" --tp 2 --sp --dp 4 --global-batch 128 -o "$BATS_TEST_TMPDIR/s.graph"
  run jq -r '.shard.axes | "\(.g) \(.f) \(.h) \(.v)"' "$BATS_TEST_TMPDIR/s.graph"
  assert_output "4 7168 4096 64128"
  run jq '.shard.num_microbatches' "$BATS_TEST_TMPDIR/s.graph"
  assert_output "32"
  # Per layer, forward: all-gather before QKV and fc1, reduce-scatter after proj and fc2.
  run jq '[.shard.ops[] | select(.layer == 0 and .phase == "fwd" and .kind == "collective") | .collective]' -c \
    "$BATS_TEST_TMPDIR/s.graph"
  assert_output '["all_gather","reduce_scatter","all_gather","reduce_scatter"]'
  # A [s, b, h] bf16 message: 8192 * 4096 * 2 bytes.
  run jq '[.shard.ops[] | select(.layer == 0 and .kind == "collective") | .message_bytes] | unique' -c \
    "$BATS_TEST_TMPDIR/s.graph"
  assert_output '[67108864]'
  # The provenance records both stages.
  run jq -r '[.provenance[].tool] | join(",")' "$BATS_TEST_TMPDIR/s.graph"
  assert_output "syssim-trace,syssim-shard"
}

@test "-o on a device writes through it and leaves the device in place" {
  run syssim-shard -i "$(trace_of llama3-8b)" --tp 2 -o /dev/null
  assert_success
  [ -c /dev/null ]
}

@test "the same input gives the same bytes" {
  a=$(syssim-shard -i "$(trace_of llama3-8b)" --tp 4 --sp | sha256sum)
  b=$(syssim-shard -i "$(trace_of llama3-8b)" --tp 4 --sp | sha256sum)
  [ "$a" = "$b" ]
}

@test "--cuda-graph-scope: the captured ops carry their graph; a scope Megatron refuses or does not know is bad usage" {
  # The tiny model with attention and dense MLP graphs: every decoder-layer op in one of them.
  run bash -c "syssim-trace '$ROOT/tests/golden/tiny.yaml' | syssim-shard --cuda-graph-scope attn,mlp |
    jq -c '[.shard.ops[] | select(.layer != null) | .cuda_graph] | unique'"
  assert_success
  assert_output '["attn","mlp"]'
  run bash -c "syssim-trace '$ROOT/tests/golden/tiny.yaml' | syssim-shard --cuda-graph-scope moe_router"
  assert_failure 2
  assert_output "syssim-shard: error: cuda_graph_scope=moe_router: moe_router needs a model with experts; tiny has none"
  run syssim-shard --cuda-graph-scope everything
  assert_failure 2
  assert_output --partial "--cuda-graph-scope"
  assert_equal "${#lines[@]}" 1
}
