// syssim-report: renders a simulated graph as a text or JSON report (docs/syssim-report.md).
#include "report/report.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  std::string input = "-";
  std::string format = "text";
  return syssim::tool::run_command(
      {"syssim-report", "Render the report of a simulated graph as text or JSON"}, argc, argv,
      [&](CLI::App& app) {
        app.add_option("-i,--input", input, "Input graph file (default: standard input)");
        app.add_option("--format", format, "Report format: text or json (default: text)")
            ->check(CLI::IsMember({"text", "json"}));
      },
      [&](const syssim::tool::Tool&) { return syssim::render_report(syssim::read_graph_file(input), format); });
}
