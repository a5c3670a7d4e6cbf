// The measured-run table: its CSV reader (quoted fields, newlines in notes, duplicated columns,
// UTF-8), then the plan of its first rows as syssim validate makes it (model, hardware preset,
// layout and measured step time from the cells; validate/plan.cpp), without simulating them.
#include "common/csv.hpp"
#include "fuzz.hpp"
#include "validate/validate.hpp"

namespace {

constexpr size_t kRowsPlanned = 8;  // each plan may read preset files: enough rows to mix cells

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string hardware_dir = std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware";
  return syssim::fuzz::accept_errors([&] {
    const syssim::CsvTable table = syssim::parse_csv(syssim::fuzz::text_of(data, size), "fuzz.csv");
    for (size_t r = 0; r < table.records.size() && r < kRowsPlanned; ++r) {
      syssim::MeasuredRow row;
      for (size_t c = 0; c < table.header.size() && c < table.records[r].size(); ++c)
        row[table.header[c]] = table.records[r][c];
      (void)syssim::plan_row(row, hardware_dir);
    }
  });
}
