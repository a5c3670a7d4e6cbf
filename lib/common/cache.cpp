#include "common/cache.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>

namespace syssim {
namespace {

// An entry is a header line, then the key, then the value:
//   syssim-cache 2 <key bytes> <value bytes> <checksum of key and value, 16 hex digits>\n
// Anything else (another layout, a size that disagrees with the file, a damaged byte) is a
// miss: entries are only ever a saving, and a damaged one must not reach a reader that
// trusts it (XGBoost's binary loader crashes on flipped bytes).
constexpr std::string_view kEntryMagic = "syssim-cache 2 ";
constexpr size_t kMaxHeaderBytes = 96;
// Larger entries are not the cache's: the biggest trace is a few MB.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

std::string entry_path(const std::string& dir, const std::string& kind, const std::string& key) {
  return dir + "/" + kind + "/" + content_hash(key);
}

// A 64-bit checksum read eight bytes at a time: fast enough for multi-MB trace entries, and
// any flipped bit changes it.
uint64_t checksum(std::string_view key, std::string_view value) {
  uint64_t hash = 0x9E3779B97F4A7C15ULL ^ (key.size() * 0xFF51AFD7ED558CCDULL);
  auto mix = [&hash](uint64_t word) {
    hash = (hash ^ word) * 0xC4CEB9FE1A85EC53ULL;
    hash ^= hash >> 29;
  };
  for (std::string_view part : {key, value}) {
    size_t i = 0;
    for (; i + 8 <= part.size(); i += 8) {
      uint64_t word;
      std::memcpy(&word, part.data() + i, 8);
      mix(word);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, part.data() + i, part.size() - i);
    mix(tail ^ (uint64_t{part.size() - i} << 59));
  }
  return hash;
}

std::string hex16(uint64_t value) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

std::string header(std::string_view key, std::string_view value) {
  return std::string(kEntryMagic) + std::to_string(key.size()) + " " + std::to_string(value.size()) + " " +
         hex16(checksum(key, value)) + "\n";
}

// A file descriptor closed on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The whole regular file at `path`, or nothing: a FIFO, a device or a folder in the cache is
// never opened for reading (a FIFO would block), and nothing larger than an entry is read.
std::optional<std::string> read_entry_file(const std::string& path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) return std::nullopt;
  struct stat status {};
  if (::fstat(file.fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size < 0 ||
      static_cast<uint64_t>(status.st_size) > kMaxEntryBytes)
    return std::nullopt;
  std::string bytes(static_cast<size_t>(status.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(file.fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;  // shrank while being read: a miss
    done += static_cast<size_t>(got);
  }
  return bytes;
}

// A decimal field of the header and the space or newline after it; nothing else parses.
bool read_size(std::string_view& text, char end, uint64_t& size) {
  auto [next, error] = std::from_chars(text.data(), text.data() + text.size(), size);
  if (error != std::errc() || next == text.data() || next == text.data() + text.size() || *next != end) return false;
  text.remove_prefix(static_cast<size_t>(next - text.data()) + 1);
  return true;
}

}  // namespace

const std::string& build_identity() {
  static const std::string identity = [] {
    // The shared object holding this function; the main executable's entry has no name.
    Dl_info info{};
    const bool named = dladdr(reinterpret_cast<void*>(&build_identity), &info) != 0 && info.dli_fname &&
                       info.dli_fname[0] != '\0';
    struct stat file {};
    if (stat(named ? info.dli_fname : "/proc/self/exe", &file) != 0) return std::string("unknown build");
    return std::to_string(file.st_size) + " bytes, modified " + std::to_string(file.st_mtim.tv_sec) + "." +
           std::to_string(file.st_mtim.tv_nsec);
  }();
  return identity;
}

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
  return hex16(hash);
}

std::string content_checksum(std::string_view text) { return hex16(checksum({}, text)); }

std::optional<CacheEntry> split_cache_entry(std::string_view bytes) {
  const size_t header_end = bytes.substr(0, kMaxHeaderBytes).find('\n');
  if (header_end == std::string_view::npos || bytes.substr(0, kEntryMagic.size()) != kEntryMagic) return std::nullopt;
  std::string_view fields = bytes.substr(kEntryMagic.size(), header_end + 1 - kEntryMagic.size());
  uint64_t key_size = 0, value_size = 0;
  if (!read_size(fields, ' ', key_size) || !read_size(fields, ' ', value_size)) return std::nullopt;
  const size_t body = header_end + 1;
  if (key_size > kMaxEntryBytes || value_size > kMaxEntryBytes || bytes.size() - body != key_size + value_size)
    return std::nullopt;
  CacheEntry entry{bytes.substr(body, key_size), bytes.substr(body + key_size), false};
  entry.intact = std::string_view(header(entry.key, entry.value)) == bytes.substr(0, body);
  return entry;
}

std::optional<std::string> decode_cache_entry(std::string_view bytes, std::string_view key) {
  std::optional<CacheEntry> entry = split_cache_entry(bytes);
  if (!entry || !entry->intact || entry->key != key) return std::nullopt;
  return std::string(entry->value);
}

std::optional<std::string> cache_get(const std::string& kind, const std::string& key) {
  std::string dir = cache_dir();
  if (dir.empty()) return std::nullopt;
  std::optional<std::string> bytes = read_entry_file(entry_path(dir, kind, key));
  if (!bytes) return std::nullopt;
  return decode_cache_entry(*bytes, key);
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
    out << header(key, value) << key << value;
    if (!out.flush()) {
      std::remove(temp.c_str());
      return;
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) std::remove(temp.c_str());
}

}  // namespace syssim
