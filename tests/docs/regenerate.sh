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
