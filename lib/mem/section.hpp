// The "mem" section (docs/graph-format.md), owned by syssim-mem: memory of one GPU.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace syssim {

struct OomInfo {
  double capacity_gb = 0;
  double required_gb = 0;
  double excess_gb = 0;
};

struct MemSection {
  double param_bytes = 0;
  double grad_bytes = 0;
  double optimizer_state_bytes = 0;
  double activation_bytes = 0;  // saved for backward, at the peak
  double temporary_bytes = 0;   // other live buffers at the peak
  double peak_memory_gb = 0;    // the tensors above: what PyTorch's allocator holds at the peak
  // Outside the allocator, on the same rank (docs/memory.md "Memory outside the allocator");
  // the OOM check counts them.
  double cuda_context_bytes = 0;
  double nccl_buffer_bytes = 0;
  double fragmentation_bytes = 0;  // the allocator's, training.allocator_fragmentation of the tensors
  double device_memory_gb = 0;     // peak_memory_gb and the three above: what the GPU holds
  // What PyTorch's caching allocator reserves at most on peak_pp_stage (its model states and
  // the replayed allocator's segments, lib/mem/allocator.hpp); null: not replayed.
  std::optional<double> reserved_memory_gb;
  std::vector<double> pp_stage_memory_gb;            // peak of each pipeline rank
  std::vector<int64_t> pp_stage_microbatches_in_flight;  // micro-batches with activations live at that peak
  int64_t peak_pp_stage = 0;                         // the heaviest rank, whose breakdown the fields give
  std::string peak_module;  // module of the op running at the peak
  std::optional<double> gpu_memory_gb;
  std::optional<OomInfo> oom;
};

nlohmann::json to_json(const MemSection& mem);
nlohmann::json oom_to_json(const std::optional<OomInfo>& oom);  // null when it fits
MemSection mem_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace syssim
