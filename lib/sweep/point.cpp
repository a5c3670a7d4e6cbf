// The points of a sweep: the axes, their product, a point's job and its simulated row.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <thread>

#include "common/cache.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/version.hpp"
#include "driver/driver.hpp"
#include "report/report.hpp"
#include "sweep/detail.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

using ordered_json = nlohmann::ordered_json;

// A YAML scalar as the JSON value a YAML reader would give: null, an integer, a float, a
// boolean, else a string (a quoted scalar always is one).
nlohmann::json yaml_scalar(const std::string& text, const std::string& path) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception&) {
    throw UsageError("--over " + path + ": '" + text + "' is not a YAML scalar");
  }
  if (node.IsNull()) return nullptr;
  if (!node.IsScalar()) throw UsageError("--over " + path + ": '" + text + "' is not a YAML scalar");
  if (node.Tag() == "!") return node.Scalar();
  // Digits are a decimal number, as on the command line, where YAML 1.1 reads 032 as octal 26.
  static const std::regex kDecimal("[-+]?[0-9]+");
  if (std::regex_match(text, kDecimal)) {
    try {
      return static_cast<int64_t>(std::stoll(text));
    } catch (const std::out_of_range&) {
      return std::stod(text);
    }
  }
  int64_t integer;
  double real;
  bool boolean;
  if (YAML::convert<int64_t>::decode(node, integer)) return integer;
  if (YAML::convert<double>::decode(node, real)) return real;
  if (YAML::convert<bool>::decode(node, boolean)) return boolean;
  return node.Scalar();
}

// The settings of a config section, by key (its defaults as JSON, less what is derived).
nlohmann::json section_keys(const nlohmann::json& section) {
  nlohmann::json keys = section;
  keys.erase("world_size");  // derived, not a setting
  return keys;
}

// The config section a path names and its key; UsageError when it names none.
std::pair<std::string, std::string> split_config_path(const std::string& path) {
  static const nlohmann::json parallelism_keys = section_keys(to_json(ShardOptions().parallelism));
  // Every key, those written only when they apply or are set (kTrainingKeysWhenSet) too.
  static const nlohmann::json training_keys = [] {
    nlohmann::json keys = section_keys(to_json(TrainingConfig()));
    for (const auto& [key, unset] : kTrainingKeysWhenSet) keys[key] = nullptr;
    return keys;
  }();
  size_t dot = path.find('.');
  std::string section = path.substr(0, dot);
  std::string key = dot == std::string::npos ? "" : path.substr(dot + 1);
  const nlohmann::json* known_keys = nullptr;
  if (section == "parallelism") known_keys = &parallelism_keys;
  else if (section == "training") known_keys = &training_keys;
  else throw UsageError("--over " + path + ": unknown config path (expected parallelism.KEY or training.KEY)");
  const nlohmann::json& keys = *known_keys;
  if (!keys.contains(key)) {
    std::string known;
    for (const auto& [name, value] : keys.items()) known += (known.empty() ? "" : ", ") + name;
    throw UsageError("--over " + path + ": unknown config path (" + section + " keys: " + known + ")");
  }
  return {section, key};
}

}  // namespace

SweepAxis parse_sweep_axis(const std::string& flag) {
  size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size())
    throw UsageError("--over " + flag + ": expected PATH=V1,V2,...");
  std::vector<std::string> values;
  const std::string text = flag.substr(eq + 1);
  for (size_t start = 0;;) {
    size_t comma = text.find(',', start);
    values.push_back(text.substr(start, comma - start));
    if (values.back().empty()) throw UsageError("--over " + flag + ": empty value");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return make_sweep_axis(flag.substr(0, eq), values);
}

SweepAxis make_sweep_axis(const std::string& given, const std::vector<std::string>& values) {
  // The spec's name of the distributed optimizer (its TrainingConfig field), as the job names it.
  const std::string path = given == "training.use_distributed_optimizer" ? "training.distributed_optimizer" : given;
  split_config_path(path);
  if (values.empty()) throw UsageError(path + ": expected at least one value");
  for (auto value = values.begin(); value != values.end(); ++value) {
    yaml_scalar(*value, path);  // refuses a list or a mapping before any point runs
    if (std::find(values.begin(), value, *value) != value)
      throw UsageError(path + ": value " + *value + " is given twice (each point would run twice)");
  }
  return SweepAxis{path, values};
}

