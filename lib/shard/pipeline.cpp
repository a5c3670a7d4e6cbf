// Pipeline parallelism as Megatron-LM lays it out (docs/parallelism.md): the decoder layers
// are cut into pp*vpp virtual stages, virtual stage v = chunk * pp + rank running on pipeline
// rank v % pp; the embedding runs on the first virtual stage, the final norm, output layer
// and loss on the last. The shard section then holds the ops of every pipeline rank (one
// representative rank per stage: its TP, CP and DP peers are symmetric), each op marked with
// its stage and chunk, and the schedule of each rank says in which order it runs them.
#include <algorithm>
#include <map>
#include <numeric>

#include "common/error.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {


std::string str(int64_t v) { return std::to_string(v); }

bool is_model_state(const ShardBuffer& b) { return b.role == TensorRole::param || b.role == TensorRole::grad; }

// Megatron-LM's split of each pipeline rank's layers: the first and last ranks take the given
// counts, the others share the rest evenly; each rank's layers split evenly over its chunks.
std::vector<int64_t> layers_of_ranks(const ModelConfig& model, const ShardOptions& options) {
  const int64_t pp = options.parallelism.pp, vpp = options.parallelism.vpp.value_or(1);
  const auto& first = options.decoder_first_pipeline_num_layers;
  const auto& last = options.decoder_last_pipeline_num_layers;
  std::vector<int64_t> per_rank(pp, 0);
  int64_t rest = model.num_layers, others = pp;
  for (auto [count, rank, name] : {std::tuple{first, int64_t{0}, "decoder_first_pipeline_num_layers"},
                                   std::tuple{last, pp - 1, "decoder_last_pipeline_num_layers"}}) {
    if (!count) continue;
    if (*count < 1) throw UsageError(std::string(name) + "=" + str(*count) + " must be at least 1 (as in Megatron-Core)");
    per_rank[rank] = *count;
    rest -= *count;
    --others;
  }
  if (rest < 0 || (others == 0 && rest != 0))
    throw DataError("decoder_first/last_pipeline_num_layers ask for " + str(model.num_layers - rest) +
                    " layers; num_layers=" + str(model.num_layers));
  if (others > 0 && (rest == 0 || rest % others != 0)) {
    std::string given;
    if (first) given = "decoder_first_pipeline_num_layers=" + str(*first);
    if (last) given += (given.empty() ? "" : ", ") + std::string("decoder_last_pipeline_num_layers=") + str(*last);
    const std::string besides = str(others) + " pipeline ranks besides the " +
                                (first && last ? "first and last" : first ? "first" : "last");
    if (rest == 0)
      throw DataError(given + ": no layers of num_layers=" + str(model.num_layers) + " are left for the " + besides);
    throw DataError(given + ": the " + besides + " do not split the remaining " + str(rest) + " of num_layers=" +
                    str(model.num_layers) + " evenly");
  }
  for (int64_t r = 0; r < pp; ++r) {
    if ((r == 0 && first) || (r == pp - 1 && last)) continue;
    per_rank[r] = rest / others;
  }
  for (int64_t r = 0; r < pp; ++r)
    if (per_rank[r] % vpp != 0)
      throw DataError("vpp=" + str(vpp) + " does not divide the " + str(per_rank[r]) + " layers of pipeline rank " +
                      str(r));
  std::vector<int64_t> layout(pp * vpp);
  for (int64_t v = 0; v < pp * vpp; ++v) layout[v] = per_rank[v % pp] / vpp;
  return layout;
}

