// The driver runs the stages in one process; its graph must be the one the pipe carries.
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "driver/driver.hpp"
#include "report/report.hpp"

namespace syssim {
namespace {

ModelConfig llama3_8b() { return load_model_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/models/llama3-8b.yaml"); }
HardwareConfig h100() {
  return load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
}

TEST(Driver, InMemoryGraphSurvivesTheJsonBetweenStages) {
  ShardOptions options;
  options.parallelism.tp = 2;
  options.parallelism.sp = true;
  options.parallelism.dp = 2;
  options.training.global_batch = 4;
  options.training.seq_length = 2048;
  Graph graph = simulate(llama3_8b(), h100(), options);
  Graph reread = read_graph(write_graph(graph), "<memory>");
  EXPECT_EQ(write_graph(reread), write_graph(graph));
  EXPECT_EQ(render_report(reread, "json"), render_report(graph, "json"));
}

TEST(Driver, MemoryEstimateEqualsTheFullRunsMemory) {
  ShardOptions options;
  options.parallelism.tp = 4;
  options.training.seq_length = 4096;
  Graph full = simulate(llama3_8b(), h100(), options);
  Graph memory = estimate_memory(llama3_8b(), h100(), options);
  EXPECT_FALSE(memory.sim.has_value());
  EXPECT_DOUBLE_EQ(memory.mem->peak_memory_gb, full.mem->peak_memory_gb);
  // Model state at tp 4 without the distributed optimizer: 18 bytes per local parameter.
  double params = memory.shard->params_local;
  EXPECT_DOUBLE_EQ(memory.mem->param_bytes + memory.mem->grad_bytes + memory.mem->optimizer_state_bytes, 18 * params);
}

TEST(Driver, DefaultJobIsEightGpusOfOneNode) {
  ShardOptions job = default_job_options();
  EXPECT_EQ(job.parallelism.world_size(), 8);
  RunRequest request;
  request.options = job;
  EXPECT_NE(run_report(request).find("SimulationReport("), std::string::npos);
}

}  // namespace
}  // namespace syssim
