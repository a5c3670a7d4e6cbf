// Low precision as Transformer Engine runs it under Megatron-LM, and torchao's rowwise recipe
// where it differs (docs/syssim-shard.md "Low precision"). TE's linears of the transformer layers (QKV, attention projection, fc1, fc2, the
// experts' grouped fc1 and fc2) run
// their three GEMMs (forward, dgrad, wgrad) on quantized operands; everything else (embedding,
// output layer, attention core, norms, element-wise ops, loss) stays in bf16. TE quantizes each
// GEMM operand once, in every usage its GEMMs read:
// - rowwise for the forward GEMM (input, weight) and the dgrad (output gradient),
// - columnwise for the wgrad (input, output gradient) and the dgrad (weight): a transposed copy
//   on Hopper for the per-tensor recipes, an independently scaled copy for MXFP8 and NVFP4
//   (NVIDIA/TransformerEngine docs/features/low_precision_training/performance_considerations,
//   "Handling transposes").
// Weights are quantized once per step: Megatron sets is_first_microbatch on every TE module at
// the first micro-batch of a step (megatron/core/transformer/module.py set_is_first_microbatch,
// called by the pipeline schedules) and TE's linear casts its weight only then, reusing the
// cached copies in the later micro-batches (transformer_engine/pytorch/module/linear.py,
// update_fp8_weights).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "common/error.hpp"
#include "common/units.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

constexpr double kBlockScaleBytes = 1;  // E8M0 (MXFP8) and E4M3 (NVFP4) block scales
// Delayed scaling keeps per quantized tensor an amax history of Megatron-LM's
// --fp8-amax-history-len entries (default 1, megatron/training/arguments.py), a scale and its
// inverse, all fp32; the update rewrites them from the reduced amaxes.
constexpr double kAmaxHistoryLength = 1;
constexpr double kScaleStateBytes = (kAmaxHistoryLength + 2) * kFp32Bytes;
constexpr double kScaleUpdateFlops = 2;  // per tensor: the scale fp8_max / amax and its inverse
// Per linear TE quantizes one input and one weight tensor in the forward pass and one output
// gradient in the backward pass; delayed scaling reduces one amax for each.
constexpr double kForwardTensorsPerLinear = 2;
constexpr double kBackwardTensorsPerLinear = 1;

// How a recipe stores a quantized tensor and what it computes to get there.
struct Recipe {
  std::string gemm_dtype;         // dtype of the GEMMs: fp8 | fp4
  double element_bytes = 1;       // E4M3/E5M2: 1 byte; E2M1: half a byte
  double block = 0;               // elements sharing one block scale; 0: none
  double tensor_scale_bytes = 0;  // fp32 scale of the whole tensor
  double amax_kernels = 0;        // kernels of a pass of its own that finds the tensor's amax (and scale) before the cast; 0: none
  bool delayed = false;           // scales come from the amax history, updated after each pass
  bool copy_amaxes = false;       // each copy takes the amaxes of its own blocks or rows in the cast
  bool gathers_quantized = true;  // a TP all-gathered operand is quantized before the gather
  bool rescaled_backward = false; // dgrad and wgrad scale their output in a kernel of their own
  bool fused_expert_casts = true; // the experts' rows are quantized in one kernel, not expert by expert
  std::string framework = "te";   // whose kernels: the prefix of the ops' names
};

