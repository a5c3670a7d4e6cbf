// The on-disk cache of results that depend only on their inputs (docs/performance.md):
// traces by architecture, sweep points by job. Entries are files named by a hash of the
// key, holding the key itself so a hash collision reads as a miss, never as a wrong hit.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace syssim {

// The cache folder: $SYSSIM_CACHE_DIR, else $XDG_CACHE_HOME/syssim, else $HOME/.cache/syssim.
// Empty when SYSSIM_CACHE_DIR is "off" (or none of the variables is set): caching disabled.
std::string cache_dir();

// 64-bit FNV-1a of `text`, as 16 hex digits.
std::string content_hash(const std::string& text);
// The entries' checksum of `text` (read eight bytes at a time), as 16 hex digits: for keys
// that name a large text by its content.
std::string content_checksum(std::string_view text);

// The build of syssim that runs: the size and modification time of the file holding its code
// (the executable, or the Python module), as ccache identifies a compiler. A key that holds it
// is never read by another build, whose results may differ although its version does not.
const std::string& build_identity();

// The value stored under `kind` (a subfolder: "trace", "point") and `key`, if any. Keys and
// values are versioned by the caller (put kSyssimVersion and build_identity() in the key). An entry that is not a
// regular file, or whose sizes or checksum disagree with its bytes, is a miss.
std::optional<std::string> cache_get(const std::string& kind, const std::string& key);

// An entry's bytes taken apart by its header's sizes: its key and value, and whether its
// checksum matches them. Nothing when the header or the sizes do not fit the bytes.
struct CacheEntry {
  std::string_view key;
  std::string_view value;
  bool intact;
};
std::optional<CacheEntry> split_cache_entry(std::string_view bytes);

// The value of an entry's bytes (the file as cache_put writes it) for `key`, or nothing when
// the bytes are not a whole, undamaged entry of that key. cache_get's reading of a file's bytes.
std::optional<std::string> decode_cache_entry(std::string_view bytes, std::string_view key);

// Stores the value atomically; a cache that cannot be written is skipped silently, because
// caching only saves time.
void cache_put(const std::string& kind, const std::string& key, const std::string& value);

}  // namespace syssim
