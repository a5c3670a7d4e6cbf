// A Megatron-style dense decoder-only transformer built directly on meta tensors (docs/syssim-trace.md).
#pragma once
#include <cstdint>

#include "config/config.hpp"
#include "trace/recorder.hpp"

namespace syssim::trace_detail {

// Sizes of the named axes: query heads are g * r. Mixture of experts: e experts, k of them per
// token, m each expert's FFN width, u the shared experts' width. Multi-head latent attention:
// q and c the query and K/V latent ranks, n and t a query/key head's parts without and with
// RoPE (d = n + t), w a value head's width. x: the sliding window. 1 where the model has none.
struct AxisSizes {
  int64_t b, s, h, g, r, d, f, v, p;
  int64_t e = 1, k = 1, m = 1, u = 1, q = 1, c = 1, n = 1, t = 1, w = 1, x = 1;
};

// Runs one training step (forward, loss, backward) of `model` at `sizes` under `recorder`.
void run_training_step(const ModelConfig& model, const AxisSizes& sizes, Recorder& recorder);

}  // namespace syssim::trace_detail
