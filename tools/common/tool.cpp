#include "tool.hpp"

#include <filesystem>
#include <iostream>
#include <new>
#include <string>

#include "common/error.hpp"
#include "common/flag_text.hpp"
#include "common/heap.hpp"
#include "common/io.hpp"
#include "common/version.hpp"

namespace syssim::tool {
namespace {

// sysexits.h's EX_SOFTWARE, "internal software error": scripts tell a bug from bad data (1).
constexpr int kInternalErrorStatus = 70;

void add_common_flags(CLI::App& app, Tool& tool, bool with_input) {
  if (with_input) app.add_option("-i,--input", tool.input, "Input graph file (default: standard input)");
  app.add_option("-o,--output", tool.output, "Output file, written atomically (default: standard output)");
  app.set_version_flag("--version", std::string(tool.name) + " " + kSyssimVersion + " (graph format " +
                                        kGraphFormatVersion + ")");
}

std::vector<std::string> args_of(int argc, char** argv) { return std::vector<std::string>(argv + 1, argv + argc); }

// A flag's text as the user means it: never empty (an empty model, hardware or file name ran
// the default one or standard output), numbers finite, integers in decimal ("064" is 64, where
// CLI11 reads octal 52) and within 64 bits (where CLI11 clamps). Applied to every flag of the app
// and its subcommands before parsing.
void read_values_as_written(CLI::App& app) {
  const CLI::Validator text([](std::string& value) { return value.empty() ? "expected a value, got ''" : ""; }, "");
  const CLI::Validator integer(normalize_whole_number, "");
  const CLI::Validator number(finite_number_message, "");
  for (CLI::Option* option : app.get_options()) {
    const std::string full = option->get_type_name();  // "INT", or "INT:> 0" with a check's description
    const std::string type = full.substr(0, full.find(':'));
    if (type == "INT" || type == "UINT") option->transform(integer);
    if (type == "FLOAT") option->transform(number);
    if (type == "TEXT") option->check(text);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) read_values_as_written(*sub);
}

// A switch given twice, which CLI11 counts without complaint, refused as a value flag given
// twice is.
void refuse_repeated_switches(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options())
    if (option->get_expected_min() == 0 && option->count() > 1)  // a switch: no value
      throw UsageError(option->get_name() + " is given " + std::to_string(option->count()) + " times; give it once");
  for (const CLI::App* sub : app.get_subcommands()) refuse_repeated_switches(*sub);
}

}  // namespace

int guarded_main(const std::string& name, CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  prepare_heap();
  remove_partial_outputs_on_signals();
  read_values_as_written(app);
  try {
    app.parse(argc, argv);
    refuse_repeated_switches(app);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const UsageError& e) {  // a flag's value refused by the library's parser
    std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    // An unknown word is named first, even when CLI11 stopped at a missing required option;
    // CLI11 lists leftovers last first, so name the first one the user typed.
    std::vector<std::string> extras = app.remaining();
    for (CLI::App* sub : app.get_subcommands())
      if (extras.empty()) extras = sub->remaining();
    if (!extras.empty())
      std::cerr << name << ": error: unknown argument '" << extras.front() << "' (see --help)\n";
    else
      std::cerr << name << ": error: " << parse_error_text(e.what()) << "\n";
    return 2;
  }
  try {
    body();
    return 0;
  } catch (const OutOfMemory& e) {
    std::cerr << name << ": out of memory: " << e.what() << "\n";
    return 3;
  } catch (const UsageError& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const DataError& e) {
    std::cerr << name << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << name << ": error: not enough memory on this machine\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the file system refuses to look at (a folder the user may not enter): bad input.
    std::cerr << name << ": error: " << e.path1().string() << ": " << e.code().message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // Every bad input is a DataError or UsageError naming its place; anything else is a bug.
    std::cerr << name << ": internal error (a bug in syssim; please report it with the command): " << e.what()
              << "\n";
    return kInternalErrorStatus;
  }
}

void with_graph(const std::string& input, const std::function<void(Graph&)>& use) {
  Graph graph = read_graph_file(input);
  try {
    use(graph);
  } catch (const DataError& e) {
    throw DataError(in_graph_source(e.what(), input));
  }
}

int run_filter(Tool tool, int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
               const std::function<void(Graph&)>& stage) {
  CLI::App app(tool.description, tool.name);
  add_common_flags(app, tool, true);
  add_flags(app);
  tool.args = args_of(argc, argv);
  return guarded_main(tool.name, app, argc, argv, [&] {
    check_outputs({{"-o", tool.output}});  // a stage may write over its input: the write is atomic
    with_graph(tool.input, [&](Graph& graph) {
      stage(graph);
      graph.provenance.push_back(Provenance{tool.name, kSyssimVersion, tool.args});
      write_output(tool.output, write_graph(graph));
    });
  });
}

int run_command(Tool tool, int argc, char** argv, const std::function<void(CLI::App&)>& add_flags,
                const std::function<std::string(const Tool&)>& produce) {
  CLI::App app(tool.description, tool.name);
  add_common_flags(app, tool, false);
  add_flags(app);
  tool.args = args_of(argc, argv);
  return guarded_main(tool.name, app, argc, argv, [&] {
    check_outputs({{"-o", tool.output}});
    write_output(tool.output, produce(tool));
  });
}

}  // namespace syssim::tool
