// The Python module's native part, `syssim._syssim`: the library's entry points on the graph
// format's JSON text, so that the Python objects (syssim/__init__.py) stay plain data and every
// number comes from the code the tools run (docs/python.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/install.hpp"
#include "config/config.hpp"
#include "config/presets.hpp"
#include "driver/text_calls.hpp"
#include "sweep/sweep.hpp"

namespace py = pybind11;
namespace {

using namespace syssim::text_calls;

// The rows of `syssim sweep --format json` over the cartesian product of `over`.
std::string sweep(const std::string& model, const std::string& hardware, const std::string& hardware_dir,
                  const std::string& parallelism, const std::string& training,
                  const std::vector<std::pair<std::string, std::vector<std::string>>>& over, int64_t threads,
                  bool use_cache) {
  Job job = job_of(model, hardware, hardware_dir, parallelism, training);
  std::vector<syssim::SweepAxis> axes;
  for (const auto& [path, values] : over) axes.push_back(syssim::make_sweep_axis(path, values));
  syssim::SweepSettings settings;
  settings.threads = threads;
  settings.use_cache = use_cache;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const syssim::SweepRow& row : syssim::run_sweep(job.model, job.hardware, job.options, axes, settings))
    rows.push_back(syssim::to_json(row));
  return rows.dump();
}

// Calls `f` with the GIL released: the library takes seconds and uses its own threads.
template <typename F>
auto released(F f) {
  py::gil_scoped_release release;
  return f();
}

}  // namespace

PYBIND11_MODULE(_syssim, m) {
  m.doc() = "syssim's library on the graph format's JSON (use the syssim package, docs/python.md)";
  // Data and usage errors raise ValueError with the tools' one-line message.
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const syssim::DataError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const syssim::UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.def("set_install_prefix", &syssim::set_install_prefix, py::arg("prefix"));
  m.def("data_dir", &syssim::data_dir);
  m.def("load_model", [](const std::string& name_or_path) { return syssim::to_json(syssim::load_model_yaml(name_or_path)).dump(); },
        py::arg("name_or_path"));
  m.def("parse_model", [](const std::string& yaml, const std::string& name) {
    return syssim::to_json(syssim::parse_model_yaml(yaml, name)).dump();
  });
  // The defaults of the sections' keys, as the library reads a key not given.
  m.def("parallelism_defaults", [] { return syssim::to_json(syssim::ParallelismConfig{}).dump(); });
  // With the keys written only when set, at the value they have unset.
  m.def("training_defaults", [] {
    nlohmann::json defaults = syssim::to_json(syssim::TrainingConfig{});
    for (const auto& [key, unset] : syssim::kTrainingKeysWhenSet)
      if (!defaults.contains(key)) defaults[key] = unset;
    return defaults.dump();
  });
  m.def("parse_hardware", [](const std::string& yaml, const std::string& name) {
    return syssim::to_json(syssim::parse_hardware_yaml(yaml, name)).dump();
  });
  // The hardware and the folder its relative calibrated_model is taken from.
  m.def("load_hardware", [](const std::string& name_or_path) {
    const std::string path = syssim::preset_file(syssim::PresetKind::kHardware, name_or_path);
    return std::make_pair(syssim::to_json(syssim::load_hardware_yaml(path)).dump(),
                          std::filesystem::path(path).parent_path().string());
  });
  m.def("simulate", [](const std::string& model, const std::string& hardware, const std::string& hardware_dir,
                       const std::string& parallelism, const std::string& training, bool memory_only,
                       const std::vector<std::pair<std::string, std::string>>& settings) {
    return released([&] {
      Job job = job_of(model, hardware, hardware_dir, parallelism, training);
      syssim::apply_config_paths(job.options, settings);  // a sweep point's, as the sweep applies them
      return simulate(job, memory_only);
    });
  });
  // The stages on graph-format text (syssim/stages.py).
  m.def("trace_stage", [](const std::string& model) { return released([&] { return trace_stage(model); }); });
  m.def("shard_stage", [](const std::string& graph, const std::string& parallelism, const std::string& training) {
    return released([&] { return shard_stage(graph, parallelism, training); });
  });
  m.def("cost_stage", [](const std::string& graph, const std::string& hardware, const std::string& hardware_dir,
                         const std::string& estimator) {
    return released([&] { return cost_stage(graph, hardware, hardware_dir, estimator); });
  });
  m.def("simulate_stage", [](const std::string& graph, bool timeline, bool every_microbatch) {
    return released([&] { return simulate_stage(graph, timeline, every_microbatch); });
  });
  m.def("memory_stage", [](const std::string& graph) { return released([&] { return memory_stage(graph); }); });
  m.def("report_stage", [](const std::string& graph, const std::string& format, const std::string& mfu_convention,
                           std::optional<double> train_tokens) {
    return released([&] { return report_stage(graph, format, mfu_convention, train_tokens); });
  });
  m.def("sweep", [](const std::string& model, const std::string& hardware, const std::string& hardware_dir,
                    const std::string& parallelism, const std::string& training,
                    const std::vector<std::pair<std::string, std::vector<std::string>>>& over, int64_t threads,
                    bool use_cache) {
    return released([&] { return sweep(model, hardware, hardware_dir, parallelism, training, over, threads, use_cache); });
  });
}
