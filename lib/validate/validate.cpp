#include "validate/validate.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "driver/driver.hpp"

#ifndef SYSSIM_HARDWARE_DIR
#error "SYSSIM_HARDWARE_DIR must name the folder of the hardware presets"
#endif

namespace syssim {
namespace {

// Columns of ../shared/validation/README.md, then the optional ones this tool honours.
const std::vector<std::string> kKnownColumns = {
    "source_id", "model", "params_b", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab",
    "seq_length", "gpu", "num_gpus", "tp", "pp", "vpp", "cp", "ep", "dp", "sp", "micro_batch",
    "global_batch", "dtype", "recompute", "distributed_optimizer", "measured_step_s",
    "measured_tokens_per_s_per_gpu", "measured_tflops_per_gpu", "measured_mfu", "measured_peak_mem_gb",
    "notes", "attention_backend", "measured_oom", "overlap_grad_reduce", "overlap_param_gather", "hardware"};
const std::vector<std::string> kRequiredColumns = {"source_id", "model", "layers", "hidden", "heads",
                                                   "seq_length", "gpu", "num_gpus", "tp", "pp",
                                                   "micro_batch", "global_batch", "dtype", "measured_step_s"};

constexpr int64_t kGpt2BpeVocab = 50257;  // GPT-2 BPE, which NeMo's GPT3 configs use
constexpr double kPercent = 100.0;
constexpr double kMsPerS = 1000.0;

// A row that cannot be simulated; the message is the reason shown for it.
struct Unsupported {
  std::string reason;
};

std::string cell(const MeasuredRow& row, const std::string& column) {
  auto found = row.find(column);
  return found == row.end() ? "" : found->second;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The cell parsed whole by `parse` (std::stoll, std::stod), or nothing when it is empty.
template <typename T, typename Parse>
std::optional<T> parsed_cell(const MeasuredRow& row, const std::string& column, const char* expected, Parse parse) {
  std::string text = cell(row, column);
  if (text.empty()) return std::nullopt;
  size_t used = 0;
  T value = 0;
  try {
    value = parse(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size())
    throw DataError("column '" + column + "': expected " + expected + ", got '" + text + "'");
  return value;
}

std::optional<int64_t> int_cell(const MeasuredRow& row, const std::string& column) {
  return parsed_cell<int64_t>(row, column, "an integer",
                              [](const std::string& text, size_t* used) { return std::stoll(text, used); });
}

std::optional<double> number_cell(const MeasuredRow& row, const std::string& column) {
  return parsed_cell<double>(row, column, "a number",
                             [](const std::string& text, size_t* used) { return std::stod(text, used); });
}

int64_t required_int(const MeasuredRow& row, const std::string& column) {
  std::optional<int64_t> value = int_cell(row, column);
  if (!value) throw Unsupported{"column '" + column + "' is empty"};
  return *value;
}

// 1/0 flag columns; the first word of free text otherwise ("ZeRO-1 (DeepSpeed ...)" is on).
std::optional<bool> flag_cell(const MeasuredRow& row, const std::string& column) {
  std::string text = cell(row, column);
  if (text.empty()) return std::nullopt;
  for (const char* off : {"0", "no", "false", "off", "none"})
    if (text == off) return false;
  return true;
}

std::string hardware_preset(const MeasuredRow& row, const std::string& hardware_dir) {
  std::string chosen = cell(row, "hardware");
  if (!chosen.empty()) {
    bool is_path = chosen.find('/') != std::string::npos ||
                   (chosen.size() > 5 && chosen.substr(chosen.size() - 5) == ".yaml");
    return is_path ? chosen : hardware_dir + "/" + chosen + ".yaml";
  }
  std::string gpu = cell(row, "gpu");
  if (gpu == "H100-80GB") return hardware_dir + "/h100-sxm-80gb.yaml";
  if (gpu == "A100-80GB") return hardware_dir + "/a100-sxm-80gb.yaml";
  throw Unsupported{"no hardware preset for gpu '" + gpu + "'"};
}

// Architecture from the model's name: Llama* is Llama (RMSNorm, SwiGLU, RoPE, untied, no
// biases); GPT*, Nemotron-3 and BLOOM are Megatron's GPT (LayerNorm, GELU, biases, learned
// positions, tied embeddings). BLOOM's ALiBi is taken as learned positions (same GEMMs).
ModelConfig architecture(const MeasuredRow& row, std::vector<std::string>& assumptions) {
  std::string name = cell(row, "model");
  ModelConfig model;
  model.name = name;
  bool llama = starts_with(name, "Llama");
  bool gpt = starts_with(name, "GPT") || starts_with(name, "Nemotron3") || starts_with(name, "Nemotron-3") ||
             starts_with(name, "BLOOM");
  if (starts_with(name, "Nemotron4") || starts_with(name, "Nemotron-4"))
    throw Unsupported{"squared-ReLU MLP (Nemotron-4) not simulated yet"};
  if (!llama && !gpt) throw Unsupported{"no architecture known for model '" + name + "'"};
  model.num_layers = required_int(row, "layers");
  model.hidden_size = required_int(row, "hidden");
  model.num_attention_heads = required_int(row, "heads");
  model.num_query_groups = int_cell(row, "kv_heads").value_or(model.num_attention_heads);
  model.kv_channels = model.num_attention_heads > 0 ? model.hidden_size / model.num_attention_heads : 0;
  model.seq_length = required_int(row, "seq_length");
  model.max_position_embeddings = model.seq_length;
  if (std::string backend = cell(row, "attention_backend"); !backend.empty()) model.attention_backend = backend;
  if (llama) {
    model.ffn_hidden_size = required_int(row, "ffn_hidden");
    model.vocab_size = required_int(row, "vocab");
    model.rms_norm_eps = 1e-5;
    return model;
  }
  model.swiglu = false;
  model.rope = false;
  model.normalization = "LayerNorm";
  model.rms_norm_eps = 1e-5;
  model.add_bias_linear = true;
  model.tie_word_embeddings = true;
  model.hidden_dropout = 0.1;  // Megatron-LM's GPT default, as configs/models/gpt3-*.yaml
  model.attention_dropout = 0.1;
  model.ffn_hidden_size = int_cell(row, "ffn_hidden").value_or(4 * model.hidden_size);
  if (cell(row, "ffn_hidden").empty()) assumptions.push_back("ffn_hidden=4*hidden");
  std::optional<int64_t> vocab = int_cell(row, "vocab");
  model.vocab_size = vocab.value_or(kGpt2BpeVocab);
  if (!vocab) assumptions.push_back("vocab=50257 (GPT-2 BPE, padded)");
  return model;
}

TrainingConfig training(const MeasuredRow& row, int64_t dp, std::vector<std::string>& assumptions) {
  TrainingConfig t;
  t.micro_batch = required_int(row, "micro_batch");
  t.global_batch = required_int(row, "global_batch");
  t.seq_length = required_int(row, "seq_length");
  std::string dtype = cell(row, "dtype");
  if (dtype == "fp8") throw Unsupported{"fp8 not simulated yet"};
  if (dtype == "bf16" || dtype == "fp16") {
    t.dtype = dtype;
  } else if (starts_with(dtype, "fp16/bf16")) {
    t.dtype = "bf16";
    assumptions.push_back("dtype=bf16");
  } else {
    throw Unsupported{"dtype '" + dtype + "' not recognised"};
  }
  std::string recompute = cell(row, "recompute");
  std::string method = recompute.substr(0, recompute.find(' '));
  if (method.empty()) method = "none";
  if (method != "none" && method != "full" && method != "selective")
    throw Unsupported{"recompute '" + recompute + "' not recognised"};
  t.recompute = method;
  std::optional<bool> distributed = flag_cell(row, "distributed_optimizer");
  t.distributed_optimizer = distributed.value_or(true);
  if (!distributed) assumptions.push_back("distributed_optimizer=1");
  // Megatron recipes overlap the gradient reduction, and the parameter all-gather with the
  // distributed optimizer; there is nothing to overlap without data parallelism.
  t.overlap_grad_reduce = flag_cell(row, "overlap_grad_reduce").value_or(dp > 1);
  t.overlap_param_gather =
      flag_cell(row, "overlap_param_gather").value_or(t.overlap_grad_reduce && t.distributed_optimizer);
  return t;
}

ShardOptions layout(const MeasuredRow& row, std::vector<std::string>& assumptions) {
  ShardOptions options;
  ParallelismConfig& p = options.parallelism;
  int64_t gpus = required_int(row, "num_gpus");
  p.tp = int_cell(row, "tp").value_or(1);
  p.pp = int_cell(row, "pp").value_or(1);
  p.cp = int_cell(row, "cp").value_or(1);
  p.vpp = int_cell(row, "vpp");
  int64_t model_parallel = p.tp * p.pp * p.cp;
  p.dp = int_cell(row, "dp").value_or(model_parallel > 0 ? gpus / model_parallel : 0);
  std::optional<bool> sp = flag_cell(row, "sp");
  p.sp = sp.value_or(p.tp > 1);  // NVIDIA recipes enable SP whenever tp > 1
  if (!sp && p.sp) assumptions.push_back("sp=1");
  options.gpus = gpus;
  options.training = training(row, p.dp, assumptions);
  return options;
}

std::string layout_text(const ShardOptions& o) {
  const ParallelismConfig& p = o.parallelism;
  std::string text = "tp" + std::to_string(p.tp) + (p.sp ? "+sp" : "") + " pp" + std::to_string(p.pp);
  if (p.vpp) text += " vpp" + std::to_string(*p.vpp);
  if (p.cp > 1) text += " cp" + std::to_string(p.cp);
  text += " dp" + std::to_string(p.dp) + " mbs" + std::to_string(o.training.micro_batch) + " gbs" +
          std::to_string(o.training.global_batch);
  if (o.training.recompute != "none") text += " " + o.training.recompute;
  return text;
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string signed_pct(double value) { return (value >= 0 ? "+" : "") + fixed(value, 1); }

// Skipped rows grouped by reason, most frequent first (ties by reason).
std::vector<std::pair<std::string, int64_t>> skip_counts(const std::vector<RowResult>& rows) {
  std::map<std::string, int64_t> counts;
  for (const RowResult& r : rows)
    if (!r.expressed()) ++counts[r.skip_reason];
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

std::string oom_text(const RowResult& r) {
  std::string verdict = std::string(r.predicted_oom ? "oom" : "fits") + "/" + (r.measured_oom ? "oom" : "ran");
  return r.predicted_oom == r.measured_oom ? verdict : verdict + " MISMATCH";
}

std::string render_table(const ValidationResult& result) {
  std::ostringstream out;
  out << "source_id        model                                        gpus layout                          "
         "     measured_s predicted_s  error_%  mem_pred/meas_GB  oom\n";
  for (const RowResult& r : result.rows) {
    if (!r.expressed()) continue;
    std::string mem = fixed(r.predicted_peak_mem_gb, 1) + "/" +
                      (r.measured_peak_mem_gb ? fixed(*r.measured_peak_mem_gb, 1) : std::string("-"));
    out << std::left << std::setw(16) << r.source_id << " " << std::setw(44) << r.model << " " << std::right
        << std::setw(4) << r.gpus << " " << std::left << std::setw(36) << r.layout << " " << std::right
        << std::setw(10) << fixed(r.measured_step_s, 3) << " " << std::setw(11) << fixed(r.predicted_step_s, 3)
        << " " << std::setw(8) << signed_pct(r.step_error_pct) << "  " << std::setw(16) << mem << "  "
        << oom_text(r) << "\n";
  }
  int64_t expressed = std::count_if(result.rows.begin(), result.rows.end(), [](const RowResult& r) { return r.expressed(); });
  int64_t mismatches = std::count_if(result.rows.begin(), result.rows.end(),
                                     [](const RowResult& r) { return r.expressed() && r.predicted_oom != r.measured_oom; });
  out << "\nSummary\n";
  out << "  rows: " << result.rows.size() << ", expressed: " << expressed
      << ", skipped: " << result.rows.size() - expressed << ", OOM verdict mismatches: " << mismatches << "\n";
  out << "  skipped by reason:\n";
  for (const auto& [reason, count] : skip_counts(result.rows)) out << "    " << std::setw(4) << count << "  " << reason << "\n";
  out << "  absolute step-time error (%):\n";
  out << "    group             rows  median     p90     max\n";
  for (const ErrorStats& s : step_error_stats(result.rows))
    out << "    " << std::left << std::setw(16) << s.group << std::right << std::setw(6) << s.rows << std::setw(8)
        << fixed(s.median, 1) << std::setw(8) << fixed(s.p90, 1) << std::setw(8) << fixed(s.max, 1) << "\n";
  return out.str();
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string render_csv(const ValidationResult& result) {
  std::ostringstream out;
  out << "line,source_id,model,gpus,layout,measured_step_s,predicted_step_s,step_error_pct,"
         "measured_peak_mem_gb,predicted_peak_mem_gb,predicted_oom,measured_oom,skip_reason\n";
  for (const RowResult& r : result.rows) {
    out << r.line << "," << csv_field(r.source_id) << "," << csv_field(r.model) << "," << r.gpus << ","
        << csv_field(r.layout) << ",";
    if (r.expressed())
      out << fixed(r.measured_step_s, 4) << "," << fixed(r.predicted_step_s, 4) << "," << fixed(r.step_error_pct, 2)
          << "," << (r.measured_peak_mem_gb ? fixed(*r.measured_peak_mem_gb, 2) : "") << ","
          << fixed(r.predicted_peak_mem_gb, 2) << "," << r.predicted_oom << "," << r.measured_oom << ",\n";
    else
      out << ",,,,,,," << csv_field(r.skip_reason) << "\n";
  }
  return out.str();
}

std::string render_json(const ValidationResult& result) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RowResult& r : result.rows) {
    nlohmann::json j = {{"line", r.line}, {"source_id", r.source_id}, {"model", r.model}, {"gpus", r.gpus}};
    if (!r.expressed()) {
      j["skip_reason"] = r.skip_reason;
    } else {
      j.update({{"layout", r.layout},
                {"measured_step_s", r.measured_step_s},
                {"predicted_step_s", r.predicted_step_s},
                {"step_error_pct", r.step_error_pct},
                {"measured_peak_mem_gb", r.measured_peak_mem_gb ? nlohmann::json(*r.measured_peak_mem_gb) : nullptr},
                {"predicted_peak_mem_gb", r.predicted_peak_mem_gb},
                {"predicted_oom", r.predicted_oom},
                {"measured_oom", r.measured_oom},
                {"assumptions", r.assumptions}});
    }
    rows.push_back(j);
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& [reason, count] : skip_counts(result.rows)) skipped.push_back({{"reason", reason}, {"rows", count}});
  nlohmann::json stats = nlohmann::json::array();
  for (const ErrorStats& s : step_error_stats(result.rows))
    stats.push_back({{"group", s.group}, {"rows", s.rows}, {"median_abs_pct", s.median}, {"p90_abs_pct", s.p90},
                     {"max_abs_pct", s.max}});
  return nlohmann::json{{"rows", rows}, {"skipped", skipped}, {"step_error", stats}}.dump(2) + "\n";
}

}  // namespace

CsvTable parse_csv(const std::string& text, const std::string& source) {
  std::vector<std::vector<std::string>> records;
  std::vector<int64_t> starts;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, field_started = false;
  int64_t line = 1, quote_line = 0;
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
  for (size_t i = 0; i < text.size(); ++i) {
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
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.header.size())
      throw DataError(source + ":" + std::to_string(starts[r]) + ": " + std::to_string(records[r].size()) +
                      " fields, the header has " + std::to_string(table.header.size()));
    table.records.push_back(records[r]);
    table.record_lines.push_back(starts[r]);
  }
  return table;
}

RowPlan plan_row(const MeasuredRow& row, const std::string& hardware_dir) {
  RowPlan plan;
  try {
    if (!number_cell(row, "measured_step_s")) throw Unsupported{"no measured step time"};
    if (int_cell(row, "ep").value_or(1) > 1) throw Unsupported{"mixture-of-experts not simulated yet"};
    plan.hardware_path = hardware_preset(row, hardware_dir);
    plan.options = layout(row, plan.assumptions);
    plan.model = architecture(row, plan.assumptions);
  } catch (const Unsupported& unsupported) {
    plan.skip_reason = unsupported.reason;
  } catch (const std::runtime_error& error) {  // DataError, UsageError: a cell syssim refuses
    plan.skip_reason = error.what();
  }
  return plan;
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

std::vector<ErrorStats> step_error_stats(const std::vector<RowResult>& rows) {
  std::map<std::string, std::vector<double>> by_source;
  std::vector<double> all;
  for (const RowResult& r : rows) {
    if (!r.expressed()) continue;
    by_source[r.source_id].push_back(std::abs(r.step_error_pct));
    all.push_back(std::abs(r.step_error_pct));
  }
  auto stats_of = [](const std::string& group, const std::vector<double>& values) {
    return ErrorStats{group, static_cast<int64_t>(values.size()), percentile(values, 0.5), percentile(values, 0.9),
                      *std::max_element(values.begin(), values.end())};
  };
  std::vector<ErrorStats> stats;
  for (const auto& [source, values] : by_source) stats.push_back(stats_of(source, values));
  if (!all.empty()) stats.push_back(stats_of("all", all));
  return stats;
}

ValidationResult validate_measured(const std::string& csv_text, const std::string& source,
                                   const ValidateOptions& options) {
  CsvTable table = parse_csv(csv_text, source);
  ValidationResult result;
  std::vector<std::string> unknown;
  for (const std::string& column : table.header)
    if (std::find(kKnownColumns.begin(), kKnownColumns.end(), column) == kKnownColumns.end()) unknown.push_back(column);
  for (const std::string& column : kRequiredColumns)
    if (std::find(table.header.begin(), table.header.end(), column) == table.header.end())
      throw DataError(source + ": no column '" + column + "'");
  if (!unknown.empty()) {
    std::string list;
    for (const std::string& column : unknown) list += (list.empty() ? "" : ", ") + column;
    result.warnings.push_back(source + ": ignoring unknown columns: " + list);
  }
  std::string hardware_dir = options.hardware_dir.empty() ? SYSSIM_HARDWARE_DIR : options.hardware_dir;
  std::map<std::string, HardwareConfig> hardware_cache;
  for (size_t r = 0; r < table.records.size(); ++r) {
    MeasuredRow row;
    for (size_t c = 0; c < table.header.size(); ++c) row[table.header[c]] = table.records[r][c];
    RowResult out;
    out.line = table.record_lines[r];
    out.source_id = cell(row, "source_id");
    out.model = cell(row, "model");
    RowPlan plan = plan_row(row, hardware_dir);
    out.skip_reason = plan.skip_reason;
    out.assumptions = plan.assumptions;
    if (plan.skip_reason.empty()) {
      try {
        out.gpus = *plan.options.gpus;
        out.layout = layout_text(plan.options);
        out.measured_step_s = *number_cell(row, "measured_step_s");
        out.measured_peak_mem_gb = number_cell(row, "measured_peak_mem_gb");
        out.measured_oom = flag_cell(row, "measured_oom").value_or(false);
        validate(plan.model, source + ":" + std::to_string(out.line));
        if (!hardware_cache.count(plan.hardware_path))
          hardware_cache.emplace(plan.hardware_path, load_hardware_yaml(plan.hardware_path));
        Graph graph = simulate(plan.model, hardware_cache.at(plan.hardware_path), plan.options);
        out.predicted_step_s = graph.sim->step_time_ms / kMsPerS;
        out.step_error_pct = (out.predicted_step_s - out.measured_step_s) / out.measured_step_s * kPercent;
        out.predicted_peak_mem_gb = graph.mem->peak_memory_gb;
        out.predicted_oom = graph.mem->oom.has_value();
      } catch (const std::runtime_error& error) {  // syssim refuses the row: say why
        out.skip_reason = error.what();
      }
    } else {
      try {
        out.gpus = int_cell(row, "num_gpus").value_or(0);
      } catch (const DataError&) {  // already the reason the row is skipped
      }
    }
    result.rows.push_back(out);
  }
  return result;
}

std::string render_validation(const ValidationResult& result, const std::string& format) {
  if (format == "table") return render_table(result);
  if (format == "csv") return render_csv(result);
  if (format == "json") return render_json(result);
  throw UsageError("--format=" + format + ": expected table, csv or json");
}

}  // namespace syssim
