// Number formatting shared by the report and its pictures.
#pragma once
#include <string>

namespace syssim {

// `value` with `decimals` digits after the point ("%.*f").
std::string fixed(double value, int decimals);

}  // namespace syssim
