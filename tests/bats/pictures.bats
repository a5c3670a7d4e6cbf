#!/usr/bin/env bats
# The simulated timeline (syssim-sim --timeline) and what is read from it: the Chrome trace
# (syssim-report --format chrome-trace, syssim run --timeline), the pipeline SVG and the
# critical path (--format critical-path, syssim run --critical-path).
load common

SCHEMA="$ROOT/tests/data/trace-event.schema.json"

# Three micro-batches on one pipeline rank; four ranks with eight, 1F1B and interleaved.
ONE_RANK=(--tp 2 --sp --seq-length 1024 --global-batch 3)
PP4=(--tp 2 --sp --pp 4 --seq-length 1024 --global-batch 8)
VPP2=(--tp 2 --sp --pp 4 --vpp 2 --seq-length 1024 --global-batch 8)

# Llama-3-8B's forward GEMMs per micro-batch: QKV, the attention projection, fc1 (gate and up
# in one) and fc2 in each of its 32 layers, and the output layer.
LLAMA3_8B_FORWARD_GEMMS=$((32 * 4 + 1))

# The graph of MODEL sharded with the flags that follow, costed on the H100, simulated with the
# timeline kept and memory accounted; made once per test file and set of flags.
timeline_of() {
  local model="$1"; shift
  local file; file="$BATS_FILE_TMPDIR/timeline_$(printf '%s_' "$model" "$@" | tr -c 'A-Za-z0-9_.=-' '_').graph"
  if [ ! -s "$file" ]; then
    syssim-sim --timeline -i "$(stage_of "$model" cost "$@")" | syssim-mem -o "$file" || return 1
  fi
  echo "$file"
}

trace_of_job() {
  local file="$BATS_FILE_TMPDIR/$(basename "$1" .graph).trace.json"
  [ -s "$file" ] || syssim-report -i "$1" --format chrome-trace -o "$file" || return 1
  echo "$file"
}

# validate SCHEMA DOCUMENT: JSON Schema validation with Debian's python3-jsonschema.
validate() {
  python3 -c 'import json, sys, jsonschema
schema = json.load(open(sys.argv[1])); jsonschema.Draft7Validator.check_schema(schema)
jsonschema.Draft7Validator(schema).validate(json.load(open(sys.argv[2])))' "$1" "$2"
}

@test "syssim-sim --timeline keeps one row per op instance and one per its issue; without it the sim section is unchanged" {
  graph=$(timeline_of llama3-8b "${ONE_RANK[@]}")
  jq -e '.shard.num_microbatches == 3' "$graph"
  # With one pipeline rank: every microbatch op runs 3 times, every other op once; the host
  # issues each microbatch instance (docs/syssim-sim.md, "The host").
  issued='([.shard.ops[] | select(.scope == "microbatch")] | length) * 3'
  jq -e "$issued + ([.shard.ops[] | select(.scope != \"microbatch\")] | length) == ([.sim.timeline[] | select(.[1] != \"host\")] | length)" "$graph"
  jq -e "$issued == ([.sim.timeline[] | select(.[1] == \"host\")] | length)" "$graph"
  jq -e '.sim.timeline | all(length == 6 and .[0] == 0 and .[4] <= .[5])' "$graph"
  plain=$(stage_of llama3-8b sim "${ONE_RANK[@]}")
  jq -e '.sim | has("timeline") | not' "$plain"
  diff <(jq -S '.sim | del(.timeline)' "$graph") <(jq -S '.sim' "$plain")
}

@test "the Chrome trace is valid Trace Event Format (JSON Schema from the format's documentation)" {
  trace=$(trace_of_job "$(timeline_of llama3-8b "${ONE_RANK[@]}")")
  validate "$SCHEMA" "$trace"
  # The schema rejects what the format forbids: a complete event without a duration.
  jq '.traceEvents[-1] = {"name": "x", "ph": "X", "ts": 0, "pid": 0, "tid": 0}' "$trace" > "$BATS_TEST_TMPDIR/bad.json"
  run validate "$SCHEMA" "$BATS_TEST_TMPDIR/bad.json"
  assert_failure
}

