#!/usr/bin/env bats
load common

# One GPU (no collectives, every op on the compute stream), 2 micro-batches.
ONE=(--seq-length 1024 --global-batch 2)
# TP 2 with SP and DP 4 on one H100 node, 2 micro-batches.
TP2=(--tp 2 --sp --dp 4 --seq-length 1024 --global-batch 8)

# jq: the summed duration in ms of the instances of the selected ops of one step, where $n is
# the number of micro-batches: sum_ms(select(...)) over [shard op, cost op] pairs.
defs='def instances: if .[0].scope == "microbatch" then $n else 1 end;
      def sum_ms(f): [[.shard.ops, .cost.ops] | transpose[] | f | .[1].time_us * instances] | add // 0 | . / 1000;
      def near($a; $b): (($a - $b) | if . < 0 then -. else . end) <= 1e-9 * ([$a, $b, 1e-300] | max);'

simjq() { # simjq GRAPH FILTER: run FILTER with the helpers above and $n bound.
  jq -c --argjson n "$(jq .shard.num_microbatches "$1")" "$defs $2" "$1"
}

@test "syssim-sim --help lists -i and -o" {
  run syssim-sim --help
  assert_success
  assert_output --partial "-i,--input"
  assert_output --partial "-o,--output"
}

@test "syssim-sim --version prints the graph format version" {
  run syssim-sim --version
  assert_success
  assert_output --regexp "^syssim-sim [0-9.]+ \(graph format 1\.23\)$"
}

@test "an unknown flag is bad usage (exit 2, one line)" {
  run syssim-sim --foo
  assert_failure 2
  assert_output "syssim-sim: error: unknown argument '--foo' (see --help)"
}

@test "empty input is bad data" {
  run syssim-sim < /dev/null
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: empty input, expected a syssim graph (did the stage before it in the pipe fail?)"
}

@test "a graph without a cost section names the stage to run" {
  run syssim-sim -i "$(stage_of llama3-8b shard "${ONE[@]}")"
  assert_failure 1
  assert_output "syssim-sim: error: $(stage_of llama3-8b shard "${ONE[@]}"): graph has no 'cost' section: run syssim-cost first"
  run syssim-sim < "$(trace_of llama3-8b)"
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: graph has no 'shard' section: run syssim-shard first"
}

@test "a cost section of another shard section is refused" {
  run syssim-sim < <(jq -c '.cost.ops |= .[:-2]' "$(stage_of llama3-8b cost "${ONE[@]}")")
  assert_failure 1
  n=$(jq '.shard.ops | length' "$(stage_of llama3-8b cost "${ONE[@]}")")
  assert_output "syssim-sim: error: <stdin>: graph: /cost/ops: $((n - 2)) ops for $n shard ops; rerun syssim-cost on this shard section"
}

@test "a dependency on a later op is refused naming the JSON path" {
  run syssim-sim < <(jq -c '.shard.ops[2].deps = [5]' "$(stage_of llama3-8b cost "${ONE[@]}")")
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: graph: /shard/ops/2/deps: 5 is not an earlier op"
}

@test "a chunk or pipeline rank the job does not have is refused naming the JSON path, not a crash" {
  cost=$(stage_of llama3-8b cost "${ONE[@]}")
  run syssim-sim < <(jq -c '.shard.ops[3].chunk = -1' "$cost")
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: graph: /shard/ops/3/chunk: chunk -1 does not exist (vpp=1)"
  # jq 1.6 rounds 2^63 - 1 to a double: the number goes in as text.
  run syssim-sim < <(jq -c '.shard.ops[3].chunk = "MAX"' "$cost" | sed 's/"MAX"/9223372036854775807/')
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: graph: /shard/ops/3/chunk: chunk 9223372036854775807 does not exist (vpp=1)"
  run syssim-sim < <(jq -c '.shard.ops[3].stage = 100000000' "$cost")
  assert_failure 1
  assert_output "syssim-sim: error: <stdin>: graph: /shard/ops/3/stage: pipeline rank 100000000 does not exist (pp=1)"
}

