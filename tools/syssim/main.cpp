// syssim: the driver. `run` and `memory` run every stage in one process (docs/syssim.md);
// `calibrate` fits the calibrated cost estimator (docs/calibration.md); `sweep` simulates many
// layouts of one model (docs/syssim-sweep.md); `validate` compares predictions with measured
// runs (docs/validation.md); `collective` predicts nccl-tests (docs/network.md); `presets`
// lists the presets (docs/configs.md).
#include <string>

#include "common/version.hpp"
#include "subcommands.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  CLI::App app("syssim: predict step time, MFU and memory of LLM training (docs/syssim.md)", "syssim");
  app.set_version_flag("--version", std::string("syssim ") + syssim::kSyssimVersion + " (graph format " +
                                        syssim::kGraphFormatVersion + ")");
  app.require_subcommand(1);
  std::vector<syssim::tool::Subcommand> subcommands = syssim::tool::add_run_and_memory(app);
  subcommands.push_back(syssim::tool::add_validate(app));
  subcommands.push_back(syssim::tool::add_calibrate(app));
  subcommands.push_back(syssim::tool::add_collective(app));
  subcommands.push_back(syssim::tool::add_sweep(app, argc, argv));
  subcommands.push_back(syssim::tool::add_presets(app));
  return syssim::tool::guarded_main("syssim", app, argc, argv, [&] {
    for (const syssim::tool::Subcommand& subcommand : subcommands)
      if (subcommand.command->parsed()) return subcommand.action();
  });
}
