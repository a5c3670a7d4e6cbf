#!/usr/bin/env bash
# Rewrites the figures of docs/ that syssim prints: each block between
#   <!-- figures NAME -->   and   <!-- end figures -->
# of a page is replaced by what the function `figures_NAME` below prints, from fresh runs of
# the built tool. Review the diff before committing it. Usage, from anywhere:
#
#   tests/docs/regenerate.sh [OUT_DIR]
#
# OUT_DIR (default: docs itself) receives the rewritten pages; tests/bats/docs.bats runs the
# script into a scratch folder to check that the committed pages agree. The tool comes from
# PATH, or from build/bin when it is not on it. A block whose function is missing, or a
# function whose block is missing, is an error.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/docs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v syssim > /dev/null || PATH="$root/build/bin:$PATH"
cd "$root"

H100=configs/hardware/h100-sxm-80gb.yaml
A100=configs/hardware/a100-sxm-80gb.yaml

# json ARGS...: `syssim run ARGS --format json`.
json() { syssim run "$@" --format json; }
# one X: X to one decimal.
one() { printf '%.1f' "$1"; }
# group_ms JSON GROUP: "total (exposed)" of a collective group, "-" when the rank spends no
# time in one (a group of one rank has nothing to exchange).
group_ms() {
  local total exposed
  total=$(jq -r --arg g "$2" '.collective_by_group_ms[$g].total_ms // 0' <<< "$1")
  [ "$total" != 0 ] || { echo -n "-"; return; }
  exposed=$(jq -r --arg g "$2" '.collective_by_group_ms[$g].exposed_ms' <<< "$1")
  echo -n "$(one "$total") ($(one "$exposed"))"
}
# peak_gb JSON: the peak, then " (OOM)" when it does not fit.
peak_gb() {
  echo -n "$(one "$(jq -r .peak_memory_gb <<< "$1")")"
  [ "$(jq -r '.bottlenecks.oom == null' <<< "$1")" = true ] || echo -n " (OOM)"
}
pct() { one "$(jq -r "$2 * 100" <<< "$1")"; }

# docs/parallelism.md, "Context parallelism": Llama-3-8B at 131072 tokens.
figures_context_parallel() {
  echo "| cp | GPUs | step ms | peak memory GB | CP exchange ms (exposed) |"
  echo "|---|---|---|---|---|"
  local cp label j
  for cp in 1 2 4 8 8,all_gather; do
    if [ "$cp" = 8,all_gather ]; then
      label='8, `all_gather`'
      j=$(json configs/models/llama3-8b.yaml --hardware $H100 --tp 8 --sp --cp 8 --cp-comm-type all_gather \
        --seq-length 131072 --global-batch 1)
    else
      label=$cp
      j=$(json configs/models/llama3-8b.yaml --hardware $H100 --tp 8 --sp --cp "$cp" --seq-length 131072 --global-batch 1)
    fi
    echo "| $label | $(jq -r .parallelism.world_size <<< "$j") | $(one "$(jq -r .step_time_ms <<< "$j")") |" \
      "$(peak_gb "$j") | $(group_ms "$j" cp) |"
  done
}

