// The trace stage as a loadable module (lib/driver/trace_of.cpp): the driver loads LibTorch
// only when it must trace. Data crosses the boundary as JSON text and errors as exit codes,
// so no C++ object or exception crosses it.
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "trace/trace.hpp"

namespace {

char* copy_of(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

}  // namespace

// Traces the model given as model-section JSON. Returns 0 with the trace-section JSON in
// *out, or 1 (DataError) or 2 (UsageError) with the message in *out; the caller frees *out.
extern "C" int syssim_trace_json(const char* model_json, char** out) {
  try {
    syssim::ModelConfig model = syssim::model_from_json(nlohmann::json::parse(model_json), "/model");
    *out = copy_of(syssim::to_json(syssim::trace_model(model)).dump());
    return 0;
  } catch (const syssim::UsageError& error) {
    *out = copy_of(error.what());
    return 2;
  } catch (const std::exception& error) {
    *out = copy_of(error.what());
    return 1;
  }
}
