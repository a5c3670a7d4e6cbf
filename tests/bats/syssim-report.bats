#!/usr/bin/env bats
load common

# TP 2 with SP, DP 4 and the distributed optimizer on one H100 node (fits in 80 GB).
TP2=(--tp 2 --sp --dp 4 --seq-length 1024 --global-batch 8 --distributed-optimizer)
# All of llama3-8b on one GPU: no collectives, out of memory.
ONE=(--seq-length 1024)

# The report keys of ../shared/spec/api.md (SimulationReport).
API_KEYS=(step_time_ms forward_ms backward_ms optimizer_ms collective_total_ms collective_exposed_ms by_op_type_ms
  model_flops_per_step achieved_tflops mfu hfu param_bytes grad_bytes optimizer_state_bytes activation_bytes
  peak_memory_gb pp_stage_memory_gb per_pp_rank_step_time_ms bottlenecks model parallelism training hardware)

# The text report rebuilt by hand from the JSON report: the layout of docs/syssim-report.md
# (ms with 4 decimals, TFLOP/s with 2, MFU/HFU in percent with 2, GB with 3).
text_from_json() {
  local json="$1" graph="$2" step fwd bwd opt coll exposed tflops tokens mfu hfu peak total active param grad optst act temp
  local dominant top modules longest stage module oom busiest groups by_type
  IFS=$'\t' read -r step fwd bwd opt coll exposed tflops tokens mfu hfu peak total active param grad optst act temp dominant stage module oom \
    < <(jq -r '[.step_time_ms, .forward_ms, .backward_ms, .optimizer_ms, .collective_total_ms, .collective_exposed_ms,
               .achieved_tflops, .tokens_per_s_per_gpu, .mfu * 100, .hfu * 100, .peak_memory_gb, .params_total / 1e9, .params_active / 1e9,
               .param_bytes / 1e9, .grad_bytes / 1e9,
               .optimizer_state_bytes / 1e9, .activation_bytes / 1e9, .temporary_bytes / 1e9,
               .bottlenecks.dominant_op_type,
               .bottlenecks.binding_pp_stage, .bottlenecks.peak_module,
               (.bottlenecks.oom | if . == null then "none" else "\(.capacity_gb) \(.required_gb) \(.excess_gb)" end)] | @tsv' <<< "$json")
  # An op "<id>_<name>" as the text names it: the shard op's module, its name after "::", a
  # collective's group, " (recompute)" for a recomputed op.
  local op_text='def op_text($ops): (.[0] | capture("^(?<id>[0-9]+)_") | .id | tonumber) as $id | $ops[$id] |
    "\(.module) \(.name | sub("^.*::"; ""))\(if .kind == "collective" then " " + .group else "" end)\(if .recompute then " (recompute)" else "" end)";'
  timed() { while IFS=$'\t' read -r name ms; do printf "('%s', %.4f), " "$name" "$ms"; done; }
  top=$(jq -r --slurpfile g "$graph" "$op_text"' .bottlenecks.top_ops_by_time[:3][] | "\(op_text($g[0].shard.ops))\t\(.[1])"' <<< "$json" | timed)
  top="[${top%, }]"
  modules=$(jq -r '.bottlenecks.top_modules_by_time[:3][] | "\(.[0])\t\(.[1])"' <<< "$json" | timed)
  modules="[${modules%, }]"
  longest=$(jq -r --slurpfile g "$graph" "$op_text"' .bottlenecks.longest_collective | if .[0] == "" then "none" else "\(op_text($g[0].shard.ops))\t\(.[1])" end' <<< "$json")
  if [ "$longest" != none ]; then longest=$(timed <<< "$longest"); longest="${longest%, }"; fi
  if [ "$oom" != none ]; then oom=$(printf "capacity %.3f GB, required %.3f GB, excess %.3f GB" ${oom}); fi
  busiest=$(jq -r '.bottlenecks.busiest_link // empty | "\(.name)\t\(.level)\t\(.bandwidth_GBps)\t\(.utilization * 100)\t\(.busy_ms)"' <<< "$json" |
    while IFS=$'\t' read -r name level bw util busy; do
      printf '    busiest_link        = %s (level %d, %.1f GB/s per GPU): %.2f%% utilized, busy %.4f ms\n' "$name" "$level" "$bw" "$util" "$busy"
    done)
  # Each group's line, in the layout's order: tp, cp, ep, etp, dp, edp, pp, embedding.
  groups=$(jq -r '.collective_by_group_ms | to_entries[] | "\(.key)\t\(.value.total_ms)\t\(.value.exposed_ms)"' <<< "$json" |
    while IFS=$'\t' read -r group total exposed; do
      rank=$(( $(echo "tp cp ep etp dp edp pp embedding" | tr ' ' '\n' | grep -nx "$group" | cut -d: -f1) ))
      name="${group}_comm_ms"; [ "$group" = cp ] && name=cp_attention_comm_ms; [ "$group" = ep ] && name=ep_dispatch_comm_ms
      printf '%d\t    %-18s = %.4f (exposed %.4f)\n' "$rank" "$name" "$total" "$exposed"
    done | sort -n -s -k1,1 | cut -f2-)
  by_type=$(jq -r '.by_op_type_ms | to_entries[] | "\(.key)\t\(.value)"' <<< "$json" |
    while IFS=$'\t' read -r type ms; do printf '%s %.4f, ' "$type" "$ms"; done)
  printf 'SimulationReport(\n'
  printf '  step_time_ms         = %.4f\n' "$step"
  jq -r '"\(.step_time_band_ms[0])\t\(.step_time_band_ms[1])\t\(.step_time_band.coverage * 100)\t\(.step_time_band.runs)\t\(.step_time_band.class)"' <<< "$json" |
    while IFS=$'\t' read -r low high coverage runs class; do
      printf '    step_time_band_ms  = %.4f to %.4f (where %.0f%% of %d published %s runs measured against their prediction, docs/validation.md)\n' \
        "$low" "$high" "$coverage" "$runs" "$class"
    done
  printf '    forward_ms         = %.4f\n' "$fwd"
  printf '    backward_ms        = %.4f\n' "$bwd"
  printf '    optimizer_ms       = %.4f\n' "$opt"
  jq -r '.host_busy_ms | select(. > 0)' <<< "$json" | while read -r host; do printf '    host_busy_ms       = %.4f\n' "$host"; done
  printf '  collective_total_ms  = %.4f\n' "$coll"
  printf '  collective_exposed   = %.4f\n' "$exposed"
  if [ -n "$groups" ]; then printf '%s\n' "$groups"; fi
  printf '  by_op_type_ms        = %s\n' "${by_type%, }"
  printf "  model_flops_per_step = %.4e (Megatron-LM's count: attention scores and context over the whole s x s matrix)\n" \
    "$(jq -r .mfu_model_flops_per_step <<< "$json")"
  printf '  achieved_tflops      = %.2f\n' "$tflops"
  printf '  tokens_per_s_per_gpu = %.1f\n' "$tokens"
  printf '  mfu                  = %.2f%%\n' "$mfu"
  printf '  hfu                  = %.2f%%\n' "$hfu"
  printf '  peak_memory_gb       = %.3f\n' "$peak"
  printf '  params_total_b       = %.3f\n' "$total"
  printf '  params_active_b      = %.3f\n' "$active"
  printf '  Memory(\n'
  printf '    param_gb           = %.3f\n' "$param"
  printf '    grad_gb            = %.3f\n' "$grad"
  printf '    optimizer_state_gb = %.3f\n' "$optst"
  printf '    activation_gb      = %.3f\n' "$act"
  printf '    temporary_gb       = %.3f\n' "$temp"
  printf '    peak_memory_gb     = %.3f\n' "$peak"
  jq -r '"\(.cuda_context_bytes / 1e9)\t\(.nccl_buffer_bytes / 1e9)\t\(.fragmentation_bytes / 1e9)\t\(.device_memory_gb)\t\(.reserved_memory_gb)"' <<< "$json" |
    while IFS=$'\t' read -r context nccl fragmentation device reserved; do
      printf '    cuda_context_gb    = %.3f\n    nccl_buffers_gb    = %.3f\n' "$context" "$nccl"
      printf '    fragmentation_gb   = %.3f\n    device_memory_gb   = %.3f\n' "$fragmentation" "$device"
      if [ "$reserved" = null ]; then printf '    reserved_memory_gb = not replayed\n'
      else printf '    reserved_memory_gb = %.3f\n' "$reserved"; fi
    done
  printf '    oom                = %s\n' "$oom"
  printf '  )\n'
  printf '  Bottlenecks(\n'
  printf '    dominant_op_type    = %s\n' "$dominant"
  printf '    top_ops_by_time     = %s\n' "$top"
  printf '    top_modules_by_time = %s\n' "$modules"
  printf '    longest_collective  = %s\n' "$longest"
  if [ -n "$busiest" ]; then printf '%s\n' "$busiest"; fi
  printf '    binding_pp_stage    = %s\n' "$stage"
  printf '    peak_module         = %s\n' "$module"
  printf '    oom                 = %s\n' "$oom"
  printf '  )\n'
  printf ')\n'
}