// TE's recipes (NVIDIA/TransformerEngine docs/features/low_precision_training):
// - DelayedScaling: one fp32 scale per tensor from the amax history; the cast kernel records
//   the tensor's amax; the amaxes are reduced and the scales updated when the fp8_autocast
//   region is left (transformer_engine/pytorch/quantization.py reduce_and_update_fp8_tensors).
// - Float8CurrentScaling: one fp32 scale per tensor from the tensor's own amax, "reading the
//   tensor twice", first for the amax, then to cast (fp8_current_scaling.rst): three kernels,
//   the amax, the scale from it and the cast (Float8CurrentScalingQuantizer::quantize_impl,
//   transformer_engine/pytorch/csrc/quantizer.cpp).
// - Quantizing the experts' rows for their grouped GEMM, TE has a fused multi-tensor kernel for
//   delayed scaling only (and grouped kernels for NVFP4); current scaling and MXFP8 run their
//   kernels expert by expert (multi_tensor_quantize_impl, .../extensions/cast.cpp).
// - MXFP8BlockScaling: one E8M0 scale per 32 consecutive elements; rowwise and columnwise
//   copies quantized independently from the high-precision data (mxfp8.rst).
// - NVFP4BlockScaling: E2M1 elements, one E4M3 scale per 16 elements and an fp32 global scale
//   from the tensor's amax (nvfp4.rst).
// - torchao's rowwise recipe (pytorch/ao torchao/float8/config.py, Float8LinearRecipeName.
//   ROWWISE, at the commit torchtitan's June 2025 benchmarks ran, 6243040): input, weight and
//   output gradient scaled per row along the GEMM's reduced dimension (AXISWISE), one fp32 per
//   row of thousands of elements (not counted), each usage cast from the bf16 tensor along its
//   own axis in a kernel that finds the rows' amaxes; torchtitan's TP all-gathers in bf16 and
//   casts after (torchtitan/models/llama3/parallelize_llama.py: the float8 TP styles only for
//   tensorwise). The forward GEMM runs PyTorch's row-wise CUTLASS kernel with fast
//   accumulation, within 90-100% of the per-tensor cuBLAS kernel on most shapes (pytorch/pytorch
//   issue 147971), priced as the fp8 GEMM; dgrad and wgrad accumulate in full precision, where
//   that kernel is slow, so torchao runs cuBLAS's per-tensor kernel with unit scales and
//   multiplies its output by the row and column scales afterwards (torchao/float8/
//   float8_ops.py, addmm_float8_unwrapped): an element-wise pass over each output, taken as a
//   kernel of its own (Inductor may fuse it into the next point-wise op).
Recipe recipe_named(const std::string& name) {
  Recipe recipe{"fp8"};
  if (name == "delayed") {
    recipe.tensor_scale_bytes = kFp32Bytes;
    recipe.delayed = true;
  } else if (name == "current") {
    recipe.tensor_scale_bytes = kFp32Bytes;
    recipe.amax_kernels = 2;  // the amax, then the scale from it
    recipe.fused_expert_casts = false;
  } else if (name == "mxfp8") {
    recipe.block = 32;
    recipe.copy_amaxes = true;
    recipe.fused_expert_casts = false;
  } else if (name == "nvfp4") {
    recipe.gemm_dtype = "fp4";
    recipe.element_bytes = 0.5;
    recipe.block = 16;
    recipe.tensor_scale_bytes = kFp32Bytes;
    recipe.amax_kernels = 1;
    recipe.copy_amaxes = true;
  } else if (name == "rowwise") {
    recipe.copy_amaxes = true;
    recipe.gathers_quantized = false;
    recipe.rescaled_backward = true;
    recipe.framework = "torchao";
  } else {
    throw UsageError("fp8_recipe=" + name + ": expected delayed, current, mxfp8, nvfp4 or rowwise");
  }
  return recipe;
}

// Bytes of one quantized copy (one usage) of a tensor of `elements`.
double copy_bytes(const Recipe& recipe, double elements) {
  double block_scales = recipe.block > 0 ? elements / recipe.block * kBlockScaleBytes : 0;
  return elements * recipe.element_bytes + block_scales + recipe.tensor_scale_bytes;
}

// FLOPs of a cast writing `copies` usages: a scaling multiply per element and copy, each
// copy's block or row amaxes (MXFP8, NVFP4, rowwise) and the tensor's amax in the same pass
// (delayed scaling).
double cast_flops(const Recipe& recipe, double elements, size_t copies) {
  double per_copy = recipe.copy_amaxes ? 2 : 1;
  return elements * (static_cast<double>(copies) * per_copy + (recipe.delayed ? 1 : 0));
}

enum class Usage { kRowwise, kColumnwise };
enum class GemmRole { kForward, kDgrad, kWgrad };

