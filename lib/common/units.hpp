// Unit conversions, defined once for every stage. Gigabytes are decimal (1e9 bytes), as
// datasheets and the reports give them.
#pragma once

namespace syssim {

inline constexpr double kBytesPerGB = 1e9;
inline constexpr double kBytesPerGiB = 1073741824;  // 2^30: what PyTorch's memory stats print as GiB
inline constexpr double kParamsPerBillion = 1e9;
inline constexpr double kFlopsPerTflop = 1e12;
inline constexpr double kMsPerS = 1e3;
inline constexpr double kUsPerMs = 1e3;
inline constexpr double kUsPerS = 1e6;
inline constexpr double kMsPerUs = 1e-3;
inline constexpr double kBytesPerUsPerGBps = 1e3;  // 1 GB/s = 1e9 bytes / 1e6 us
inline constexpr double kFp32Bytes = 4;             // one fp32 value

}  // namespace syssim
