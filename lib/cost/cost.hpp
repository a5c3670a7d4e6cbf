// The cost stage (docs/syssim-cost.md): the time of every op of one rank, from the roofline
// with per-family efficiencies or from a calibrated model bundle.
#pragma once
#include <memory>
#include <optional>

#include "calibrate/calibrate.hpp"
#include "common/graph.hpp"

namespace syssim {

struct CostOptions {
  // auto: the hardware's calibrated_model when it has one, else the roofline with its
  // efficiencies; roofline: the bare roofline at peak (no bundle, no efficiencies);
  // calibrated: a bundle is required.
  std::string estimator = "auto";
  std::string calibrated_model;  // a bundle folder overriding the hardware's
};

// Loads the bundle once, so that many graphs can be priced with it.
class CostEstimator {
 public:
  // Throws DataError when a bundle is required but missing or does not fit the hardware.
  CostEstimator(HardwareConfig hardware, const CostOptions& options = {});
  // Sets g.cost from g.shard: one OpCost per shard op, in order. Throws DataError when the
  // hardware lacks a value the graph needs (an fp8 peak, the inter-node bandwidth).
  void cost_graph(Graph& g) const;

 private:
  bool priced_by_bundle(const std::string& family) const;
  // The kernel the bundle prices for `kernel`, and the factor on its time; none: the roofline.
  std::optional<std::pair<Kernel, double>> bundle_kernel(const Kernel& kernel, double roofline, const ShardOp& op) const;
  void scale_attention(const Graph& g, std::vector<OpCost>& ops) const;
  double uncalibrated_roofline(const Kernel& kernel, double roofline) const;

  HardwareConfig hardware_;
  CostOptions options_;
  std::shared_ptr<const CalibratedModel> calibrated_;
};

void cost_graph(Graph& g, const HardwareConfig& hw, const CostOptions& options = {});

}  // namespace syssim
