// The closed sets an op's fields take (docs/graph-format.md): parsed once where a section is
// read, enums everywhere after.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace syssim {

// What an op computes, and so how the cost stage prices it (host_copy: a copy between the
// GPU's memory and its host's, over the host link).
enum class OpKind : uint8_t { gemm, attention, math, memory, collective, optimizer, host_copy };
// How often a step runs an op: once per micro-batch, once after them, once before them.
enum class OpScope : uint8_t { microbatch, step, step_start };
// Which part of the step an op belongs to (a traced op: fwd or bwd).
enum class OpPhase : uint8_t { fwd, bwd, optimizer };
// The schedule slot that runs an op: a micro-batch's forward, backward or weight-gradient pass
// through a chunk, or the step's own ops (a schedule slot is one of the first three).
enum class OpPass : uint8_t { forward, backward, weight, step };

// A collective's operation (send_recv: one step of a ring, each rank sending to the next of its
// group; all_to_all: each rank sending a share to every other; flex_all_to_all: the flex token
// dispatcher's exchange, each token sent once to each GPU and node holding one of its experts)
// and the ranks it runs over:
// the tensor-, context- and data-parallel groups, the pipeline's (pp, and embedding: the
// first and last stages holding the tied embeddings), the expert layers' groups and hybrid
// sharding's replicas of the data-parallel shard groups (docs/graph-format.md).
enum class Collective : uint8_t { all_reduce, all_gather, reduce_scatter, send_recv, all_to_all, flex_all_to_all };
enum class CommGroup : uint8_t { tp, cp, dp, pp, embedding, ep, etp, edp, dpr };
// The in-order queue an op runs on (docs/graph-format.md, `stream`): the compute stream, one
// per communication group (a collective runs on its group's, as NCCL runs one stream per
// communicator, in CommGroup's order), the delayed-scaling amax reduction's, activation
// offloading's two copy streams, and the host thread that issues the kernels, which only
// the simulator's queues and timelines have.
enum class Stream : uint8_t { compute, tp, cp, dp, pp, embedding, ep, etp, edp, dpr, amax, d2h, h2d, host };
// The stream of a group's collectives.
constexpr Stream stream_of(CommGroup group) { return static_cast<Stream>(static_cast<uint8_t>(group) + 1); }
// How tensor (and expert) parallelism splits a traced op (docs/graph-format.md, `tp_role`):
// Megatron's column- and row-parallel linears, the vocabulary-parallel embedding, output
// layer and loss, the routed experts' grouped fc1 and fc2 and their other ops, the token
// permutation to expert order and back; none: replicated, or split by the sequence alone.
enum class TpRole : uint8_t {
  none, column, row, vocab_embedding, vocab_output, vocab_loss, expert_column, expert_row, expert, expert_dispatch
};

// What a traced tensor or a shard buffer holds: a weight, a weight's gradient, the step's input
// (token ids, labels, positions), an activation; the shard stage adds the buffers collectives
// create (comm) and the fp8/fp4 copies of a weight kept for the step (quantized_weight).
enum class TensorRole : uint8_t { param, grad, input, activation, comm, quantized_weight };

// The ops a stage treats apart by what they are, not by their kind: the linears (whose operand
// layout gives a GEMM's sizes), the attention variants, the norms, reductions and casts the
// cost stage prices as their own families, and the ops a pass looks for. Every other op is
// `other`. A Symbol knows the one its text names from when the text is first interned
// (Symbol::named_op), so no stage compares op names.
enum class NamedOp : uint8_t {
  other,
  linear, linear_dgrad, linear_wgrad,
  qkv_linear, qkv_linear_dgrad, qkv_linear_wgrad,
  stacked_linear, stacked_linear_dgrad, stacked_linear_wgrad,
  grouped_linear, grouped_linear_dgrad, grouped_linear_wgrad,
  flash_attn, flash_attn_backward, flash_attn_window, flash_attn_window_backward,
  scale_mask_softmax, moe_permute,
  rms_norm, rms_norm_backward, layer_norm, layer_norm_backward, grad_norm, copy_grads_to_fp32,
  sum, cross_entropy, amax, quantize, transpose, torchao_quantize,
};