Usage activation_usage(GemmRole role) { return role == GemmRole::kWgrad ? Usage::kColumnwise : Usage::kRowwise; }
Usage weight_usage(GemmRole role) { return role == GemmRole::kDgrad ? Usage::kColumnwise : Usage::kRowwise; }

// The ops of one delayed-scaling update: per pipeline rank, model chunk and direction.
using ScalingGroup = std::tuple<int64_t, int64_t, bool>;  // stage, chunk, backward

bool is_tp_gather(const ShardOp& op) {
  return op.kind == OpKind::collective && op.collective == Collective::all_gather && op.group == CommGroup::tp && op.scope == OpScope::microbatch &&
         op.reads.size() == 1 && op.writes.size() == 1;
}

// The distributed optimizer's all-gather of updated weights.
bool is_param_gather(const ShardOp& op, const ShardSection& shard) {
  return op.kind == OpKind::collective && op.collective == Collective::all_gather && !op.writes.empty() &&
         std::all_of(op.writes.begin(), op.writes.end(), [&](int64_t b) { return shard.buffers[b].role == TensorRole::param; });
}

class LowPrecision {
 public:
  LowPrecision(const ShardContext& context, ShardSection& shard, const std::string& recipe)
      : context_(context),
        shard_(shard),
        recipe_(recipe_named(recipe)),
        high_precision_(high_precision_dtype(context.options.training)),
        param_gather_(context.options.training.fp8_param_gather),
        pads_expert_rows_(recipe_.framework == "te" && !context.options.training.moe_pad_expert_input_to_capacity &&
                          !context.options.training.moe_router_padding_for_quantization),
        rewriter_(shard) {
    for (const ShardBuffer& b : shard.buffers) original_bytes_.push_back(b.bytes);
    plan();
  }

  void run() {
    bool weights_done = false;
    for (const ShardOp& op : rewriter_.old_ops()) {
      if (!weights_done && op.scope != OpScope::step_start) {
        quantize_weights();
        weights_done = true;
      }
      if (gather_usages_.count(op.id))
        gather_quantized(op);
      else if (roles_.count(op.id))
        low_precision_gemm(op, roles_.at(op.id));
      else
        keep(op);
      auto group = last_of_group_.find(op.id);
      if (group != last_of_group_.end()) update_scales(group->second, op);
    }
  }

 private:
  // --- the plan: what the linears read ----------------------------------------------------

  std::optional<GemmRole> role_of(const ShardOp& op) const {
    if (op.kind != OpKind::gemm || op.scope != OpScope::microbatch || !op.layer || !op.trace_op) return std::nullopt;
    const TraceOp& traced = context_.trace.ops[*op.trace_op];
    const bool linear = traced.tp_role == TpRole::column || traced.tp_role == TpRole::row ||
                        traced.tp_role == TpRole::expert_column || traced.tp_role == TpRole::expert_row;
    if (!linear) return std::nullopt;
    if (traced.phase == OpPhase::fwd) return GemmRole::kForward;
    bool reads_weight = std::any_of(op.reads.begin(), op.reads.end(), [&](int64_t b) { return is_weight(b); });
    return reads_weight ? GemmRole::kDgrad : GemmRole::kWgrad;
  }

  // The linear a GEMM belongs to: its forward traced op.
  int64_t linear_of(const ShardOp& op) const {
    const TraceOp& traced = context_.trace.ops[*op.trace_op];
    return traced.phase == OpPhase::fwd ? traced.id : traced.fwd_op.value_or(traced.id);
  }

  // A weight matrix, or the experts' stack of them; a bias stays in 16 bits.
  bool is_weight(int64_t b) const {
    if (shard_.buffers[b].role != TensorRole::param || b >= static_cast<int64_t>(context_.trace.tensors.size())) return false;
    const size_t dims = context_.trace.tensors[b].dims.size();
    return dims == (context_.is_expert_tensor(b) ? 3 : 2);
  }
  bool is_activation_operand(int64_t b) const { return shard_.buffers[b].role != TensorRole::param; }

