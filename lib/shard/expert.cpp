// Expert parallelism as Megatron-Core runs it (docs/parallelism.md "Expert parallelism"): with
// parallel folding the experts of an MoE layer are split over the ep ranks of an expert-
// parallel group and each expert's FFN over etp ranks, on the same GPUs as attention's
// tp x cp x dp. A rank routes its own tokens; the token dispatcher sends each routed copy to
// the rank holding its expert and brings the experts' outputs back. The traced step has both
// sides in one graph: the ops of the experts (tp_role expert_*) run on the rank's experts and
// the tokens dispatched to them (ShardContext::expert_axes), the others on the rank's tokens,
// and this pass exchanges every buffer that one side writes and the other reads.
#include <algorithm>
#include <map>
#include <optional>

#include "common/error.hpp"
#include "common/routing.hpp"
#include "common/text.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool allgather_dispatcher(const ShardContext& context) {
  return context.options.training.moe_token_dispatcher_type == "allgather";
}

bool flex_dispatcher(const ShardContext& context) { return context.options.training.moe_token_dispatcher_type == "flex"; }

// Which side of the exchange a traced op is on (permutes_on_expert_side).
bool on_expert_side(const TraceOp& op, const ShardContext& context) {
  if (op.tp_role == TpRole::expert_dispatch) return permutes_on_expert_side(context.options.training);
  return is_expert_role(op.tp_role);
}

Routing routing_of(const ModelConfig& model) {
  return {static_cast<double>(model.num_moe_experts), static_cast<double>(model.moe_router_topk),
          static_cast<double>(model.moe_router_num_groups), static_cast<double>(model.moe_router_group_topk)};
}

// The GPUs of the ep group a token goes to under the flex dispatcher: ep x the chance that a
// rank's experts hold one of its top-k.
double flex_destinations(const ModelConfig& model, int64_t ep) {
  const double ranks = static_cast<double>(ep);
  return ranks * holding_share(routing_of(model), static_cast<double>(model.num_moe_experts) / ranks);
}

// The token rows the simulated (busiest) rank receives under the flex dispatcher per token row
// it routes: the destinations, scaled by its load as the alltoall dispatcher's copies are.
double flex_received_rows(const ShardContext& context) {
  return context.flex_destinations * context.expert_load.received / context.expert_load.sent;
}

// Megatron-Core's capacity (moe_utils.get_capacity): capacity_factor x tokens x topk / experts
// per expert. Tokens past it are dropped; with padding every expert gets exactly that many,
// but never more than every token: past the token count the capacity mask keeps them all
// (moe_utils.apply_router_token_dropping, "No need to drop tokens if capacity exceeds the
// number of tokens"), experts / topk times the mean.
ExpertLoad expert_load(const ModelConfig& model, const TrainingConfig& t, int64_t ep) {
  const double experts = static_cast<double>(model.num_moe_experts);
  const double local = experts / static_cast<double>(ep);
  ExpertLoad load;
  if (t.moe_pad_expert_input_to_capacity) {
    const double capacity = std::min(*t.moe_expert_capacity_factor, experts / static_cast<double>(model.moe_router_topk));
    load.sent = load.received = load.busiest_expert = load.other_experts = capacity;
    return load;
  }
  // The busiest expert gets moe_imbalance x the mean; the others share the rest equally, so
  // that the routed tokens stay top-k per token; the capacity drops what exceeds it, from
  // every expert.
  const double busiest = t.moe_imbalance;
  const double others = experts > 1 ? (experts - busiest) / (experts - 1) : 1;
  const double capacity = t.moe_expert_capacity_factor.value_or(busiest);
  load.other_experts = std::min(others, capacity);
  load.busiest_expert = std::min(busiest, capacity);
  // The router drops before the dispatch: a rank sends what the experts keep.
  load.sent = (load.busiest_expert + (experts - 1) * load.other_experts) / experts;
  // The busiest rank holds the busiest expert and local - 1 others.
  load.received = (load.busiest_expert + (local - 1) * load.other_experts) / local;
  return load;
}

class ExpertExchange {
 public:
  ExpertExchange(const ShardContext& context, ShardSection& shard)
      : context_(context),
        p_(context.options.parallelism),
        local_experts_(context.model.num_moe_experts / p_.ep),
        rewriter_(shard) {}