std::vector<std::vector<std::string>> cartesian_product(const std::vector<SweepAxis>& axes) {
  std::vector<std::vector<std::string>> points = {{}};
  for (const SweepAxis& axis : axes) {
    std::vector<std::vector<std::string>> longer;
    for (const auto& point : points)
      for (const std::string& value : axis.values) {
        longer.push_back(point);
        longer.back().push_back(value);
      }
    points = std::move(longer);
  }
  return points;
}

namespace {

// The data-parallel sharding strategy takes every name and alias --data-parallel-sharding-strategy
// takes; a job's training section holds no_shard and optim as distributed_optimizer (false,
// true) and the others by name (docs/graph-format.md).
const std::string kShardingPath = "training.data_parallel_sharding_strategy";
const std::string kShardingValues =
    "expected no_shard, optim, optim_grads or optim_grads_params (or zero1, zero2, zero3, shard_grad_op, full_shard)";
std::optional<DataParallelSharding> set_sharding_strategy(nlohmann::json& training, const ConfigSetting& setting) {
  const std::optional<DataParallelSharding> sharding =
      setting.value.is_string() ? parse_data_parallel_sharding(setting.value.get<std::string>()) : std::nullopt;
  if (!sharding) return std::nullopt;
  if (*sharding >= DataParallelSharding::optim_grads) {
    training["data_parallel_sharding_strategy"] = to_string(*sharding);  // the job's fsdp_implementation kept
  } else {
    training.erase("data_parallel_sharding_strategy");
    training.erase("fsdp_implementation");
  }
  training["distributed_optimizer"] = *sharding != DataParallelSharding::no_shard;
  return sharding;
}

// Whether `key` of a section written back holds `given`; a key written only when set
// (kTrainingKeysWhenSet) is absent when it holds the value it has unset.
bool reads_back(const nlohmann::json& written, const std::string& key, const nlohmann::json& given) {
  if (written.contains(key)) return written[key] == given;
  const auto unset = kTrainingKeysWhenSet.find(key);
  return unset != kTrainingKeysWhenSet.end() && !unset->second.is_null() && unset->second == given;
}

// Sets every setting through the config's own readers, one JSON round trip per section (the
// readers check each key on its own, so this is setting them one by one). An error, with
// `options` unchanged, when a value does not read back unchanged (the JSON reader would
// truncate a float read as an integer: "") or the reader refuses it (its message).
std::optional<std::string> try_settings(ShardOptions& options, const std::vector<ConfigSetting>& settings) {
  nlohmann::json parallelism = to_json(options.parallelism), training = to_json(options.training);
  std::vector<std::pair<nlohmann::json*, std::string>> keys;  // section, key
  std::optional<DataParallelSharding> sharding;  // the strategy set, checked apart
  for (const ConfigSetting& setting : settings) {
    auto [section, key] = split_config_path(setting.path);
    if (setting.path == kShardingPath) {
      sharding = set_sharding_strategy(training, setting);
      if (!sharding) return kShardingValues;
      continue;
    }
    keys.emplace_back(section == "parallelism" ? &parallelism : &training, key);
    // A list key takes one name: the list of it.
    const bool list = key == "recompute_modules" || key == "cuda_graph_scope";
    (*keys.back().first)[key] = list && setting.value.is_string() ? nlohmann::json::array({setting.value}) : setting.value;
  }
  try {
    ParallelismConfig parallelism_read = parallelism_from_json(parallelism, "parallelism");
    TrainingConfig training_read = training_from_json(training, "training");
    nlohmann::json parallelism_back = to_json(parallelism_read), training_back = to_json(training_read);
    for (const auto& [section, key] : keys)
      if (!reads_back(section == &parallelism ? parallelism_back : training_back, key, (*section)[key])) return "";
    if (sharding && training_read.data_parallel_sharding != *sharding) return "";
    options.parallelism = parallelism_read;
    options.training = training_read;
    return std::nullopt;
  } catch (const DataError& e) {
    return e.what();
  }
}

}  // namespace