  // Which GEMMs run in low precision; what each bf16 tensor is quantized for (a tensor a TP
  // all-gather gathers is quantized before it and its quantized copies are gathered, as TE
  // does under sequence parallelism); which weights each linear reads; where each
  // delayed-scaling group ends.
  void plan() {
    const auto& ops = rewriter_.old_ops();
    std::vector<int64_t> last_writer(shard_.buffers.size(), -1);
    std::set<int64_t> other_readers;  // buffers some op reads other than as a quantized operand
    std::map<ScalingGroup, int64_t> last_gemm;
    for (const ShardOp& op : ops) {
      std::optional<GemmRole> role = role_of(op);
      for (int64_t b : op.reads)
        if (!role || !is_activation_operand(b)) other_readers.insert(b);
      if (role) plan_gemm(op, *role, last_writer);
      if (role && recipe_.delayed && !op.recompute) {
        ScalingGroup group{op.stage, op.chunk, *role != GemmRole::kForward};
        last_gemm[group] = op.id;
        linears_of_group_[group].insert(linear_of(op));
      }
      for (int64_t b : op.writes) last_writer[b] = op.id;
    }
    for (const auto& [group, op] : last_gemm) last_of_group_[op] = group;
    for (const auto& [gather, usages] : gather_usages_)
      if (other_readers.count(ops[gather].writes[0])) gathers_kept_.insert(gather);
    // --fp8-param-gather: the weight is itself the fp8 rowwise copy, from the step's start on.
    if (param_gather_)
      for (const auto& [w, usages] : weight_usages_) shard_.buffers[w].bytes = copy_bytes(recipe_, elements_of(w));
  }

  void plan_gemm(const ShardOp& op, GemmRole role, const std::vector<int64_t>& last_writer) {
    const auto& ops = rewriter_.old_ops();
    roles_[op.id] = role;
    int64_t linear = linear_of(op);
    if (!weights_of_linear_.count(linear)) linear_order_.push_back(linear);
    if (role == GemmRole::kForward) first_forward_.emplace(linear, op);
    std::vector<int64_t>& weights = weights_of_linear_[linear];
    for (int64_t b : op.reads) {
      if (is_weight(b)) {
        if (std::find(weights.begin(), weights.end(), b) == weights.end()) weights.push_back(b);
        weight_usages_[b].insert(weight_usage(role));
      } else if (is_activation_operand(b)) {
        int64_t writer = last_writer[b];
        Usage usage = activation_usage(role);
        if (recipe_.gathers_quantized && writer >= 0 && is_tp_gather(ops[writer])) {
          gather_usages_[writer].insert(usage);
          source_usages_[ops[writer].reads[0]].insert(usage);
        } else {
          source_usages_[b].insert(usage);
        }
      }
    }
  }

  // --- emitting ----------------------------------------------------------------------------

  // An op inserted for `consumer`: same layer, module, pass and pipeline place, on the
  // compute stream.
  ShardOp inserted(const ShardOp& consumer, const std::string& name, OpKind kind) const {
    return compute_op_for(consumer, name, kind, high_precision_);
  }

  // A collective of `group` inserted for `consumer`, in its pass and pipeline place.
  ShardOp inserted_collective(const ShardOp& consumer, CommGroup group, double message_bytes) const {
    ShardOp c = make_collective(context_, Collective::all_reduce, group, message_bytes, consumer.phase, consumer.scope);
    place_with(consumer, c);
    return c;
  }

  double bytes_of(const IdList& buffers) const {
    double bytes = 0;
    for (int64_t b : buffers) bytes += shard_.buffers[b].bytes;
    return bytes;
  }

  double elements_of(int64_t source) const { return original_bytes_[source] / dtype_size(high_precision_); }

  // The kernels `op` launches to quantize an operand of `consumer`, `per_tensor` for one
  // tensor: for the experts' grouped GEMM TE quantizes each local expert's rows (or weight) as
  // a tensor of its own unless the recipe has a fused multi-tensor kernel (split_quantize,
  // multi_tensor_quantize_impl in transformer_engine/pytorch/csrc/extensions/cast.cpp). The
  // shape's `kernels` sets the op's launch floor and the host's launches (syssim-cost).
  void launches(ShardOp& op, const ShardOp& consumer, double per_tensor) const {
    const double tensors = !recipe_.fused_expert_casts && consumer.shape.count("groups") ? consumer.shape.at("groups") : 1;
    if (per_tensor * tensors > 1) op.shape["kernels"] = per_tensor * tensors;
  }

