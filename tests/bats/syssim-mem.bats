#!/usr/bin/env bats
load common

# TP 2 with SP and DP 4 on one H100 node; the same with the distributed optimizer.
TP2=(--tp 2 --sp --dp 4 --seq-length 1024 --global-batch 4)
DISTOPT=(--tp 2 --sp --dp 4 --seq-length 1024 --global-batch 4 --distributed-optimizer)
# All of llama3-8b on one GPU: 18 bytes x 8.03e9 parameters alone exceed 80 GB.
ONE=(--seq-length 1024)

@test "syssim-mem --help lists -i and -o" {
  run syssim-mem --help
  assert_success
  assert_output --partial "-i,--input"
  assert_output --partial "-o,--output"
}

@test "syssim-mem --version prints the graph format version" {
  run syssim-mem --version
  assert_success
  assert_output --regexp "^syssim-mem [0-9.]+ \(graph format 1\.23\)$"
}

@test "an unknown flag is bad usage (exit 2, one line)" {
  run syssim-mem --foo
  assert_failure 2
  assert_output "syssim-mem: error: unknown argument '--foo' (see --help)"
}

@test "empty input is bad data" {
  run syssim-mem < /dev/null
  assert_failure 1
  assert_output "syssim-mem: error: <stdin>: empty input, expected a syssim graph (did the stage before it in the pipe fail?)"
}

@test "a graph without a shard section names the stage to run" {
  run syssim-mem -i "$(trace_of llama3-8b)"
  assert_failure 1
  assert_output "syssim-mem: error: $(trace_of llama3-8b): graph has no 'shard' section: run syssim-shard first"
}

@test "a chunk or pipeline rank the job does not have is refused naming the JSON path, not a crash" {
  sim=$(stage_of llama3-8b sim "${TP2[@]}")
  run syssim-mem < <(jq -c '.shard.ops[3].chunk = -1' "$sim")
  assert_failure 1
  assert_output "syssim-mem: error: <stdin>: graph: /shard/ops/3/chunk: chunk -1 does not exist (vpp=1)"
  run syssim-mem < <(jq -c '.shard.ops[3].stage = 100000000' "$sim")
  assert_failure 1
  assert_output "syssim-mem: error: <stdin>: graph: /shard/ops/3/stage: pipeline rank 100000000 does not exist (pp=1)"
}

@test "-o writes the graph to the file; a failed run leaves no file behind" {
  run syssim-mem -i "$(stage_of llama3-8b sim "${TP2[@]}")" -o "$BATS_TEST_TMPDIR/m.graph"
  assert_success
  assert_output ""
  run jq -e '.mem.peak_memory_gb > 0' "$BATS_TEST_TMPDIR/m.graph"
  assert_success
  rm "$BATS_TEST_TMPDIR/m.graph"
  run syssim-mem -i "$(trace_of llama3-8b)" -o "$BATS_TEST_TMPDIR/m.graph"
  assert_failure 1
  [ -z "$(ls "$BATS_TEST_TMPDIR")" ]
}

@test "--replay-allocator fills reserved_memory_gb, null without it (plumbing: the replay's figures are tests/unit/test_mem.cpp's)" {
  local sim=$(stage_of llama3-8b sim "${TP2[@]}")
  run --separate-stderr jq -c '.mem.reserved_memory_gb' < <(syssim-mem -i "$sim")
  assert_output "null"
  run --separate-stderr jq -c '.mem.reserved_memory_gb >= .mem.peak_memory_gb' < <(syssim-mem -i "$sim" --replay-allocator)
  assert_output "true"
}

@test "model states: 2 bytes of weights, 4 of fp32 gradients and 12 of Adam state per local parameter" {
  run jq -c '.shard.params_local as $p | [$p > 0, $p < .shard.params_total,
    .mem.param_bytes == $p * 2, .mem.grad_bytes == $p * 4, .mem.optimizer_state_bytes == $p * 12]' \
    "$(stage_of llama3-8b mem "${TP2[@]}")"
  assert_output '[true,true,true,true,true]'
}

@test "the distributed optimizer shards the Adam state over DP: 12/dp bytes per parameter" {
  run jq -c '.shard.params_local as $p | [.shard.parallelism.dp, .shard.training.distributed_optimizer,
    .mem.param_bytes == $p * 2, .mem.grad_bytes == $p * 4, .mem.optimizer_state_bytes == $p * 12 / 4]' \
    "$(stage_of llama3-8b mem "${DISTOPT[@]}")"
  assert_output '[4,true,true,true,true]'
}

