// Cache entries: the entry envelope (sizes, key, checksum) on any bytes, and the trace entry's
// binary form behind it, as cache_get would hand it on. The seeds are real entries (.ci/fuzz),
// so the value is also taken from behind an envelope whose checksum the mutations broke.
#include <cstdlib>

#include "common/cache.hpp"
#include "fuzz.hpp"
#include "trace/section.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes = syssim::fuzz::text_of(data, size);
  (void)syssim::decode_cache_entry(bytes, "syssim trace of tiny");
  std::string value = bytes;
  const size_t header_end = bytes.find('\n');
  if (bytes.rfind("syssim-cache 2 ", 0) == 0 && header_end != std::string::npos) {
    const size_t key_size = std::strtoull(bytes.c_str() + 15, nullptr, 10);
    if (key_size < bytes.size() - header_end) value = bytes.substr(header_end + 1 + key_size);
  }
  return syssim::fuzz::accept_errors([&] { (void)syssim::trace_from_binary(value, "fuzz"); });
}