  // The amax of `sources` in a pass of its own (current scaling, NVFP4), all-reduced over TP
  // when the quantized tensor is all-gathered: the ranks need one scale (TE docs: "Tensors
  // that are gathered ... require amax synchronization before quantization").
  int64_t amax_pass(const std::vector<int64_t>& sources, const ShardOp& consumer, bool gathered) {
    int64_t amax = rewriter_.emitter().add_buffer(kFp32Bytes, TensorRole::activation);
    ShardOp op = inserted(consumer, "te::amax", OpKind::math);
    launches(op, consumer, recipe_.amax_kernels);
    op.reads = sources;
    op.writes = {amax};
    for (int64_t b : sources) op.flops += elements_of(b);
    op.bytes = bytes_of(op.reads) + kFp32Bytes;
    rewriter_.add(op);
    if (gathered && context_.tp() > 1) {
      ShardOp reduce = inserted_collective(consumer, CommGroup::tp, kFp32Bytes);
      reduce.reads = reduce.writes = {amax};
      rewriter_.add(reduce);
    }
    return amax;
  }

  // Quantizes `sources` (one tensor of TE's) before `consumer` in every usage their readers
  // need, in one cast; `gathered` when the copies are all-gathered next.
  void quantize(const std::vector<int64_t>& sources, const ShardOp& consumer, bool gathered) {
    ShardOp cast = inserted(consumer, recipe_.framework + "::quantize", OpKind::memory);
    launches(cast, consumer, 1);
    cast.reads = sources;
    if (recipe_.amax_kernels > 0) cast.reads.push_back(amax_pass(sources, consumer, gathered));
    for (int64_t source : sources) {
      const std::set<Usage>& usages = source_usages_.at(source);
      for (Usage usage : usages) {
        int64_t copy = rewriter_.emitter().add_buffer(copy_bytes(recipe_, elements_of(source)), TensorRole::activation);
        quantized_[source][usage] = copy;
        cast.writes.push_back(copy);
      }
      cast.flops += cast_flops(recipe_, elements_of(source), usages.size());
    }
    if (recipe_.delayed) {
      int64_t amax = rewriter_.emitter().add_buffer(kFp32Bytes, TensorRole::activation);
      cast.writes.push_back(amax);
      if (!consumer.recompute) amaxes_of_group_[{consumer.stage, consumer.chunk, consumer.phase == OpPhase::bwd}].push_back(amax);
    }
    cast.bytes = bytes_of(cast.reads) + bytes_of(cast.writes);
    rewriter_.add(cast);
  }

  // A TP all-gather of a tensor the linears read quantized: the tensor is quantized first and
  // each usage's copy is gathered (the 16-bit gather stays when other ops read its result).
  void gather_quantized(const ShardOp& gather) {
    int64_t source = gather.reads[0];
    if (!quantized_.count(source)) quantize({source}, gather, true);
    bool first = !gathers_kept_.count(gather.id);
    if (!first) keep(gather);
    for (Usage usage : gather_usages_.at(gather.id)) {
      int64_t piece = quantized_.at(source).at(usage);
      double full = shard_.buffers[piece].bytes * static_cast<double>(context_.tp());
      ShardOp copy = gather;
      copy.dtype = recipe_.gemm_dtype;
      copy.message_bytes = copy.bytes = full;
      copy.reads = {piece};
      copy.writes = {rewriter_.emitter().add_buffer(full, TensorRole::comm)};
      gathered_[gather.writes[0]][usage] = copy.writes[0];
      if (first)
        rewriter_.keep(gather.id, copy);
      else
        rewriter_.add(copy);
      first = false;
    }
  }

  // The quantized copy a GEMM of `role` reads for operand b (what was read in 16 bits).
  int64_t quantized_operand(int64_t b, GemmRole role) const {
    if (is_weight(b)) {
      if (param_gather_ && role == GemmRole::kForward) return b;  // the weight is the fp8 rowwise copy
      return weight_copies_.at(b).at(weight_usage(role));
    }
    Usage usage = activation_usage(role);
    auto gathered = gathered_.find(b);
    return gathered != gathered_.end() ? gathered->second.at(usage) : quantized_.at(b).at(usage);
  }

