// What a module path ("decoder.layers.3.mlp.shared_experts.linear_fc1", as lib/trace names
// Megatron-Core's modules) says about the ops in it, for the stages that treat parts of a
// layer apart: CUDA graph scopes, the shared experts' overlap, selective recompute, the
// pipeline's placement of the embedding. A Symbol finds it once, when its text is first
// interned (Symbol::module_path), so no stage searches module paths.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "common/op_kinds.hpp"

namespace syssim {

// The part of a decoder layer ("decoder.layers.N.") a module is in, by the first names below
// the layer: input_layernorm and self_attention (attention), pre_mlp_layernorm, mlp.router,
// mlp.token_dispatcher, the rest of mlp; the layer's own module (its residual adds); `other`
// for every other path, in a layer or not.
enum class LayerPart : uint8_t { other, attention, pre_mlp_norm, router, dispatch, mlp, residual };

// The names of Megatron-Core modules that selective recompute checkpoints wherever they occur
// in a path (as a whole dot-separated name: "mlp" is in "decoder.layers.3.mlp.linear_fc1", not
// in "decoder.layers.3.mlp_bda").
enum class ModuleComponent : uint8_t {
  core_attention, mlp, input_layernorm, pre_mlp_layernorm, activation_func, shared_experts,
  linear_q_up_proj, linear_kv_up_proj, mla_rope,
};
template <>
struct EnumNames<ModuleComponent> {
  static constexpr std::array<const char*, 9> kNames = {
      "core_attention", "mlp", "input_layernorm", "pre_mlp_layernorm", "activation_func", "shared_experts",
      "linear_q_up_proj", "linear_kv_up_proj", "mla_rope"};
};

struct ModulePath {
  LayerPart layer_part = LayerPart::other;
  uint16_t components = 0;  // bit c set: ModuleComponent c is one of the path's names
  // The MoE layer modules the shared experts' overlap pairs up, as the length of the layer's
  // path (0: not such a module): a shared expert's module is the layer's path followed by
  // ".shared_experts" (and more), the token dispatcher's by ".token_dispatcher" (and nothing).
  uint32_t shared_expert_layer_length = 0;
  uint32_t token_dispatcher_layer_length = 0;
  bool shared_expert_fc2 = false;  // under "….shared_experts.linear_fc2"
  bool embedding = false;          // "embedding" or below it: runs before the decoder layers

  bool has(ModuleComponent component) const { return components >> static_cast<unsigned>(component) & 1u; }
};

ModulePath parse_module_path(std::string_view path);

}  // namespace syssim
