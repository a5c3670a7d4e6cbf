// The measured-run table's CSV reader (quoted fields, newlines in notes, duplicated columns).
#include "common/csv.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return syssim::fuzz::accept_errors([&] { (void)syssim::parse_csv(syssim::fuzz::text_of(data, size), "fuzz.csv"); });
}