// Megatron-LM's even split with the embedding and/or the loss counted as one layer each
// (get_num_layers_to_build in megatron/core/transformer/transformer_block.py): num_layers plus
// those must divide into pp*vpp equal virtual stages; the first (last) virtual stage then
// builds one decoder layer fewer. 126 layers, pp 8, vpp 8: (126+2)/64 = 2 each, 1 at both ends.
std::vector<int64_t> split_counting_embedding_and_loss(const ModelConfig& model, const ShardOptions& options,
                                                       int64_t stages) {
  const int64_t embedding = options.account_for_embedding_in_pipeline_split ? 1 : 0;
  const int64_t loss = options.account_for_loss_in_pipeline_split ? 1 : 0;
  const int64_t counted = model.num_layers + embedding + loss;
  if (counted % stages != 0)
    throw DataError("pp*vpp=" + str(stages) + " does not divide num_layers=" + str(model.num_layers) + " plus " +
                    str(embedding + loss) + " for the " +
                    (embedding && loss ? "embedding and loss" : embedding ? "embedding" : "loss") + " (" + str(counted) + ")");
  std::vector<int64_t> layout(stages, counted / stages);
  layout.front() -= embedding;
  layout.back() -= loss;
  return layout;
}

}  // namespace

std::vector<int64_t> pipeline_layout(const ModelConfig& model, const ShardOptions& options) {
  const auto& p = options.parallelism;
  const int64_t stages = p.pp * p.vpp.value_or(1);
  const bool uneven = options.decoder_first_pipeline_num_layers || options.decoder_last_pipeline_num_layers;
  const bool accounted = options.account_for_embedding_in_pipeline_split || options.account_for_loss_in_pipeline_split;
  if (p.pp == 1) {
    if (p.vpp) throw UsageError("vpp=" + str(*p.vpp) + " needs pp > 1");
    if (!options.pp_layout.empty()) throw UsageError("pp_layout needs pp > 1");
    if (uneven) throw UsageError("decoder_first/last_pipeline_num_layers need pp > 1");
    return {model.num_layers};
  }
  if (accounted && (uneven || !options.pp_layout.empty()))
    throw UsageError("account_for_embedding/loss_in_pipeline_split apply to the even split only: not with "
                     "pp_layout or decoder_first/last_pipeline_num_layers");
  std::vector<int64_t> layout;
  if (!options.pp_layout.empty()) {
    if (uneven) throw UsageError("pp_layout and decoder_first/last_pipeline_num_layers exclude each other");
    layout = options.pp_layout;
    if (static_cast<int64_t>(layout.size()) != stages)
      throw UsageError("pp_layout has " + str(static_cast<int64_t>(layout.size())) + " entries; pp*vpp=" +
                       str(stages) + " virtual stages need one each");
    int64_t sum = std::accumulate(layout.begin(), layout.end(), int64_t{0});
    if (sum != model.num_layers)
      throw DataError("pp_layout sums to " + str(sum) + " layers; num_layers=" + str(model.num_layers));
  } else if (uneven) {
    layout = layers_of_ranks(model, options);
  } else if (accounted) {
    layout = split_counting_embedding_and_loss(model, options, stages);
  } else {
    if (model.num_layers % stages != 0)
      throw DataError("pp*vpp=" + str(stages) + " does not divide num_layers=" + str(model.num_layers) +
                      " (give --pp-layout for an uneven split)");
    layout.assign(stages, model.num_layers / stages);
  }
  // The first virtual stage may hold only the embedding and the last only the output layer;
  // a middle one without layers would have nothing to pass on. (The split of the ranks
  // refuses both itself: only a given layout gets here with them.)
  for (int64_t v = 0; v < stages; ++v) {
    if (layout[v] < 0)
      throw UsageError("pp_layout: virtual pipeline stage " + str(v) + " has " + str(layout[v]) +
                       " layers; a count cannot be negative");
    if (layout[v] == 0 && v > 0 && v + 1 < stages)
      throw UsageError("pp_layout: virtual pipeline stage " + str(v) +
                       " has 0 layers; every stage but the first and last needs at least one");
  }
  return layout;
}

