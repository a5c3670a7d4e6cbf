// syssim-report: renders a simulated graph as a text or JSON report, draws its timeline as a
// Chrome trace or an SVG, or reads the step's critical path from it (docs/syssim-report.md).
#include "report/report.hpp"
#include "report_flags.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  std::string input = "-";
  std::string format = "text";
  syssim::ReportOptions options;
  return syssim::tool::run_command(
      {"syssim-report", "Render the report of a simulated graph as text or JSON, or draw its timeline"}, argc, argv,
      [&](CLI::App& app) {
        app.add_option("-i,--input", input, "Input graph file (default: standard input)");
        app.add_option("--format", format,
                       "Report format: text, json, chrome-trace, svg or critical-path (the last three need "
                       "syssim-sim --timeline; default: text)")
            ->check(CLI::IsMember({"text", "json", "chrome-trace", "svg", "critical-path"}));
        syssim::tool::add_report_flags(app, options);
      },
      [&](const syssim::tool::Tool&) {
        std::string report;
        syssim::tool::with_graph(input, [&](syssim::Graph& graph) { report = syssim::render_report(graph, format, options); });
        return report;
      });
}
