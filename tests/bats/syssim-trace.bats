#!/usr/bin/env bats
load common

# A copy of the llama3-8b preset with one line replaced by sed's expression $1.
model_with() {
  sed "$1" "$MODELS/llama3-8b.yaml" > "$BATS_TEST_TMPDIR/m.yaml"
  echo "$BATS_TEST_TMPDIR/m.yaml"
}

@test "syssim-trace --help shows the model argument and -o" {
  run syssim-trace --help
  assert_success
  assert_output --partial "Usage: syssim-trace"
  assert_output --partial "model"
  assert_output --partial "-o,--output"
  assert_output --partial "--version"
}

@test "syssim-trace --version prints the graph format version" {
  run syssim-trace --version
  assert_success
  assert_output --regexp "^syssim-trace [0-9.]+ \(graph format 1\.23\)$"
}

@test "an unknown flag is bad usage (exit 2, one line)" {
  run syssim-trace "$MODELS/llama3-8b.yaml" --foo
  assert_failure 2
  assert_output "syssim-trace: error: unknown argument '--foo' (see --help)"
}

@test "a second positional argument is bad usage" {
  run syssim-trace "$MODELS/llama3-8b.yaml" extra.yaml
  assert_failure 2
  assert_output "syssim-trace: error: unknown argument 'extra.yaml' (see --help)"
}

@test "a missing model argument is bad usage" {
  run syssim-trace
  assert_failure 2
  assert_output "syssim-trace: error: model is required"
}

@test "a missing model file is bad data naming the file" {
  run syssim-trace "$BATS_TEST_TMPDIR/nope.yaml"
  assert_failure 1
  assert_output "syssim-trace: error: $BATS_TEST_TMPDIR/nope.yaml: cannot open file"
}

@test "invalid YAML is bad data naming the file and the line" {
  printf 'name: x\nnum_layers: 2\n  hidden_size: 3\n' > "$BATS_TEST_TMPDIR/bad.yaml"
  run syssim-trace "$BATS_TEST_TMPDIR/bad.yaml"
  assert_failure 1
  assert_output "syssim-trace: error: $BATS_TEST_TMPDIR/bad.yaml: invalid YAML at line 3: illegal map value"
}

@test "a YAML file that is not a mapping is bad data" {
  printf -- '- a\n- b\n' > "$BATS_TEST_TMPDIR/list.yaml"
  run syssim-trace "$BATS_TEST_TMPDIR/list.yaml"
  assert_failure 1
  assert_output "syssim-trace: error: $BATS_TEST_TMPDIR/list.yaml: expected a mapping at the top level"
}

@test "an unknown key names the nearest valid key" {
  file=$(model_with 's/^hidden_size:/hiden_size:/')
  run syssim-trace "$file"
  assert_failure 1
  assert_output "syssim-trace: error: $file: unknown key 'hiden_size' (did you mean 'hidden_size'?)"
}

@test "a missing required key and a value of the wrong type are bad data naming the key" {
  file=$(model_with '/^ffn_hidden_size:/d')
  run syssim-trace "$file"
  assert_failure 1
  assert_output "syssim-trace: error: $file: missing required key 'ffn_hidden_size'"
  file=$(model_with 's/^num_layers: 32/num_layers: many/')
  run syssim-trace "$file"
  assert_failure 1
  assert_output "syssim-trace: error: $file: key 'num_layers' has invalid value 'many'"
}

@test "-o writes the graph to the file and nothing to standard output" {
  run syssim-trace "$MODELS/llama3-8b.yaml" -o "$BATS_TEST_TMPDIR/t.graph"
  assert_success
  assert_output ""
  # The same graph as on standard output, but for the command line in the provenance.
  syssim-trace "$MODELS/llama3-8b.yaml" > "$BATS_TEST_TMPDIR/stdout.graph"
  cmp <(jq -c 'del(.provenance)' "$BATS_TEST_TMPDIR/t.graph") <(jq -c 'del(.provenance)' "$BATS_TEST_TMPDIR/stdout.graph")
  run jq -c '.provenance[0].args' "$BATS_TEST_TMPDIR/t.graph"
  assert_output "[\"$MODELS/llama3-8b.yaml\",\"-o\",\"$BATS_TEST_TMPDIR/t.graph\"]"
}

@test "a failed run leaves no output file behind" {
  file=$(model_with 's/^hidden_size:/hiden_size:/')
  run syssim-trace "$file" -o "$BATS_TEST_TMPDIR/out.graph"
  assert_failure 1
  [ ! -e "$BATS_TEST_TMPDIR/out.graph" ]
  [ "$(ls "$BATS_TEST_TMPDIR")" = "m.yaml" ]
}

@test "the graph has the format tag, the version, the model and trace sections and one provenance entry" {
  run jq -c '[.format, .version, keys, [.provenance[].tool], .provenance[0].args]' "$(trace_of llama3-8b)"
  assert_output "[\"syssim-graph\",\"1.23\",[\"format\",\"model\",\"provenance\",\"trace\",\"version\"],[\"syssim-trace\"],[\"$MODELS/llama3-8b.yaml\",\"-o\",\"$BATS_FILE_TMPDIR/llama3-8b.graph\"]]"
}

@test "llama3-8b: the axes are the architecture's (b and s stay free)" {
  run jq -c '.trace.axes' "$(trace_of llama3-8b)"
  # r = 32 heads / 8 groups, d = kv_channels, p = max_position_embeddings.
  assert_output '{"d":128,"f":14336,"g":8,"h":4096,"p":8192,"r":4,"v":128256}'
}

