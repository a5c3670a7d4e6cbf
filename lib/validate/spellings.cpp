#include "validate/spellings.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>
#include <vector>

#include "common/text.hpp"

namespace syssim {
namespace {

// Upper case, words joined by single dashes ("nvidia h100_sxm 80GB" -> "NVIDIA-H100-SXM-80GB").
std::string normalized(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool separator = c == ' ' || c == '-' || c == '_' || c == '\t';
    if (separator) {
      if (!out.empty() && out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

}  // namespace

bool same_gpu_spelling(const std::string& a, const std::string& b) {
  if (normalized(a) == normalized(b)) return true;
  const std::optional<std::string> preset = preset_of_gpu(a);
  return preset && preset == preset_of_gpu(b);
}

std::optional<std::string> preset_of_gpu(const std::string& gpu) {
  std::string name = normalized(gpu);
  if (starts_with(name, "NVIDIA-")) name = name.substr(7);
  if (starts_with(name, "AMD-")) name = name.substr(4);
  if (starts_with(name, "INSTINCT-")) name = name.substr(9);  // AMD's product line: "AMD Instinct MI300X"
  // Each GPU's spellings; the first of a list is the plain name, which takes the preset of the
  // part most runs use (the SXM board with its larger memory).
  static const std::vector<std::pair<std::vector<std::string>, std::string>> kSpellings = {
      {{"A100", "A100-80GB", "A100-SXM", "A100-SXM4", "A100-SXM-80GB", "A100-SXM4-80GB"}, "a100-sxm-80gb"},
      {{"A100-40GB", "A100-SXM-40GB", "A100-SXM4-40GB"}, "a100-sxm-40gb"},
      {{"H100", "H100-80GB", "H100-SXM", "H100-SXM5", "H100-SXM-80GB", "H100-SXM5-80GB", "H100-80GB-HBM3"},
       "h100-sxm-80gb"},
      {{"H100-NVL", "H100-NVL-94GB"}, "h100-nvl"},
      {{"H100-96GB-HBM2E-500W"}, "h100-sxm-96gb-500w"},
      {{"H200", "H200-SXM", "H200-141GB", "H200-SXM-141GB"}, "h200-sxm"},
      {{"H800", "H800-SXM", "H800-80GB"}, "h800-sxm"},
      {{"GH200", "GH200-96GB", "GH200-144GB"}, "gh200"},
      {{"B200", "B200-180GB", "B200-SXM"}, "b200"},
      {{"B300", "B300-288GB", "B300-SXM"}, "b300"},
      {{"GB200", "GB200-NVL72"}, "gb200-nvl72"},
      {{"GB300", "GB300-NVL72"}, "gb300-nvl72"},
      {{"MI300X", "MI300X-192GB"}, "mi300x"},
  };
  for (const auto& [spellings, preset] : kSpellings)
    if (std::find(spellings.begin(), spellings.end(), name) != spellings.end()) return preset;
  return std::nullopt;
}

std::optional<Precision> precision_of(const std::string& dtype) {
  const std::string name = normalized(dtype);
  // Mixed 16-bit labels of papers ("fp16/bf16 mixed (16-bit)") and Composer's ("bf16 (amp_bf16,
  // DEFAULT)"): the 16-bit dtype, bf16 where both are named.
  if (starts_with(name, "FP16/BF16")) return Precision{"bf16", std::nullopt, true};
  if (starts_with(name, "BF16-(AMP")) return Precision{"bf16", std::nullopt, false};
  static const std::map<std::string, Precision> kPrecisions = {
      {"BF16", {"bf16", std::nullopt, false}},
      {"BFLOAT16", {"bf16", std::nullopt, false}},
      {"BF16-MIXED", {"bf16", std::nullopt, false}},
      {"AMP-BF16", {"bf16", std::nullopt, false}},
      {"FP16", {"fp16", std::nullopt, false}},
      {"FLOAT16", {"fp16", std::nullopt, false}},
      {"FP16-MIXED", {"fp16", std::nullopt, false}},
      {"FP8", {"fp8", std::nullopt, false}},
      {"FP8-CS", {"fp8", "current", false}},
      {"FP8-CURRENT", {"fp8", "current", false}},
      {"FP8-CURRENT-SCALING", {"fp8", "current", false}},
      {"FP8-DS", {"fp8", "delayed", false}},
      {"FP8-DELAYED", {"fp8", "delayed", false}},
      {"FP8-DELAYED-SCALING", {"fp8", "delayed", false}},
      {"FP8-MX", {"fp8", "mxfp8", false}},
      {"MXFP8", {"fp8", "mxfp8", false}},
      {"FP8-MXFP8", {"fp8", "mxfp8", false}},
      {"NVFP4", {"fp4", "nvfp4", false}},
      // torchao's float8 recipes, as torchtitan's tables name them: tensorwise is dynamic
      // per-tensor scaling (Transformer Engine's current scaling), rowwise its own recipe.
      {"FP8-TENSORWISE", {"fp8", "current", false}},
      {"FP8-ROWWISE", {"fp8", "rowwise", false}},
      {"FP4", {"fp4", "nvfp4", false}},
  };
  auto it = kPrecisions.find(name);
  if (it == kPrecisions.end()) return std::nullopt;
  return it->second;
}

}  // namespace syssim