@test "syssim-report --help lists --format, -i and -o" {
  run syssim-report --help
  assert_success
  assert_output --partial "--format"
  assert_output --partial "text"
  assert_output --partial "json"
  assert_output --partial "-i,--input"
  assert_output --partial "-o,--output"
}

@test "syssim-report --version prints the graph format version" {
  run syssim-report --version
  assert_success
  assert_output --regexp "^syssim-report [0-9.]+ \(graph format 1\.23\)$"
}

@test "an unknown flag is bad usage (exit 2, one line)" {
  run syssim-report --foo
  assert_failure 2
  assert_output "syssim-report: error: unknown argument '--foo' (see --help)"
}

@test "a --format other than text, json, chrome-trace or svg is bad usage" {
  run syssim-report --format xml -i "$(stage_of llama3-8b mem "${TP2[@]}")"
  assert_failure 2
  assert_output "syssim-report: error: --format: xml not in {text,json,chrome-trace,svg,critical-path}"
}

@test "empty input is bad data" {
  run syssim-report < /dev/null
  assert_failure 1
  assert_output "syssim-report: error: <stdin>: empty input, expected a syssim graph (did the stage before it in the pipe fail?)"
}

@test "a graph without a sim or mem section names the stage to run" {
  run syssim-report -i "$(stage_of llama3-8b cost "${TP2[@]}")"
  assert_failure 1
  assert_output "syssim-report: error: $(stage_of llama3-8b cost "${TP2[@]}"): graph has no 'sim' section: run syssim-sim first"
  run syssim-report -i "$(stage_of llama3-8b sim "${TP2[@]}")"
  assert_failure 1
  assert_output "syssim-report: error: $(stage_of llama3-8b sim "${TP2[@]}"): graph has no 'mem' section: run syssim-mem first"
  run syssim-report -i "$(trace_of llama3-8b)"
  assert_failure 1
  assert_output "syssim-report: error: $(trace_of llama3-8b): graph has no 'shard' section: run syssim-shard first"
}

