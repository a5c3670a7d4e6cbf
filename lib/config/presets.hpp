// Presets by name: the hardware and model YAML files of the data folder (common/install.hpp),
// wherever a file is accepted (docs/configs.md, "Presets and the data folder").
#pragma once
#include <string>
#include <vector>

namespace syssim {

enum class PresetKind { kHardware, kModel };

// The file that `name_or_path` names: itself when it exists or reads as a path (a folder in it
// or a file extension), else the preset of that name (data folder/hardware/NAME.yaml, data
// folder/models/NAME.yaml). DataError naming both places when neither exists, and for an empty
// name (which would read standard input).
std::string preset_file(PresetKind kind, const std::string& name_or_path);

// The folder of a kind's presets in the data folder.
std::string preset_dir(PresetKind kind);

struct Preset {
  std::string name;         // what --hardware or a model argument takes
  std::string description;  // the first sentence of the file's leading comment
};

// The presets of a kind, by name.
std::vector<Preset> list_presets(PresetKind kind);

// `syssim presets`: both kinds, one line each (name and description), and the data folder.
std::string render_presets();

}  // namespace syssim
