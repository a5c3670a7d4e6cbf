#include "common/cache.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.hpp"
#include "common/io.hpp"

namespace syssim {
namespace {

std::string entry_path(const std::string& dir, const std::string& kind, const std::string& key) {
  return dir + "/" + kind + "/" + content_hash(key);
}

}  // namespace

std::string cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "";
  };
  std::string dir = env("SYSSIM_CACHE_DIR");
  if (dir == "off") return "";
  if (!dir.empty()) return dir;
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/syssim";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/syssim";
  return "";
}

std::string content_hash(const std::string& text) {
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis and prime
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// An entry is the key's length, a newline, the key, then the value.
std::optional<std::string> cache_get(const std::string& kind, const std::string& key) {
  std::string dir = cache_dir();
  if (dir.empty()) return std::nullopt;
  const std::string path = entry_path(dir, kind, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  size_t key_size = 0;
  if (!(in >> key_size) || in.get() != '\n') return std::nullopt;
  std::string stored_key(key_size, '\0');
  if (!in.read(stored_key.data(), static_cast<std::streamsize>(key_size)) || stored_key != key) return std::nullopt;
  try {
    return read_rest(in, path);
  } catch (const DataError&) {
    return std::nullopt;  // unreadable: a miss
  }
}

void cache_put(const std::string& kind, const std::string& key, const std::string& value) {
  std::string dir = cache_dir();
  if (dir.empty()) return;
  std::error_code error;
  std::filesystem::create_directories(dir + "/" + kind, error);
  if (error) return;
  std::string path = entry_path(dir, kind, key);
  // Unique per process and thread: sweeps store points from several threads at once.
  std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << key.size() << '\n' << key << value;
    if (!out.flush()) {
      std::remove(temp.c_str());
      return;
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) std::remove(temp.c_str());
}

}  // namespace syssim
