#!/usr/bin/env bats
# syssim collective: nccl-tests' table predicted from the hardware YAML (docs/network.md).
# Expected bus bandwidths are published nccl-tests figures or closed forms worked by hand.
load common

# busbw of the one row of `syssim collective ... --format csv`.
busbw() { syssim collective --hardware "$H100" --format csv "$@" | awk -F, 'NR == 2 { print $4 }'; }

@test "all_gather on one H100 node, 1 GiB: busbw 450 GB/s * 0.822 = 369.9 GB/s (nccl-tests issue 212)" {
  run busbw --op all_gather --gpus 8 --bytes 1G
  assert_success
  assert_close "$output" 369.9 0.01
}

@test "a size in plain bytes of any length: 1073741824 is 1G; past 64 bits is refused" {
  run busbw --op all_gather --gpus 8 --bytes 1073741824
  assert_success
  assert_close "$output" 369.9 0.01
  run syssim collective --hardware "$H100" --op all_gather --gpus 8 --bytes 9000000000G
  assert_failure 2
  assert_output "syssim: error: --bytes: 9000000000G bytes do not fit in 64 bits"
  # 2^64 = 18446744073709551616 (20 digits); leading zeros add nothing.
  run syssim collective --hardware "$H100" --op all_gather --gpus 8 --bytes 18446744073709551616
  assert_failure 2
  assert_output "syssim: error: --bytes: 18446744073709551616 bytes do not fit in 64 bits"
  run busbw --op all_gather --gpus 8 --bytes 0001073741824
  assert_success
  assert_close "$output" 369.9 0.01
  # 19 digits that fit (2^62 = 4611686018427387904) are a size; 2^63 is not.
  run syssim collective --hardware "$H100" --op all_gather --gpus 8 --bytes 4611686018427387904 --format csv
  assert_success
  # Lower-case suffixes, as nccl-tests takes them: 1g is 1G.
  run busbw --op all_gather --gpus 8 --bytes 1g
  assert_success
  assert_close "$output" 369.9 0.01
  run syssim collective --hardware "$H100" --op all_gather --gpus 8 --bytes 9223372036854775808
  assert_failure 2
  assert_output "syssim: error: --bytes: 9223372036854775808 bytes do not fit in 64 bits"
}

@test "all_reduce on one H100 node, 1 GiB: NVLS at ~480 GB/s busbw, algbw ~275 (nccl-tests issue 212)" {
  run syssim collective --hardware "$H100" --op all_reduce --gpus 8 --bytes 1G --format csv
  assert_success
  IFS=, read -r size time algbw busbw algorithm <<< "${lines[1]}"
  [ "$size" = 1073741824 ]
  [ "$algorithm" = nvls ]
  assert_close "$busbw" 480 0.01
  assert_close "$algbw" 275 0.01
}

@test "ring all_reduce over 2 DGX H100 nodes, 8 GiB: busbw 368-384 GB/s (46-48 GB/s per NIC x 8, nccl-tests issue 290)" {
  run syssim collective --hardware "$H100" --op all_reduce --gpus 16 --bytes 8G --format csv
  assert_success
  IFS=, read -r _ _ _ busbw algorithm <<< "${lines[1]}"
  [ "$algorithm" = ring ]
  awk -v b="$busbw" 'BEGIN { exit !(b >= 368 && b <= 384) }'
}

@test "small all_reduce across nodes takes the tree, large ones the ring (latency against bandwidth)" {
  run syssim collective --hardware "$H100" --op all_reduce --gpus 16 --sweep 8:1G --format csv
  assert_success
  [[ "${lines[1]}" == 8,*,tree ]]
  [[ "${lines[-1]}" == 1073741824,*,ring ]]
}

@test "one 100 GbE NIC for 8 GPUs: all_gather over 4 nodes runs at 12.5 GB/s x 0.94 per node" {
  # 32 GPUs, 8 per node: each GPU's share is 12.5/8 * 0.94 GB/s and carries 1/8 of the ring, so
  # the bus bandwidth is the node's 11.75 GB/s, less 31 steps on 1 GiB: as NCCL's tuning model
  # counts them, the 3 between nodes at 4 us and the other 28 at NVLink's 1.9 us.
  run syssim collective --hardware "$HARDWARE/h100-100gbe.yaml" --op all_gather --gpus 32 --bytes 1G --format csv
  assert_success
  IFS=, read -r _ time _ _ _ <<< "${lines[1]}"
  assert_close "$time" "$(awk 'BEGIN { print 31/32 * 2^30 / 11.75e9 * 1e6 + 3 * 4 + 28 * 1.9 }')" 1e-6
}

@test "--sweep 8B:16G doubles from 8 bytes to 16 GiB, in csv, json and the table" {
  run syssim collective --hardware "$H100" --op alltoall --gpus 8 --sweep 8B:16G --format csv
  assert_success
  assert_equal "${lines[0]}" "size,time_us,algbw_GBps,busbw_GBps,algorithm"
  assert_equal "${#lines[@]}" 33
  [[ "${lines[1]}" == 8,* ]]
  [[ "${lines[32]}" == 17179869184,* ]]
  run syssim collective --hardware "$H100" --op broadcast --gpus 8 --sweep 1K:4K --format json
  assert_success
  assert_equal "$(jq -c '[.rows[].size]' <<< "$output")" "[1024,2048,4096]"
  run syssim collective --hardware "$H100" --op sendrecv --gpus 8 --bytes 1M
  assert_success
  assert_equal "${#lines[@]}" 3
  [[ "${lines[2]}" == *" p2p" ]]
}

@test "bad --op, bad size and GPUs that do not fill nodes are usage errors naming the value" {
  run syssim collective --hardware "$H100" --op allreduce --gpus 8 --bytes 1G
  assert_failure 2
  assert_output "syssim: error: collective: expected all_reduce|all_gather|reduce_scatter|alltoall|broadcast|sendrecv, got 'allreduce'"
  run syssim collective --hardware "$H100" --op all_reduce --gpus 8 --bytes 1T
  assert_failure 2
  assert_output "syssim: error: --bytes: expected a positive size like 8, 8B, 64K, 16M or 1G, got '1T'"
  run syssim collective --hardware "$H100" --op all_reduce --gpus 12 --bytes 1G
  assert_failure 2
  assert_output "syssim: error: --gpus: 12 GPUs do not fill whole nodes of gpus_per_node=8 (hardware h100-sxm-80gb)"
  # More GPUs than a job has: refused before a rank list is sized by it (issue 23).
  run syssim collective --hardware "$H100" --op all_reduce --gpus 2147483648 --bytes 1G
  assert_failure 2
  assert_output "syssim: error: --gpus: expected 2 to 1048576, got 2147483648"
}

@test "a forced algorithm that does not apply is bad data naming the key" {
  { h100_copy; echo "collective_algorithm: {all_reduce: nvls}"; } > "$BATS_TEST_TMPDIR/nvls.yaml"
  run syssim collective --hardware "$BATS_TEST_TMPDIR/nvls.yaml" --op all_reduce --gpus 4 --bytes 1G
  assert_failure 1
  # The copy keeps the preset's name: the error names its file too.
  assert_output "syssim: error: hardware h100-sxm-80gb ($BATS_TEST_TMPDIR/nvls.yaml): collective_algorithm.all_reduce: nvls does not apply to a group of 4 ranks in one node"
}
