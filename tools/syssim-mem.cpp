// syssim-mem: accounts the peak memory of one GPU (docs/syssim-mem.md).
#include "mem/mem.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  return syssim::tool::run_filter(
      {"syssim-mem", "Account model states and the activation peak of one GPU"}, argc, argv, [](CLI::App&) {},
      syssim::account_memory);
}
