// The one helper every tool uses: flag parsing with CLI11, -i/-o, --version,
// graph input/output, provenance, and the single top-level catch that maps
// errors to exit codes (0 ok, 1 bad data, 2 bad usage) and one stderr line.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "common/graph.hpp"

namespace syssim::tool {

struct Tool {
  Tool(std::string tool_name, std::string tool_description)
      : name(std::move(tool_name)), description(std::move(tool_description)) {}
  std::string name;         // "syssim-shard"
  std::string description;  // one line for --help
  std::string input = "-";
  std::string output = "-";
  std::vector<std::string> args;  // the command line after the program name, for provenance
};

// Runs a graph filter: reads the input graph, applies `stage`, appends provenance, writes the output.
int run_filter(Tool tool, int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
               const std::function<void(Graph&)>& stage);

// Applies `use` to the graph read from `input` ("-": standard input); its errors about the
// graph's data name the file, as the reader's do (in_graph_source).
void with_graph(const std::string& input, const std::function<void(Graph&)>& use);

// Runs a tool whose output is text produced by `produce` (the input handling is its own).
int run_command(Tool tool, int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
                const std::function<std::string(const Tool&)>& produce);

// A flag's value that must be positive (0 or more); one short message where
// CLI::PositiveNumber (NonNegativeNumber) prints the whole range of a double.
inline CLI::Validator at_least(bool zero_too) {
  return CLI::Validator(
      [zero_too](std::string& text) -> std::string {
        double value = 0;
        const bool within = CLI::detail::lexical_cast(text, value) && (value > 0 || (zero_too && value == 0));
        return within ? "" : std::string(zero_too ? "must be 0 or more" : "must be positive") + ", got '" + text + "'";
      },
      zero_too ? ">= 0" : "> 0");
}
inline const CLI::Validator kPositive = at_least(false);
inline const CLI::Validator kNonNegative = at_least(true);

// Parses CLI11 flags and runs `body`, mapping every error to an exit code and one line on stderr.
int guarded_main(const std::string& name, CLI::App& app, int argc, char** argv, const std::function<void()>& body);

}  // namespace syssim::tool
