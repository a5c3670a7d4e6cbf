// The driver's trace: from this process's memo, the on-disk cache, or the trace stage loaded
// as a module. Loading LibTorch costs about half a second, more than the rest of a run of
// Llama-3-70B on 1,024 GPUs, so the driver does not link it (docs/performance.md).
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "common/cache.hpp"
#include "common/error.hpp"
#include "common/install.hpp"
#include "common/version.hpp"
#include "driver/driver.hpp"

namespace syssim {
namespace {

using TraceEntry = int (*)(const char* model_json, char** out);

// The module in the program's module folder (build/lib/syssim in a build tree).
std::string module_path() { return module_dir() + "/" + SYSSIM_TRACE_MODULE_NAME; }

TraceEntry load_trace_entry() {
  static TraceEntry entry = nullptr;
  static std::string load_error;
  static std::once_flag loaded;
  std::call_once(loaded, [] {
    std::string path = module_path();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) entry = reinterpret_cast<TraceEntry>(::dlsym(handle, "syssim_trace_json"));
    if (!entry) load_error = path + ": cannot load the trace stage: " + ::dlerror();
  });
  if (!entry) throw DataError(load_error);
  return entry;
}

// The trace the on-disk cache holds under `key`; a damaged entry is a miss, traced again.
std::optional<TraceSection> cached_trace(const std::string& key) {
  std::optional<std::string> bytes = cache_get("trace", key);
  if (!bytes) return std::nullopt;
  try {
    return trace_from_binary(*bytes, "trace cache");
  } catch (const DataError&) {
    return std::nullopt;
  }
}

}  // namespace

TraceSection trace_afresh(const ModelConfig& model) {
  char* out = nullptr;
  int status = load_trace_entry()(to_json(model).dump().c_str(), &out);
  std::unique_ptr<char, decltype(&std::free)> text(out, &std::free);
  if (status == 2) throw UsageError(text.get());
  if (status != 0) throw DataError(text.get());
  return trace_from_json(nlohmann::json::parse(text.get()), "/trace");
}

const TraceSection& trace_of(const ModelConfig& given, std::optional<int64_t> seq_length) {
  const ModelConfig model = traced_at(given, seq_length.value_or(given.seq_length));
  // The trace leaves the batch and sequence axes free: one trace serves every seq_length with
  // the same softmax kernels.
  nlohmann::json architecture = to_json(model);
  architecture.erase("seq_length");
  architecture["fused_softmax_kernel"] = runs_fused_softmax_kernel(model, model.seq_length);
  const std::string key = std::string("syssim ") + kSyssimVersion + " (" + build_identity() + ") graph format " +
                          kGraphFormatVersion + " trace of " + architecture.dump();
  static std::mutex mutex;
  // Never freed: the traces live until the process ends, and freeing them at exit took a
  // twentieth of a run.
  static auto& traced = *new std::map<std::string, TraceSection>;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = traced.find(key);
    if (it != traced.end()) return it->second;
  }
  std::optional<TraceSection> trace = cached_trace(key);
  if (!trace) {
    trace = trace_afresh(model);
    cache_put("trace", key, trace_to_binary(*trace));
  }
  std::lock_guard<std::mutex> lock(mutex);
  return traced.emplace(key, std::move(*trace)).first->second;
}

}  // namespace syssim