@test "Chrome trace: one X event per op instance (and its issue on the host track), named tracks, in time order, summing to the sim's busy times" {
  graph=$(timeline_of llama3-8b "${ONE_RANK[@]}")
  trace=$(trace_of_job "$graph")
  jq -e --argjson n $((LLAMA3_8B_FORWARD_GEMMS * 3)) \
    '[.traceEvents[] | select(.ph == "X" and .cat == "gemm" and .args.pass == "forward")] | length == $n' "$trace"
  jq -e '[.traceEvents[] | select(.ph == "M" and .name == "process_name") | .args.name] == ["pp rank 0"]' "$trace"
  jq -e '[.traceEvents[] | select(.ph == "M" and .name == "thread_name") | [.tid, .args.name]] == [[0, "host"], [1, "compute"], [2, "tp"]]' "$trace"
  # The events in time order, as a stream reader takes them.
  jq -e '[.traceEvents[] | select(.ph == "X") | .ts] | . as $ts | [range(1; length) | select($ts[.] < $ts[. - 1])] | length == 0' "$trace"
  # Collectives are colored by group; compute ops are left to the viewer.
  jq -e '[.traceEvents[] | select(.ph == "X" and .cat == "collective") | .cname] | unique == ["thread_state_iowait"]' "$trace"
  # A stream runs one op at a time: on each track, every event starts after the one before ends.
  jq -e '[.traceEvents[] | select(.ph == "X")] | group_by([.pid, .tid]) | map(sort_by(.ts) | . as $t
         | [range(1; length) | select($t[.].ts < $t[. - 1].ts + $t[. - 1].dur - 1e-6)] | length) | add == 0' "$trace"
  forward_us=$(jq '[.traceEvents[] | select(.ph == "X" and .cat != "collective" and .cat != "host" and .args.pass == "forward") | .dur] | add' "$trace")
  assert_close "$forward_us" "$(jq '.sim.forward_ms * 1000' "$graph")" 1e-9
  collective_us=$(jq '[.traceEvents[] | select(.ph == "X" and .cat == "collective") | .dur] | add' "$trace")
  assert_close "$collective_us" "$(jq '.sim.collective_total_ms * 1000' "$graph")" 1e-9
  # The FLOPs over the events are the instances' once: the host's issue of an op carries none.
  jq -e '[.traceEvents[] | select(.ph == "X" and .cat == "host" and (.args | has("flops")))] | length == 0' "$trace"
}

