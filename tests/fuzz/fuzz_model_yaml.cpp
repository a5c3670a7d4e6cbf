// Model YAML: the loader and the model checks every stage relies on.
#include "config/config.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return syssim::fuzz::accept_errors([&] {
    syssim::ModelConfig model = syssim::parse_model_yaml(syssim::fuzz::text_of(data, size), "fuzz.yaml");
    syssim::validate(model, "fuzz.yaml");
    const nlohmann::json written = syssim::to_json(model);
    (void)written.dump();  // the JSON writer takes every string the loader let through
    (void)syssim::model_from_json(written, "/model");
  });
}
