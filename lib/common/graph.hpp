// The graph document that the tools pass on stdin/stdout (docs/graph-format.md):
// format tag, MAJOR.MINOR version, provenance, and one section per stage.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "cost/section.hpp"
#include "mem/section.hpp"
#include "shard/section.hpp"
#include "sim/section.hpp"
#include "trace/section.hpp"

namespace syssim {

struct Provenance {
  std::string tool;
  std::string version;
  std::vector<std::string> args;
};

struct Graph {
  std::vector<Provenance> provenance;
  std::optional<ModelConfig> model;  // owned by syssim-trace, like "trace"
  std::optional<TraceSection> trace;
  std::optional<ShardSection> shard;
  std::optional<CostSection> cost;
  std::optional<SimSection> sim;
  std::optional<MemSection> mem;
  nlohmann::json other_sections = nlohmann::json::object();  // sections of other programs, passed through
};

// Serializes deterministically (sorted keys, no timestamps), ending in a newline.
std::string write_graph(const Graph& graph);

// Parses and checks format and major version; `source` names the input in errors.
Graph read_graph(const std::string& text, const std::string& source);

// The name errors give a graph read from `path`: the path, or <stdin> for "-" or none.
std::string graph_source(const std::string& path);

// Reads a graph from a file, or from standard input when path is "-".
Graph read_graph_file(const std::string& path);

// A stage's error about a graph's data (a JSON path, or "graph ...") named after the graph's
// source, as the reader's errors are; any other error (about another file) unchanged.
std::string in_graph_source(const std::string& message, const std::string& path);

// Returns the section or throws DataError telling which stage to run first.
template <typename T>
const T& need_section(const std::optional<T>& section, const std::string& name, const std::string& producer) {
  if (!section) throw DataError("graph has no '" + name + "' section: run " + producer + " first");
  return *section;
}

}  // namespace syssim