  void run() {
    const auto& ops = rewriter_.old_ops();
    for (const ShardOp& old : ops) {
      if (old.scope != OpScope::microbatch) {
        rewriter_.keep(old.id);
        continue;
      }
      const bool expert = old.trace_op && on_expert_side(context_.trace.ops[*old.trace_op], context_);
      if (old.trace_op && context_.trace.ops[*old.trace_op].tp_role == TpRole::expert_dispatch) dispatcher_ = old.module;
      ShardOp op = rewriter_.take(old.id);
      for (int64_t& b : op.reads) b = readable(b, expert, op);
      const int64_t id = rewriter_.keep(old.id, std::move(op));
      for (int64_t b : rewriter_.emitter().shard().ops[id].writes) side(b) = expert ? kExperts : kTokens;
    }
  }

 private:
  enum Side : char { kNone, kTokens, kExperts };

  Side& side(int64_t buffer) {
    if (static_cast<size_t>(buffer) >= side_.size()) side_.resize(buffer + 1, kNone);
    return side_[buffer];
  }

  // The buffer an op of the experts' side (`expert`) or the tokens' side reads for b: b, or
  // b exchanged when the other side wrote it (weights and inputs belong to no side).
  int64_t readable(int64_t b, bool expert, const ShardOp& reader) {
    const Side from = side(b);
    if (from == kNone || (from == kExperts) == expert) return b;
    auto key = std::pair{b, expert};
    auto it = exchanged_.find(key);
    if (it == exchanged_.end()) it = exchanged_.emplace(key, expert ? dispatch(b, reader) : combine(b, reader)).first;
    return it->second;
  }

  ShardSection& shard() { return rewriter_.emitter().shard(); }
  double bytes(int64_t b) { return shard().buffers[b].bytes; }

  // A traced buffer of routed tokens (hidden-sized) rather than their routing probabilities:
  // its local experts' chunks are sorted (Megatron's sort_chunks_by_idxs, which moves the
  // probabilities in the same kernel).
  bool is_tokens(int64_t b) const {
    return static_cast<size_t>(b) < context_.trace.tensors.size() && has_axis(context_.trace.tensors[b].dims, "h");
  }

  int64_t collective(Collective kind, CommGroup group, int64_t group_size, int64_t from,
                     double written_bytes, double message_bytes, const ShardOp& reader, KernelShape shape = {}) {
    if (group_size == 1) return from;  // Megatron-Core's _AllToAll and gathers return their input over one rank
    const int64_t to = rewriter_.emitter().add_buffer(written_bytes, TensorRole::comm);
    ShardOp c = make_collective(context_, kind, group, message_bytes, reader.phase, reader.scope);
    c.shape = std::move(shape);
    place_with(reader, c);
    c.module = dispatcher_;
    c.group_size = group_size;
    c.reads = {from};
    c.writes = {to};
    rewriter_.add(c);
    return to;
  }

  // Megatron's sort of the received tokens by local expert (and back): one pass over them.
  int64_t sort_chunks(int64_t from, const ShardOp& reader) {
    const int64_t to = rewriter_.emitter().add_buffer(bytes(from), TensorRole::activation);
    ShardOp sort = compute_op_for(reader, "moe::sort_chunks", OpKind::memory, reader.dtype);
    sort.module = dispatcher_;
    sort.bytes = 2 * bytes(from);
    sort.reads = {from};
    sort.writes = {to};
    rewriter_.add(sort);
    return to;
  }

  // To the experts: the alltoall dispatcher's all-to-all over the ep group (the busiest rank
  // receiving the most), then the expert-TP all-gather and the sort by local expert; the
  // allgather dispatcher's all-gather over the etp x ep group.
  int64_t dispatch(int64_t b, const ShardOp& reader) {
    const int64_t etp = p_.expert_tp();
    if (flex_dispatcher(context_)) return flex_dispatch(b, reader);
    if (allgather_dispatcher(context_)) {
      const double gathered = bytes(b) * static_cast<double>(etp * p_.ep);
      return collective(Collective::all_gather, CommGroup::ep, etp * p_.ep, b, gathered, gathered, reader);
    }
    const bool tokens = is_tokens(b);
    const double received = bytes(b) * context_.expert_load.received / context_.expert_load.sent;
    int64_t at = collective(Collective::all_to_all, CommGroup::ep, p_.ep, b, received, received, reader);
    if (etp > 1) at = collective(Collective::all_gather, CommGroup::etp, etp, at, received * etp, received * etp, reader);
    if (tokens && local_experts_ > 1) at = sort_chunks(at, reader);
    return at;
  }