@test "-o writes the graph to the file; a failed run leaves no file behind" {
  run syssim-sim -i "$(stage_of llama3-8b cost "${ONE[@]}")" -o "$BATS_TEST_TMPDIR/s.graph"
  assert_success
  assert_output ""
  run jq -e '.sim.step_time_ms > 0' "$BATS_TEST_TMPDIR/s.graph"
  assert_success
  rm "$BATS_TEST_TMPDIR/s.graph"
  run syssim-sim -i "$(stage_of llama3-8b shard "${ONE[@]}")" -o "$BATS_TEST_TMPDIR/s.graph"
  assert_failure 1
  [ -z "$(ls "$BATS_TEST_TMPDIR")" ]
}

@test "one GPU: the step is the sum of all op times (micro-batch ops x micro-batches, plus step ops) after the first op's issue" {
  graph=$(stage_of llama3-8b sim "${ONE[@]}")
  run jq -c '[.shard.num_microbatches, ([.shard.ops[].stream] | unique)]' "$graph"
  assert_output '[2,["compute"]]'
  # Each op's issue on the H100's host is shorter than the GPU work before it: only the first
  # shows (docs/syssim-sim.md, "The host").
  run simjq "$graph" '[near(.sim.step_time_ms; sum_ms(.) + .cost.ops[0].host_us / 1000),
    near(.sim.per_pp_rank_step_time_ms[0]; .sim.step_time_ms),
    (.sim.per_pp_rank_step_time_ms | length)]'
  assert_output '[true,true,1]'
}

@test "one GPU: phases and op kinds add up, and nothing is a collective" {
  run simjq "$(stage_of llama3-8b sim "${ONE[@]}")" '
    [near(.sim.forward_ms; sum_ms(select(.[0].phase == "fwd"))),
     near(.sim.backward_ms; sum_ms(select(.[0].phase == "bwd"))),
     near(.sim.optimizer_ms; sum_ms(select(.[0].phase == "optimizer"))),
     (.sim.by_op_type_ms | keys),
     (. as $g | .sim.by_op_type_ms | to_entries | all(.key as $k | near(.value; $g | sum_ms(select(.[0].kind == $k))))),
     .sim.collective_total_ms, .sim.collective_exposed_ms, .sim.longest_collective]'
  assert_output '[true,true,true,["attention","gemm","math","memory","optimizer"],true,0,0,{"name":"","time_ms":0}]'
}

@test "the by-kind sums are really per kind (checked against a hand-picked kind)" {
  run simjq "$(stage_of llama3-8b sim "${ONE[@]}")" '
    near(.sim.by_op_type_ms.gemm; sum_ms(select(.[0].kind == "gemm"))) and (.sim.by_op_type_ms.gemm > .sim.by_op_type_ms.math)'
  assert_output "true"
}

@test "hardware_flops_per_rank counts every op instance's FLOPs" {
  run jq --argjson n 2 '.sim.hardware_flops_per_rank as $h
    | [.shard.ops[] | .flops * (if .scope == "microbatch" then $n else 1 end)] | add | . == $h and . > 0' \
    "$(stage_of llama3-8b sim "${ONE[@]}")"
  assert_output "true"
}

@test "top_ops: the ten longest ops summed over micro-batches, longest first, named <id>_<op name>" {
  run simjq "$(stage_of llama3-8b sim "${ONE[@]}")" '
    ([[.shard.ops, .cost.ops] | transpose[] | {name: "\(.[0].id)_\(.[0].name)", time_ms: (.[1].time_us * instances / 1000)}]
     | sort_by(-.time_ms) | .[0]) as $longest
    | [(.sim.top_ops | length), (.sim.top_ops | map(.time_ms) | . == (sort | reverse)),
       (.sim.top_ops[0].name == $longest.name), near(.sim.top_ops[0].time_ms; $longest.time_ms),
       (.sim.dominant_op_type == (.sim.by_op_type_ms | to_entries | max_by(.value) | .key))]'
  assert_output '[10,true,true,true,true]'
}

@test "TP 2 + DP 4: the step is at least the compute stream's work and at most all work in series" {
  run simjq "$(stage_of llama3-8b sim "${TP2[@]}")" '
    [([.shard.ops[].stream] | unique), sum_ms(select(.[0].stream == "compute")), .sim.step_time_ms, sum_ms(.)]'
  read -r streams compute step serial < <(jq -r '"\(.[0]) \(.[1]) \(.[2]) \(.[3])"' <<< "$output")
  [ "$streams" = '["compute","dp","tp"]' ]
  awk -v c="$compute" -v s="$step" -v a="$serial" 'BEGIN { exit !(c > 0 && s >= c * (1 - 1e-12) && s <= a * (1 + 1e-12) && s < a) }'
}

