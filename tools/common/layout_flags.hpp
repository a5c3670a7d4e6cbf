// The parallelism and training flags shared by syssim-shard and the syssim driver.
#pragma once
#include <CLI/CLI.hpp>

#include "shard/shard.hpp"

namespace syssim::tool {

inline void add_layout_flags(CLI::App& app, ShardOptions& options) {
  auto& p = options.parallelism;
  auto& t = options.training;
  app.add_option("--tp", p.tp, "Tensor-parallel size")->check(CLI::PositiveNumber);
  app.add_flag("--sp", p.sp, "Sequence parallelism (with --tp > 1)");
  app.add_option("--dp", p.dp, "Data-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--cp", p.cp, "Context-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--pp", p.pp, "Pipeline-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--vpp", p.vpp, "Virtual pipeline stages per rank")->check(CLI::PositiveNumber);
  app.add_option("--gpus", options.gpus, "GPU count; must equal tp*cp*pp*dp")->check(CLI::PositiveNumber);
  app.add_option("--micro-batch", t.micro_batch, "Micro-batch size")->check(CLI::PositiveNumber);
  app.add_option("--global-batch", t.global_batch, "Global batch size")->check(CLI::PositiveNumber);
  app.add_option("--seq-length", t.seq_length, "Sequence length (default: the model's seq_length)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dtype", t.dtype, "Training precision")->check(CLI::IsMember({"bf16", "fp16", "fp8"}));
  app.add_option("--recompute", t.recompute, "Activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  app.add_flag("--distributed-optimizer", t.distributed_optimizer, "Shard optimizer state over data parallel ranks");
}

}  // namespace syssim::tool