  // The flex dispatcher's exchange (DeepEP's or HybridEP's kernels): each token crosses once to
  // each GPU holding one of its experts, where its routed copies are made, and back; the
  // network prices the crossings from the routing in the op's shape (docs/network.md). The
  // experts' side holds flex_received_rows x the tokens' rows; the routing map and probabilities
  // travel with their tokens, a rank keeping its experts' share. The message is the experts'
  // side's bytes over the destinations: one copy of the sender's token rows, as many as the
  // busiest rank receives.
  int64_t flex_dispatch(int64_t b, const ShardOp& reader) {
    const double experts_side = bytes(b) * flex_received_rows(context_) / (is_tokens(b) ? 1.0 : static_cast<double>(p_.ep));
    return flex_exchange(b, experts_side, experts_side, reader);
  }
  int64_t flex_combine(int64_t b, const ShardOp& reader) {
    const double tokens_side = bytes(b) / flex_received_rows(context_) * (is_tokens(b) ? 1.0 : static_cast<double>(p_.ep));
    return flex_exchange(b, tokens_side, bytes(b), reader);
  }
  int64_t flex_exchange(int64_t b, double written, double experts_side, const ShardOp& reader) {
    return collective(Collective::flex_all_to_all, CommGroup::ep, p_.ep, b, written, experts_side / context_.flex_destinations,
                      reader, routing_shape(routing_of(context_.model)));
  }
  // Back to the tokens: the reverse, reduce-scatters for all-gathers.
  int64_t combine(int64_t b, const ShardOp& reader) {
    const int64_t etp = p_.expert_tp();
    if (flex_dispatcher(context_)) return flex_combine(b, reader);
    if (allgather_dispatcher(context_)) {
      const double full = bytes(b);
      return collective(Collective::reduce_scatter, CommGroup::ep, etp * p_.ep, b, full / static_cast<double>(etp * p_.ep), full, reader);
    }
    int64_t at = b;
    if (is_tokens(b) && local_experts_ > 1) at = sort_chunks(at, reader);
    if (etp > 1) at = collective(Collective::reduce_scatter, CommGroup::etp, etp, at, bytes(at) / static_cast<double>(etp), bytes(at), reader);
    const double sent = bytes(at) * context_.expert_load.sent / context_.expert_load.received;
    return collective(Collective::all_to_all, CommGroup::ep, p_.ep, at, sent, bytes(at), reader);
  }

  const ShardContext& context_;
  const ParallelismConfig& p_;
  const int64_t local_experts_;
  OpRewriter rewriter_;
  std::vector<Side> side_;  // by buffer: the side of its last writer
  std::map<std::pair<int64_t, bool>, int64_t> exchanged_;  // (buffer, to the experts) -> its exchanged copy
  // The module of the token dispatcher of the layer being exchanged (the last permutation op
  // seen: the first op of an MoE layer's forward and of its backward to cross sides comes
  // after it); the exchanges are the dispatcher's.
  Symbol dispatcher_;
};

}  // namespace

// The alltoall dispatcher's permutations make and take its send buffer with the rank's tokens;
// the allgather dispatcher's pick the local experts' tokens from everyone's, the flex
// dispatcher's copy each received token to its local experts.
bool permutes_on_expert_side(const TrainingConfig& training) { return training.moe_token_dispatcher_type != "alltoall"; }

bool is_expert_role(TpRole tp_role) {
  return tp_role == TpRole::expert_column || tp_role == TpRole::expert_row || tp_role == TpRole::expert;
}