@test "-o writes the report to the file; a failed run leaves no file behind" {
  run syssim-report -i "$(stage_of llama3-8b mem "${TP2[@]}")" -o "$BATS_TEST_TMPDIR/r.txt"
  assert_success
  assert_output ""
  cmp "$BATS_TEST_TMPDIR/r.txt" <(syssim-report -i "$(stage_of llama3-8b mem "${TP2[@]}")")
  rm "$BATS_TEST_TMPDIR/r.txt"
  run syssim-report -i "$(stage_of llama3-8b sim "${TP2[@]}")" -o "$BATS_TEST_TMPDIR/r.txt"
  assert_failure 1
  [ -z "$(ls "$BATS_TEST_TMPDIR")" ]
}

@test "text: the SimulationReport layout, every number the JSON report's, rounded" {
  graph=$(stage_of llama3-8b mem "${TP2[@]}")
  run syssim-report -i "$graph"
  assert_success
  # The job first (docs/syssim-report.md, "The job"): the flags of TP2 in words, and the
  # H100 preset's bundle for the GEMMs and attention (its calibrated_families).
  assert_equal "$(sed -n '1,/^)$/p' <<< "$output")" "Job(
  model         = llama3-8b, 8.030 B parameters
  hardware      = h100-sxm-80gb, 8 GPUs, 8 per node
  layout        = tp2+sp pp1 dp4 mbs1 gbs8
  precision     = bf16
  recompute     = none
  data_parallel = sharding optim
  estimator     = calibrated gemm, attention from ../calibration/h100-sxm-80gb, the rest the roofline over the hardware's efficiencies
)"
  assert_equal "$(sed '1,/^)$/d' <<< "$output")" "$(text_from_json "$(syssim-report -i "$graph" --format json)" "$graph")"
  assert_line --index 9 "SimulationReport("
  assert_line "    oom                 = none"
}

