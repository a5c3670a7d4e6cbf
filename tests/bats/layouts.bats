#!/usr/bin/env bats
# Published layouts at full scale simulate through the pipe and through `syssim run`, with
# identical reports (issue 3's acceptance layouts).
load common

A100="$HARDWARE/a100-sxm-80gb.yaml"

same_report() {
  local model="$1" hardware="$2"; shift 2
  expected=$(syssim run "$MODELS/$model.yaml" --hardware "$hardware" "$@")
  actual=$(syssim-shard -i "$(trace_of "$model")" "$@" | syssim-cost --hardware "$hardware" | syssim-sim \
    | syssim-mem | syssim-report)
  [ "$expected" = "$actual" ] || { diff <(echo "$expected") <(echo "$actual"); return 1; }
  [[ "$expected" == *"SimulationReport("* ]]
}

@test "GPT-3 175B on 1024 A100: tp 8, sp, pp 8 with vpp 1, 2, 4, selective recompute" {
  for vpp in 1 2 4; do
    same_report gpt3-175b "$A100" --tp 8 --sp --pp 8 --vpp "$vpp" --dp 16 --gpus 1024 --micro-batch 1 \
      --global-batch 1536 --recompute selective
  done
}

@test "GPT-3 175B on 1024 A100: tp 8, sp, pp 16 with vpp 1 and 3, selective recompute" {
  for vpp in 1 3; do
    same_report gpt3-175b "$A100" --tp 8 --sp --pp 16 --vpp "$vpp" --dp 8 --gpus 1024 --micro-batch 1 \
      --global-batch 1536 --recompute selective
  done
}

@test "Llama-3-70B on 256 H100: tp 8, sp, pp 4, vpp 5, cp 2, dp 4 with the distributed optimizer" {
  same_report llama3-70b "$H100" --tp 8 --sp --pp 4 --vpp 5 --cp 2 --dp 4 --gpus 256 --micro-batch 1 \
    --global-batch 128 --distributed-optimizer --overlap-grad-reduce --overlap-param-gather
}