namespace {

// What Megatron-Core refuses with overlap_moe_expert_parallel_comm (TransformerConfig's
// checks, megatron/core/transformer/transformer_config.py).
void check_expert_parallel_overlap(const ModelConfig& model, const ShardOptions& options) {
  const ParallelismConfig& p = options.parallelism;
  const TrainingConfig& t = options.training;
  auto refuse = [](const std::string& why) { throw UsageError("overlap_moe_expert_parallel_comm " + why); };
  if (p.ep < 2) refuse("needs expert parallelism (ep > 1)");
  if (t.moe_token_dispatcher_type == "allgather") refuse("needs the alltoall or flex token dispatcher");
  if (p.pp > 1 && !p.vpp) refuse("with pp > 1 needs virtual pipeline stages (--vpp), as Megatron-Core");
  if (t.recompute == "full") refuse("does not take full recomputation");
  if (std::find(t.recompute_modules.begin(), t.recompute_modules.end(), "moe") != t.recompute_modules.end())
    refuse("does not take the moe recompute module");
  if (t.moe_shared_expert_overlap) refuse("and moe_shared_expert_overlap exclude each other");
  if (model.mtp_num_layers > 1) refuse("takes at most one MTP layer");
}

// What Megatron-Core's MoEFlexTokenDispatcher refuses, and what syssim does not simulate of it.
void check_flex_dispatcher(const ShardOptions& options) {
  const ParallelismConfig& p = options.parallelism;
  auto refuse = [](const std::string& why) { throw UsageError("moe_token_dispatcher_type=flex " + why); };
  if (p.ep < 2) refuse("needs expert parallelism (ep > 1)");
  if (p.expert_tp() > 1)
    refuse("with expert tensor parallelism (etp=" + str(p.expert_tp()) + ") is not simulated: give --etp 1");
  if (options.training.moe_pad_expert_input_to_capacity) refuse("does not take moe_pad_expert_input_to_capacity (as Megatron-Core)");
}

}  // namespace

