// Cache entries: the entry envelope (sizes, key, checksum) on any bytes, and the trace entry's
// binary form behind it, as cache_get would hand it on. The seeds are real entries (.ci/fuzz),
// so the value is also taken from behind an envelope whose checksum the mutations broke.
#include "common/cache.hpp"
#include "fuzz.hpp"
#include "trace/section.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes = syssim::fuzz::text_of(data, size);
  (void)syssim::decode_cache_entry(bytes, "syssim trace of tiny");
  const std::optional<syssim::CacheEntry> entry = syssim::split_cache_entry(bytes);
  const std::string value = entry ? std::string(entry->value) : bytes;
  return syssim::fuzz::accept_errors([&] { (void)syssim::trace_from_binary(value, "fuzz"); });
}
