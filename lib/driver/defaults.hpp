// The default job of `syssim run` with no arguments: Llama-3-8B, bf16, one 8-GPU H100 node.
#pragma once

namespace syssim {

extern const char* const kDefaultModelYaml;     // configs/models/llama3-8b.yaml
extern const char* const kDefaultHardwareYaml;  // configs/hardware/h100-sxm-80gb.yaml

}  // namespace syssim