void check_expert_parallel(const ModelConfig& model, const ShardOptions& options) {
  const ParallelismConfig& p = options.parallelism;
  const TrainingConfig& t = options.training;
  if (p.ep < 1) throw UsageError("ep=" + str(p.ep) + " must be at least 1");
  if (p.etp && *p.etp < 1) throw UsageError("etp=" + str(*p.etp) + " must be at least 1");
  const bool moe_layers = std::find(model.moe_layer_pattern.begin(), model.moe_layer_pattern.end(), 1) !=
                          model.moe_layer_pattern.end();
  if (model.is_moe() && !moe_layers && (p.ep > 1 || p.expert_tp() != p.tp))
    throw UsageError("ep and etp need an MoE layer; moe_layer_freq of " + model.name + " makes every layer dense");
  if (!model.is_moe()) {
    if (p.ep > 1 || p.expert_tp() != p.tp)
      throw UsageError("ep and etp need a model with experts (num_moe_experts); " + model.name + " has none");
    for (auto [set, key] : {std::pair{t.overlap_moe_expert_parallel_comm, "overlap_moe_expert_parallel_comm"},
                            std::pair{t.moe_router_padding_for_quantization, "moe_router_padding_for_quantization"},
                            std::pair{t.moe_token_dispatcher_type != "alltoall", "moe_token_dispatcher_type"},
                            std::pair{t.moe_expert_capacity_factor.has_value(), "moe_expert_capacity_factor"},
                            std::pair{t.moe_pad_expert_input_to_capacity, "moe_pad_expert_input_to_capacity"},
                            std::pair{t.moe_imbalance != 1, "moe_imbalance"},
                            std::pair{t.moe_shared_expert_overlap, "moe_shared_expert_overlap"}})
      if (set) throw UsageError(std::string(key) + " needs a model with experts (num_moe_experts); " + model.name + " has none");
    return;
  }
  const int64_t etp = p.expert_tp(), attention_ranks = p.tp * p.cp * p.dp;
  if (model.num_moe_experts % p.ep != 0)
    throw DataError("ep=" + str(p.ep) + " does not divide num_moe_experts=" + str(model.num_moe_experts));
  if (model.moe_ffn_hidden_size % etp != 0)
    throw DataError("etp=" + str(etp) + " does not divide moe_ffn_hidden_size=" + str(model.moe_ffn_hidden_size));
  // Parallel folding: the expert layers' etp x ep x expert-dp ranks are a stage's tp x cp x dp.
  if (attention_ranks % (p.ep * etp) != 0)
    throw DataError("ep*etp=" + str(p.ep * etp) + " does not divide the tp*cp*dp=" + str(attention_ranks) +
                    " ranks of a pipeline stage (Megatron-Core's parallel folding" + (p.etp ? ")" : "; etp defaults to tp)"));
  expert_rank_order(p);  // refuses an order that leaves out ep, as the decoder's order check does
  // Megatron-Core orders the expert layers' ranks as the dense layers'; unless pp varies
  // slowest, their pipeline groups agree only where both data-parallel sizes do
  // (parallel_state.initialize_model_parallel refuses the rest).
  if (p.pp > 1 && !ends_with(p.order, "-pp") && p.expert_dp() != p.dp)
    throw UsageError("order=" + p.order + " does not put pp last, which needs the expert layers' data-parallel size (" +
                     str(p.expert_dp()) + " = tp*cp*dp/(ep*etp)) to equal dp=" + str(p.dp) +
                     ", as Megatron-Core's parallel_state requires");
  // Megatron-Core's MoELayer refuses to train with TP but without sequence parallelism.
  if (p.tp > 1 && !p.sp)
    throw UsageError("tp=" + str(p.tp) + " with experts needs --sp (Megatron-Core's MoE layer requires sequence "
                     "parallelism with tensor parallelism)");
  if (t.moe_token_dispatcher_type != "alltoall" && t.moe_token_dispatcher_type != "allgather" &&
      t.moe_token_dispatcher_type != "flex")
    throw UsageError("moe_token_dispatcher_type=" + t.moe_token_dispatcher_type + ": expected alltoall, allgather or flex");
  if (t.moe_token_dispatcher_type == "flex") check_flex_dispatcher(options);
  if (t.moe_expert_capacity_factor && !(*t.moe_expert_capacity_factor > 0))
    throw UsageError("moe_expert_capacity_factor=" + text_of(*t.moe_expert_capacity_factor) +
                     ": expected a positive factor, or a negative one for dropless routing (as Megatron-Core reads it)");
  if (t.moe_pad_expert_input_to_capacity && !t.moe_expert_capacity_factor)
    throw UsageError("moe_pad_expert_input_to_capacity needs moe_expert_capacity_factor (as in Megatron-Core)");
  if (t.moe_router_padding_for_quantization && t.dtype != "fp8" && t.dtype != "fp4")
    throw UsageError("moe_router_padding_for_quantization needs --dtype fp8 or fp4, got " + t.dtype);
  if (t.moe_router_padding_for_quantization && t.moe_token_dispatcher_type == "allgather")
    throw UsageError("moe_router_padding_for_quantization needs the alltoall or flex dispatcher, as in Megatron-Core; "
                     "the allgather dispatcher does not pad");
  // The busiest expert can take every token once: experts / topk times the mean.
  const double most = static_cast<double>(model.num_moe_experts) / static_cast<double>(model.moe_router_topk);
  if (!(t.moe_imbalance >= 1 && t.moe_imbalance <= most))
    throw UsageError("moe_imbalance=" + text_of(t.moe_imbalance) + ": expected the busiest expert's tokens over the mean, "
                     "from 1 (balanced) to num_moe_experts/moe_router_topk=" + text_of(most));
  if (t.moe_shared_expert_overlap && model.moe_shared_expert_intermediate_size == 0)
    throw UsageError("moe_shared_expert_overlap needs shared experts (moe_shared_expert_intermediate_size)");
  if (t.moe_shared_expert_overlap && t.moe_token_dispatcher_type == "allgather")
    throw UsageError("moe_shared_expert_overlap needs the alltoall or flex token dispatcher (as in Megatron-Core)");
  if (t.moe_shared_expert_overlap && t.moe_token_dispatcher_type == "flex")
    throw UsageError("moe_shared_expert_overlap with the flex token dispatcher is not simulated: syssim overlaps the "
                     "shared experts with the alltoall dispatcher's exchanges only");
  if (t.overlap_moe_expert_parallel_comm) check_expert_parallel_overlap(model, options);
}