@test "llama3-8b: forward and backward ops, 32 layers, 12 forward and 16 backward ops per layer" {
  run jq -c '[([.trace.ops[].phase] | unique), ([.trace.ops[].layer | select(. != null)] | unique | length),
              (.trace.ops | length)]' "$(trace_of llama3-8b)"
  assert_output '[["bwd","fwd"],32,907]'
  for layer in 0 17 31; do
    run jq -c --argjson l "$layer" '[.trace.ops[] | select(.layer == $l) | .phase] | group_by(.) | map(length)' \
      "$(trace_of llama3-8b)"
    assert_output '[16,12]'
  done
}

@test "llama3-8b: ops are in execution order with ids, forward before backward" {
  run jq -e '(.trace.ops | to_entries | all(.key == .value.id))
    and ([.trace.ops[].phase] | index("bwd")) as $b | ([.trace.ops[:$b][].phase] | unique) == ["fwd"]
    and ([.trace.ops[$b:][].phase] | unique) == ["bwd"]' "$(trace_of llama3-8b)"
  assert_success
}

@test "llama3-8b: the layer-0 fc1 linear reads [s, b, h] with a [2*f, h] weight (SwiGLU gate and up)" {
  run jq -c '.trace.ops[] | select(.name == "syssim::linear" and .module == "decoder.layers.0.mlp.linear_fc1")
    | [.phase, .layer, .tp_role, .kind, [.inputs[].dims], .flops]' "$(trace_of llama3-8b)"
  # FLOPs: 2 * numel(x) * out_features = 2 * s*b*h * 2*f.
  assert_output '["fwd",0,"column","gemm",[["s","b","h"],["2*f","h"]],"4*b*f*h*s"]'
}

@test "llama3-8b: 259 parameter tensors (2 embedding/output + 32 layers x 8 + final norm)" {
  run jq '[.trace.tensors[] | select(.role == "param")] | length' "$(trace_of llama3-8b)"
  assert_output "$((2 + 32 * 8 + 1))"
  # Per layer: input norm, q, k, v, proj, pre-MLP norm, fc1, fc2; outside the layers: the word
  # embeddings, the final norm and the (untied) output layer.
  run jq -r '.trace.tensors[] | select(.role == "param" and (.param | test("^decoder.layers.0[.]|^[^d]|final"))) | .param' \
    "$(trace_of llama3-8b)"
  assert_output "embedding.word_embeddings.weight
decoder.layers.0.input_layernorm.weight
decoder.layers.0.self_attention.linear_qkv.weight_q
decoder.layers.0.self_attention.linear_qkv.weight_k
decoder.layers.0.self_attention.linear_qkv.weight_v
decoder.layers.0.self_attention.linear_proj.weight
decoder.layers.0.pre_mlp_layernorm.weight
decoder.layers.0.mlp.linear_fc1.weight
decoder.layers.0.mlp.linear_fc2.weight
decoder.final_layernorm.weight
output_layer.weight"
}

@test "llama3-8b: the parameter tensors hold 8,030,261,248 values (the published 8.03B)" {
  # Parameter dims are products of numbers and axes ("2*f", "d*g*r"): evaluate them with the axes.
  run jq '.trace.axes as $a
    | [.trace.tensors[] | select(.role == "param")
       | [.dims[] | split("*") | map(if test("^[0-9]+$") then tonumber else $a[.] end) | .[]] | reduce .[] as $x (1; . * $x)]
    | add' "$(trace_of llama3-8b)"
  assert_output "8030261248"
}

@test "the same model file gives the same bytes" {
  a=$(syssim-trace "$MODELS/llama3-8b.yaml" | sha256sum)
  b=$(syssim-trace "$MODELS/llama3-8b.yaml" | sha256sum)
  [ "$a" = "$b" ]
}

@test "a Hugging Face id traces with --seq-length: Qwen3-8B's config.json gives the qwen3-8b preset's trace" {
  syssim-trace Qwen/Qwen3-8B --seq-length 4096 -o "$BATS_TEST_TMPDIR/hf.graph"
  syssim-trace qwen3-8b -o "$BATS_TEST_TMPDIR/preset.graph"
  [ "$(jq -S .trace "$BATS_TEST_TMPDIR/hf.graph")" = "$(jq -S .trace "$BATS_TEST_TMPDIR/preset.graph")" ]
  run syssim-trace Qwen/Qwen3-8B
  assert_failure 2
  assert_output "syssim-trace: error: Qwen/Qwen3-8B: a Hugging Face model needs --seq-length (its config.json holds no training sequence length)"
}

@test "past 4096 keys the unfused attention is traced as PyTorch's softmax, and shard refuses another length" {
  model=$(model_with 's/^attention_backend: flash/attention_backend: unfused/')
  syssim-trace "$model" -o "$BATS_TEST_TMPDIR/8192.graph"  # the preset's seq_length is 8192
  run jq -r '[.trace.ops[] | select(.layer == 0 and .phase == "fwd" and (.module | endswith("core_attention"))) | .name] | join(" ")' \
    "$BATS_TEST_TMPDIR/8192.graph"
  # the GQA key and value copies first
  assert_output "aten::clone aten::clone aten::bmm aten::_to_copy aten::masked_fill_ aten::_softmax aten::_to_copy aten::bmm aten::clone"
  run syssim-shard -i "$BATS_TEST_TMPDIR/8192.graph" --seq-length 4096
  assert_failure 1
  assert_output "syssim-shard: error: seq_length=4096 runs the unfused attention's softmax as Megatron's fused kernel but the trace holds PyTorch's: trace the model at this length (syssim-trace --seq-length 4096)"
  syssim-trace "$model" --seq-length 4096 | syssim-shard > /dev/null
}