@test "text: out of memory and no collective on one GPU" {
  graph=$(stage_of llama3-8b mem "${ONE[@]}")
  run syssim-report -i "$graph"
  assert_success
  assert_equal "$(sed '1,/^)$/d' <<< "$output")" "$(text_from_json "$(syssim-report -i "$graph" --format json)" "$graph")"
  assert_line "    longest_collective  = none"
  assert_line --regexp "^    oom                 = capacity 85\.900 GB, required 1[0-9][0-9]\.[0-9]{3} GB, excess [0-9]+\.[0-9]{3} GB$"
}

@test "json: the api.md keys, the sim and mem sections' values" {
  graph=$(stage_of llama3-8b mem "${TP2[@]}")
  syssim-report -i "$graph" --format json > "$BATS_TEST_TMPDIR/r.json"
  for key in "${API_KEYS[@]}" temporary_bytes; do
    jq -e --arg k "$key" 'has($k)' "$BATS_TEST_TMPDIR/r.json" > /dev/null || { echo "no key $key"; false; }
  done
  run jq -c --slurpfile g "$graph" '[
    (. as $r | ["step_time_ms", "forward_ms", "backward_ms", "optimizer_ms", "collective_total_ms", "collective_exposed_ms",
      "by_op_type_ms", "per_pp_rank_step_time_ms"] | all($r[.] == $g[0].sim[.])),
    (. as $r | ["param_bytes", "grad_bytes", "optimizer_state_bytes", "activation_bytes", "temporary_bytes", "peak_memory_gb",
      "pp_stage_memory_gb"] | all($r[.] == $g[0].mem[.])),
    .model_flops_per_step == $g[0].shard.model_flops_per_step,
    .parallelism == $g[0].shard.parallelism, .training == $g[0].shard.training, .hardware == $g[0].cost.hardware,
    .model == $g[0].model, (.bottlenecks | keys), (.bottlenecks.top_ops_by_time | length)]' "$BATS_TEST_TMPDIR/r.json"
  assert_output '[true,true,true,true,true,true,true,["binding_pp_stage","busiest_link","dominant_op_type","longest_collective","oom","peak_module","top_modules_by_time","top_ops_by_time"],10]'
}

@test "json: achieved TFLOP/s = model FLOPs / (step time x GPUs); mfu = achieved / 989; hfu = mfu" {
  run syssim-report -i "$(stage_of llama3-8b mem "${TP2[@]}")" --format json
  json=$output
  assert_close "$(jq '.achieved_tflops' <<< "$json")" \
    "$(jq '.model_flops_per_step / (.step_time_ms / 1000 * .parallelism.world_size) / 1e12' <<< "$json")"
  assert_close "$(jq '.mfu' <<< "$json")" "$(jq '.achieved_tflops / 989' <<< "$json")"
  [ "$(jq '.hfu == .mfu and .mfu > 0 and .mfu < 1' <<< "$json")" = true ]
}

