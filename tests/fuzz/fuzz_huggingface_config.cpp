// A Hugging Face config.json: mapped to Megatron's keys, then loaded as a model YAML is.
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config/config.hpp"
#include "config/huggingface.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, false);
  if (config.is_discarded()) return 0;  // not JSON: the reader's parse_error, tested elsewhere
  return syssim::fuzz::accept_errors([&] {
    YAML::Node node = syssim::map_huggingface_config(config, 4096, "config.json");
    YAML::Emitter out;
    out << node;
    syssim::validate(syssim::parse_model_yaml(out.c_str(), "config.json"), "config.json");
  });
}