@test "TP 2 + DP 4: collective time adds up, and only part of it is exposed" {
  run simjq "$(stage_of llama3-8b sim "${TP2[@]}")" '
    [near(.sim.collective_total_ms; sum_ms(select(.[0].kind == "collective"))),
     near(.sim.by_op_type_ms.collective; .sim.collective_total_ms),
     (.sim.collective_exposed_ms > 0), (.sim.collective_exposed_ms < .sim.collective_total_ms),
     near(.sim.forward_ms; sum_ms(select(.[0].phase == "fwd" and .[0].kind != "collective")))]'
  assert_output '[true,true,true,true,true]'
}

@test "TP 2 + DP 4: the longest collective is the once-per-step DP gradient all-reduce" {
  run simjq "$(stage_of llama3-8b sim "${TP2[@]}")" '
    ([.shard.ops, .cost.ops] | transpose | map(select(.[0].group == "dp"))[0]) as $dp
    | [(.sim.longest_collective.name == "\($dp[0].id)_\($dp[0].name)"), near(.sim.longest_collective.time_ms; $dp[1].time_us / 1000),
       $dp[0].collective, $dp[0].scope]'
  assert_output '[true,true,"all_reduce","step"]'
}

@test "syssim-sim adds the sim section, one provenance entry, and passes a foreign section through" {
  jq -c '.mine = {"x": 1}' "$(stage_of llama3-8b cost "${TP2[@]}")" > "$BATS_TEST_TMPDIR/in.graph"
  syssim-sim < "$BATS_TEST_TMPDIR/in.graph" > "$BATS_TEST_TMPDIR/out.graph"
  assert_passes_through "$BATS_TEST_TMPDIR/out.graph" "$BATS_TEST_TMPDIR/in.graph" sim syssim-sim
  run jq -c '.provenance[-1].args' "$BATS_TEST_TMPDIR/out.graph"
  assert_output '[]'
}

@test "the same input gives the same bytes" {
  a=$(syssim-sim < "$(stage_of llama3-8b cost "${TP2[@]}")" | sha256sum)
  b=$(syssim-sim < "$(stage_of llama3-8b cost "${TP2[@]}")" | sha256sum)
  [ "$a" = "$b" ]
}

# Network flows (docs/syssim-sim.md): TP 2 + DP 4 in one node puts every collective on nvlink.
# jq: a list of {link, bytes}, one per phase instance and link, bytes weighted by the load.
loads='def link_loads: [[.shard.ops, .cost.ops] | transpose[] | select(.[1].phases) | instances as $k
  | .[1].phases[] | .bytes as $b | [.links, .loads] | transpose[] | {link: .[0], bytes: (.[1] * $b * $k)}];'

