#!/usr/bin/env bash
# Tensor-parallel sweep of Llama-3-8B on one 8-GPU H100 SXM node: for tp in 1 2 4 8 with
# dp = 8 / tp, print one CSV line per point:
#
#   tp,dp,step_time_ms,mfu,peak_memory_gb
#
# The model is traced once (the trace depends on the architecture only); each point shards,
# costs, simulates, accounts memory and reports. Sequence parallelism is on whenever tp > 1,
# with the distributed optimizer, micro-batch 1 and a global batch of 128 sequences of 8192
# tokens. Override with the environment: MODEL, HARDWARE (YAML files), GLOBAL_BATCH, SEQ_LENGTH.
#
#   examples/tp-sweep.sh > tp-sweep.csv
#
# The tools come from PATH, or from build/bin when they are not on it. Needs jq.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v syssim-trace > /dev/null || PATH="$root/build/bin:$PATH"
model=${MODEL:-$root/configs/models/llama3-8b.yaml}
hardware=${HARDWARE:-$root/configs/hardware/h100-sxm-80gb.yaml}
global_batch=${GLOBAL_BATCH:-128}
seq_args=()
[ -z "${SEQ_LENGTH:-}" ] || seq_args=(--seq-length "$SEQ_LENGTH")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
syssim-trace "$model" -o "$work/model.graph"

echo "tp,dp,step_time_ms,mfu,peak_memory_gb"
for tp in 1 2 4 8; do
  dp=$((8 / tp))
  sp=()
  [ "$tp" -eq 1 ] || sp=(--sp)
  syssim-shard -i "$work/model.graph" --tp "$tp" "${sp[@]}" --dp "$dp" --micro-batch 1 \
      --global-batch "$global_batch" --distributed-optimizer "${seq_args[@]}" \
    | syssim-cost --hardware "$hardware" | syssim-sim | syssim-mem | syssim-report --format json \
    | jq -r --argjson tp "$tp" --argjson dp "$dp" '[$tp, $dp, .step_time_ms, .mfu, .peak_memory_gb] | @csv'
done
