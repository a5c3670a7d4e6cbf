// `syssim collective`: nccl-tests' table for one collective on the hardware's links
// (docs/network.md).
#include <memory>

#include "common/io.hpp"
#include "network/network.hpp"
#include "subcommands.hpp"

namespace syssim::tool {

Subcommand add_collective(CLI::App& app) {
  struct Settings {
    CollectiveRequest request;
    std::string hardware, output = "-";
  };
  auto settings = std::make_shared<Settings>();
  CollectiveRequest& request = settings->request;
  CLI::App* collective = app.add_subcommand("collective", "Predict nccl-tests' table for one collective (docs/network.md)");
  collective->add_option("--hardware", settings->hardware, "Hardware YAML or preset")->required();
  collective->add_option("--op", request.collective, "all_reduce|all_gather|reduce_scatter|alltoall|broadcast|sendrecv")
      ->required();
  collective->add_option("--gpus", request.gpus, "GPUs, placed consecutively, gpus_per_node per node")->required();
  collective->add_option("--bytes", request.bytes, "Size per rank (8, 64K, 16M, 1G)");
  collective->add_option("--sweep", request.sweep, "MIN:MAX, doubling (8B:16G)");
  collective->add_option("--format", request.format, "table, csv or json");
  collective->add_option("-o,--output", settings->output, "Output file, written atomically (default: standard output)");
  return {collective, [settings] {
            write_output(settings->output, collective_report(settings->request, load_hardware_yaml(settings->hardware)));
          }};
}

}  // namespace syssim::tool
