#include "common/install.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "common/error.hpp"

namespace syssim {
namespace {

std::mutex prefix_mutex;
std::filesystem::path prefix_given;  // set_install_prefix's, empty: none

// The given prefix, else the running executable's folder's parent, from /proc/self/exe
// (symlinks to the program, a PATH entry, resolve to where it is installed).
std::filesystem::path install_prefix() {
  {
    std::lock_guard<std::mutex> lock(prefix_mutex);
    if (!prefix_given.empty()) return prefix_given;
  }
  char exe[PATH_MAX];
  ssize_t size = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (size <= 0) throw DataError("/proc/self/exe: cannot read the running program's path; set SYSSIM_DATA_DIR");
  return std::filesystem::path(std::string(exe, static_cast<size_t>(size))).parent_path() / "..";
}

}  // namespace

std::string data_dir() {
  if (const char* dir = std::getenv("SYSSIM_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  return (install_prefix() / "share" / "syssim").lexically_normal().string();
}

std::string module_dir() { return (install_prefix() / "lib" / "syssim").lexically_normal().string(); }

void set_install_prefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(prefix_mutex);
  prefix_given = prefix;
}

}  // namespace syssim
