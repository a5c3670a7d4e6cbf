// CSV tables (the measured runs of syssim validate, the kernel timings of syssim calibrate)
// and the percentiles their summaries report.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace syssim {

// RFC 4180 CSV: quoted fields may hold commas, newlines and doubled quotes. The first record
// is the header; every record must have as many fields. Throws DataError naming source:line.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> records;
  std::vector<int64_t> record_lines;  // line where each record starts
};
CsvTable parse_csv(const std::string& text, const std::string& source);

// The first name `header` holds twice: the fields (from 0) of its first and second place.
std::optional<std::pair<size_t, size_t>> repeated_column(const std::vector<std::string>& header);

// One field as RFC 4180 writes it: quoted, quotes doubled, when it holds a comma, quote or newline.
std::string csv_field(const std::string& text);

// Linear interpolation between closest ranks (position q*(n-1) of the sorted values).
double percentile(std::vector<double> values, double q);

}  // namespace syssim
