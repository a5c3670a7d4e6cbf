#include "common/install.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>

#include "common/error.hpp"

namespace syssim {
namespace {

// The folder of the running executable, from /proc/self/exe: symlinks to the program (a
// PATH entry) resolve to where it is installed.
std::filesystem::path program_dir() {
  char exe[PATH_MAX];
  ssize_t size = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (size <= 0) throw DataError("/proc/self/exe: cannot read the running program's path; set SYSSIM_DATA_DIR");
  return std::filesystem::path(std::string(exe, static_cast<size_t>(size))).parent_path();
}

}  // namespace

std::string data_dir() {
  if (const char* dir = std::getenv("SYSSIM_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  return (program_dir() / ".." / "share" / "syssim").lexically_normal().string();
}

std::string module_dir() { return (program_dir() / ".." / "lib" / "syssim").lexically_normal().string(); }

}  // namespace syssim