  // A linear's GEMM in low precision, reading its operands' quantized copies; its output stays
  // 16-bit. Operands not quantized yet (nor gathered) are quantized just before it in one cast:
  // TE's linear quantizes its input, or its output gradient, as one tensor (the QKV gradient is
  // one tensor in TE, three in the trace).
  void quantized_gemm(const ShardOp& op, GemmRole role) {
    std::vector<int64_t> pending;
    for (int64_t b : op.reads)
      if (is_activation_operand(b) && !gathered_.count(b) && !quantized_.count(b) &&
          std::find(pending.begin(), pending.end(), b) == pending.end())
        pending.push_back(b);
    if (!pending.empty()) quantize(pending, op, false);
    ShardOp q = op;
    q.dtype = recipe_.gemm_dtype;
    q.reads.clear();
    for (int64_t b : op.reads) {
      if (!is_weight(b) && !is_activation_operand(b)) {  // a bias
        q.reads.push_back(b);
        continue;
      }
      int64_t copy = quantized_operand(b, role);
      q.bytes += shard_.buffers[copy].bytes - original_bytes_[b];
      q.reads.push_back(copy);
      // The forward GEMM keeps naming the 16-bit weight: TE's linear takes it as an input (and
      // casts it at the first micro-batch), and the pipeline pass places a weight on the ranks
      // whose micro-batch ops read it.
      if (copy != b && is_weight(b) && role == GemmRole::kForward) q.reads.push_back(b);
    }
    rewriter_.keep(op.id, q);
    if (recipe_.rescaled_backward && role != GemmRole::kForward) rescale(q);
  }

  // A linear's GEMM, and for the experts' grouped GEMMs TE's Fp8Padding and Fp8Unpadding
  // around Megatron-Core's TEGroupedMLP (moe/experts.py): each expert's rows padded to a
  // multiple of 16 (32 for MXFP8) before fc1 and cut back after fc2, the reverse on their
  // gradients, one copy kernel each (fused_multi_row_padding and _unpadding, padding.py), which
  // runs whenever the routed counts are not multiples already: without padding to capacity.
  void low_precision_gemm(const ShardOp& op, GemmRole role) {
    // The wgrads read what the dgrads' side already padded or has yet to cut back.
    const TpRole tp_role = pads_expert_rows_ && role != GemmRole::kWgrad ? context_.trace.ops[*op.trace_op].tp_role
                                                                         : TpRole::none;
    // fc1's input and fc2's output gradient: padded before the GEMM that quantizes them.
    const bool pads = (tp_role == TpRole::expert_column && role == GemmRole::kForward) ||
                      (tp_role == TpRole::expert_row && role == GemmRole::kDgrad);
    // fc2's output and fc1's input gradient: cut back after the GEMM that writes them.
    const bool unpads = (tp_role == TpRole::expert_row && role == GemmRole::kForward) ||
                        (tp_role == TpRole::expert_column && role == GemmRole::kDgrad);
    if (pads) {
      std::vector<int64_t> operands;
      for (int64_t b : op.reads)
        if (is_activation_operand(b)) operands.push_back(b);
      rewriter_.add(in_place_pass(op, "te::fp8_padding", OpKind::memory, operands));
    }
    quantized_gemm(op, role);
    // The padded rows are a sliver of the tensor: a copy of it, written in place here.
    if (unpads) rewriter_.add(in_place_pass(op, "te::fp8_unpadding", OpKind::memory, op.writes));
  }

  // A kernel beside `gemm` that reads `buffers` and writes them back in place.
  ShardOp in_place_pass(const ShardOp& gemm, const std::string& name, OpKind kind,
                        const IdList& buffers) const {
    ShardOp op = inserted(gemm, name, kind);
    op.reads = op.writes = buffers;
    op.bytes = 2 * bytes_of(buffers);
    return op;
  }