@test "one GPU holds all 8,030,261,248 parameters: 16.06 GB of weights" {
  run jq -c '[.shard.params_local, .mem.param_bytes]' "$(stage_of llama3-8b mem "${ONE[@]}")"
  assert_output '[8030261248,16060522496]'
}

@test "the peak is the sum of model states, activations and temporaries, in GB of 1e9 bytes" {
  for graph in "$(stage_of llama3-8b mem "${TP2[@]}")" "$(stage_of llama3-8b mem "${DISTOPT[@]}")" \
               "$(stage_of llama3-8b mem "${ONE[@]}")"; do
    run jq -c '.mem | [
      ((.param_bytes + .grad_bytes + .optimizer_state_bytes + .activation_bytes + .temporary_bytes) / 1e9 - .peak_memory_gb
       | if . < 0 then -. else . end) < 1e-9,
      .pp_stage_memory_gb == [.peak_memory_gb], .activation_bytes > 0, .temporary_bytes > 0, .peak_module != ""]' "$graph"
    assert_output '[true,true,true,true,true]'
  done
}

@test "the distributed optimizer saves 12 - 12/4 bytes per parameter at the peak" {
  plain=$(stage_of llama3-8b mem "${TP2[@]}")
  dist=$(stage_of llama3-8b mem "${DISTOPT[@]}")
  assert_close "$(jq -n --slurpfile a "$plain" --slurpfile b "$dist" '$a[0].mem.peak_memory_gb - $b[0].mem.peak_memory_gb')" \
    "$(jq '.shard.params_local * 9 / 1e9' "$plain")"
}

@test "bf16 main gradients: the optimizer's fp32 copy of them (4 bytes per parameter) sets the peak when it is the larger" {
  # Full recompute keeps the activations small; the step holds 2 + 2 + 12 bytes of states and
  # the 4-byte copy, 20 x 4,015,263,744 parameters (Megatron-LM's main_grad.float()), and the
  # gradient norm's fp32 scalar: 80,305,274,884 bytes.
  run jq -c '[.shard.params_local, .mem.peak_memory_gb, .mem.temporary_bytes == .shard.params_local * 4 + 4, .mem.peak_module]' \
    "$(stage_of llama3-8b mem --tp 2 --sp --dp 4 --global-batch 128 --grad-reduce-in-bf16 --recompute full)"
  assert_output '[4015263744,80.305274884,true,"optimizer.clip_grad"]'
}

@test "within the 80 GiB (85.9 GB) of the H100 there is no OOM; all of llama3-8b on one GPU is" {
  run jq -c '.mem | [.gpu_memory_gb, .oom]' "$(stage_of llama3-8b mem "${DISTOPT[@]}")"
  assert_output '[85.9,null]'
  # One GPU opens no communicator: the GPU holds the tensors and the preset's 0.4 GB CUDA context.
  run jq -c '.mem | [.gpu_memory_gb, .oom.capacity_gb, .nccl_buffer_bytes, .cuda_context_bytes,
    (.device_memory_gb - .peak_memory_gb - 0.4 | if . < 0 then -. else . end) < 1e-9, .oom.required_gb == .device_memory_gb,
    (.oom.excess_gb - (.device_memory_gb - 85.9) | if . < 0 then -. else . end) < 1e-9, .peak_memory_gb > 85.9]' \
    "$(stage_of llama3-8b mem "${ONE[@]}")"
  assert_output '[85.9,85.9,0,400000000,true,true,true,true]'
}

@test "without a cost section the capacity is unknown: no OOM verdict" {
  run syssim-mem -i "$(stage_of llama3-8b shard "${ONE[@]}")"
  assert_success
  run jq -c '.mem | [.gpu_memory_gb, .oom, .peak_memory_gb > 80]' <<< "$output"
  assert_output '[null,null,true]'
}

@test "syssim-mem adds the mem section, one provenance entry, and passes a foreign section through" {
  jq -c '.mine = {"x": 1}' "$(stage_of llama3-8b sim "${TP2[@]}")" > "$BATS_TEST_TMPDIR/in.graph"
  syssim-mem < "$BATS_TEST_TMPDIR/in.graph" > "$BATS_TEST_TMPDIR/out.graph"
  assert_passes_through "$BATS_TEST_TMPDIR/out.graph" "$BATS_TEST_TMPDIR/in.graph" mem syssim-mem
}

@test "the same input gives the same bytes" {
  a=$(syssim-mem < "$(stage_of llama3-8b sim "${TP2[@]}")" | sha256sum)
  b=$(syssim-mem < "$(stage_of llama3-8b sim "${TP2[@]}")" | sha256sum)
  [ "$a" = "$b" ]
}