namespace {

// The virtual stage of a microbatch op: its layer's, or for the ops outside the decoder the
// first (embedding) or last (final norm, output layer, loss).
class StageMap {
 public:
  explicit StageMap(const ShardSection& shard) : pp_(shard.parallelism.pp) {
    for (size_t v = 0; v < shard.pp_layout.size(); ++v)
      for (int64_t i = 0; i < shard.pp_layout[v]; ++i) stage_of_layer_.push_back(static_cast<int64_t>(v));
    stages_ = static_cast<int64_t>(shard.pp_layout.size());
  }

  int64_t virtual_stage(const ShardOp& op) const {
    if (!op.layer) return before_layers(op) ? 0 : stages_ - 1;
    if (*op.layer < 0 || *op.layer >= static_cast<int64_t>(stage_of_layer_.size()))
      throw DataError("/shard/ops/" + str(op.id) + "/layer: layer " + str(*op.layer) + " is not in pp_layout");
    return stage_of_layer_[*op.layer];
  }
  int64_t rank(int64_t virtual_stage) const { return virtual_stage % pp_; }
  int64_t chunk(int64_t virtual_stage) const { return virtual_stage / pp_; }

 private:
  int64_t pp_;
  int64_t stages_ = 1;
  std::vector<int64_t> stage_of_layer_;
};

// A few pipeline ranks: a set per buffer, and there are thousands of buffers. Ranks below 64
// (every pipeline people run) are bits of one word, so most sets allocate nothing.
class RankSet {
 public:
  void insert(int64_t rank) {
    if (rank < kBits) {
      low_ |= uint64_t{1} << rank;
      return;
    }
    auto it = std::lower_bound(high_.begin(), high_.end(), rank);
    if (it == high_.end() || *it != rank) high_.insert(it, rank);
  }
  bool count(int64_t rank) const {
    return rank < kBits ? (low_ >> rank & 1) != 0 : std::binary_search(high_.begin(), high_.end(), rank);
  }
  size_t size() const { return static_cast<size_t>(__builtin_popcountll(low_)) + high_.size(); }
  // In increasing order.
  std::vector<int64_t> ranks() const {
    std::vector<int64_t> all;
    for (int64_t r = 0; r < kBits; ++r)
      if (low_ >> r & 1) all.push_back(r);
    all.insert(all.end(), high_.begin(), high_.end());
    return all;
  }

