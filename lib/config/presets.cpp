#include "config/presets.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "common/error.hpp"
#include "common/install.hpp"

namespace syssim {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPresetSuffix = ".yaml";
constexpr size_t kDescriptionLimit = 100;  // characters of a description, the rest elided

const char* kind_name(PresetKind kind) { return kind == PresetKind::kHardware ? "hardware" : "model"; }

// The first sentence of the comment block the file starts with.
std::string description_of(const fs::path& file) {
  std::ifstream in(file);
  std::string line, text;
  while (std::getline(in, line) && line.rfind('#', 0) == 0) {
    size_t start = line.find_first_not_of("# ");
    if (start == std::string::npos) break;
    text += (text.empty() ? "" : " ") + line.substr(start);
    size_t end = text.find(". ");
    if (end != std::string::npos) return text.substr(0, end + 1);
    if (text.back() == '.' || text.size() > kDescriptionLimit) break;
  }
  if (text.size() > kDescriptionLimit) text = text.substr(0, kDescriptionLimit - 3) + "...";
  return text;
}

}  // namespace

std::string preset_dir(PresetKind kind) {
  return (fs::path(data_dir()) / (kind == PresetKind::kHardware ? "hardware" : "models")).string();
}

std::string preset_file(PresetKind kind, const std::string& name_or_path) {
  // An existing file, or a path with a folder in it, is taken as given. A bare name is a preset
  // where one of that name exists (names may hold dots: llama3.1-405b); otherwise a name with a
  // file extension is a path, whose loader says that it cannot be opened.
  const fs::path given(name_or_path);
  std::error_code error;
  if (name_or_path.empty())  // read as standard input further down, which no caller means
    throw DataError(std::string("expected a ") + kind_name(kind) + " preset or file, got ''");
  if (given.has_parent_path() || fs::exists(given, error)) return name_or_path;
  const fs::path preset = fs::path(preset_dir(kind)) / (name_or_path + kPresetSuffix);
  if (fs::is_regular_file(preset, error)) return preset.string();
  if (given.has_extension()) return name_or_path;
  throw DataError(name_or_path + ": no such file, and no " + kind_name(kind) + " preset " + preset.string() +
                  " (`syssim presets` lists them)");
}

std::vector<Preset> list_presets(PresetKind kind) {
  std::vector<Preset> presets;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(preset_dir(kind), error)) {
    const fs::path& path = entry.path();
    if (path.extension() != kPresetSuffix || !entry.is_regular_file(error)) continue;
    presets.push_back(Preset{path.stem().string(), description_of(path)});
  }
  if (error) throw DataError(preset_dir(kind) + ": cannot list the " + kind_name(kind) + " presets: " + error.message());
  std::sort(presets.begin(), presets.end(), [](const Preset& a, const Preset& b) { return a.name < b.name; });
  return presets;
}

std::string render_presets() {
  std::ostringstream out;
  out << "data folder: " << data_dir() << "\n";
  for (PresetKind kind : {PresetKind::kHardware, PresetKind::kModel}) {
    const std::vector<Preset> presets = list_presets(kind);
    size_t width = 0;
    for (const Preset& preset : presets) width = std::max(width, preset.name.size());
    out << "\n" << kind_name(kind) << " presets (" << preset_dir(kind) << "):\n";
    for (const Preset& preset : presets)
      out << "  " << std::left << std::setw(static_cast<int>(width)) << preset.name << "  " << preset.description << "\n";
  }
  return out.str();
}

}  // namespace syssim
