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
#include "common/version.hpp"
#include "config/presets.hpp"
#include "cost/cost.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "report/report.hpp"
#include "shard/shard.hpp"
#include "sim/sim.hpp"
#include "sweep/sweep.hpp"

namespace py = pybind11;
using nlohmann::json;

namespace {

json parse(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw syssim::DataError(what + ": not valid JSON: " + e.what());
  }
}

// A model and a hardware from the graph format's JSON, checked as a loaded YAML is.
syssim::ModelConfig checked_model(const std::string& text) {
  syssim::ModelConfig model = syssim::model_from_json(parse(text, "model"), "model");
  syssim::validate(model, "model");
  return model;
}

syssim::HardwareConfig checked_hardware(const std::string& text) {
  syssim::HardwareConfig hardware = syssim::hardware_from_json(parse(text, "hardware"), "hardware");
  syssim::validate(hardware, "hardware");
  return hardware;
}

// One job: the model and hardware as the graph format writes them (a relative
// calibrated_model taken from hardware_dir, the hardware YAML's folder), parallelism and
// training as the keys to set.
struct Job {
  syssim::ModelConfig model;
  syssim::HardwareConfig hardware;
  syssim::ShardOptions options;
};

Job job_of(const std::string& model, const std::string& hardware, const std::string& hardware_dir,
           const std::string& parallelism, const std::string& training) {
  Job job{checked_model(model), checked_hardware(hardware),
          syssim::shard_options_from_json(parse(parallelism, "parallelism"), parse(training, "training"))};
  job.hardware.calibrated_model_dir = syssim::resolve_calibrated_model(job.hardware.calibrated_model, hardware_dir);
  return job;
}

// The report as JSON and as text, rendered from one simulated graph.
std::pair<std::string, std::string> simulate(const std::string& model, const std::string& hardware,
                                             const std::string& hardware_dir, const std::string& parallelism,
                                             const std::string& training, bool memory_only) {
  Job job = job_of(model, hardware, hardware_dir, parallelism, training);
  if (memory_only) {
    syssim::Graph graph = syssim::estimate_memory(job.model, job.hardware, job.options);
    return {syssim::render_memory_report(graph, "json"), syssim::render_memory_report(graph, "text")};
  }
  syssim::Graph graph = syssim::simulate(job.model, job.hardware, job.options);
  return {syssim::render_report(graph, "json"), syssim::render_report(graph, "text")};
}

// The rows of `syssim sweep --format json` over the cartesian product of `over`.
std::string sweep(const std::string& model, const std::string& hardware, const std::string& hardware_dir,
                  const std::string& parallelism, const std::string& training,
                  const std::vector<std::pair<std::string, std::vector<std::string>>>& over, int64_t threads,
                  bool use_cache) {
  Job job = job_of(model, hardware, hardware_dir, parallelism, training);
  std::vector<syssim::SweepAxis> axes;
  for (const auto& [path, values] : over) {
    std::string flag = path + "=";
    for (size_t i = 0; i < values.size(); ++i) flag += (i ? "," : "") + values[i];
    axes.push_back(syssim::parse_sweep_axis(flag));
  }
  syssim::SweepSettings settings;
  settings.threads = threads;
  settings.use_cache = use_cache;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const syssim::SweepRow& row : syssim::run_sweep(job.model, job.hardware, job.options, axes, settings))
    rows.push_back(syssim::to_json(row));
  return rows.dump();
}

// One stage on a graph in the graph format, as its tool runs it: the graph read and checked,
// the stage applied, a provenance entry naming the Python function and its arguments, the
// graph written (docs/python.md, "Stages").
template <typename Stage>
std::string apply_stage(const std::string& graph_text, const std::string& function,
                        const std::vector<std::string>& args, Stage stage) {
  syssim::Graph graph = syssim::read_graph(graph_text, function + " input");
  stage(graph);
  graph.provenance.push_back(syssim::Provenance{function, syssim::kSyssimVersion, args});
  return syssim::write_graph(graph);
}

std::string trace_stage(const std::string& model) {
  syssim::Graph graph;
  graph.model = checked_model(model);
  graph.trace = syssim::trace_of(*graph.model);
  graph.provenance.push_back(syssim::Provenance{"syssim.stages.trace", syssim::kSyssimVersion, {}});
  return syssim::write_graph(graph);
}

std::string shard_stage(const std::string& graph, const std::string& parallelism, const std::string& training) {
  const syssim::ShardOptions options =
      syssim::shard_options_from_json(parse(parallelism, "parallelism"), parse(training, "training"));
  return apply_stage(graph, "syssim.stages.shard", {parallelism, training},
                     [&](syssim::Graph& g) { syssim::shard_graph(g, options); });
}

std::string cost_stage(const std::string& graph, const std::string& hardware, const std::string& hardware_dir,
                       const std::string& estimator) {
  syssim::HardwareConfig hw = checked_hardware(hardware);
  hw.calibrated_model_dir = syssim::resolve_calibrated_model(hw.calibrated_model, hardware_dir);
  syssim::CostOptions options;
  options.estimator = estimator;
  return apply_stage(graph, "syssim.stages.cost", {hw.name, estimator},
                     [&](syssim::Graph& g) { syssim::cost_graph(g, hw, options); });
}

std::string simulate_stage(const std::string& graph, bool timeline, bool every_microbatch) {
  syssim::SimOptions options;
  options.record_timeline = timeline;
  options.extrapolate_microbatches = !every_microbatch;
  return apply_stage(graph, "syssim.stages.simulate",
                     {timeline ? "timeline" : "", every_microbatch ? "every_microbatch" : ""},
                     [&](syssim::Graph& g) { syssim::simulate_graph(g, options); });
}

std::string report_stage(const std::string& graph, const std::string& format, const std::string& mfu_convention,
                         std::optional<double> train_tokens) {
  syssim::ReportOptions options;
  const auto convention = syssim::parse_mfu_convention(mfu_convention);
  if (!convention) throw syssim::UsageError("mfu_convention: expected megatron or causal, got '" + mfu_convention + "'");
  options.mfu_convention = *convention;
  if (train_tokens && !(*train_tokens > 0))
    throw syssim::UsageError("train_tokens: expected a positive number, got " + std::to_string(*train_tokens));
  options.train_tokens = train_tokens;
  return syssim::render_report(syssim::read_graph(graph, "syssim.stages.report input"), format, options);
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
  // The hardware and the folder its relative calibrated_model is taken from.
  m.def("load_hardware", [](const std::string& name_or_path) {
    const std::string path = syssim::preset_file(syssim::PresetKind::kHardware, name_or_path);
    return std::make_pair(syssim::to_json(syssim::load_hardware_yaml(path)).dump(),
                          std::filesystem::path(path).parent_path().string());
  });
  m.def("check_model", [](const std::string& model) { return syssim::to_json(checked_model(model)).dump(); });
  m.def("check_hardware", [](const std::string& hardware) { return syssim::to_json(checked_hardware(hardware)).dump(); });
  m.def("simulate", [](const std::string& model, const std::string& hardware, const std::string& hardware_dir,
                       const std::string& parallelism, const std::string& training, bool memory_only) {
    return released([&] { return simulate(model, hardware, hardware_dir, parallelism, training, memory_only); });
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
  m.def("memory_stage", [](const std::string& graph) {
    return released([&] {
      return apply_stage(graph, "syssim.stages.memory", {}, [](syssim::Graph& g) { syssim::account_memory(g); });
    });
  });
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