 private:
  static constexpr int64_t kBits = 64;
  uint64_t low_ = 0;
  std::vector<int64_t> high_;
};

// What the original op list says about the ranks: where each microbatch op runs, which
// ranks hold each weight and gradient, and which ops reduce partial gradients of a weight
// several ranks hold (the tied word embeddings: Megatron-LM keeps a copy on the last stage).
struct RankAnalysis {
  std::vector<int64_t> virtual_stage;                 // per old op; -1 for step ops
  std::vector<OpPass> pass;                           // per old op
  std::vector<RankSet> holders;                       // per buffer: ranks holding a param or grad
  std::vector<RankSet> reader_ranks;                  // per buffer: ranks of microbatch ops reading it
  std::map<int64_t, std::map<int64_t, int64_t>> partial_sums;  // old op -> other rank -> virtual stage
};

RankAnalysis analyze(const std::vector<ShardOp>& ops, const ShardSection& shard, const StageMap& stages) {
  RankAnalysis a;
  const size_t buffers = shard.buffers.size();
  a.virtual_stage.assign(ops.size(), -1);
  a.holders.resize(buffers);
  a.reader_ranks.resize(buffers);
  std::map<uintptr_t, int64_t> weight_named;  // by the name's identity
  for (const ShardBuffer& b : shard.buffers)
    if (b.role == TensorRole::param) weight_named.emplace(b.param.identity(), b.id);
  for (const ShardOp& op : ops) {
    if (op.scope == OpScope::microbatch) {
      int64_t v = a.virtual_stage[op.id] = stages.virtual_stage(op);
      for (int64_t b : op.reads) {
        a.reader_ranks[b].insert(stages.rank(v));
        if (shard.buffers[b].role == TensorRole::param) a.holders[b].insert(stages.rank(v));
      }
    }
  }

  // Gradients live where they are written; an op summing partial gradients of a weight that
  // several ranks hold is run by each of them on its own partials.
  std::vector<int64_t> last_writer(buffers, -1);
  for (const ShardOp& op : ops) {
    if (op.scope == OpScope::microbatch) {
      int64_t v = a.virtual_stage[op.id], rank = stages.rank(v);
      bool shared_weight_grad = false;
      for (int64_t b : op.writes) {
        const ShardBuffer& buffer = shard.buffers[b];
        if (buffer.role != TensorRole::grad) continue;
        auto weight = weight_named.find(buffer.param.identity());
        if (weight != weight_named.end() && a.holders[weight->second].size() > 1) shared_weight_grad = true;
      }
      std::map<int64_t, int64_t> others;
      for (int64_t b : op.reads)
        if (shared_weight_grad && !is_model_state(shard.buffers[b]) && last_writer[b] >= 0) {
          int64_t w = a.virtual_stage[last_writer[b]];
          if (stages.rank(w) != rank) others[stages.rank(w)] = w;
        }
      if (!others.empty()) a.partial_sums[op.id] = others;
      for (int64_t b : op.writes)
        if (shard.buffers[b].role == TensorRole::grad) {
          a.holders[b].insert(rank);
          for (const auto& [other, w] : others) a.holders[b].insert(other);
        }
    }
    for (int64_t b : op.writes) last_writer[b] = op.id;
  }

  // A backward collective whose results only weight-gradient ops read (the all-gather of a
  // linear's input for its weight gradient) belongs to the weight pass that zero-bubble
  // schedules defer. From the last op back: by buffer, whether a later microbatch op reads
  // it, and whether one that is not a weight op does.
  a.pass.reserve(ops.size());
  for (const ShardOp& op : ops) a.pass.push_back(op.pass);
  std::vector<char> read_later(buffers, 0), read_later_outside_weight_pass(buffers, 0);
  for (auto op = ops.rbegin(); op != ops.rend(); ++op) {
    if (op->scope != OpScope::microbatch) continue;
    if (op->pass == OpPass::backward && op->kind == OpKind::collective) {
      bool read = false, only_by_weight_ops = true;
      for (int64_t b : op->writes)
        read = read || read_later[b], only_by_weight_ops = only_by_weight_ops && !read_later_outside_weight_pass[b];
      if (read && only_by_weight_ops) a.pass[op->id] = OpPass::weight;
    }
    for (int64_t b : op->reads) {
      read_later[b] = 1;
      if (op->pass != OpPass::weight) read_later_outside_weight_pass[b] = 1;
    }
  }
  return a;
}

class PipelineRewriter {
 public:
  PipelineRewriter(const ShardContext& context, ShardSection& shard)
      : context_(context),
        shard_(shard),
        stages_(shard),
        pp_(shard.parallelism.pp),
        rewriter_(shard),
        analysis_(analyze(rewriter_.old_ops(), shard, stages_)),
        writer_(shard.buffers.size(), -1),
        last_of_stream_(pp_) {}

  void run() {
    const auto& ops = rewriter_.old_ops();
    bool optimizer_reached = false;
    for (const ShardOp& op : ops) {
      if (op.scope == OpScope::microbatch) {
        if (analysis_.partial_sums.count(op.id))
          split_partial_sum(op);
        else
          place(op);
        continue;
      }
      if (!optimizer_reached && op.scope == OpScope::step && op.kind != OpKind::collective) {
        optimizer_reached = true;
        reduce_shared_weight_grads();
      }
      split_step_op(op);
    }
    if (!optimizer_reached) reduce_shared_weight_grads();
    count_stage_parameters();
  }

 private:
  // --- microbatch ops -------------------------------------------------------------------

  ShardOp placed(ShardOp op, int64_t virtual_stage) const {
    op.pass = analysis_.pass[op.id];
    op.stage = stages_.rank(virtual_stage);
    op.chunk = stages_.chunk(virtual_stage);
    return op;
  }

