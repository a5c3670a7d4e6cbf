// syssim-mem: accounts the peak memory of one GPU (docs/syssim-mem.md).
#include "mem/mem.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  syssim::MemOptions options;
  return syssim::tool::run_filter(
      {"syssim-mem", "Account model states and the activation peak of one GPU"}, argc, argv,
      [&options](CLI::App& app) {
        app.add_flag("--replay-allocator", options.replay_allocator,
                     "Also replay PyTorch's caching allocator for the memory it reserves (reserved_memory_gb)");
      },
      [&options](syssim::Graph& g) { syssim::account_memory(g, options); });
}
