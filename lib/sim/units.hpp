// Units the simulator's files share (internal to lib/sim).
#pragma once

namespace syssim::sim_units {

constexpr double kMsPerUs = 1e-3;
constexpr double kBytesPerUsPerGBps = 1e3;  // 1 GB/s = 1e9 bytes / 1e6 us

}  // namespace syssim::sim_units