  // Emits an op of a rank: its buffers are that rank's copies; what it reads from another
  // rank, or what an op it waits for produced there, arrives by point-to-point first.
  void place(const ShardOp& op) {
    int64_t v = analysis_.virtual_stage[op.id];
    ShardOp s = placed(rewriter_.take(op.id), v);  // `op` keeps its id, place and writes
    for (int64_t& b : s.reads) b = readable(b, v, op);
    for (int64_t& b : s.writes) b = local(b, s.stage);
    // An op waiting for a neighbour's op (launched after it) waits for what arrives from it.
    for (int64_t d : rewriter_.control_deps(op.id)) {
      int64_t w = analysis_.virtual_stage[d];
      if (w < 0 || stages_.rank(w) == s.stage || (v != w + 1 && v != w - 1)) continue;
      for (int64_t b : rewriter_.old_ops()[d].writes)
        if (!is_model_state(shard_.buffers[b]) && analysis_.reader_ranks[b].count(s.stage)) readable(b, v, op);
    }
    finish(rewriter_.keep(op.id, std::move(s)));
  }

  // The rank's copy of buffer b.
  int64_t local(int64_t b, int64_t rank) const {
    if (!has_copies(b)) return b;
    auto it = local_copy_.find({b, rank});
    return it == local_copy_.end() ? b : it->second;
  }

  bool has_copies(int64_t b) const { return b < static_cast<int64_t>(copied_.size()) && copied_[b]; }
  void add_copy(int64_t b, int64_t rank, int64_t copy) {
    local_copy_[{b, rank}] = copy;
    copied_.resize(std::max(copied_.size(), static_cast<size_t>(b) + 1), 0);
    copied_[b] = 1;
  }

  // The buffer an op of virtual stage v reads for b: b itself when this rank wrote it (or
  // nobody did: weights, inputs); else its copy received from the neighbouring virtual stage.
  int64_t readable(int64_t b, int64_t v, const ShardOp& reader) {
    const int64_t rank = stages_.rank(v);
    if ((has_copies(b) && local_copy_.count({b, rank})) || writer_[b] < 0 || is_model_state(shard_.buffers[b]))
      return local(b, rank);
    const ShardOp& producer = shard_.ops[writer_[b]];
    if (producer.stage == rank) return b;
    const int64_t w = producer.chunk * pp_ + producer.stage;
    if (v != w + 1 && v != w - 1)
      throw DataError("/shard/ops/" + str(reader.id) + ": virtual pipeline stage " + str(v) + " reads buffer " +
                      str(b) + " of virtual stage " + str(w) + ", which is not its neighbour");
    int64_t copy = rewriter_.emitter().add_buffer(shard_.buffers[b].bytes, TensorRole::comm);
    // Receives from the previous virtual stage in the forward direction, from the next in
    // the backward one (docs/parallelism.md); runs in the slot of the op that needs it.
    ShardOp recv = make_collective(context_, Collective::send_recv, CommGroup::pp, shard_.buffers[b].bytes, v == w + 1 ? OpPhase::fwd : OpPhase::bwd,
                                   OpScope::microbatch);
    recv.group_size = 2;
    recv.layer = reader.layer;
    recv.module = reader.module;
    recv.pass = reader.recompute ? OpPass::backward : analysis_.pass[reader.id];
    recv.stage = rank;
    recv.chunk = stages_.chunk(v);
    recv.writes = {copy};
    int64_t id = rewriter_.add(recv, {writer_[b]});
    add_copy(b, rank, copy);
    received_[{writer_[b], rank}].push_back(id);
    note(id);
    return copy;
  }