@test "json: model_flops_per_step is Megatron-LM's formula (docs/metrics.md)" {
  # F = 12 B s L h^2 [(1 + g/a + s/h)(d a / h) + (f/h)(3/2) + V/(2 L h)], V padded to 128 * tp.
  run syssim-report -i "$(stage_of llama3-8b mem "${TP2[@]}")" --format json
  assert_close "$(jq '.model_flops_per_step' <<< "$output")" \
    "$(awk 'BEGIN { B = 8; s = 1024; L = 32; h = 4096; a = 32; g = 8; d = 128; f = 14336; V = 128256
      printf "%.17g", 12 * B * s * L * h * h * ((1 + g / a + s / h) * (d * a / h) + (f / h) * 1.5 + V / (2 * L * h)) }')"
}

@test "json: out of memory is reported with capacity, required and excess" {
  run syssim-report -i "$(stage_of llama3-8b mem "${ONE[@]}")" --format json
  run jq -c '[.bottlenecks.oom.capacity_gb, .bottlenecks.oom.required_gb == .device_memory_gb, .bottlenecks.longest_collective]' <<< "$output"
  assert_output '[85.9,true,["",0]]'
}

@test "the report is the same from standard input and from -i" {
  a=$(syssim-report --format json < "$(stage_of llama3-8b mem "${TP2[@]}")" | sha256sum)
  b=$(syssim-report --format json -i "$(stage_of llama3-8b mem "${TP2[@]}")" | sha256sum)
  [ "$a" = "$b" ]
}

@test "a foreign section does not disturb the report" {
  graph=$(stage_of llama3-8b mem "${TP2[@]}")
  cmp <(jq -c '.mine = {"x": 1}' "$graph" | syssim-report) <(syssim-report -i "$graph")
}

@test "a parallelism size out of range in the graph is bad data, not an infinite MFU" {
  run bash -c "jq -c '.shard.parallelism.tp = 0' '$ROOT/tests/golden/tiny.mem.graph' | syssim-report"
  assert_failure 1
  assert_output "syssim-report: error: <stdin>: /shard/parallelism/tp: expected a size from 1 to 1048576, got 0"
  run bash -c "jq -c '.shard.parallelism.pp = 100000000' '$ROOT/tests/golden/tiny.mem.graph' | syssim-sim"
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: /shard/parallelism/pp: expected a size from 1 to 1048576, got 100000000"
}

@test "tokens per second per GPU: the global batch's tokens over the step, on every GPU" {
  graph=$(stage_of llama3-8b mem "${TP2[@]}")
  json=$(syssim-report -i "$graph" --format json)
  # TP2: a global batch of 8 sequences of 1,024 tokens on tp 2 x dp 4 = 8 GPUs.
  assert_close "$(jq '.tokens_per_s_per_gpu' <<< "$json")" "$(jq '8 * 1024 / (.step_time_ms / 1000 * 8)' <<< "$json")" 1e-12
}

@test "an MFU above 100% says why: the FLOP count takes attention in full, the kernels its causal half" {
  # The tiny Llama at 65,536 tokens is mostly attention; on the bare roofline every kernel runs at
  # the peak, so the causal count can reach at most 100% while Megatron's full count nearly doubles it.
  graph="$BATS_TEST_TMPDIR/long.graph"
  syssim-trace "$ROOT/tests/golden/tiny.yaml" | syssim-shard --seq-length 65536 | syssim-cost --hardware h100-sxm-80gb --roofline |
    syssim-sim | syssim-mem > "$graph"
  run syssim-report -i "$graph"
  assert_success
  assert_line --regexp '^  mfu += 1[0-9][0-9]\.[0-9]+% \(above 100%: the FLOP count takes attention over the whole sequence, the simulated kernels the causal half or the window; --mfu-convention causal counts what they compute\)$'
  causal=$(syssim-report -i "$graph" --mfu-convention causal --format json | jq '.mfu')
  awk -v m="$causal" 'BEGIN { exit !(m > 0.5 && m <= 1) }' || { echo "causal mfu $causal"; false; }
}
