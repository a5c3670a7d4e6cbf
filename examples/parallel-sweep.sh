#!/usr/bin/env bash
# A sweep spread over processes (or machines) with GNU parallel: `syssim sweep --emit-jobs`
# writes one single-point `syssim sweep` command per point, parallel runs them, and
# `syssim sweep --merge` joins their JSON results into the table the sweep would have
# printed in one process. Llama-3-8B on one 8-GPU H100 SXM node, tp in 1 2 4 8 (dp = 8 / tp)
# by micro-batch 1 2, with SP, the distributed optimizer and a global batch of 32 sequences
# of 4096 tokens:
#
#   examples/parallel-sweep.sh OUT_DIR > sweep.txt
#
# leaves OUT_DIR/jobs.txt (the commands), OUT_DIR/jobs/point-NNNN.json (their results) and
# OUT_DIR/sweep.svg (MFU per point). OUT_DIR/jobs must not hold an earlier run's points:
# `--emit-jobs` refuses a folder that is not empty, so give each run a new OUT_DIR. PARALLEL_ARGS goes to parallel: e.g. "--jobs 4", or
# "--sshlogin host1,host2" to run on other machines that see the same paths (a shared
# filesystem) and have syssim on their PATH. MODEL and HARDWARE select another job. The tools
# come from PATH, or from build/bin when they are not on it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v syssim > /dev/null || PATH="$root/build/bin:$PATH"
out=${1:?usage: parallel-sweep.sh OUT_DIR}
model=${MODEL:-$root/configs/models/llama3-8b.yaml}
hardware=${HARDWARE:-$root/configs/hardware/h100-sxm-80gb.yaml}

mkdir -p "$out"
syssim sweep "$model" --hardware "$hardware" --gpus 8 --sp --distributed-optimizer --global-batch 32 \
  --seq-length 4096 --over parallelism.tp=1,2,4,8 --over training.micro_batch=1,2 \
  --emit-jobs "$out/jobs" -o "$out/jobs.txt"
# shellcheck disable=SC2086  # PARALLEL_ARGS holds several words
parallel --halt now,fail=1 ${PARALLEL_ARGS:-} < "$out/jobs.txt"
syssim sweep --merge "$out"/jobs/point-*.json --plot "$out/sweep.svg"