  // The tied word embeddings: the op summing the output layer's and the embedding's weight
  // gradients runs on each rank holding the weight, on that rank's partial, into that rank's
  // copy of the gradient (Megatron-LM's main_grad of each copy).
  void split_partial_sum(const ShardOp& op) {
    const int64_t own = analysis_.virtual_stage[op.id], own_rank = stages_.rank(own);
    std::map<int64_t, int64_t> parts = analysis_.partial_sums.at(op.id);
    parts[own_rank] = own;
    bool kept = false;
    for (const auto& [rank, v] : parts) {
      ShardOp s = placed(op, v);
      s.reads.clear();
      for (int64_t b : op.reads) {
        bool written = writer_[b] >= 0 && !is_model_state(shard_.buffers[b]);
        if ((written ? shard_.ops[writer_[b]].stage : own_rank) == rank) s.reads.push_back(local(b, rank));
      }
      for (int64_t& b : s.writes) b = own_copy(b, rank, rank == own_rank);
      if (!kept) {
        finish(rewriter_.keep(op.id, s));
        kept = true;
      } else {
        finish(rewriter_.add(s));
      }
    }
  }

  // The rank's copy of a buffer several ranks write; the first keeps the original.
  int64_t own_copy(int64_t b, int64_t rank, bool original) {
    if (original) return b;
    if (int64_t copy = local(b, rank); copy != b) return copy;
    const ShardBuffer& buffer = shard_.buffers[b];
    int64_t copy = rewriter_.emitter().add_buffer(buffer.bytes, buffer.role);
    shard_.buffers[copy].param = buffer.param;
    add_copy(b, rank, copy);
    return copy;
  }

  // --- step ops --------------------------------------------------------------------------

  // Every rank runs its part of a once-per-step op: the share of the weights and gradients it
  // touches that the rank holds (an op touching none, like the gradient norm's all-reduce,
  // runs whole on every rank), on the rank's own copies of the other buffers.
  void split_step_op(const ShardOp& op) {
    std::vector<int64_t> covered;  // in buffer order, each once
    for (const auto* buffers : {&op.reads, &op.writes})
      for (int64_t b : *buffers)
        if (is_model_state(shard_.buffers[b])) covered.push_back(b);
    sort_unique(covered);
    double total = 0;
    for (int64_t b : covered) total += shard_.buffers[b].bytes;
    std::vector<int64_t> control;
    for (int64_t d : rewriter_.control_deps(op.id)) control.push_back(rewriter_.new_id(d));
    bool kept = false;
    std::map<int64_t, int64_t> copies;  // rank -> new id
    for (int64_t rank = 0; rank < pp_; ++rank) {
      double held = 0;
      for (int64_t b : covered)
        if (analysis_.holders[b].count(rank)) held += shard_.buffers[b].bytes;
      if (total > 0 && held == 0) continue;
      // Per byte held first: exact for sizes that are whole multiples of the bytes touched.
      auto share = [&](double value) { return total > 0 ? value / total * held : value; };
      ShardOp s = op;
      s.stage = rank;
      s.chunk = 0;
      s.flops = share(op.flops);
      s.bytes = share(op.bytes);
      s.message_bytes = share(op.message_bytes);
      for (auto* buffers : {&s.reads, &s.writes}) {
        std::vector<int64_t> mine;
        for (int64_t b : *buffers) {
          if (!is_model_state(shard_.buffers[b]))
            mine.push_back(own_copy(b, rank, first_step_rank_.emplace(b, rank).first->second == rank));
          else if (analysis_.holders[b].count(rank))
            mine.push_back(local(b, rank));
        }
        *buffers = mine;
      }
      int64_t id = kept ? rewriter_.add(s, control) : rewriter_.keep(op.id, s);
      kept = true;
      copies[rank] = id;
      copies_of_[id] = op.id;
      step_copy_[{op.id, rank}] = id;
      finish(id);
    }
    if (pp_ > 1 && reduces_gradients_to_scalar(op))
      for (int64_t b : op.writes) reduce_over_pipeline(b, copies);
  }