@test "Chrome trace: rank r's memory counter peaks at pp - r micro-batches of saved activations under 1F1B" {
  graph=$(timeline_of llama3-8b "${PP4[@]}")
  trace=$(trace_of_job "$graph")
  for rank in 0 1 2 3; do
    # The bytes one micro-batch saves on the rank: transient buffers a forward op of the rank
    # writes and a backward op of it reads (docs/memory.md).
    saved=$(jq --argjson r $rank '.shard as $s | [$s.ops[] | select(.stage == $r)] as $ops
      | ([$ops[] | select(.phase == "fwd") | .writes[]] | unique) as $w
      | ([$ops[] | select(.phase == "bwd") | .reads[]] | unique) as $read
      | [$w[] | select(. as $b | $read | index($b)) | $s.buffers[.]
         | select(.role != "param" and .role != "grad" and .role != "quantized_weight") | .bytes] | add' "$graph")
    # The next micro-batch's input comes on the pp stream only after the first backward has
    # freed its micro-batch's (Megatron posts the receive after the step before it).
    peak=$(jq --argjson r $rank '[.traceEvents[] | select(.ph == "C" and .pid == $r) | .args.activations] | max * 1e9' "$trace")
    assert_close "$peak" "$(awk -v s="$saved" -v r=$rank 'BEGIN { printf "%.17g", (4 - r) * s }')" 1e-12
    jq -e --argjson r $rank '[.traceEvents[] | select(.ph == "C" and .pid == $r)][-1].args == {"activations": 0, "other": 0}' "$trace"
  done
}

@test "the pictures need the timeline: without it, bad data naming syssim-sim --timeline" {
  run syssim-report -i "$(stage_of llama3-8b mem "${ONE_RANK[@]}")" --format chrome-trace
  assert_failure 1
  assert_output --partial "run syssim-sim --timeline"
  run syssim-report -i "$(stage_of llama3-8b mem "${ONE_RANK[@]}")" --format svg
  assert_failure 1
  run syssim-report -i "$(stage_of llama3-8b mem "${ONE_RANK[@]}")" --format png
  assert_failure 2
}

@test "syssim run --timeline FILE writes the Chrome trace (the SVG for FILE.svg) and prints the same report" {
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${PP4[@]}"
  assert_success
  report="$output"
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${PP4[@]}" --timeline "$BATS_TEST_TMPDIR/step.json"
  assert_success
  assert_output "$report"
  jq -e '[.traceEvents[] | select(.ph == "M" and .name == "process_name") | .args.name]
         == ["pp rank 0", "pp rank 1", "pp rank 2", "pp rank 3"]' "$BATS_TEST_TMPDIR/step.json"
  jq -e --argjson n $((LLAMA3_8B_FORWARD_GEMMS * 8)) \
    '[.traceEvents[] | select(.ph == "X" and .cat == "gemm" and .args.pass == "forward")] | length == $n' \
    "$BATS_TEST_TMPDIR/step.json"
  # The same trace as the pipe's.
  diff <(jq -S . "$BATS_TEST_TMPDIR/step.json") <(jq -S . "$(trace_of_job "$(timeline_of llama3-8b "${PP4[@]}")")")
  # A FILE ending in .svg gets the pipe's SVG (syssim-report --format svg).
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${PP4[@]}" --timeline "$BATS_TEST_TMPDIR/step.svg"
  assert_success
  assert_output "$report"
  diff "$BATS_TEST_TMPDIR/step.svg" <(syssim-report -i "$(timeline_of llama3-8b "${PP4[@]}")" --format svg)
}

@test "critical path: under 1F1B on 4 ranks it explains the whole step and crosses every rank; syssim run --critical-path writes the pipe's" {
  graph=$(timeline_of llama3-8b "${PP4[@]}")
  run syssim-report -i "$graph" --format critical-path
  assert_success
  path="$output"
  step=$(sed -n 's/^  step_time_ms *= //p' <<<"$path")
  assert_equal "$(sed -n 's/^  path_ms *= //p' <<<"$path")" "$step"
  # Rank 0 starts the first forward and ends the last backward; the pipeline's fill and drain pass every other rank.
  ranks=$(sed -n 's/^  pp_rank_ms *= \[\(.*\)\]/\1/p' <<<"$path")
  [ "$(tr ',' '\n' <<<"$ranks" | awk '$1 > 0' | wc -l)" -eq 4 ]
  run syssim run "$MODELS/llama3-8b.yaml" --hardware "$H100" "${PP4[@]}" --critical-path "$BATS_TEST_TMPDIR/path.txt"
  assert_success
  assert_equal "$(cat "$BATS_TEST_TMPDIR/path.txt")" "$path"
  run syssim-report -i "$(stage_of llama3-8b mem "${ONE_RANK[@]}")" --format critical-path
  assert_failure 1
  assert_output --partial "run syssim-sim --timeline"
}

# assert_schedule_svg SVG RANKS FORWARD_BOXES BACKWARD_BOXES: well-formed, one row per rank,
# the boxes, and rendered to a PNG by librsvg.
assert_schedule_svg() {
  local svg="$1" ranks="$2" forward="$3" backward="$4"
  xmllint --noout "$svg"
  assert_equal "$(grep -c '>pp rank [0-9]*</text>' "$svg")" "$ranks"
  assert_equal "$(grep -o '<title>pp rank [0-9]*: forward, micro-batch' "$svg" | wc -l)" "$forward"
  assert_equal "$(grep -o '<title>pp rank [0-9]*: backward, micro-batch' "$svg" | wc -l)" "$backward"
  rsvg-convert -o "${svg%.svg}.png" "$svg"
  assert_equal "$(head -c 8 "${svg%.svg}.png" | od -An -tx1 | tr -d ' \n')" "89504e470d0a1a0a"
}

@test "SVG: 1F1B on 4 ranks with 8 micro-batches draws 4 rows of 8 forward and 8 backward boxes" {
  syssim-report -i "$(timeline_of llama3-8b "${PP4[@]}")" --format svg -o "$BATS_TEST_TMPDIR/1f1b.svg"
  assert_schedule_svg "$BATS_TEST_TMPDIR/1f1b.svg" 4 32 32
  # Each rank's micro-batches in 1F1B order: rank 0 runs forwards 0-3 before its first backward.
  grep -o '<title>pp rank 0: [a-z]*, micro-batch [0-9]*' "$BATS_TEST_TMPDIR/1f1b.svg" | head -6 |
    sed 's/.*: \([a-z]\)[a-z]*, micro-batch /\1/' | tr '\n' ' ' > "$BATS_TEST_TMPDIR/order"
  assert_equal "$(cat "$BATS_TEST_TMPDIR/order")" "f0 f1 f2 f3 b0 f4 "
  grep -q '>tp collectives</text>' "$BATS_TEST_TMPDIR/1f1b.svg"
}

@test "SVG: interleaved with 2 chunks draws a box per micro-batch, chunk and pass" {
  syssim-report -i "$(timeline_of llama3-8b "${VPP2[@]}")" --format svg -o "$BATS_TEST_TMPDIR/interleaved.svg"
  assert_schedule_svg "$BATS_TEST_TMPDIR/interleaved.svg" 4 $((4 * 8 * 2)) $((4 * 8 * 2))
  assert_equal "$(grep -c 'forward, micro-batch [0-9]*, chunk 1:' "$BATS_TEST_TMPDIR/interleaved.svg")" 32
}

@test "timeline windows: micro-batches 1:1 keep one micro-batch's forward GEMMs; a time window keeps what overlaps it" {
  graph=$(timeline_of llama3-8b "${ONE_RANK[@]}")
  syssim-report -i "$graph" --format chrome-trace --timeline-microbatches 1:1 -o "$BATS_TEST_TMPDIR/mb1.json"
  jq -e --argjson n "$LLAMA3_8B_FORWARD_GEMMS" \
    '[.traceEvents[] | select(.ph == "X" and .cat == "gemm" and .args.pass == "forward")] | length == $n' "$BATS_TEST_TMPDIR/mb1.json"
  jq -e '[.traceEvents[] | select(.ph == "X") | .args.microbatch] | unique - [-1] == [1]' "$BATS_TEST_TMPDIR/mb1.json"
  jq -e '.otherData.microbatch_window == [1, 1]' "$BATS_TEST_TMPDIR/mb1.json"
  # The middle tenth of the step: every event kept overlaps it, and none of the whole trace
  # that overlaps it is left out.
  step_ms=$(jq '.sim.step_time_ms' "$graph")
  from=$(jq -n "$step_ms * 0.45"); to=$(jq -n "$step_ms * 0.55")
  syssim-report -i "$graph" --format chrome-trace --timeline-window "$from:$to" -o "$BATS_TEST_TMPDIR/mid.json"
  overlapping='[.traceEvents[] | select(.ph == "X" and .ts + .dur >= ($from * 1000) and .ts <= ($to * 1000))] | length'
  kept=$(jq '[.traceEvents[] | select(.ph == "X")] | length' "$BATS_TEST_TMPDIR/mid.json")
  [ "$kept" -gt 0 ]
  [ "$(jq --argjson from "$from" --argjson to "$to" "$overlapping" "$BATS_TEST_TMPDIR/mid.json")" -eq "$kept" ]
  [ "$(jq --argjson from "$from" --argjson to "$to" "$overlapping" "$(trace_of_job "$graph")")" -eq "$kept" ]
  # syssim run --timeline takes the same flags; the report is unchanged by them.
  run syssim run llama3-8b "${ONE_RANK[@]}" --timeline "$BATS_TEST_TMPDIR/run.json" --timeline-microbatches 2:2
  assert_success
  jq -e '[.traceEvents[] | select(.ph == "X") | .args.microbatch] | unique - [-1] == [2]' "$BATS_TEST_TMPDIR/run.json"
  run syssim-report -i "$graph" --timeline-microbatches 1:1
  assert_failure 2
  assert_output "syssim-report: error: --timeline-microbatches and --timeline-window choose what a timeline draws: they need --format chrome-trace or svg, or syssim run's --timeline FILE"
  run syssim run llama3-8b "${ONE_RANK[@]}" --timeline-window 0:5
  assert_failure 2
  assert_output "syssim: error: --timeline-microbatches and --timeline-window choose what a timeline draws: they need --format chrome-trace or svg, or syssim run's --timeline FILE"
  n=$(jq '.shard.num_microbatches' "$graph")
  run syssim-report -i "$graph" --format svg --timeline-microbatches "$n:$((n + 1))"
  assert_failure 2
  assert_output "syssim-report: error: --timeline-microbatches $n:$((n + 1)): the step has $n micro-batches, 0 to $((n - 1))"
  run syssim-report -i "$graph" --format svg --timeline-microbatches 3:1
  assert_failure 2
  assert_output "syssim-report: error: --timeline-microbatches: expected FIRST:LAST, micro-batch indices from 0 with FIRST <= LAST, got '3:1'"
}

@test "syssim run writes its report and timeline all or none: an unwritable -o leaves an old timeline as it was" {
  timeline="$BATS_TEST_TMPDIR/step.json"
  echo OLD > "$timeline"
  run syssim run "$ROOT/tests/golden/tiny.yaml" --timeline "$timeline" -o "$BATS_TEST_TMPDIR/no/such/folder/report.txt"
  assert_failure 1
  [ "${#lines[@]}" -eq 1 ]
  assert_equal "$(cat "$timeline")" OLD
  [ -z "$(ls "$BATS_TEST_TMPDIR" | grep -v '^step.json$')" ]  # no temporary left beside it
}
