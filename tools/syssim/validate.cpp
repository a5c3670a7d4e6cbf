// `syssim validate`: predictions against a table of measured runs (docs/validation.md).
#include <iostream>
#include <memory>

#include "common/error.hpp"
#include "common/io.hpp"
#include "subcommands.hpp"
#include "validate/validate.hpp"

namespace syssim::tool {

Subcommand add_validate(CLI::App& app) {
  auto request = std::make_shared<ValidateRequest>();
  CLI::App* validate = app.add_subcommand("validate", "Compare predictions with a table of measured runs");
  validate->add_option("measured", request->measured, "CSV of measured runs (docs/validation.md)")->required();
  validate->add_option("--format", request->format, "Output format")->check(CLI::IsMember({"table", "csv", "json"}));
  validate->add_option("--hardware-dir", request->options.hardware_dir, "Folder of the hardware presets");
  validate->add_option("--hardware-map", request->hardware_map,
                       "GPU=PRESET_OR_YAML: the hardware of rows with that gpu cell (repeatable)");
  validate->add_option("-o,--output", request->output, "Output file, written atomically (default: standard output)");
  validate->add_option("--bands-out", request->bands_out,
                       "Also write the step-time bands fitted on the rows, as the report reads them (docs/validation.md)");
  return {validate, [request] {
            check_outputs({{"-o", request->output}, {"--bands-out", request->bands_out}},
                                 {{"measured table", request->measured}});
            const ValidateRun run = validate_command(*request);
            for (const std::string& warning : run.warnings) std::cerr << "syssim: warning: " << warning << "\n";
            write_outputs(run.outputs);
            if (run.failure) throw DataError(*run.failure);
          }};
}

}  // namespace syssim::tool