  // The per-row and per-column scales applied to a backward GEMM's 16-bit output in place
  // (torchao's rowwise recipe): one multiply per element, the output read and written.
  void rescale(const ShardOp& gemm) {
    ShardOp op = in_place_pass(gemm, recipe_.framework + "::rescale", OpKind::math, gemm.writes);
    op.flops = bytes_of(gemm.writes) / dtype_size(high_precision_);
    rewriter_.add(op);
  }

  // Once per step, before the first micro-batch: each linear's weights quantized in the usages
  // its GEMMs read. With --fp8-param-gather the weight is itself the fp8 rowwise copy, written
  // by the optimizer and all-gathered in fp8 (Megatron-LM's fp8 parameters); only the
  // columnwise copy is made per step (TE's transpose).
  void quantize_weights() {
    for (int64_t linear : linear_order_) {
      const std::vector<int64_t>& weights = weights_of_linear_.at(linear);
      ShardOp consumer = first_forward_.at(linear);
      consumer.scope = OpScope::step_start;
      consumer.pass = OpPass::step;
      consumer.recompute = false;
      ShardOp cast = inserted(consumer, param_gather_ ? "te::transpose" : recipe_.framework + "::quantize", OpKind::memory);
      launches(cast, consumer, 1);
      cast.reads = weights;
      if (recipe_.amax_kernels > 0 && !param_gather_) cast.reads.push_back(amax_pass(weights, consumer, false));
      for (int64_t w : weights) {
        double elements = elements_of(w);
        std::set<Usage> usages = weight_usages_.at(w);
        if (param_gather_)
          usages.erase(Usage::kRowwise);
        else
          cast.flops += cast_flops(recipe_, elements, usages.size());
        for (Usage usage : usages) {
          int64_t copy = rewriter_.emitter().add_buffer(copy_bytes(recipe_, elements), TensorRole::quantized_weight);
          shard_.buffers[copy].param = shard_.buffers[w].param;
          weight_copies_[w][usage] = copy;
          cast.writes.push_back(copy);
        }
      }
      cast.bytes = bytes_of(cast.reads) + bytes_of(cast.writes);
      rewriter_.add(cast);
    }
  }

  // Delayed scaling, where TE leaves an fp8_autocast region (Megatron-LM wraps each model
  // chunk's layers in one, megatron/core/transformer/transformer_block.py) and at the end of
  // its backward: the amaxes recorded by the casts are all-reduced over Megatron's amax
  // reduction group, the tensor-, data- and context-parallel ranks of the pipeline stage
  // (parallel_state.get_amax_reduction_group(with_context_parallel=True)), synchronously, then
  // the scales of the next pass are computed from them.
  void update_scales(const ScalingGroup& group, const ShardOp& last) {
    const bool backward = std::get<2>(group);
    const double tensors = static_cast<double>(linears_of_group_.at(group).size()) *
                           (backward ? kBackwardTensorsPerLinear : kForwardTensorsPerLinear);
    std::vector<int64_t> amaxes = amaxes_of_group_[group];
    const auto& p = context_.options.parallelism;
    const int64_t ranks = p.tp * p.dp * p.cp;
    ShardOp update = inserted(last, "te::amax_and_scale_update", OpKind::math);
    update.dtype = "fp32";
    if (ranks > 1) {
      int64_t reduced = rewriter_.emitter().add_buffer(tensors * kFp32Bytes, TensorRole::comm);
      ShardOp reduce = inserted_collective(last, CommGroup::dp, tensors * kFp32Bytes);
      reduce.group_size = ranks;
      reduce.stream = Stream::amax;
      reduce.reads = amaxes;
      reduce.writes = {reduced};
      rewriter_.add(reduce);
      amaxes = {reduced};
    }
    update.reads = amaxes;
    update.writes = {rewriter_.emitter().add_buffer(tensors * kScaleStateBytes, TensorRole::activation)};
    update.flops = tensors * kScaleUpdateFlops;
    update.bytes = bytes_of(update.reads) + bytes_of(update.writes);
    rewriter_.add(update);
  }