// Each enum's names, in the order of its values, as the graph format writes them.
template <typename Enum>
struct EnumNames;
template <>
struct EnumNames<OpKind> {
  static constexpr std::array<const char*, 7> kNames = {"gemm",       "attention", "math",     "memory",
                                                        "collective", "optimizer", "host_copy"};
};
template <>
struct EnumNames<OpScope> {
  static constexpr std::array<const char*, 3> kNames = {"microbatch", "step", "step_start"};
};
template <>
struct EnumNames<OpPhase> {
  static constexpr std::array<const char*, 3> kNames = {"fwd", "bwd", "optimizer"};
};
template <>
struct EnumNames<OpPass> {
  static constexpr std::array<const char*, 4> kNames = {"forward", "backward", "weight", "step"};
};

template <>
struct EnumNames<Collective> {
  static constexpr std::array<const char*, 6> kNames = {"all_reduce", "all_gather",  "reduce_scatter",
                                                        "send_recv",  "all_to_all", "flex_all_to_all"};
};
template <>
struct EnumNames<CommGroup> {
  static constexpr std::array<const char*, 9> kNames = {"tp", "cp", "dp", "pp", "embedding", "ep", "etp", "edp", "dpr"};
};
template <>
struct EnumNames<Stream> {
  static constexpr std::array<const char*, 14> kNames = {"compute", "tp",  "cp",   "dp",  "pp",  "embedding", "ep",
                                                         "etp",     "edp", "dpr", "amax", "d2h", "h2d",       "host"};
};
template <>
struct EnumNames<TensorRole> {
  static constexpr std::array<const char*, 6> kNames = {"param", "grad", "input", "activation", "comm", "quantized_weight"};
};
template <>
struct EnumNames<TpRole> {
  static constexpr std::array<const char*, 10> kNames = {"none",          "column",     "row",    "vocab_embedding",
                                                         "vocab_output",  "vocab_loss", "expert_column",
                                                         "expert_row",    "expert",     "expert_dispatch"};
};
template <>
struct EnumNames<NamedOp> {
  static constexpr std::array<const char*, 31> kNames = {
      "",  // other: any name not below
      "syssim::linear", "syssim::linear_dgrad", "syssim::linear_wgrad",
      "syssim::qkv_linear", "syssim::qkv_linear_dgrad", "syssim::qkv_linear_wgrad",
      "syssim::stacked_linear", "syssim::stacked_linear_dgrad", "syssim::stacked_linear_wgrad",
      "syssim::grouped_linear", "syssim::grouped_linear_dgrad", "syssim::grouped_linear_wgrad",
      "syssim::flash_attn", "syssim::flash_attn_backward", "syssim::flash_attn_window",
      "syssim::flash_attn_window_backward",
      "syssim::scale_mask_softmax", "syssim::moe_permute",
      "syssim::rms_norm", "syssim::rms_norm_backward", "syssim::layer_norm", "syssim::layer_norm_backward",
      "optimizer::grad_norm", "optimizer::copy_grads_to_fp32",
      "aten::sum", "syssim::cross_entropy", "te::amax", "te::quantize", "te::transpose",
      "torchao::quantize"};
};

// A group's stream bears the group's name.
constexpr bool streams_follow_groups() {
  for (size_t g = 0; g < EnumNames<CommGroup>::kNames.size(); ++g) {
    const auto stream = static_cast<size_t>(stream_of(static_cast<CommGroup>(g)));
    if (std::string_view(EnumNames<CommGroup>::kNames[g]) != EnumNames<Stream>::kNames[stream]) return false;
  }
  return true;
}
static_assert(streams_follow_groups());

template <typename Enum, typename = decltype(EnumNames<Enum>::kNames)>
const char* to_string(Enum value) {
  return EnumNames<Enum>::kNames[static_cast<size_t>(value)];
}

// The names of `values`, in their order; without values, every name of Enum.
template <typename Enum>
std::vector<std::string> names_of(const std::vector<Enum>& values = {}) {
  if (values.empty()) return {EnumNames<Enum>::kNames.begin(), EnumNames<Enum>::kNames.end()};
  std::vector<std::string> names;
  for (Enum value : values) names.push_back(to_string(value));
  return names;
}

// The value named `name`, or nullopt for another name.
template <typename Enum>
std::optional<Enum> parse_enum(std::string_view name) {
  const auto& names = EnumNames<Enum>::kNames;
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace syssim
