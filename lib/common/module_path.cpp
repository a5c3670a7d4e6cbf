#include "common/module_path.hpp"

#include "common/text.hpp"

namespace syssim {
namespace {

LayerPart layer_part_of(std::string_view path) {
  constexpr std::string_view kLayers = "decoder.layers.";
  if (!starts_with(path, kLayers)) return LayerPart::other;
  const size_t dot = path.find('.', kLayers.size());
  if (dot == std::string_view::npos) return LayerPart::residual;
  const std::string_view part = path.substr(dot + 1);
  if (starts_with(part, "input_layernorm") || starts_with(part, "self_attention")) return LayerPart::attention;
  if (starts_with(part, "pre_mlp_layernorm")) return LayerPart::pre_mlp_norm;
  if (starts_with(part, "mlp.router")) return LayerPart::router;
  if (starts_with(part, "mlp.token_dispatcher")) return LayerPart::dispatch;
  if (starts_with(part, "mlp")) return LayerPart::mlp;
  return LayerPart::other;
}

bool has_component(std::string_view path, std::string_view component) {
  for (size_t at = path.find(component); at != std::string_view::npos; at = path.find(component, at + 1)) {
    const size_t end = at + component.size();
    if ((at == 0 || path[at - 1] == '.') && (end == path.size() || path[end] == '.')) return true;
  }
  return false;
}

}  // namespace

ModulePath parse_module_path(std::string_view path) {
  ModulePath parsed;
  parsed.layer_part = layer_part_of(path);
  const auto& components = EnumNames<ModuleComponent>::kNames;
  for (size_t c = 0; c < components.size(); ++c)
    if (has_component(path, components[c])) parsed.components |= static_cast<uint16_t>(1u << c);
  constexpr std::string_view kShared = ".shared_experts", kDispatcher = ".token_dispatcher";
  if (const size_t at = path.find(kShared); at != std::string_view::npos) {
    parsed.shared_expert_layer_length = static_cast<uint32_t>(at);
    parsed.shared_expert_fc2 = path.find(".shared_experts.linear_fc2") != std::string_view::npos;
  }
  if (ends_with(path, kDispatcher))
    parsed.token_dispatcher_layer_length = static_cast<uint32_t>(path.size() - kDispatcher.size());
  parsed.embedding = path == "embedding" || starts_with(path, "embedding.");
  return parsed;
}

}  // namespace syssim