void apply_config_settings(ShardOptions& options, const std::vector<ConfigSetting>& settings) {
  if (!try_settings(options, settings)) return;
  // One by one, to name the first value that does not fit.
  for (const ConfigSetting& setting : settings) {
    auto [section, key] = split_config_path(setting.path);
    nlohmann::json previous = (section == "parallelism" ? to_json(options.parallelism) : to_json(options.training))[key];
    if (const auto unset = kTrainingKeysWhenSet.find(key); previous.is_null() && unset != kTrainingKeysWhenSet.end())
      previous = unset->second;  // not written: the value it has unset
    if (const std::optional<std::string> error = try_settings(options, {setting})) {
      // What the key takes: the reader's word for a value of the right kind (out of range, an
      // unknown name) or for a key the job leaves unset, else the kind of the job's own value.
      auto kind_of = [](const nlohmann::json& value) {
        return value.is_boolean()          ? "true or false"
               : value.is_number_integer() ? "a whole number"
               : value.is_number()         ? "a number"
               : value.is_string()         ? "a name"
                                           : "a value of this key";
      };
      const std::string kind = kind_of(previous);
      if (!error->empty() && (previous.is_null() || kind == kind_of(setting.value)))
        throw DataError(setting.path + "=" + setting.text + ": " + *error);
      throw DataError(setting.path + "=" + setting.text + ": expected " + kind + ", as the job's " + previous.dump());
    }
  }
}

void apply_config_path(ShardOptions& options, const std::string& path, const std::string& value) {
  apply_config_paths(options, {{path, value}});
}

void apply_config_paths(ShardOptions& options, const std::vector<std::pair<std::string, std::string>>& settings) {
  std::vector<ConfigSetting> parsed;
  for (const auto& [path, value] : settings) parsed.push_back(ConfigSetting{path, value, yaml_scalar(value, path)});
  apply_config_settings(options, parsed);
}

std::vector<SweepRow> run_sweep(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& base,
                                const std::vector<SweepAxis>& axes, const SweepSettings& settings) {
  const std::vector<std::vector<std::string>> points = cartesian_product(axes);
  const bool derive_dp =
      base.gpus && std::none_of(axes.begin(), axes.end(), [](const SweepAxis& a) { return a.path == "parallelism.dp"; });
  PointEvaluator evaluate(model, hardware, settings.use_cache);
  std::vector<SweepRow> rows(points.size());
  std::vector<std::optional<ShardOptions>> jobs(points.size());
  // Each axis value parsed once: points repeat them.
  std::vector<std::map<std::string, nlohmann::json>> parsed(axes.size());
  for (size_t a = 0; a < axes.size(); ++a)
    for (const std::string& value : axes[a].values) parsed[a].emplace(value, yaml_scalar(value, axes[a].path));
  for (size_t i = 0; i < points.size(); ++i) {
    const std::vector<std::string>& point = points[i];
    SweepRow& row = rows[i];
    ShardOptions options = base;
    std::vector<ConfigSetting> settings;
    for (size_t a = 0; a < axes.size(); ++a) {
      settings.push_back(ConfigSetting{axes[a].path, point[a], parsed[a].at(point[a])});
      row.inputs[axes[a].path] = settings.back().value;
    }
    try {
      apply_config_settings(options, settings);
      if (derive_dp) {
        const ParallelismConfig& p = options.parallelism;
        int64_t model_parallel = p.tp * p.cp * p.pp;
        if (model_parallel < 1 || *base.gpus % model_parallel != 0)
          throw DataError("tp*cp*pp=" + std::to_string(model_parallel) + " does not divide --gpus " +
                          std::to_string(*base.gpus));
        options.parallelism.dp = *base.gpus / model_parallel;
        row.inputs["parallelism.dp"] = options.parallelism.dp;
      }
      jobs[i] = options;
    } catch (const DataError& e) {
      mark_invalid(row, e.what());
    } catch (const UsageError& e) {
      mark_invalid(row, e.what());
    }
  }
  // Jobs that differ only in the global batch share their shard and cost sections: they form a
  // group, whose jobs one thread simulates in order on one graph. A point refused above is a
  // group of its own with nothing to run.
  std::map<std::string, size_t> group_of;
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!jobs[i]) {
      groups.push_back({i});
      continue;
    }
    ShardOptions shared = *jobs[i];
    shared.training.global_batch = 0;
    auto [it, added] = group_of.emplace(job_cache_key(model, hardware, shared), groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  for_each_point(
      groups.size(), settings,
      [&](size_t g) {
        std::optional<Graph> built;
        for (size_t i : groups[g])
          if (jobs[i]) evaluate(*jobs[i], rows[i], &built);
      },
      [&](size_t g) { return groups[g].size(); });
  return rows;
}

