// The spellings of a measured table's `gpu` and `dtype` cells that `syssim validate` accepts
// (docs/validation.md, "Spellings"): each mapped to a hardware preset or to a precision and
// Transformer Engine recipe, so a user's own table needs no renaming.
#pragma once
#include <optional>
#include <string>

namespace syssim {

// The hardware preset of a gpu cell, in any case, with spaces, dashes or underscores, with or
// without "NVIDIA" and the memory size ("H100", "h100 sxm 80gb", "A100-40GB", "GB300");
// nullopt for a GPU without a preset.
std::optional<std::string> preset_of_gpu(const std::string& gpu);
// Whether two gpu cells name the same GPU: the same text in any case, with spaces, dashes or
// underscores between words, or two spellings of one preset ("H100", "NVIDIA H100 SXM5").
// Unknown GPUs match by text alone.
bool same_gpu_spelling(const std::string& a, const std::string& b);

// A precision as a dtype cell names it: the linear GEMMs' dtype and, for fp8 and fp4, the
// scaling recipe when the spelling says which (fp8-cs / current scaling: current; fp8-ds /
// delayed scaling: delayed; fp8-mx / mxfp8: mxfp8; nvfp4, fp4: nvfp4).
struct Precision {
  std::string dtype;                  // bf16 | fp16 | fp8 | fp4
  std::optional<std::string> recipe;  // none for 16-bit and for a bare "fp8"
  bool mixed_16bit = false;           // a cell that names both 16-bit types ("fp16/bf16 mixed"): bf16 taken
};
std::optional<Precision> precision_of(const std::string& dtype);

}  // namespace syssim