  // Ops that stay in 16 bits; the distributed optimizer's all-gather moves what the weights
  // hold (bf16, or fp8 parameters: one byte each and a scale).
  void keep(const ShardOp& op) {
    ShardOp kept = op;
    if (kept.dtype == context_.options.training.dtype) kept.dtype = high_precision_;
    if (is_param_gather(op, shard_)) kept.message_bytes = kept.bytes = bytes_of(op.writes);
    rewriter_.keep(op.id, std::move(kept));
  }

  const ShardContext& context_;
  ShardSection& shard_;
  Recipe recipe_;
  std::string high_precision_;
  bool param_gather_;
  bool pads_expert_rows_;  // TE's grouped GEMMs get routed counts that need padding
  OpRewriter rewriter_;
  std::vector<double> original_bytes_;  // per buffer, before this pass

  // The plan.
  std::map<int64_t, GemmRole> roles_;                    // old GEMM -> its role in its linear
  std::map<int64_t, std::set<Usage>> source_usages_;     // bf16 tensor -> usages read quantized
  std::map<int64_t, std::set<Usage>> gather_usages_;     // old TP all-gather -> usages gathered
  std::set<int64_t> gathers_kept_;                       // ... whose 16-bit result others read
  std::vector<int64_t> linear_order_;                    // linears in forward order
  std::map<int64_t, std::vector<int64_t>> weights_of_linear_;
  std::map<int64_t, std::set<Usage>> weight_usages_;
  std::map<int64_t, ShardOp> first_forward_;             // linear -> its first forward GEMM
  std::map<ScalingGroup, std::set<int64_t>> linears_of_group_;
  std::map<int64_t, ScalingGroup> last_of_group_;        // old GEMM ending a scaling group

  // What has been emitted.
  std::map<int64_t, std::map<Usage, int64_t>> quantized_;      // bf16 tensor -> its copies
  std::map<int64_t, std::map<Usage, int64_t>> gathered_;       // old gathered buffer -> gathered copies
  std::map<int64_t, std::map<Usage, int64_t>> weight_copies_;  // weight -> its copies
  std::map<ScalingGroup, std::vector<int64_t>> amaxes_of_group_;
};

}  // namespace

std::string high_precision_dtype(const TrainingConfig& training) {
  // Megatron-LM runs fp8/fp4 with --bf16: weights, activations and the other ops in bf16.
  return training.dtype == "fp8" || training.dtype == "fp4" ? "bf16" : training.dtype;
}

void check_low_precision(const ShardOptions& options) {
  const TrainingConfig& t = options.training;
  if (!t.known_dtype())
    throw UsageError("dtype=" + t.dtype + ": expected bf16, fp16, fp8 or fp4");
  if (t.fp8_recipe) {
    const std::string& r = *t.fp8_recipe;
    recipe_named(r);
    if (t.dtype != "fp8" && t.dtype != "fp4")
      throw UsageError("fp8_recipe=" + r + " needs --dtype " + (r == "nvfp4" ? "fp4" : "fp8"));
    if (t.dtype == "fp8" && r == "nvfp4") throw UsageError("fp8_recipe=nvfp4 is a 4-bit recipe: it needs --dtype fp4");
    if (t.dtype == "fp4" && r != "nvfp4")
      throw UsageError("dtype=fp4 needs fp8_recipe=nvfp4 (Transformer Engine's 4-bit recipe), got " + r);
  }
  if (t.fp8_param_gather) {
    if (t.dtype != "fp8") throw UsageError("fp8_param_gather needs --dtype fp8");
    if (!t.distributed_optimizer)
      throw UsageError("fp8_param_gather needs --distributed-optimizer (as in Megatron-LM)");
    if (const std::string recipe = *low_precision_recipe(t); recipe != "delayed" && recipe != "current")
      throw UsageError("fp8_param_gather with fp8_recipe=" + recipe + " is not simulated yet (delayed or current only)");
  }
}

void apply_low_precision(const ShardContext& context, ShardSection& shard) {
  std::optional<std::string> recipe = low_precision_recipe(context.options.training);
  if (!recipe) return;
  LowPrecision(context, shard, *recipe).run();
}

}  // namespace syssim
