// --emit-jobs: a sweep as independent single-point commands for GNU parallel, make or a cluster.
#include <filesystem>

#include "common/error.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

// The flags an emitted job sets itself; each takes a value.
const char* const kReplacedFlags[] = {"--over", "--emit-jobs", "--format", "-o", "--output", "--top", "--metric", "--plot"};

bool replaced_flag(const std::string& arg, bool& value_follows) {
  for (const std::string flag : kReplacedFlags) {
    if (arg == flag) return value_follows = true;
    if (arg.rfind(flag + "=", 0) == 0 || (flag == "-o" && arg.rfind("-o", 0) == 0 && arg.size() > 2)) {
      value_follows = false;
      return true;
    }
  }
  return false;
}

std::string shell_quoted(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=,:+-@%") ==
                          std::string::npos)
    return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string emit_sweep_jobs(const std::vector<std::string>& command_line, const std::vector<SweepAxis>& axes,
                            const std::string& dir) {
  if (axes.empty()) throw UsageError("--emit-jobs needs at least one --over");
  std::string kept;
  for (size_t i = 0; i < command_line.size(); ++i) {
    bool value_follows = false;
    if (replaced_flag(command_line[i], value_follows)) {
      i += value_follows ? 1 : 0;
      continue;
    }
    kept += (kept.empty() ? "" : " ") + shell_quoted(command_line[i]);
  }
  std::error_code error;
  // Results of an earlier sweep left there would join this one's in a --merge of DIR/point-*.json.
  if (std::filesystem::exists(dir, error) && !std::filesystem::is_empty(dir, error))
    throw UsageError("--emit-jobs " + dir + ": the folder exists and is not empty (give a new or an empty one)");
  std::filesystem::create_directories(dir, error);
  if (error) throw DataError(dir + ": cannot create the folder of the jobs' results (" + error.message() + ")");
  const std::vector<std::vector<std::string>> points = cartesian_product(axes);
  const size_t digits = std::max<size_t>(4, std::to_string(points.size() - 1).size());
  std::string jobs;
  for (size_t p = 0; p < points.size(); ++p) {
    std::string job = kept;
    for (size_t a = 0; a < axes.size(); ++a) job += " --over " + shell_quoted(axes[a].path + "=" + points[p][a]);
    std::string number = std::to_string(p);
    number.insert(0, digits - number.size(), '0');
    jobs += job + " --format json -o " + shell_quoted(dir + "/point-" + number + ".json") + "\n";
  }
  return jobs;
}

}  // namespace syssim
