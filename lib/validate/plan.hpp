// The cells of a measured row (validate.hpp's MeasuredRow) as the row's plan (plan.cpp) and its
// result (validate.cpp) read them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "validate/validate.hpp"

namespace syssim {

std::string cell(const MeasuredRow& row, const std::string& column);  // "" when the row has no such column
// The cell read whole as an integer or a number; nothing when empty, DataError naming the
// column and the text otherwise.
std::optional<int64_t> int_cell(const MeasuredRow& row, const std::string& column);
std::optional<double> number_cell(const MeasuredRow& row, const std::string& column);
// A column of free text that is off where it says so ("0", "no", "false", "off", "none") and
// on otherwise ("ZeRO-1 (DeepSpeed ...)" is on).
std::optional<bool> flag_cell(const MeasuredRow& row, const std::string& column);
// A 1/0 column (also true/false, yes/no, on/off, any case); DataError naming the column and the
// text otherwise, so that a typo is a skipped row, not a flipped setting.
std::optional<bool> switch_cell(const MeasuredRow& row, const std::string& column);
// The YAML of a preset name of hardware_dir, or a YAML path as given.
std::string preset_path(const std::string& chosen, const std::string& hardware_dir);

}  // namespace syssim