  // An op that reads gradients and writes something else: the gradient norm, whose partial
  // sums Megatron-LM all-reduces over the model-parallel group, pipeline ranks included.
  bool reduces_gradients_to_scalar(const ShardOp& op) const {
    bool reads_grads = std::any_of(op.reads.begin(), op.reads.end(),
                                   [&](int64_t b) { return shard_.buffers[b].role == TensorRole::grad; });
    bool writes_other = std::any_of(op.writes.begin(), op.writes.end(),
                                    [&](int64_t b) { return !is_model_state(shard_.buffers[b]); });
    return op.kind != OpKind::collective && reads_grads && writes_other;
  }

  void reduce_over_pipeline(int64_t b, const std::map<int64_t, int64_t>& copies) {
    std::vector<int64_t> ranks;
    for (const auto& [rank, id] : copies) ranks.push_back(rank);
    all_reduce_across(b, ranks, CommGroup::pp, shard_.buffers[b].bytes, shard_.ops[copies.begin()->second].module);
  }

  // Megatron-LM's _allreduce_embedding_grads: after the DP reduction, every rank holding a
  // copy of a weight all-reduces its main gradient with the others.
  void reduce_shared_weight_grads() {
    if (pp_ == 1) return;
    for (const auto& t : context_.trace.tensors) {
      const RankSet& ranks = analysis_.holders[t.id];
      if (t.role != TensorRole::grad || ranks.size() < 2) continue;
      double elements = numel_at(t.dims, context_.tensor_axes(t.id), "/trace/tensors/" + str(t.id));
      all_reduce_across(t.id, ranks.ranks(), CommGroup::embedding, elements * context_.options.training.main_grad_bytes(),
                        "tied_embedding_grads");
    }
  }

  // An all-reduce of buffer b (each rank's copy) between ranks: each rank's instance starts
  // when every rank has written its copy, as the collective needs them all.
  void all_reduce_across(int64_t b, const std::vector<int64_t>& ranks, CommGroup group, double message_bytes,
                         const std::string& module) {
    std::vector<int64_t> ready;
    for (int64_t rank : ranks) {
      std::vector<int64_t> w = rewriter_.emitter().writers_of(IdList{local(b, rank)});
      ready.insert(ready.end(), w.begin(), w.end());
    }
    for (int64_t rank : ranks) {
      ShardOp c = make_collective(context_, Collective::all_reduce, group, message_bytes, OpPhase::optimizer, OpScope::step);
      c.pass = OpPass::step;
      c.module = module;
      c.group_size = static_cast<int64_t>(ranks.size());
      c.stage = rank;
      c.reads = c.writes = {local(b, rank)};
      note(rewriter_.add(c, ready));
    }
  }

  // --- deps across ranks -----------------------------------------------------------------

  // Keeps an emitted op's deps on its own rank: a dep on another rank's copy of a step op
  // becomes the dep on this rank's copy; on another rank's microbatch op, the dep on what this
  // rank received from it (a microbatch op) or on this rank's last op of that stream (a step
  // op: the end of the rank's backward). A wait across ranks with nothing received has no
  // meaning on the rank and is dropped; so is a forward or backward op's wait for a weight op
  // (autograd's order of the two, e.g. a recomputation launched after the wgrad GEMM before
  // it, is what zero-bubble schedules change: the weight op may run later).
  void finish(int64_t id) {
    ShardOp& op = shard_.ops[id];
    const bool before_weight_ops = op.scope == OpScope::microbatch && (op.pass != OpPass::weight || op.recompute);
    std::vector<int64_t> deps;
    for (int64_t d : op.deps) {
      const ShardOp& dep = shard_.ops[d];
      if (dep.stage == op.stage) {
        if (!before_weight_ops || dep.scope != OpScope::microbatch || dep.pass != OpPass::weight) deps.push_back(d);
      } else if (copies_of_.count(d)) {
        auto it = step_copy_.find({copies_of_.at(d), op.stage});
        if (it != step_copy_.end() && it->second != id) deps.push_back(it->second);
      } else if (op.scope == OpScope::microbatch) {
        auto it = received_.find({d, op.stage});
        if (it != received_.end()) deps.insert(deps.end(), it->second.begin(), it->second.end());
      } else {
        if (const int64_t* last = last_of_stream(op.stage, dep.stream)) deps.push_back(*last);
      }
    }
    sort_unique(deps);
    op.deps = std::move(deps);
    note(id);
  }

