// The default job of `syssim run` and `syssim memory` (neither a model nor a hardware given).
#pragma once
#include <CLI/CLI.hpp>

#include "driver/driver.hpp"
#include "layout_flags.hpp"

namespace syssim::tool {

// Flags of the default job that the user did not set take the default job's values
// (default_job_options: `syssim run` with neither a model nor a hardware); dp from --gpus where
// given, as for any job.
inline void apply_default_job(const CLI::App& command, ShardOptions& options) {
  const ShardOptions job = default_job_options();
  auto unset = [&](const char* flag) { return command.count(flag) == 0; };
  if (unset("--tp")) options.parallelism.tp = job.parallelism.tp;
  if (unset("--sp") && unset("--tp")) options.parallelism.sp = job.parallelism.sp;
  if (unset("--dp") && unset("--gpus")) options.parallelism.dp = job.parallelism.dp;
  if (unset("--micro-batch")) options.training.micro_batch = job.training.micro_batch;
  derive_unset_sizes(command, options);  // dp from --gpus
  if (unset("--global-batch")) options.training.global_batch = job.training.global_batch;
  if (unset("--distributed-optimizer") && unset("--data-parallel-sharding-strategy"))
    options.training.distributed_optimizer = job.training.distributed_optimizer;
}

}  // namespace syssim::tool