# docs/parallelism.md, "Pipeline parallelism": GPT-3 175B on A100, tp 8 with SP, global batch 64.
figures_pipeline_schedules() {
  echo "| pipeline | GPUs | step ms | bubble | peak GB (stage) | in flight, rank 0 | pp send_recv ms (exposed) |"
  echo "|---|---|---|---|---|---|---|"
  local row label flags j stage
  for row in "pp 8, 1F1B|--pp 8" "pp 8, GPipe|--pp 8 --pipeline-schedule gpipe" \
    "pp 8, interleaved vpp 2|--pp 8 --vpp 2" "pp 8, interleaved vpp 4|--pp 8 --vpp 4" \
    "pp 8, ZB-H1|--pp 8 --pipeline-schedule zb-h1" "pp 16, 1F1B|--pp 16" "pp 16, interleaved vpp 3|--pp 16 --vpp 3"; do
    label=${row%%|*} flags=${row#*|}
    # shellcheck disable=SC2086  # flags are words
    j=$(json configs/models/gpt3-175b.yaml --hardware $A100 --tp 8 --sp --global-batch 64 $flags)
    stage=$(jq -r '.pp_stage_memory_gb | index(max)' <<< "$j")
    local peak
    peak="$(one "$(jq -r .peak_memory_gb <<< "$j")") ($stage)"
    [ "$(jq -r '.bottlenecks.oom == null' <<< "$j")" = true ] || peak+=", OOM"
    echo "| $label | $(jq -r .parallelism.world_size <<< "$j") | $(one "$(jq -r .step_time_ms <<< "$j")") |" \
      "$(pct "$j" .bubble_fraction)% | $peak | $(jq -r '.pp_stage_microbatches_in_flight[0]' <<< "$j") |" \
      "$(group_ms "$j" pp) |"
  done
}

# docs/parallelism.md, "Pipeline parallelism": ZB-H1 against 1F1B where tensor parallelism
# loses its overlap.
figures_zero_bubble_tensor_parallel() {
  echo "| schedule | step s | tp collectives s (exposed) |"
  echo "|---|---|---|"
  local schedule j
  for schedule in 1f1b zb-h1; do
    j=$(json configs/models/llama3-70b.yaml --tp 8 --sp --pp 8 --dp 16 --global-batch 16384 --pipeline-schedule $schedule)
    echo "| $schedule | $(one "$(jq -r '.step_time_ms / 1000' <<< "$j")") |" \
      "$(one "$(jq -r '.collective_by_group_ms.tp.total_ms / 1000' <<< "$j")")" \
      "($(one "$(jq -r '.collective_by_group_ms.tp.exposed_ms / 1000' <<< "$j")")) |"
  done
}

# docs/parallelism.md, "Expert parallelism": Mixtral 8x7B on 64 H100, tp 2 with SP, dp 32.
figures_mixtral_expert_parallel() {
  echo "| ep | etp | other flags | step ms | MFU | EP exchange ms (exposed) | ETP ms (exposed) | peak GB |"
  echo "|---|---|---|---|---|---|---|---|"
  local ep etp flags j etp_label flags_label
  while IFS='|' read -r ep etp flags; do
    etp_label=$etp
    [ "$etp" = 2 ] && etp_label="2 (= tp)"
    flags_label=" "
    [ -z "$flags" ] || flags_label=" \`$flags\` "
    # shellcheck disable=SC2086  # flags are words
    j=$(json configs/models/mixtral-8x7b.yaml --hardware $H100 --tp 2 --sp --dp 32 --global-batch 256 \
      --distributed-optimizer --ep "$ep" --etp "$etp" $flags)
    echo "| $ep | $etp_label |$flags_label| $(one "$(jq -r .step_time_ms <<< "$j")") | $(pct "$j" .mfu)% |" \
      "$(group_ms "$j" ep) | $(group_ms "$j" etp) | $(peak_gb "$j") |"
  done <<'ROWS'
1|2|
2|1|
4|1|
4|2|
8|1|
8|2|
8|1|--moe-imbalance 1.5
8|1|--moe-imbalance 2
8|1|--moe-imbalance 2 --moe-expert-capacity-factor 1.25
8|1|--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity
8|1|--moe-token-dispatcher-type allgather
ROWS
}

# DeepSeek-V3 on 1,024 H100 in Megatron-Bridge's layout (docs/parallelism.md), `syssim run ARGS`.
deepseek_v3() {
  syssim run configs/models/deepseek-v3.yaml --hardware $H100 --tp 2 --sp --pp 16 --dp 32 --ep 64 --etp 1 \
    --global-batch 8192 --pp-layout 4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1 --distributed-optimizer \
    --overlap-grad-reduce --overlap-param-gather "$@"
}
figures_deepseek_v3() {
  echo "| other flags | step ms | EP exchange ms (exposed) | binding stage | bubble |"
  echo "|---|---|---|---|---|"
  local flags j
  for flags in "" --moe-shared-expert-overlap; do
    # shellcheck disable=SC2086  # flags are words
    j=$(deepseek_v3 --format json $flags)
    echo "|${flags:+ \`$flags\`} | $(one "$(jq -r .step_time_ms <<< "$j")") | $(group_ms "$j" ep) |" \
      "$(jq -r .bottlenecks.binding_pp_stage <<< "$j") | $(pct "$j" .bubble_fraction)% |"
  done
}

# docs/syssim-report.md: excerpts of text reports, indented as the page shows them.
# excerpt PATTERN ARGS...: the lines of `syssim run ARGS` that match PATTERN, indented 4.
excerpt() {
  local pattern=$1
  shift
  syssim run "$@" | grep -E "$pattern" | sed 's/^/    /'
}
figures_report_pipeline() {
  syssim run configs/models/llama3-8b.yaml --tp 2 --sp --pp 4 --global-batch 16 --seq-length 4096 |
    sed -n '/^  Pipeline($/,/^  )$/p' | sed 's/^/    /'
}
figures_report_busiest_link() { excerpt '^    busiest_link ' ; }
figures_report_context_parallel() {
  excerpt '^  collective_exposed |^    cp_attention_comm_ms ' configs/models/llama3-8b.yaml --tp 2 --sp --cp 2 \
    --global-batch 16 --seq-length 8192
}
figures_report_expert_parallel() {
  local report
  report=$(deepseek_v3)
  grep -E '^  collective_(total_ms|exposed) |^    ep_dispatch_comm_ms ' <<< "$report" | sed 's/^/    /'
  echo "      ..."
  grep -E '^  params_(total|active)_b ' <<< "$report" | sed 's/^/    /'
}

# docs/syssim.md: the line --fail-on-oom prints on stderr, and the two memory lines of
# --replay-allocator, as a shell session shows them.
figures_fail_on_oom() {
  echo '    $ syssim run llama3-8b --hardware h100-sxm-80gb --fail-on-oom'
  echo '    ...'
  local status=0 err
  err=$(syssim run llama3-8b --hardware h100-sxm-80gb --fail-on-oom 2>&1 > /dev/null) || status=$?
  [ "$status" = 3 ] || { echo "regenerate.sh: --fail-on-oom exited with $status, not 3" >&2; exit 1; }
  echo "    $err"
}
figures_replay_allocator() {
  # shellcheck disable=SC2016  # the command as the page shows it
  echo '    $ syssim run --replay-allocator | grep -E '\''^    (peak|reserved)_memory_gb'\'''
  syssim run --replay-allocator | grep -E '^    (peak|reserved)_memory_gb' | sed 's/^/    /'
}

# docs/syssim-trace.md, "Against measurements": Megatron's unfused attention chain on an H200,
# measured (tests/data/calibration/h200/attention_unfused.csv) against the sum of the chain's
# op times, by the loop the page shows.
figures_unfused_attention() {
  echo "| heads | seq | forward, measured ms | predicted | error | forward+backward, measured ms | predicted | error |"
  echo "|---|---|---|---|---|---|---|---|"
  local heads seq model measured predicted
  model=$(mktemp --suffix .yaml)
  for heads in 8 16 32; do
    for seq in 2048 4096 8192; do
      printf 'num_layers: 1\nhidden_size: %d\nnum_attention_heads: %d\nkv_channels: 128\nffn_hidden_size: %d\nseq_length: %d\nvocab_size: 32000\nattention_backend: unfused\nmasked_softmax_fusion: false\nattention_dropout: 0.1\n' \
        $((heads * 128)) "$heads" $((heads * 512)) "$seq" > "$model"
      predicted=$(syssim-trace "$model" | syssim-shard | syssim-cost --hardware configs/hardware/h200-sxm.yaml |
        jq -r '[.shard.ops, .cost.ops] | transpose
          | map(select((.[0].module | endswith("core_attention")) and .[0].name != "aten::clone"))
          | [(map(select(.[0].phase == "fwd")[1].time_us) | add / 1000), (map(.[1].time_us) | add / 1000)] | @tsv')
      measured=$(awk -F, -v h="$heads" -v s="$seq" \
        '$1 == "megatron_unfused" && $2 == 1 && $3 == h && $4 == s && $5 == 128 { print $6 "\t" $7 }' \
        tests/data/calibration/h200/attention_unfused.csv)
      [ -n "$measured" ] || { echo "regenerate.sh: no measured unfused attention at $heads heads, $seq" >&2; exit 1; }
      awk -F'\t' -v h="$heads" -v s="$seq" -v m="$measured" '{ split(m, t, "\t")
        printf "| %d | %d | %.2f | %.2f | %+.0f%% | %.2f | %.2f | %+.0f%% |\n", h, s, t[1], $1, ($1 - t[1]) / t[1] * 100,
          t[2], $2, ($2 - t[2]) / t[2] * 100 }' <<< "$predicted"
    done
  done
  rm -f "$model"
}

# docs/syssim-trace.md, "Unfused kernels": the default job's layout with the three fusion keys
# of the Llama-3-8B preset off.
figures_unfused_kernels() {
  echo "| model | step s | activations GB |"
  echo "|---|---|---|"
  local model j label
  model=$(mktemp --suffix .yaml)
  { cat configs/models/llama3-8b.yaml; printf 'rms_norm_fusion: false\napply_rope_fusion: false\nbias_swiglu_fusion: false\n'; } > "$model"
  for label in preset unfused; do
    if [ $label = preset ]; then
      j=$(json configs/models/llama3-8b.yaml --hardware $H100 --tp 2 --sp --dp 4 --global-batch 128 --distributed-optimizer)
      label='`llama3-8b`'
    else
      j=$(json "$model" --hardware $H100 --tp 2 --sp --dp 4 --global-batch 128 --distributed-optimizer)
      label='`llama3-8b` with the three keys `false`'
    fi
    echo "| $label | $(one "$(jq -r '.step_time_ms / 1000' <<< "$j")") | $(one "$(jq -r '.activation_bytes / 1e9' <<< "$j")") |"
  done
  rm -f "$model"
}

# docs/calibration.md, "Two clock regimes in the GH200 data": one job's step time by micro-batch
# on the H100 preset, whose bundle prices a GEMM of over about 3 ms slower per FLOP.
figures_h100_micro_batch() {
  echo "| micro-batch | micro-batches per GPU | step ms | GEMM ms |"
  echo "|---|---|---|---|"
  local mbs j
  for mbs in 1 2 4 8; do
    j=$(json configs/models/llama3-8b.yaml --hardware $H100 --gpus 8 --micro-batch "$mbs" --global-batch 64 \
      --distributed-optimizer --recompute full)
    echo "| $mbs | $((8 / mbs)) | $(one "$(jq -r .step_time_ms <<< "$j")") | $(one "$(jq -r .by_op_type_ms.gemm <<< "$j")") |"
  done
}

# docs/validation.md, "Measured on the shared set": the median signed step-time error of groups
# of the table's simulated rows, from one `syssim validate --format json`.
figures_validation_signed_error() {
  echo "| source | GPU | dtype | models | rows | median signed % |"
  echo "|---|---|---|---|---|---|"
  local report source gpu dtype models filter errors n fsdp tp8
  report=$(syssim validate tests/data/validation/measured.csv --format json)
  while IFS='|' read -r source gpu dtype models filter; do
    errors=$(jq -r "[.rows[] | select(.step_error_pct != null) | select($filter) | .step_error_pct] | sort | .[]" <<< "$report")
    n=$(grep -c . <<< "$errors" || true)
    [ "$n" != 0 ] || { echo "regenerate.sh: no simulated row of validation group $source $gpu $dtype $models" >&2; exit 1; }
    fsdp=$(jq -r "[.rows[] | select(.step_error_pct != null) | select($filter) | select(.layout | test(\"optim_grads\"))] | length" <<< "$report")
    tp8=$(jq -r "[.rows[] | select(.step_error_pct != null) | select($filter) | select(.layout | startswith(\"tp8\"))] | length" <<< "$report")
    models=${models//\{fsdp\}/$fsdp}
    models=${models//\{tp8\}/$tp8}
    echo "| $source | $gpu | $dtype | $models | $n |" \
      "$(awk -v n="$n" '{ v[NR] = $1 } END { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; printf "%+.1f", m }' <<< "$errors") |"
  done <<'ROWS'
BLOOM_176B|A100|bf16|dense|.source_id == "BLOOM_176B"
KORTHIKANTI22|A100|fp16/bf16|dense|.source_id == "KORTHIKANTI22"
NARAYANAN21|A100|fp16/bf16|dense|.source_id == "NARAYANAN21"
DGXC|H100|bf16|dense|.source_id == "DGXC" and (.gpu | startswith("H100")) and .dtype == "bf16" and (.band_class | startswith("dense"))
DGXC|H100|fp8|dense|.source_id == "DGXC" and (.gpu | startswith("H100")) and .dtype == "fp8" and (.band_class | startswith("dense"))
MLM_README_H100|H100|bf16|dense|.source_id == "MLM_README_H100"
NEMO_2407|H100|fp8|dense|.source_id == "NEMO_2407"
MB_PERF|H100|fp8, fp8-cs|dense ({fsdp} of them Megatron-FSDP)|.source_id == "MB_PERF" and (.gpu | startswith("H100")) and (.band_class | startswith("dense"))
DGXC|GB200|bf16|dense|.source_id == "DGXC" and .gpu == "GB200" and .dtype == "bf16" and (.band_class | startswith("dense"))
DGXC|GB200|fp8|dense|.source_id == "DGXC" and .gpu == "GB200" and .dtype == "fp8" and (.band_class | startswith("dense"))
MB_PERF|B200|fp8, fp8-cs|dense|.source_id == "MB_PERF" and .gpu == "B200" and (.band_class | startswith("dense"))
MB_PERF|GB200|fp8, fp8-cs|dense ({fsdp} of them Megatron-FSDP)|.source_id == "MB_PERF" and .gpu == "GB200" and (.band_class | startswith("dense"))
MB_PERF|GB300|fp8-cs|dense ({fsdp} of them Megatron-FSDP)|.source_id == "MB_PERF" and .gpu == "GB300" and (.band_class | startswith("dense"))
DGXC|H100|bf16|MoE (Grok-1, DeepSeek-V3)|.source_id == "DGXC" and (.gpu | startswith("H100")) and .dtype == "bf16" and (.band_class | startswith("moe"))
DGXC|H100|fp8|MoE (Grok-1)|.source_id == "DGXC" and (.gpu | startswith("H100")) and .dtype == "fp8" and (.band_class | startswith("moe"))
DGXC|GB200|bf16|MoE (Grok-1, DeepSeek-V3)|.source_id == "DGXC" and .gpu == "GB200" and .dtype == "bf16" and (.band_class | startswith("moe"))
DGXC|GB200|fp8|MoE (Grok-1)|.source_id == "DGXC" and .gpu == "GB200" and .dtype == "fp8" and (.band_class | startswith("moe"))
MB_PERF|H100|bf16, fp8, fp8-cs|MoE|.source_id == "MB_PERF" and (.gpu | startswith("H100")) and (.band_class | startswith("moe"))
MB_PERF|B200|bf16, fp8, fp8-mx|MoE|.source_id == "MB_PERF" and .gpu == "B200" and (.band_class | startswith("moe"))
MB_PERF|GB200|bf16, fp8, fp8-mx|MoE|.source_id == "MB_PERF" and .gpu == "GB200" and (.band_class | startswith("moe"))
MB_PERF|GB300|bf16, fp8-mx|MoE|.source_id == "MB_PERF" and .gpu == "GB300" and (.band_class | startswith("moe"))
MB_PERF|H100, GB200, GB300|fp8, fp8-cs|dense, Megatron-FSDP (`optim_grads_params`)|.source_id == "MB_PERF" and (.layout | test("optim_grads_params"))
MOSAIC_LLMFOUNDRY|H100|bf16|MPT, Composer FSDP FULL_SHARD|.source_id == "MOSAIC_LLMFOUNDRY"
TORCHTITAN|H100 96 GB 500 W|bf16, fp8 tensorwise, fp8 rowwise|Llama-3.1-8B, FSDP2 ({tp8} of them with TP 8)|.source_id == "TORCHTITAN"
ROWS
}

# rewrite PAGE: PAGE with each figures block regenerated, into $out.
rewrite() {
  local page=$1 line name in_block=0 blocks=0
  local target="$out/$(basename "$page")" tmp
  tmp=$(mktemp)
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $in_block = 1 ]]; then
      [[ $line = "<!-- end figures -->" ]] || continue
      in_block=0
    fi
    printf '%s\n' "$line" >> "$tmp"
    if [[ $line =~ ^\<!--\ figures\ ([a-z0-9_]+)\ --\>$ ]]; then
      name=${BASH_REMATCH[1]}
      declare -F "figures_$name" > /dev/null || { echo "regenerate.sh: $page: no function figures_$name" >&2; exit 1; }
      "figures_$name" >> "$tmp"
      in_block=1 blocks=$((blocks + 1))
      done_blocks+=("$name")
    fi
  done < "$page"
  [[ $in_block = 0 ]] || { echo "regenerate.sh: $page: block $name has no <!-- end figures -->" >&2; exit 1; }
  mv "$tmp" "$target"
}

done_blocks=()
for page in docs/*.md; do
  grep -q '^<!-- figures ' "$page" || { [ "$out" = "$root/docs" ] || cp "$page" "$out/"; continue; }
  rewrite "$page"
done
for name in $(declare -F | sed -n 's/^declare -f figures_//p'); do
  [[ " ${done_blocks[*]} " = *" $name "* ]] || { echo "regenerate.sh: no page has a block 'figures $name'" >&2; exit 1; }
done
