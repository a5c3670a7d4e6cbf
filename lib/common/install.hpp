// Where syssim finds what it ships: the data folder (hardware and model presets, calibration
// bundles, Hugging Face configs) and the trace module, both relative to the running program,
// so that a build tree, an installed prefix and a moved prefix all work (docs/configs.md,
// "Presets and the data folder").
#pragma once
#include <string>

namespace syssim {

// $SYSSIM_DATA_DIR when set, else <prefix>/share/syssim, the prefix being the program's
// folder's parent (the build tree links build/share/syssim to the source tree's configs/).
std::string data_dir();

// The folder of the trace module: <prefix>/lib/syssim.
std::string module_dir();

// The prefix for a process whose program is not syssim's (the Python module, loaded into the
// interpreter, finds it from its own file).
void set_install_prefix(const std::string& prefix);

}  // namespace syssim