@test "TP 2 + DP 4: each link carries its phases' loaded bytes; utilization is bytes over capacity x step" {
  run simjq "$(stage_of llama3-8b sim "${TP2[@]}")" "$loads"'
    (.sim.step_time_ms / 1000) as $step_s | link_loads as $loads
    | [(.sim.links | map(.name)) == (.cost.links | map(.name)),
       (.sim.links | to_entries | all(.key as $l | near(.value.bytes; [$loads[] | select(.link == $l) | .bytes] | add // 0))),
       all(.sim.links[]; near(.utilization; .bytes / (.bandwidth_GBps * 1e9 * $step_s))),
       .sim.busiest_link == (.sim.links | max_by(.utilization) | .name), (.sim.links[0].busy_ms > 0)]'
  assert_output '[true,true,true,true,true]'
}

@test "a cost without links or phases (format 1.2) simulates collectives as time_us" {
  jq -c 'del(.cost.links) | .cost.ops[] |= del(.phases)' "$(stage_of llama3-8b cost "${TP2[@]}")" > "$BATS_TEST_TMPDIR/old.graph"
  syssim-sim -i "$BATS_TEST_TMPDIR/old.graph" -o "$BATS_TEST_TMPDIR/old.sim.graph"
  run jq -c '(.sim.longest_collective.name | split("_")[0] | tonumber) as $id
    | [.sim.links, .sim.busiest_link, .sim.collective_slowdown, .sim.longest_collective.time_ms == .cost.ops[$id].time_us * 1e-3]' \
    "$BATS_TEST_TMPDIR/old.sim.graph"
  assert_output '[[],"",1,true]'
}

@test "flows from a jq-edited cost: the exposed DP all-reduce over a new 10 GB/s link moves the step by hand" {
  # The DP gradient all-reduce (fully exposed; every later op waits for it) becomes 100 us of
  # latency, then 2e8 bytes on a new 10 GB/s link: 2e8 / 10e3 B/us = 20000 us, then a 50 us
  # phase of no bytes: 20.15 ms in all. The step moves by 20.15 ms less its old time_us.
  cost=$(stage_of llama3-8b cost "${TP2[@]}")
  id=$(jq '[.shard.ops[] | select(.group == "dp" and .scope == "step")][0].id' "$cost")
  jq -c --argjson id "$id" '.cost.links += [{name: "test", level: 3, bandwidth_GBps: 10}]
    | .cost.ops[$id].phases = [{links: [3], loads: [1], bytes: 2e8, bandwidth_GBps: 10, latency_us: 100},
                               {links: [], loads: [], bytes: 0, bandwidth_GBps: 0, latency_us: 50}]
    | .cost.ops[$id].time_us = 20150' "$cost" > "$BATS_TEST_TMPDIR/edited.graph"
  before=$(stage_of llama3-8b sim "${TP2[@]}")
  syssim-sim -i "$BATS_TEST_TMPDIR/edited.graph" -o "$BATS_TEST_TMPDIR/after.graph"
  [ "$(jq '.sim.collective_by_group_ms.dp | .total_ms == .exposed_ms' "$before")" = true ]
  assert_close "$(jq .sim.step_time_ms "$BATS_TEST_TMPDIR/after.graph")" \
    "$(jq --argjson id "$id" '.sim.step_time_ms - .cost.ops[$id].time_us / 1000 + 20.15' "$before")"
  run simjq "$BATS_TEST_TMPDIR/after.graph" '.sim | [.busiest_link, .links[3].bytes, .links[3].max_flows,
    near(.links[3].busy_ms; 20), near(.collective_by_group_ms.dp.total_ms; 20.15), near(.collective_slowdown; 1)]'
  assert_output '["test",200000000,1,true,true,true]'
}

@test "overlapped gradient reduction: DP and TP collectives share nvlink and slow each other down" {
  graph=$(stage_of llama3-8b sim "${TP2[@]}" --overlap-grad-reduce --distributed-optimizer --overlap-param-gather)
  run simjq "$graph" '[.sim.links[0].name, .sim.links[0].max_flows, (.sim.collective_slowdown > 1),
    near(.sim.collective_total_ms; .sim.collective_slowdown * sum_ms(select(.[0].kind == "collective")))]'
  assert_output '["nvlink",2,true,true]'
}

@test "a graph from another program: counts written as 32.0 and no provenance read as the tools' own" {
  # JSON has one kind of number: Python's 64 / 2 writes 32.0 for a count.
  graph="$ROOT/tests/golden/tiny.cost.graph"
  expected=$(syssim-sim -i "$graph" | jq -c '.sim')
  run bash -c "jq -c 'del(.provenance)' '$graph' \
    | sed -e 's/\"num_microbatches\":2,/\"num_microbatches\":2.0,/' -e 's/\"tp\":2,/\"tp\":2.0,/' | syssim-sim | jq -c '.sim'"
  assert_success
  assert_output "$expected"
  # A fraction is still no count.
  run bash -c "sed 's/\"num_microbatches\":2,/\"num_microbatches\":2.5,/' '$graph' | syssim-sim"
  assert_failure 1
  assert_output --partial "/shard/num_microbatches: expected a whole number that fits 64 bits, got 2.5"
}

@test "a stage refuses a terminal as its input (exit 2) instead of waiting for a graph typed there" {
  # script(1) gives the stage a pseudo-terminal for its standard input.
  run script -qec "syssim-sim" /dev/null < /dev/null
  assert_failure 2
  assert_output --partial "syssim-sim: error: no graph on standard input (a terminal): pipe one in, or give -i FILE"
}

@test "an output that names a folder is bad usage (exit 2), refused before the stage runs" {
  run syssim-sim -i "$ROOT/tests/golden/tiny.cost.graph" -o "$BATS_TEST_TMPDIR"
  assert_failure 2
  assert_output "syssim-sim: error: -o $BATS_TEST_TMPDIR: is a directory, expected a file"
}
