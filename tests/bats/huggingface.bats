#!/usr/bin/env bats
# Model YAMLs `huggingface: org/name` (docs/configs.md, "Hugging Face models"). Llama 3.1 8B
# differs from Llama 3 8B (configs/models/llama3-8b.yaml, from the Llama 3 paper) only in RoPE
# scaling and the positions it supports, neither of which changes the cost of a step at the same
# sequence length: the two must simulate to the same step.
load common

LLAMA31_8B="$ROOT/configs/hf/meta-llama/Llama-3.1-8B/config.json"
# Each test gets its own empty cache, whatever the caller's environment says.
setup() {
  unset HF_HUB_CACHE HUGGINGFACE_HUB_CACHE
  export HF_HOME="$BATS_TEST_TMPDIR/hf"
}

JOB=(--hardware "$H100" --tp 2 --sp --dp 2 --micro-batch 1 --global-batch 8 --format json)

# A model YAML naming $1 with seq_length 8192 (llama3-8b.yaml's), in the test's folder.
hf_model() {
  printf 'huggingface: %s\noverrides:\n  seq_length: 8192\n' "$1" > "$BATS_TEST_TMPDIR/model.yaml"
  echo "$BATS_TEST_TMPDIR/model.yaml"
}

# The step time, MFU and peak memory of a `syssim run` JSON report.
summary() { jq -c '[.step_time_ms, .mfu, .peak_memory_gb]'; }

expected_summary() { syssim run "$MODELS/llama3-8b.yaml" "${JOB[@]}" | summary; }

@test "syssim run takes huggingface: meta-llama/Llama-3.1-8B from configs/hf" {
  model=$(hf_model meta-llama/Llama-3.1-8B)
  run syssim run "$model" "${JOB[@]}"
  assert_success
  assert_equal "$(summary <<< "$output")" "$(expected_summary)"
}

@test "syssim run takes the Hugging Face cache's snapshot that refs/main names" {
  repo="$BATS_TEST_TMPDIR/hf/hub/models--acme--llama-copy"
  mkdir -p "$repo/snapshots/abc123" "$repo/snapshots/zzz999" "$repo/refs"
  cp "$LLAMA31_8B" "$repo/snapshots/abc123/config.json"
  # A later-sorting snapshot of a 2-layer model that refs/main does not name.
  sed 's/"num_hidden_layers": 32/"num_hidden_layers": 2/' "$LLAMA31_8B" > "$repo/snapshots/zzz999/config.json"
  echo abc123 > "$repo/refs/main"
  model=$(hf_model acme/llama-copy)
  run syssim run "$model" "${JOB[@]}"
  assert_success
  assert_equal "$(summary <<< "$output")" "$(expected_summary)"
}

@test "syssim run takes a folder holding config.json" {
  mkdir -p "$BATS_TEST_TMPDIR/llama31"
  cp "$LLAMA31_8B" "$BATS_TEST_TMPDIR/llama31/config.json"
  model=$(hf_model "$BATS_TEST_TMPDIR/llama31")
  run syssim run "$model" "${JOB[@]}"
  assert_success
  assert_equal "$(summary <<< "$output")" "$(expected_summary)"
}

@test "a folder given with a trailing slash names the model after the folder" {
  mkdir -p "$BATS_TEST_TMPDIR/Llama-3.1-8B"
  cp "$LLAMA31_8B" "$BATS_TEST_TMPDIR/Llama-3.1-8B/config.json"
  run syssim memory "$BATS_TEST_TMPDIR/Llama-3.1-8B/" --seq-length 4096 --format json
  assert_success
  assert_equal "$(jq -r .model.name <<< "$output")" "Llama-3.1-8B"
}

@test "a mixture-of-experts architecture syssim does not map is refused as bad data" {
  mkdir -p "$BATS_TEST_TMPDIR/olmoe"
  echo '{"architectures": ["OlmoeForCausalLM"], "num_experts": 64}' > "$BATS_TEST_TMPDIR/olmoe/config.json"
  model=$(hf_model "$BATS_TEST_TMPDIR/olmoe")
  run syssim run "$model" "${JOB[@]}"
  assert_failure 1
  assert_output "syssim: error: $model: huggingface: $BATS_TEST_TMPDIR/olmoe: $BATS_TEST_TMPDIR/olmoe/config.json: architecture OlmoeForCausalLM is a mixture of experts, which syssim does not model yet"
}

@test "an id found nowhere names the places looked in" {
  model=$(hf_model meta-llama/Foo)
  run syssim run "$model" "${JOB[@]}"
  assert_failure 1
  assert_output "syssim: error: $model: huggingface: meta-llama/Foo: no config.json found (looked in: $BATS_TEST_TMPDIR/meta-llama/Foo, $BATS_TEST_TMPDIR/hf/hub/models--meta-llama--Foo/snapshots/*/config.json, $SYSSIM_BINARY_DIR/share/syssim/hf/meta-llama/Foo/config.json)"
}

# Plumbing: a Hugging Face model given to syssim run directly is the model YAML that names it.
@test "syssim run takes a Hugging Face id or config.json with --seq-length, as the YAML naming it" {
  cd "$BATS_TEST_TMPDIR"
  printf 'name: Qwen3-8B\nhuggingface: Qwen/Qwen3-8B\noverrides:\n  seq_length: 4096\n' > qwen3-8b.yaml
  flags=(--tp 2 --sp --dp 4 --global-batch 64 --format json)
  expected=$(syssim run qwen3-8b.yaml "${flags[@]}")
  run syssim run Qwen/Qwen3-8B --seq-length 4096 "${flags[@]}"
  assert_success
  assert_equal "$output" "$expected"
  run syssim run "$ROOT/configs/hf/Qwen/Qwen3-8B/config.json" --seq-length 4096 "${flags[@]}"
  assert_equal "$output" "$expected"
  run syssim run "$ROOT/configs/hf/Qwen/Qwen3-8B" --seq-length 4096 "${flags[@]}"
  assert_equal "$output" "$expected"
  # Qwen3-8B's config.json (36 layers, hidden 4096, FFN 12288, vocabulary 151936, untied
  # embeddings, QK-norm): 8.19e9 parameters, the model card's "8.2B".
  jq -e '.params_total > 8.18e9 and .params_total < 8.20e9' <<< "$expected"
  run syssim run Qwen/Qwen3-8B
  assert_failure 2
  assert_output "syssim: error: Qwen/Qwen3-8B: a Hugging Face model needs --seq-length (its config.json holds no training sequence length)"
}

@test "an id with dots in its name (meta-llama/Llama-3.1-8B) is an id, not a missing file" {
  cd "$BATS_TEST_TMPDIR"
  printf 'name: Llama-3.1-8B\nhuggingface: meta-llama/Llama-3.1-8B\noverrides:\n  seq_length: 8192\n' > llama.yaml
  flags=(--tp 2 --sp --dp 4 --global-batch 64 --format json)
  run syssim run meta-llama/Llama-3.1-8B --seq-length 8192 "${flags[@]}"
  assert_success
  assert_equal "$output" "$(syssim run llama.yaml "${flags[@]}")"
}
