// `syssim presets`: the hardware and model presets, by name (docs/configs.md).
#include "common/io.hpp"
#include "config/presets.hpp"
#include "subcommands.hpp"

namespace syssim::tool {

Subcommand add_presets(CLI::App& app) {
  return {app.add_subcommand("presets", "List the hardware and model presets, by name"),
          [] { write_output("-", render_presets()); }};
}

}  // namespace syssim::tool
