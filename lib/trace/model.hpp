// A Megatron-style dense decoder-only transformer built directly on meta tensors (docs/trace.md).
#pragma once
#include <cstdint>

#include "config/config.hpp"
#include "trace/recorder.hpp"

namespace syssim::trace_detail {

// Sizes of the named axes: query heads are g * r.
struct AxisSizes {
  int64_t b, s, h, g, r, d, f, v, p;
};

// Runs one training step (forward, loss, backward) of `model` at `sizes` under `recorder`.
void run_training_step(const ModelConfig& model, const AxisSizes& sizes, Recorder& recorder);

}  // namespace syssim::trace_detail
