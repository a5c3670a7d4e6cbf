// The subcommands of `syssim` (docs/syssim.md), one file each: each adds its flags to the
// program's CLI::App and returns what to run once it is the one parsed. A subcommand's
// settings live in its action, which CLI11 fills while parsing.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace syssim::tool {

struct Subcommand {
  CLI::App* command = nullptr;
  std::function<void()> action;  // runs it: reads, computes, writes its outputs or throws
};

std::vector<Subcommand> add_run_and_memory(CLI::App& app);  // run.cpp
Subcommand add_validate(CLI::App& app);                      // validate.cpp
Subcommand add_calibrate(CLI::App& app);                     // calibrate.cpp
Subcommand add_collective(CLI::App& app);                    // collective.cpp
Subcommand add_sweep(CLI::App& app, int argc, char** argv);  // sweep.cpp: emitted jobs repeat argv
Subcommand add_presets(CLI::App& app);                       // presets.cpp

}  // namespace syssim::tool
