// Hardware YAML: the loader, its range checks and the JSON round trip the cost section keeps.
#include "config/config.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return syssim::fuzz::accept_errors([&] {
    syssim::HardwareConfig hardware = syssim::parse_hardware_yaml(syssim::fuzz::text_of(data, size), "fuzz.yaml");
    syssim::validate(hardware, "fuzz.yaml");
    (void)syssim::hardware_from_json(syssim::to_json(hardware), "/hardware");
  });
}
