#include "common/csv.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/io.hpp"

namespace syssim {

std::optional<std::pair<size_t, size_t>> repeated_column(const std::vector<std::string>& header) {
  for (size_t c = 0; c < header.size(); ++c)
    for (size_t d = 0; d < c; ++d)
      if (header[c] == header[d]) return std::pair{d, c};
  return std::nullopt;
}

CsvTable parse_csv(const std::string& text, const std::string& source) {
  require_utf8(text, source);
  std::vector<std::vector<std::string>> records;
  std::vector<int64_t> starts;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, field_started = false;
  int64_t line = 1, quote_line = 0;
  // A UTF-8 byte-order mark (spreadsheets write one) is not part of the first column's name.
  const size_t begin = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  auto end_record = [&] {
    record.push_back(field);
    bool blank = record.size() == 1 && record[0].empty() && !field_started;
    if (!blank) records.push_back(record);
    else starts.pop_back();
    record.clear();
    field.clear();
    field_started = false;
  };
  starts.push_back(line);
  for (size_t i = begin; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == '"' && field.empty()) {
      quoted = field_started = true;
      quote_line = line;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
      field_started = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_record();
      starts.push_back(++line);
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) throw DataError(source + ":" + std::to_string(quote_line) + ": quoted field is not closed");
  end_record();
  if (records.empty()) throw DataError(source + ": no header line");
  CsvTable table;
  table.header = records.front();
  if (const auto repeat = repeated_column(table.header))
    throw DataError(source + ":1: column '" + table.header[repeat->first] + "' appears twice (fields " +
                    std::to_string(repeat->first + 1) + " and " + std::to_string(repeat->second + 1) + ")");
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.header.size())
      throw DataError(source + ":" + std::to_string(starts[r]) + ": " + std::to_string(records[r].size()) +
                      " fields, the header has " + std::to_string(table.header.size()));
    table.records.push_back(records[r]);
    table.record_lines.push_back(starts[r]);
  }
  return table;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) throw DataError("percentile of no values");
  std::sort(values.begin(), values.end());
  double position = q * static_cast<double>(values.size() - 1);
  size_t below = static_cast<size_t>(std::floor(position));
  size_t above = std::min(below + 1, values.size() - 1);
  double fraction = position - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace syssim
