#include "common/graph.hpp"

#include <regex>
#include <unistd.h>

#include "common/io.hpp"
#include "common/json_util.hpp"
#include "common/version.hpp"

namespace syssim {
namespace {

const char* kFormat = "syssim-graph";

// MAJOR of "MAJOR.MINOR", each a decimal number without a leading zero ("1.20", not "01.20",
// " 1.20" or "1.20.1").
int major_of(const std::string& version, const std::string& where) {
  static const std::regex kVersion("(0|[1-9][0-9]{0,5})\\.(0|[1-9][0-9]{0,5})");
  std::smatch parts;
  if (!std::regex_match(version, parts, kVersion))
    throw DataError(where + ": /version: expected MAJOR.MINOR, got \"" + version + "\"");
  return std::stoi(parts[1].str());
}

}  // namespace

std::string write_graph(const Graph& g) {
  json out = g.other_sections;
  out["format"] = kFormat;
  out["version"] = kGraphFormatVersion;
  json provenance = json::array();
  for (const auto& p : g.provenance) provenance.push_back({{"tool", p.tool}, {"version", p.version}, {"args", p.args}});
  out["provenance"] = provenance;
  if (g.model) out["model"] = to_json(*g.model);
  if (g.trace) out["trace"] = to_json(*g.trace);
  if (g.shard) out["shard"] = to_json(*g.shard);
  if (g.cost) out["cost"] = to_json(*g.cost);
  if (g.sim) out["sim"] = to_json(*g.sim);
  if (g.mem) out["mem"] = to_json(*g.mem);
  return out.dump() + "\n";
}

Graph read_graph(const std::string& text, const std::string& source) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)  // in a pipe, most likely what the stage before left after its error
    throw DataError(source + ": empty input, expected a syssim graph" +
                    (source == "<stdin>" ? std::string(" (did the stage before it in the pipe fail?)") : std::string()));
  if (text[first] != '{')  // a model YAML given to a stage, say
    throw DataError(source + ": not a syssim graph (a JSON object that syssim-trace or a later stage writes); "
                    "a model goes to syssim-trace");
  const json j = parse_json(text, source);
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
    throw DataError(source + ": /format: expected \"syssim-graph\", got " +
                    (j.is_object() && j.contains("format") ? j["format"].dump() : std::string("nothing")));
  if (!j.contains("version")) throw DataError(source + ": /version: missing");
  if (!j["version"].is_string())
    throw DataError(source + ": /version: expected a string \"MAJOR.MINOR\", got " + j["version"].dump());
  std::string version = j["version"];
  int ours = major_of(kGraphFormatVersion, "syssim");
  if (major_of(version, source) != ours)
    throw DataError(source + ": /version: graph format " + version + " is not supported (this syssim reads " +
                    std::to_string(ours) + ".x)");
  Graph g;
  try {
    // Optional: a graph made by hand or by another program may not say where it came from.
    const json& provenance = j.contains("provenance") ? require_array(j, "provenance", "") : json::array();
    for (const auto& p : provenance)
      g.provenance.push_back(Provenance{require_as<std::string>(p, "tool", "/provenance"),
                                        require_as<std::string>(p, "version", "/provenance"),
                                        require_as<std::vector<std::string>>(p, "args", "/provenance")});
    if (j.contains("model")) g.model = model_from_json(j["model"], "/model");
    if (j.contains("trace")) g.trace = trace_from_json(j["trace"], "/trace");
    if (g.model && g.trace) check_axes_match_model(*g.trace, *g.model);
    if (j.contains("shard")) g.shard = shard_from_json(j["shard"], "/shard");
    if (j.contains("cost")) g.cost = cost_from_json(j["cost"], "/cost");
    if (g.shard && g.cost) check_matches_shard(*g.cost, *g.shard, "graph: /cost");
    if (j.contains("sim")) g.sim = sim_from_json(j["sim"], "/sim");
    if (j.contains("mem")) g.mem = mem_from_json(j["mem"], "/mem");
  } catch (const DataError& e) {
    throw DataError(source + ": " + e.what());
  }
  for (const auto& [key, value] : j.items())
    if (key != "format" && key != "version" && key != "provenance" && key != "model" && key != "trace" &&
        key != "shard" && key != "cost" && key != "sim" && key != "mem")
      g.other_sections[key] = value;
  return g;
}

std::string graph_source(const std::string& path) { return path == "-" || path.empty() ? "<stdin>" : path; }

Graph read_graph_file(const std::string& path) {
  // A stage run by hand would otherwise wait, silent, for a graph typed at the terminal.
  if (graph_source(path) == "<stdin>" && isatty(STDIN_FILENO))
    throw UsageError("no graph on standard input (a terminal): pipe one in, or give -i FILE");
  return read_graph(read_input(path), graph_source(path));
}

std::string in_graph_source(const std::string& message, const std::string& path) {
  if (message.rfind("graph ", 0) == 0 || message.rfind("graph: ", 0) == 0) return graph_source(path) + ": " + message;
  for (const char* section : {"/model", "/trace", "/shard", "/cost", "/sim", "/mem"}) {
    const size_t length = std::char_traits<char>::length(section);
    if (message.compare(0, length, section) == 0 && message.size() > length &&
        (message[length] == '/' || message[length] == ':'))
      return graph_source(path) + ": graph: " + message;
  }
  return message;  // about another file, which it names
}

}  // namespace syssim