  void note(int64_t id) {
    const ShardOp& op = shard_.ops[id];
    writer_.resize(shard_.buffers.size(), -1);  // buffers added since
    for (int64_t b : op.writes) writer_[b] = id;
    if (op.scope != OpScope::microbatch) return;
    if (int64_t* last = last_of_stream(op.stage, op.stream))
      *last = id;
    else
      last_of_stream_[op.stage].emplace_back(op.stream, id);
  }

  // The rank's last microbatch op on the stream so far; nullptr before the first.
  int64_t* last_of_stream(int64_t rank, Stream stream) {
    for (auto& [s, last] : last_of_stream_[rank])
      if (s == stream) return &last;
    return nullptr;
  }

  void count_stage_parameters() {
    shard_.stage_params_local.assign(pp_, 0.0);
    if (context_.model.is_moe()) shard_.stage_expert_params_local.assign(pp_, 0.0);
    for (const auto& t : context_.trace.tensors) {
      if (t.role != TensorRole::param) continue;
      double elements = numel_at(t.dims, context_.tensor_axes(t.id), "/trace/tensors/" + str(t.id));
      for (int64_t rank : analysis_.holders[t.id].ranks()) {
        shard_.stage_params_local[rank] += elements;
        if (context_.is_expert_tensor(t.id)) shard_.stage_expert_params_local[rank] += elements;
      }
    }
  }

  const ShardContext& context_;
  ShardSection& shard_;
  StageMap stages_;
  const int64_t pp_;
  OpRewriter rewriter_;
  RankAnalysis analysis_;
  std::vector<int64_t> writer_;  // per buffer: the new op that last wrote it
  std::map<std::pair<int64_t, int64_t>, int64_t> local_copy_;             // (buffer, rank) -> copy
  std::vector<char> copied_;  // by buffer: whether local_copy_ has it
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> received_;  // (op, rank) -> recvs of its outputs
  std::vector<std::vector<std::pair<Stream, int64_t>>> last_of_stream_;  // by rank: (stream, last microbatch op)
  std::map<int64_t, int64_t> copies_of_;                                   // step op copy -> old op
  std::map<std::pair<int64_t, int64_t>, int64_t> step_copy_;              // (old op, rank) -> copy
  std::map<int64_t, int64_t> first_step_rank_;  // transient buffer of step ops -> rank keeping the original
};

}  // namespace

ScheduleKind pipeline_schedule_of(const ShardOptions& options) {
  return options.pipeline_schedule.value_or(options.parallelism.vpp.value_or(1) > 1 ? ScheduleKind::interleaved
                                                                                    : ScheduleKind::one_f_one_b);
}

void plan_pipeline(const ModelConfig& model, const ShardOptions& options, ShardSection& shard) {
  const auto& p = options.parallelism;
  shard.pp_layout = pipeline_layout(model, options);
  const ScheduleKind kind = pipeline_schedule_of(options);
  if (p.pp == 1 && kind != ScheduleKind::one_f_one_b)
    throw UsageError(std::string("pipeline_schedule=") + to_string(kind) + " needs pp > 1");
  shard.pipeline_schedule = kind;
}

void assign_pipeline_stages(ShardSection& shard) {
  StageMap stages(shard);
  for (ShardOp& op : shard.ops) {
    if (op.scope != OpScope::microbatch) continue;
    int64_t v = stages.virtual_stage(op);
    op.stage = stages.rank(v);
    op.chunk = stages.chunk(v);
  }
}

void apply_pipeline_parallel(const ShardContext& context, ShardSection& shard) {
  PipelineRewriter(context, shard).run();
}

}  // namespace syssim
