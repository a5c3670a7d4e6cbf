#include "mem/section.hpp"

#include "common/json_util.hpp"

namespace syssim {

json oom_to_json(const std::optional<OomInfo>& oom) {
  if (!oom) return nullptr;
  return {{"capacity_gb", oom->capacity_gb}, {"required_gb", oom->required_gb}, {"excess_gb", oom->excess_gb}};
}

json to_json(const MemSection& m) {
  return {{"param_bytes", m.param_bytes},
          {"grad_bytes", m.grad_bytes},
          {"optimizer_state_bytes", m.optimizer_state_bytes},
          {"activation_bytes", m.activation_bytes},
          {"temporary_bytes", m.temporary_bytes},
          {"peak_memory_gb", m.peak_memory_gb},
          {"cuda_context_bytes", m.cuda_context_bytes},
          {"nccl_buffer_bytes", m.nccl_buffer_bytes},
          {"fragmentation_bytes", m.fragmentation_bytes},
          {"device_memory_gb", m.device_memory_gb},
          {"reserved_memory_gb", nullable_to_json(m.reserved_memory_gb)},
          {"pp_stage_memory_gb", m.pp_stage_memory_gb},
          {"pp_stage_microbatches_in_flight", m.pp_stage_microbatches_in_flight},
          {"peak_pp_stage", m.peak_pp_stage},
          {"peak_module", m.peak_module},
          {"gpu_memory_gb", nullable_to_json(m.gpu_memory_gb)},
          {"oom", oom_to_json(m.oom)}};
}

MemSection mem_from_json(const json& j, const std::string& path) {
  MemSection m;
  m.param_bytes = require_at_least(j, "param_bytes", path, 0);
  m.grad_bytes = require_at_least(j, "grad_bytes", path, 0);
  m.optimizer_state_bytes = require_at_least(j, "optimizer_state_bytes", path, 0);
  m.activation_bytes = require_at_least(j, "activation_bytes", path, 0);
  m.temporary_bytes = require_at_least(j, "temporary_bytes", path, 0);
  m.peak_memory_gb = require_at_least(j, "peak_memory_gb", path, 0);
  // New in 1.15; absent: nothing outside the allocator.
  if (j.contains("cuda_context_bytes")) m.cuda_context_bytes = require_at_least(j, "cuda_context_bytes", path, 0);
  if (j.contains("nccl_buffer_bytes")) m.nccl_buffer_bytes = require_at_least(j, "nccl_buffer_bytes", path, 0);
  if (j.contains("fragmentation_bytes")) m.fragmentation_bytes = require_at_least(j, "fragmentation_bytes", path, 0);
  m.device_memory_gb = j.contains("device_memory_gb") ? require_at_least(j, "device_memory_gb", path, 0) : m.peak_memory_gb;
  // New in 1.17; absent: not replayed.
  if (j.contains("reserved_memory_gb")) m.reserved_memory_gb = read_nullable<double>(j, "reserved_memory_gb", path);
  if (m.reserved_memory_gb) check_at_least(*m.reserved_memory_gb, 0, "graph: " + path + "/reserved_memory_gb", j["reserved_memory_gb"]);
  m.pp_stage_memory_gb = require_all_at_least(j, "pp_stage_memory_gb", path, 0);
  m.pp_stage_microbatches_in_flight = require_as<std::vector<int64_t>>(j, "pp_stage_microbatches_in_flight", path);
  m.peak_pp_stage = require_as<int64_t>(j, "peak_pp_stage", path);
  m.peak_module = require_as<std::string>(j, "peak_module", path);
  m.gpu_memory_gb = read_nullable<double>(j, "gpu_memory_gb", path);
  if (m.gpu_memory_gb) check_at_least(*m.gpu_memory_gb, 0, "graph: " + path + "/gpu_memory_gb", j["gpu_memory_gb"]);
  const json& oom = require(j, "oom", path);
  if (!oom.is_null())
    m.oom = OomInfo{require_at_least(oom, "capacity_gb", path + "/oom", 0), require_at_least(oom, "required_gb", path + "/oom", 0),
                    require_at_least(oom, "excess_gb", path + "/oom", 0)};
  return m;
}

}  // namespace syssim