void for_each_point(size_t count, const SweepSettings& settings, const std::function<void(size_t)>& run_point,
                    const std::function<size_t(size_t)>& points_of) {
  const size_t threads = std::min<size_t>(
      count, settings.threads > 0 ? static_cast<size_t>(settings.threads) : std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::mutex reporting;
  int64_t done = 0, total = 0;
  for (size_t i = 0; i < count; ++i) total += static_cast<int64_t>(points_of ? points_of(i) : 1);
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        run_point(i);
      } catch (...) {  // not a refused job (run_point rows those): stop, and rethrow on the caller's thread
        std::lock_guard<std::mutex> lock(reporting);
        if (!failure) failure = std::current_exception();
        next = count;
      }
      std::lock_guard<std::mutex> lock(reporting);
      done += static_cast<int64_t>(points_of ? points_of(i) : 1);
      if (settings.progress) settings.progress(done, total);
    }
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  if (failure) std::rethrow_exception(failure);
}

void mark_invalid(SweepRow& row, const std::string& reason) {
  row.status = "invalid";
  row.reason = reason;
  row.step_time_ms = row.mfu = row.peak_memory_gb = 0;
  row.step_time_band.reset();
}

PointEvaluator::PointEvaluator(const ModelConfig& model, const HardwareConfig& hardware, bool use_cache)
    : model_(model), hardware_(hardware), use_cache_(use_cache), bands_(load_step_time_bands()) {}

PointEvaluator::Traced& PointEvaluator::traced(std::optional<int64_t> seq_length) {
  Traced& traced = traced_[runs_fused_softmax_kernel(model_, seq_length.value_or(model_.seq_length))];
  if (!traced.trace) traced.trace = &trace_of(model_, seq_length);
  return traced;
}

const TraceSection& PointEvaluator::trace(std::optional<int64_t> seq_length) {
  std::lock_guard<std::mutex> lock(loading_);
  return *traced(seq_length).trace;
}

ShardReuse& PointEvaluator::reuse(std::optional<int64_t> seq_length) {
  std::lock_guard<std::mutex> lock(loading_);
  Traced& traced = this->traced(seq_length);
  if (!traced.reuse) traced.reuse.emplace(*traced.trace);
  return *traced.reuse;
}

const CostEstimator& PointEvaluator::estimator() {
  std::lock_guard<std::mutex> lock(loading_);
  if (!estimator_) estimator_.emplace(hardware_);
  return *estimator_;
}

void PointEvaluator::operator()(const ShardOptions& options, SweepRow& row, std::optional<Graph>* built) {
  simulate_row(options, row, built);
  // The band comes from the data folder each time, not from a cached row: it moves with the bands.
  if (row.status != "invalid")
    row.step_time_band =
        step_time_range(row.step_time_ms, bands_.of(band_class_of(model_.is_moe(), options.training.dtype)));
}

