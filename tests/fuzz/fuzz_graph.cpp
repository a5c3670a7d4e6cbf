// A graph file as the stages read it: the envelope, then every section present (trace, shard,
// cost, sim, mem) with its checks, and back to text; then the stage that comes next in the
// pipe runs on the parsed graph (syssim-cost on the roofline of the H100 preset), and a
// complete graph is rendered as syssim-report's text and JSON, and its critical path read
// when it has a timeline.
#include "common/graph.hpp"
#include "common/io.hpp"
#include "config/config.hpp"
#include "cost/cost.hpp"
#include "fuzz.hpp"
#include "mem/mem.hpp"
#include "report/report.hpp"
#include "shard/shard.hpp"
#include "sim/sim.hpp"

namespace {

const std::string kConfigs = std::string(SYSSIM_SOURCE_DIR) + "/configs";

// The next stage of `graph`, as the tools would run it.
void run_next_stage(syssim::Graph& graph) {
  static const syssim::HardwareConfig hardware = syssim::load_hardware_yaml(kConfigs + "/hardware/h100-sxm-80gb.yaml");
  static const syssim::ReportOptions report = [] {
    syssim::ReportOptions options;
    const std::string bands = kConfigs + "/uncertainty/step_time_bands.json";
    options.step_time_bands = syssim::parse_step_time_bands(syssim::read_input(bands), bands);
    return options;
  }();
  if (graph.mem) {
    (void)syssim::render_report(graph, "text", report);
    (void)syssim::render_report(graph, "json", report);
    if (graph.sim->timeline) (void)syssim::render_report(graph, "critical-path", report);
  } else if (graph.sim) {
    syssim::account_memory(graph);
  } else if (graph.cost) {
    (void)syssim::simulate_graph(graph);
  } else if (graph.shard) {
    syssim::CostOptions roofline;
    roofline.estimator = "roofline";
    syssim::cost_graph(graph, hardware, roofline);
  } else if (graph.trace) {
    syssim::shard_graph(graph, syssim::ShardOptions{});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return syssim::fuzz::accept_errors([&] {
    syssim::Graph graph = syssim::read_graph(syssim::fuzz::text_of(data, size), "fuzz.json");
    (void)syssim::write_graph(graph);
    run_next_stage(graph);
  });
}