void set_expert_axes(ShardContext& context) {
  context.expert_axes = context.sequence_axes;
  if (!context.model.is_moe()) return;
  context.expert_tensors.assign(context.trace.tensors.size(), 0);
  for (const TraceOp& op : context.trace.ops)
    if (is_expert_role(op.tp_role))
      for (const auto* refs : {&op.inputs, &op.outputs})
        for (const TensorRef& r : *refs)
          if (context.trace.tensors[r.tensor].role == TensorRole::param || context.trace.tensors[r.tensor].role == TensorRole::grad)
            context.expert_tensors[r.tensor] = 1;
  const ParallelismConfig& p = context.options.parallelism;
  context.expert_load = expert_load(context.model, context.options.training, p.ep);
  const double k = context.trace.axes.at("k"), etp = static_cast<double>(p.expert_tp()), ep = static_cast<double>(p.ep);
  const ExpertLoad& load = context.expert_load;
  context.sequence_axes["k"] = k * load.sent;  // what the rank routes
  AxisValues& experts = context.expert_axes;
  experts["e"] = context.trace.axes.at("e") / ep;
  experts["m"] = context.trace.axes.at("m") / etp;
  if (allgather_dispatcher(context)) {
    // Everyone's tokens, of which the local experts take their share.
    experts["s"] = context.sequence_axes.at("s") * etp * ep;
    experts["k"] = k * load.received / ep;
  } else if (flex_dispatcher(context)) {
    // The tokens received, each once however many of the rank's experts it goes to.
    context.flex_destinations = flex_destinations(context.model, p.ep);
    experts["s"] = context.sequence_axes.at("s") * flex_received_rows(context);
    experts["k"] = k * load.sent / context.flex_destinations;
  } else {
    experts["k"] = k * etp * load.received;  // the tokens dispatched to the rank's experts, gathered over etp
  }
}

void share_expert_tokens(const ShardContext& context, ShardOp& op) {
  const ExpertLoad& load = context.expert_load;
  if (!op.shape.count("groups") || load.busiest_expert == load.other_experts) return;
  // The kernel shape shares the rank's tokens equally: load.received x the balanced share each.
  const char* tokens = op.pass == OpPass::weight ? "k" : "m";
  const double balanced = op.shape.at(tokens) / load.received;
  op.shape[tokens] = balanced * load.other_experts;
  op.shape["busiest"] = balanced * load.busiest_expert;
}

void apply_expert_parallel(const ShardContext& context, ShardSection& shard) {
  if (!context.model.is_moe()) return;
  ExpertExchange(context, shard).run();
}

bool dispatcher_syncs_host(const TrainingConfig& training) {
  return training.moe_token_dispatcher_type == "allgather" || !training.moe_pad_expert_input_to_capacity;
}

void mark_host_syncs(const ShardContext& context, ShardSection& shard) {
  if (!context.model.is_moe() || !dispatcher_syncs_host(context.options.training)) return;
  const bool exchanged = context.options.parallelism.ep * context.options.parallelism.expert_tp() > 1;
  const bool flex = flex_dispatcher(context);
  std::vector<ShardOp>& ops = shard.ops;
  auto same_pass = [](const ShardOp& a, const ShardOp& b) {
    return a.stage == b.stage && a.chunk == b.chunk && a.recompute == b.recompute && a.phase == b.phase &&
           a.scope == b.scope;
  };
  auto last_before = [&](size_t at) {
    std::optional<size_t> found;
    for (size_t q = at; q-- > 0 && !found;)
      if (same_pass(ops[q], ops[at])) found = q;
    return found;
  };
  for (size_t p = 0; p < ops.size(); ++p) {
    const ShardOp& permute = ops[p];
    if (permute.name.named_op() != NamedOp::moe_permute || permute.phase != OpPhase::fwd) continue;
    if (flex) {
      // The flex dispatcher's first exchange waits for the counts of the tokens it receives
      // (DeepEP's dispatch, which the host enters after the router's ops).
      size_t first = p;
      for (std::optional<size_t> q = last_before(p); q && ops[*q].kind == OpKind::collective &&
                                                     ops[*q].collective == Collective::flex_all_to_all;
           q = last_before(*q))
        first = *q;
      if (const std::optional<size_t> counted = last_before(first); counted && first != p)
        ops[first].host_waits_for = ops[*counted].id;
      continue;
    }
    // The token counts are copied after the router's ops, the ones issued before the permutation.
    const std::optional<size_t> counted = last_before(p);
    if (!counted) continue;
    // The host waits before the dispatch's first exchange, or before the experts' first op.
    for (size_t next = p + 1; next < ops.size(); ++next) {
      ShardOp& op = ops[next];
      if (!same_pass(op, permute)) continue;
      const bool first_expert_op = exchanged ? op.kind == OpKind::collective && (op.group == CommGroup::ep || op.group == CommGroup::etp)
                                             : op.module != permute.module;
      if (!first_expert_op) continue;
      op.host_waits_for = ops[*counted].id;
      break;
    }
  }
}

}  // namespace syssim