void PointEvaluator::simulate_row(const ShardOptions& options, SweepRow& row, std::optional<Graph>* built) {
  const std::string key = use_cache_ ? job_cache_key(model_, hardware_, options) : "";
  if (use_cache_) {
    if (std::optional<std::string> cached = cache_get("point", key)) {
      ordered_json result = ordered_json::parse(*cached);
      result["inputs"] = row.inputs;
      row = sweep_row_from_json(result, "cache");
      return;
    }
  }
  // A hardware the estimator cannot load (its calibrated bundle missing, say) is the sweep's
  // bad data, not a point's: it stops the sweep.
  const CostEstimator& cost = estimator();
  try {
    std::optional<Graph> own;
    std::optional<Graph>& graph = built ? *built : own;
    if (graph)
      resimulate_with_global_batch(*graph, options.training.global_batch);
    else
      graph = simulate(model_, trace(options.training.seq_length), cost, options, SimOptions{},
                       &reuse(options.training.seq_length));
    row.step_time_ms = graph->sim->step_time_ms;
    row.mfu = throughput(*graph).mfu;
    row.peak_memory_gb = graph->mem->peak_memory_gb;
    row.status = graph->mem->oom ? "oom" : "ok";
    if (graph->mem->oom) row.reason = oom_reason(*graph->mem);
  } catch (const DataError& e) {
    mark_invalid(row, e.what());
  } catch (const UsageError& e) {
    mark_invalid(row, e.what());
  }
  if (use_cache_) cache_put("point", key, to_json(row).dump());
}

namespace {

// The calibrated bundle a hardware names, as the cache key holds it: the folder it resolves to
// (absolute) and a checksum of each of its files, so that two hardware files naming bundles
// alike from different folders, or a bundle refitted in place, never share an entry. Read once
// per folder and process.
nlohmann::json bundle_identity(const std::string& folder) {
  static std::mutex reading;
  static std::map<std::string, nlohmann::json> known;
  std::lock_guard<std::mutex> lock(reading);
  auto [it, added] = known.try_emplace(folder);
  if (!added) return it->second;
  std::error_code error;
  const std::filesystem::path path = std::filesystem::weakly_canonical(std::filesystem::absolute(folder), error);
  nlohmann::json files = nlohmann::json::object();
  for (const auto& entry : std::filesystem::directory_iterator(path, error))
    if (entry.is_regular_file(error)) {
      std::ifstream in(entry.path(), std::ios::binary);
      files[entry.path().filename().string()] =
          content_checksum(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
    }
  return it->second = {{"folder", path.string()}, {"files", files}};  // no files: a folder that is not there
}

}  // namespace

// Every field of ShardOptions is part of the key: a setting left out would return another job's row.
std::string job_cache_key(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options) {
  nlohmann::json hardware_key = to_json(hardware);
  if (!hardware.calibrated_model_dir.empty()) hardware_key["calibrated_model"] = bundle_identity(hardware.calibrated_model_dir);
  nlohmann::json job = {{"model", to_json(model)},
                        {"hardware", hardware_key},
                        {"parallelism", to_json(options.parallelism)},
                        {"training", to_json(options.training)},
                        {"gpus", nullable_to_json(options.gpus)},
                        {"pipeline_schedule", options.pipeline_schedule ? to_string(*options.pipeline_schedule) : ""},
                        {"pp_layout", options.pp_layout},
                        {"decoder_first_pipeline_num_layers", nullable_to_json(options.decoder_first_pipeline_num_layers)},
                        {"decoder_last_pipeline_num_layers", nullable_to_json(options.decoder_last_pipeline_num_layers)},
                        {"account_for_embedding_in_pipeline_split", options.account_for_embedding_in_pipeline_split},
                        {"account_for_loss_in_pipeline_split", options.account_for_loss_in_pipeline_split},
                        {"cp_comm_type", options.cp_comm_type}};
  return std::string(kSyssimVersion) + " (" + build_identity() + ")\n" + job.dump();
}

std::string oom_reason(const MemSection& mem) {
  return "needs " + fixed(mem.oom->required_gb, 1) + " GB of " + fixed(mem.oom->capacity_gb, 1) + " GB";
}

}  // namespace syssim
