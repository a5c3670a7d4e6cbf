#include "tool.hpp"

#include <iostream>

#include "common/error.hpp"
#include "common/heap.hpp"
#include "common/io.hpp"
#include "common/version.hpp"

namespace syssim::tool {
namespace {

void add_common_flags(CLI::App& app, Tool& tool, bool with_input) {
  if (with_input) app.add_option("-i,--input", tool.input, "Input graph file (default: standard input)");
  app.add_option("-o,--output", tool.output, "Output file, written atomically (default: standard output)");
  app.set_version_flag("--version", std::string(tool.name) + " " + kSyssimVersion + " (graph format " +
                                        kGraphFormatVersion + ")");
}

std::vector<std::string> args_of(int argc, char** argv) { return std::vector<std::string>(argv + 1, argv + argc); }

}  // namespace

int guarded_main(const std::string& name, CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  prepare_heap();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // An unknown word is named first, even when CLI11 stopped at a missing required option;
    // CLI11 lists leftovers last first, so name the first one the user typed.
    std::vector<std::string> extras = app.remaining();
    for (CLI::App* sub : app.get_subcommands())
      if (extras.empty()) extras = sub->remaining();
    if (!extras.empty())
      std::cerr << name << ": error: unknown argument '" << extras.front() << "' (see --help)\n";
    else
      std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  }
  try {
    body();
    return 0;
  } catch (const UsageError& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const DataError& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 1;
  }
}

int run_filter(Tool tool, int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
               const std::function<void(Graph&)>& stage) {
  CLI::App app(tool.description, tool.name);
  add_common_flags(app, tool, true);
  add_flags(app);
  tool.args = args_of(argc, argv);
  return guarded_main(tool.name, app, argc, argv, [&] {
    Graph graph = read_graph_file(tool.input);
    stage(graph);
    graph.provenance.push_back(Provenance{tool.name, kSyssimVersion, tool.args});
    write_output(tool.output, write_graph(graph));
  });
}

int run_command(Tool tool, int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
                const std::function<std::string(const Tool&)>& produce) {
  CLI::App app(tool.description, tool.name);
  add_common_flags(app, tool, false);
  add_flags(app);
  tool.args = args_of(argc, argv);
  return guarded_main(tool.name, app, argc, argv, [&] { write_output(tool.output, produce(tool)); });
}

}  // namespace syssim::tool
