#include "shard/schedule.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace syssim {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

ScheduleSlot forward(int64_t microbatch, int64_t chunk = 0) { return {chunk, microbatch, OpPass::forward}; }
ScheduleSlot backward(int64_t microbatch, int64_t chunk = 0) { return {chunk, microbatch, OpPass::backward}; }
ScheduleSlot weight(int64_t microbatch) { return {0, microbatch, OpPass::weight}; }

// Megatron-LM forward_backward_pipelining_without_interleaving (Narayanan et al. 2021,
// Fig. 4 top): pp - rank - 1 warm-up forwards, then one forward and one backward in turn,
// then the remaining backwards.
std::vector<ScheduleSlot> one_f_one_b(int64_t pp, int64_t rank, int64_t m, int64_t extra_warmup) {
  int64_t warmup = std::min(pp - rank - 1 + extra_warmup, m);
  std::vector<ScheduleSlot> slots;
  for (int64_t i = 0; i < warmup; ++i) slots.push_back(forward(i));
  for (int64_t i = 0; i < m - warmup; ++i) {
    slots.push_back(forward(warmup + i));
    slots.push_back(backward(i));
  }
  for (int64_t i = m - warmup; i < m; ++i) slots.push_back(backward(i));
  return slots;
}

// GPipe (Huang et al. 2019; Narayanan et al. 2021, Fig. 3): every forward, then every backward.
std::vector<ScheduleSlot> gpipe(int64_t m) {
  std::vector<ScheduleSlot> slots;
  for (int64_t i = 0; i < m; ++i) slots.push_back(forward(i));
  for (int64_t i = 0; i < m; ++i) slots.push_back(backward(i));
  return slots;
}

// Megatron-LM forward_backward_pipelining_with_interleaving (Narayanan et al. 2021, Fig. 4
// bottom). The k-th forward of a rank runs micro-batch group k / (pp*vpp): pp micro-batches
// through chunk 0, the same pp through chunk 1, ...; backwards go through the chunks in
// reverse. Warm-up: (pp - rank - 1) * 2 + (vpp - 1) * pp forwards, or all of them when
// m == pp.
std::vector<ScheduleSlot> interleaved(int64_t pp, int64_t vpp, int64_t rank, int64_t m, int64_t extra_warmup) {
  const int64_t total = m * vpp, group = pp * vpp;
  auto slot = [&](int64_t k, bool is_forward) {
    int64_t chunk = k % group / pp;
    int64_t microbatch = k / group * pp + k % pp;
    return is_forward ? forward(microbatch, chunk) : backward(microbatch, vpp - 1 - chunk);
  };
  int64_t warmup = m == pp ? total : std::min((pp - rank - 1) * 2 + (vpp - 1) * pp + extra_warmup, total);
  std::vector<ScheduleSlot> slots;
  for (int64_t k = 0; k < warmup; ++k) slots.push_back(slot(k, true));
  for (int64_t k = 0; k < total - warmup; ++k) {
    slots.push_back(slot(warmup + k, true));
    slots.push_back(slot(k, false));
  }
  for (int64_t k = total - warmup; k < total; ++k) slots.push_back(slot(k, false));
  return slots;
}

// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Fig. 3 top): 1F1B's warm-up,
// but the first `rank` backwards compute only input gradients (B); their weight gradients
// (W) are deferred, oldest first, one after each later B, and the last `rank` of them fill
// the cool-down bubble. Micro-batches in flight stay those of 1F1B.
std::vector<ScheduleSlot> zb_h1(int64_t pp, int64_t rank, int64_t m) {
  int64_t warmup = std::min(pp - rank - 1, m);
  std::vector<ScheduleSlot> slots;
  int64_t next_forward = 0, next_backward = 0, next_weight = 0;
  for (; next_forward < warmup; ++next_forward) slots.push_back(forward(next_forward));
  auto backward_then_weight = [&](bool defer) {
    slots.push_back(backward(next_backward++));
    if (!defer) slots.push_back(weight(next_weight++));
  };
  for (int64_t i = 0; i < rank && next_forward < m; ++i) {
    slots.push_back(forward(next_forward++));
    backward_then_weight(true);
  }
  while (next_forward < m) {
    slots.push_back(forward(next_forward++));
    backward_then_weight(false);
  }
  while (next_backward < m) backward_then_weight(false);
  while (next_weight < m) slots.push_back(weight(next_weight++));
  return slots;
}

}  // namespace

PipelineSchedule make_schedule(ScheduleKind kind, int64_t pp, int64_t vpp, int64_t m, bool combined) {
  const std::string name = to_string(kind);
  if (combined && kind != ScheduleKind::one_f_one_b && kind != ScheduleKind::interleaved)
    throw UsageError("pipeline_schedule=" + name +
                     " has no forward and backward to pair: the combined 1F1B schedule is 1f1b (pp 1) or interleaved");
  // Megatron-Core's combined 1F1B runs one more warm-up forward, so that the forward and the
  // backward of each 1F1B step are independent (schedules.py, get_pp_rank_microbatches).
  const int64_t extra_warmup = combined ? 1 : 0;
  if (kind == ScheduleKind::interleaved) {
    if (vpp < 2) throw UsageError("pipeline_schedule=interleaved needs vpp > 1 (got vpp=" + str(vpp) + ")");
    if (m % pp != 0)
      throw UsageError("pipeline_schedule=interleaved needs num_microbatches a multiple of pp, as Megatron-LM does: "
                       "num_microbatches=" + str(m) + ", pp=" + str(pp));
  } else if (vpp != 1) {
    throw UsageError("pipeline_schedule=" + name + " runs one model chunk per rank: vpp=" + str(vpp) +
                     " needs pipeline_schedule=interleaved");
  }
  PipelineSchedule schedule;
  for (int64_t rank = 0; rank < pp; ++rank) {
    switch (kind) {
      case ScheduleKind::one_f_one_b: schedule.push_back(one_f_one_b(pp, rank, m, extra_warmup)); break;
      case ScheduleKind::gpipe: schedule.push_back(gpipe(m)); break;
      case ScheduleKind::interleaved: schedule.push_back(interleaved(pp, vpp, rank, m, extra_warmup)); break;
      case ScheduleKind::zb_h1: schedule.push_back(zb_h1(pp, rank, m)); break;
    }
  }
  return schedule;
}

}  // namespace syssim
