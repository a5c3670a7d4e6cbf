// Pipeline schedules as data (docs/parallelism.md): each pipeline rank runs a list of slots,
// one pass of one micro-batch through one of its model chunks. The simulator and the memory
// accounting replay these lists, so a new schedule (DualPipe, ZB-V, ...) is a new list,
// not a change of either.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/op_kinds.hpp"

namespace syssim {

struct ScheduleSlot {
  int64_t chunk = 0;       // the rank's model chunk (virtual stage chunk * pp + rank)
  int64_t microbatch = 0;
  OpPass pass = OpPass::forward;  // forward | backward | weight
};

inline bool operator==(const ScheduleSlot& a, const ScheduleSlot& b) {
  return a.chunk == b.chunk && a.microbatch == b.microbatch && a.pass == b.pass;
}

// One slot list per pipeline rank, in the order the rank runs them.
using PipelineSchedule = std::vector<std::vector<ScheduleSlot>>;

// The named schedules, as the graph format and the flags spell them.
enum class ScheduleKind : uint8_t { one_f_one_b, interleaved, gpipe, zb_h1 };
template <>
struct EnumNames<ScheduleKind> {
  static constexpr std::array<const char*, 4> kNames = {"1f1b", "interleaved", "gpipe", "zb-h1"};
};

// The schedule `kind` for pp ranks with vpp chunks each and num_microbatches micro-batches;
// `combined`: Megatron-Core's combined 1F1B (EP overlap), whose 1F1B steps each run their
// forward beside their backward (one more warm-up forward). Throws UsageError for
// combinations the schedule does not support (interleaved: num_microbatches a multiple of pp;
// zb-h1 and gpipe: vpp = 1, not combined).
PipelineSchedule make_schedule(ScheduleKind kind, int64_t pp, int64_t vpp, int64_t num_microbatches, bool combined);

}  // namespace syssim
